"""Compiled CUDA candidates for #39's batch measurements (a script, not a test): variants of
submission/v5.py as a search loop would write them, each a file of its own with its own build.

    python docs/experiments/v5_variants.py OUT_DIR [--count 40] [--broken 4]

Each honest variant compiles one of v5's launch configurations (CONFIGS, the ones `tune` times on
every benchmark shape) under a name of its own and uses it for every shape: a build of one kernel
(load_inline) per candidate, nothing shared with another candidate's. The broken ones, one in ten
about: a CUDA syntax error (the build fails), a result scaled by 2 (wrong), a configuration that was
not compiled (raises at the first call). Prints name -> kind as JSON lines.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ("build_error", "wrong", "not_compiled")


def variant(source: str, tag: str, cfg: tuple, kind: str) -> str:
    """v5's source compiling only cfg (its first six numbers; the seventh, the K split, is a runtime
    argument) under the extension name tag, and choosing it for every shape."""
    kernels_line = "CUDA_SRC = _configs_macro(KERNELS) + KERNEL_SRC"
    assert kernels_line in source and 'name="nvfp4_gemv_v5"' in source and "    return c\n\n\nif torch" in source
    compiled = cfg[:6] if kind != "not_compiled" else (8, 2, 128, 2, 1, 2)  # never a KERNELS entry
    text = source.replace(kernels_line, f"VARIANT = {tuple(cfg)!r}\nCUDA_SRC = _configs_macro([{tuple(compiled)!r}]) + KERNEL_SRC")
    text = text.replace('name="nvfp4_gemv_v5"', f'name="nvfp4_gemv_{tag}"')
    if kind == "build_error":
        text = text.replace("KERNEL_SRC = r\"\"\"", "KERNEL_SRC = r\"\"\"\nthis is not CUDA;\n", 1)
    if kind == "wrong":
        text = text.replace("    return c\n\n\nif torch", "    return c * 2\n\n\nif torch")
    text = text.replace("\n\nif torch.cuda.is_available():\n    _ext()", "\n\ndef choose_config(m: int, k: int, l: int) -> tuple:\n"
                        "    return VARIANT\n\n\nif torch.cuda.is_available():\n    _ext()")
    return f"# {tag}: v5 with launch configuration {tuple(cfg)} for every shape ({kind})\n" + text


def make(out: Path, count: int, broken: int) -> dict[str, str]:
    source = (ROOT / "submission" / "v5.py").read_text()
    kernels = _kernels(source)
    configs = [k + (1,) for k in kernels] + [(32, 2, 128, 2, 1, 1, 4)]  # v5's CONFIGS: each runs every shape
    out.mkdir(parents=True, exist_ok=True)
    made = {}
    for i in range(count):
        kind = BROKEN[(i // 10) % len(BROKEN)] if i % 10 == 9 and broken > sum(v != "honest" for v in made.values()) \
            else "honest"
        cfg = configs[i % len(configs)]
        tag = f"v5var{i:02d}"
        (out / f"{tag}.py").write_text(variant(source, tag, cfg, kind))
        made[f"{tag}.py"] = kind
    return made


def _kernels(source: str) -> list[tuple]:
    """KERNELS as v5 lists them (read from its text: the module itself builds at import)."""
    start = source.index("KERNELS = [")
    end = source.index("]\n", start) + 1
    return [tuple(k) for k in eval(source[start + len("KERNELS = "):end])]  # noqa: S307 - our own file


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--broken", type=int, default=4)
    options = parser.parse_args()
    for name, kind in make(options.out, options.count, options.broken).items():
        print(json.dumps({"name": name, "kind": kind}))


if __name__ == "__main__":
    main()
