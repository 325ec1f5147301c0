import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

HAS_CUDA = torch.cuda.is_available()
gpu = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


def load_module(path, name: str):
    """Import the file at path as a fresh module called name."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_submission(name: str):
    """Import submission/<name>.py as a fresh module of its own (not the harness's `submission`)."""
    return load_module(ROOT / "submission" / f"{name}.py", f"sub_{name}")


@pytest.fixture
def results_dir(tmp_path, monkeypatch):
    """Redirect every result file into a temporary folder."""
    from eval import rank, results, sol

    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(rank, "MARKDOWN_PATH", tmp_path / "leaderboard.md")
    monkeypatch.setattr(rank, "CHART_PATH", tmp_path / "leaderboard.png")
    monkeypatch.setattr(sol.results, "RESULTS_DIR", tmp_path)
    return tmp_path


def pytest_addoption(parser):
    parser.addoption("--shard", default=None, metavar="I/N",
                     help="Run only the I-th of N equal shares of the selected tests (parallel runs).")


def pytest_collection_modifyitems(config, items):
    shard = config.getoption("--shard")
    if shard:
        index, count = (int(x) for x in shard.split("/"))
        items[:] = [item for n, item in enumerate(items) if n % count == index]
