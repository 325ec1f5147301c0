import atexit
import importlib.util
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# every command the tests run keeps its records and logs in a folder of this session's, never in the
# checkout's results/: the red-team tests watch that one for forgeries, and a second test run beside
# this one (or the other pytest-xdist process of this run) would write there meanwhile
if not os.environ.get("EVAL_RESULTS_DIR"):
    _SESSION_RESULTS = tempfile.mkdtemp(prefix="eval-tests-results-")
    os.environ["EVAL_RESULTS_DIR"] = _SESSION_RESULTS
    atexit.register(shutil.rmtree, _SESSION_RESULTS, True)

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


@pytest.fixture
def inproc(monkeypatch, capsys):
    """The command line in this process, as `python -m eval` runs it (eval/cli.py cli) without an
    interpreter and torch import per call: (exit code, stdout, stderr). State the command sets up
    (the secret seed, the problem folder, SIGTERM's handler) is reset around each call. For commands
    that end before any worker starts (usage and input errors, --help)."""
    from eval import cases, cli, problem_folder

    monkeypatch.chdir(ROOT)
    term = signal.getsignal(signal.SIGTERM)

    def call(*args, env=None):
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        cases._SECRET.clear()
        os.environ.pop(problem_folder.DIR_ENV, None)
        capsys.readouterr()
        try:
            cli.cli(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            signal.signal(signal.SIGTERM, term)
            cases._SECRET.clear()
            for key in env or {}:
                monkeypatch.delenv(key, raising=False)
            os.environ.pop(problem_folder.DIR_ENV, None)  # what --problem set (not monkeypatch's to restore)
            problem_folder.use(None)
        out, err = capsys.readouterr()
        return code, out, err

    return call


def pytest_addoption(parser):
    parser.addoption("--shard", default=None, metavar="I/N",
                     help="Run only the I-th of N equal shares of the selected tests (parallel runs).")


def pytest_collection_modifyitems(config, items):
    shard = config.getoption("--shard")
    if shard:
        index, count = (int(x) for x in shard.split("/"))
        items[:] = [item for n, item in enumerate(items) if n % count == index]


@pytest.fixture(scope="session")
def judged_batch(tmp_path_factory):
    """(folder, verdicts file, the finished command) of one `python -m eval batch` without Ray of
    tests/test_batch.py's candidates (a hang at import, a crash, a wrong result, an honest one from a
    JSONL of sources, one that modifies its input): test_batch reads its verdicts and reruns it
    (resume), test_ray judges the same candidates through Ray and compares. Run once per session: the
    batch waits out its hang's --timeout twice (the build ahead, then the judge's import)."""
    from tests.test_batch import batch

    folder = tmp_path_factory.mktemp("batch")
    out = folder / "local.jsonl"
    return folder, out, batch(folder, out)
