"""Which submissions exist, what each needs, and which is the best one that can run here."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from eval import problem_folder

# best first: the default `make eval` runs the first one whose needs this machine meets (this
# repository's names; a problem folder's other files follow in name order)
PREFERENCE = ("v5", "v4", "v3", "v2", "v1", "v0", "triton_ref", "torch_ref")


def submission_dir() -> Path:
    """The problem folder's submission/ (or submissions/)."""
    root = problem_folder.current().root
    return next((root / name for name in ("submission", "submissions") if (root / name).is_dir()), root / "submission")


def all_submissions() -> list[Path]:
    found = sorted(submission_dir().glob("*.py"))
    order = {name: i for i, name in enumerate(PREFERENCE)}
    return sorted(found, key=lambda p: (order.get(p.stem, len(order)), p.stem))


def needs(path: Path) -> set[str]:
    """What a submission needs, read from its imports: 'cuda', 'triton', 'cutlass'."""
    source = Path(path).read_text(errors="replace")
    required = set()
    if re.search(r"^\s*(import|from)\s+cutlass", source, re.M):
        required |= {"cuda", "cutlass"}
    if re.search(r"^\s*(import|from)\s+triton", source, re.M):
        required |= {"cuda", "triton"}
    if "load_inline" in source or "cpp_extension" in source:
        required.add("cuda")
    return required


def available() -> set[str]:
    have = set()
    try:
        import torch

        if torch.cuda.is_available():
            have.add("cuda")
    except ImportError:
        pass
    for module, name in (("triton", "triton"), ("cutlass", "cutlass")):
        if importlib.util.find_spec(module) is not None:
            have.add(name)
    return have


def best_runnable() -> Path:
    have = available()
    for path in all_submissions():
        if needs(path) <= have:
            return path
    found = all_submissions()
    if not found:
        from eval.cases import ConfigError

        raise ConfigError(f"no submission in {submission_dir()}: name one (python -m eval run SUB)")
    return found[-1]
