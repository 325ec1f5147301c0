"""The error contract, walked command by command: every usage or input error is one line on stderr,
no traceback, exit 2; a GPU-only command without a GPU exits 3; a failing run names its log.
Each bad input here is one a new user typed (issue #38), or one like it for another command."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import HAS_CUDA, ROOT

SUB = "submission/torch_ref.py"


@pytest.fixture
def worker_readable():
    """A folder a worker's own uid can read (pytest's tmp tree is 0700 above it)."""
    folder = Path(tempfile.mkdtemp(prefix="errors-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def run_cli(*args, env=None, cwd=ROOT, timeout=300, pass_fds=()):
    environ = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "eval", *args], capture_output=True, text=True, cwd=cwd,
                          env=environ, timeout=timeout, pass_fds=pass_fds)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("bad")
    empty_task = base / "empty_task"
    empty_task.mkdir()
    (empty_task / "task.yml").write_text("")
    for name in ("task.py", "reference.py"):
        (empty_task / name).write_text((ROOT / name).read_text())
    not_json = base / "result.json"
    not_json.write_text("{not json")
    empty_dir = base / "nothing"
    empty_dir.mkdir()
    a_file = base / "file.txt"
    a_file.write_text("x")
    list_task = base / "list_task"  # a YAML list, not a mapping; no problem.py
    list_task.mkdir()
    (list_task / "task.yml").write_text("- a\n- b\n")
    for name in ("task.py", "reference.py"):
        (list_task / name).write_text((ROOT / name).read_text())
    bad_jsonl = base / "bad.jsonl"
    bad_jsonl.write_text("nope\n")
    return {"empty_task": empty_task, "not_json": not_json, "empty_dir": empty_dir, "file": a_file,
            "list_task": list_task, "bad_jsonl": bad_jsonl}


# (what a new user typed, the words the one line must hold)
CASES = [
    (["test", "nonexistent.py"], "does not exist"),
    (["test"], "Missing argument"),
    (["test", SUB, "--bogus"], "No such option"),
    (["test", SUB, "--no-such-flag", "1"], "No such option"),
    (["test", SUB, "--cases", "nosuch"], "unknown case set"),
    (["test", SUB, "--cases", "benchmarks:9"], "give an index"),
    (["test", SUB, "--dist", "nosuch"], "--dist nosuch"),
    (["test", SUB, "--timeout", "0"], "not a number of seconds above 0"),
    (["test", SUB, "--timeout", "nan"], "not a number of seconds above 0"),  # a trial run: nan failed every case
    (["benchmark", SUB, "--timeout", "inf"], "not a number of seconds above 0"),
    (["batch", SUB, "--limit", "nan"], "not a number of seconds above 0"),
    (["test", SUB, "--cases", ""], "an empty case set name"),
    (["compare", SUB, SUB, "--fail-if-slower", "-5"], "a percentage of 0 or more"),
    (["doctor", "--workers", "0"], "--workers and --jobs must be >= 1"),
    (["conform", "{empty_dir}", "--only", "("], "is not a regular expression"),
    (["--problem", "{list_task}", "test", SUB], "must be a YAML mapping"),
    (["batch", "{bad_jsonl}"], "bad.jsonl:1: not a JSON line"),
    (["accuracy", SUB, "--format", "nosuch"], "Invalid value for '--format'"),
    (["test", SUB, "--timeout", "abc"], "not a valid float"),
    (["test", SUB, "--format", "nosuch"], "Invalid value for '--format'"),
    (["benchmark", SUB, "--batch", "0", "--timing", "batched"], "--batch must be at least 1"),
    (["leaderboard", SUB, "--gap-us", "-1"], "--gap-us must be >= 0"),
    (["run", "nonexistent.py"], "does not exist"),
    (["profile", SUB, "--cases", "nosuch"], "unknown case set"),
    (["compare", SUB], "Missing argument"),
    (["compare", SUB, SUB, "--rounds", "0"], "--rounds must be >= 1"),
    (["compare", "{not_json}", SUB], "is not JSON"),
    (["rank", "nonexistent.py"], "does not exist"),
    (["accuracy", SUB, "--cases", "nosuch"], "unknown case set"),
    (["tune", SUB, "--runs", "1"], "--runs must be >= 2"),
    (["batch"], "Missing argument"),
    (["batch", SUB, "--jobs", "0"], "--jobs must be at least 1"),
    (["conform", "{empty_dir}"], "holds no problem folder"),
    (["conform", "/nonexistent"], "does not exist"),
    (["nosuchcommand"], "No such command"),
    (["--problem", "/nonexistent", "test", SUB], "problem folder /nonexistent does not exist"),
    (["--problem", "{file}", "test", SUB], "is a file"),
    (["test", SUB, "--problem", "/nonexistent"], "problem folder /nonexistent does not exist"),  # after the command too
    (["test", SUB, "--cases", "smoke", "--sandbox", "bogus"], "Invalid value for '--sandbox'"),
    (["--problem", "{empty_task}", "test", SUB], "task.yml is empty"),
    (["test", SUB, "-o", "{file}/report.txt"], "cannot write"),  # checked before anything runs
    (["test", SUB, "-o", "/proc/nope/report.txt"], "cannot write"),  # a trial run: found only after the run
    (["tune", SUB], "defines no CONFIGS and no run_with"),
    (["batch", "{empty_dir}"], "no candidates in"),
    (["test", SUB, "-o", "/dev/null/report.txt"], "/dev/null is not a folder"),  # not mkdir's "File exists"
]


@pytest.mark.parametrize("args,words", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_usage_error_is_one_line_and_exit_2(args, words, folders, inproc):
    code, out, err = inproc(*[a.format(**folders) for a in args])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("error: ") and words in lines[0], lines[0]


@pytest.mark.parametrize("env,words", [({"POPCORN_SEED": "abc"}, "POPCORN_SEED='abc' is not an integer"),
                                       ({"POPCORN_SEED": "9" * 26}, "is too large"),
                                       ({"POPCORN_FD": "abc"}, "POPCORN_FD='abc' is not an open file descriptor"),
                                       ({"POPCORN_FD": "987"}, "POPCORN_FD='987' is not an open file descriptor")])
def test_a_bad_environment_is_one_line_and_exit_2(env, words):
    done = run_cli("test", SUB, "--cases", "smoke", env=env)  # its own process: read at start-up
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], done.stderr


def test_the_empty_task_file_is_named_with_its_path(folders, inproc):
    _, _, err = inproc("--problem", str(folders["empty_task"]), "test", SUB)
    assert str(folders["empty_task"] / "task.yml") in err


@pytest.mark.skipif(HAS_CUDA, reason="checks the machine without a GPU")
def test_a_gpu_only_command_without_a_gpu_exits_3(inproc):
    code, _, err = inproc("sol")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 3 and len(lines) == 1 and "needs a CUDA GPU" in lines[0], err


def test_help_and_no_arguments_are_not_errors(inproc):
    assert inproc("--help")[0] == 0
    code, out, _ = inproc()
    assert code == 0 and "Commands:" in out


def test_a_returned_list_is_named_and_the_failure_names_its_log(tmp_path, worker_readable):
    """A list output is judged as a structure (not "a subclass that overrides behaviour"); the report
    points at the worker's log; popcorn lines go to POPCORN_FD too, with --no-tui accepted."""
    sub = worker_readable / "returns_list.py"
    sub.write_text("def custom_kernel(data):\n    return [data[-1]]\n")
    sub.chmod(0o644)
    read, write = os.pipe()
    done = run_cli("test", str(sub), "--cases", "smoke", "--no-tui", env={"POPCORN_FD": str(write),
                   "EVAL_RESULTS_DIR": str(tmp_path / "results")}, pass_fds=(write,))
    os.close(write)
    with os.fdopen(read) as handle:
        lines = handle.read().splitlines()
    assert done.returncode == 112, done.stderr
    # a list is a structure the problem's checker judges (here: the pre-filled output, unchanged)
    assert "subclass that overrides" not in done.stdout and "returned the pre-filled c unchanged" in done.stdout
    assert "log: " in done.stdout
    log = next(line for line in done.stdout.splitlines() if line.startswith("log: ")).split("log: ", 1)[1]
    assert Path(log if Path(log).is_absolute() else ROOT / log).is_file()
    assert "test-count: 2" in lines and "check: fail" in lines
    assert "test.0.status: fail" in lines


def popcorn_of(source: str, name: str, folder: Path, results: Path) -> tuple:
    """`test --cases smoke --format popcorn` of source (a file a worker's uid reads): (run, its lines)."""
    sub = folder / name
    sub.write_text(source)
    sub.chmod(0o644)
    done = run_cli("test", str(sub), "--cases", "smoke", "--format", "popcorn", env={"EVAL_RESULTS_DIR": str(results)})
    return done, done.stdout.splitlines()


def test_a_load_failure_in_popcorn_format_keeps_the_counts(tmp_path, worker_readable):
    done, lines = popcorn_of("def custom_kernel(data:\n", "broken.py", worker_readable, tmp_path / "results")
    assert done.returncode == 112
    assert "test-count: 2" in lines and "test.1.status: fail" in lines and lines[-1] == "check: fail"
    assert "# HOST TIMER: CPU wall time, not GPU kernel time" in lines or HAS_CUDA
    records = list((tmp_path / "results").glob("*.json"))  # test writes its record too, mode 0644
    assert records and all(oct(p.stat().st_mode & 0o777) == oct(0o666 & ~_umask()) for p in records)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_wrong_output_type_fails_in_accuracy_and_profile_as_in_test(tmp_path):
    """A list where a tensor belongs: accuracy and profile judge the outputs first, as test does (no
    traceback from the problem's error statistics, no profile of a wrong kernel under check: pass)."""
    sub = tmp_path / "wrongtype.py"
    sub.write_text("def custom_kernel(data):\n    return [1, 2]\n")
    for mode in ("accuracy", "profile"):
        done = run_cli(mode, str(sub), "--cases", "smoke")
        assert done.returncode == 112 and "Traceback" not in done.stderr, done.stdout + done.stderr
        assert "output is a list" in done.stdout or "check: fail" in done.stdout, done.stdout


def test_a_broken_jsonl_line_stores_no_candidate(tmp_path, inproc):
    """A new user's trial: a JSONL whose second line is broken exited 2 but had stored the first
    candidate's source under batch-sources/ already. Every line is checked before any is stored."""
    jsonl = tmp_path / "cands.jsonl"
    jsonl.write_text('{"id": "a", "source": "def custom_kernel(data):\\n    return None\\n"}\n{"id": "b", "source": \n')
    code, out, err = inproc("batch", str(jsonl), "-o", str(tmp_path / "out" / "v.jsonl"))
    assert code == 2 and "cands.jsonl:2: not a JSON line" in err, err
    assert not (tmp_path / "out" / "batch-sources").exists()


def test_cannot_run_here_in_popcorn_format_is_no_failing_verdict(tmp_path, worker_readable):
    """As the table says it: a missing package is "cannot run here" in the popcorn lines too, exit 113."""
    done, lines = popcorn_of("import not_a_real_module_xyz\n\ndef custom_kernel(data):\n    return None\n",
                             "needs_a_package.py", worker_readable, tmp_path / "results")
    assert done.returncode == 113, done.stdout + done.stderr
    assert "test-count: 2" in lines and "test.1.status: cannot run here" in lines and lines[-1] == "check: cannot run here"
