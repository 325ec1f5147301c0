"""Every adversarial submission is caught with its reason; honest ones pass; the harness survives."""
import pytest

from eval import cases, modes
from tests.conftest import HAS_CUDA, ROOT

ADV = ROOT / "tests" / "adversarial"
EXPECTED = {
    "syntax_error": "syntax error in syntax_error.py line 2",
    "no_kernel": "defines no custom_kernel",
    "raises": "raised RuntimeError: kernel exploded",
    "wrong_shape": "output shape",
    "wrong_dtype": "output dtype",
    "nan": "mismatch found",
    "hangs": "timed out after",
    "exits": "exited with code 3",
    "sys_exit": "called sys.exit(0)",
    "segfault": "SIGSEGV",
    "oom": "ran out of",
    "cache_by_pointer": "same buffers",
    "cache_by_shape": "same buffers",
    "call_count": "same buffers",
    "mutates_input": "modified its input `a`",
    "unchanged_c": "pre-filled c unchanged",
}


def run(name, n_cases=1, timeout=60.0, **kw):
    options = modes.Options(timeout=timeout, load_timeout=60.0, log_dir=kw.pop("log_dir"))
    return modes.run_tests(ADV / f"{name}.py", cases.select_cases("smoke")[:n_cases], options)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_adversarial_submission_is_caught(name, tmp_path):
    record = run(name, timeout=15.0 if name == "hangs" else 120.0, log_dir=tmp_path)
    assert not record["passed"]
    reason = record["error"] or record["cases"][0]["error"]
    assert EXPECTED[name] in reason, reason


@pytest.mark.skipif(not HAS_CUDA, reason="streams need a CUDA GPU")
def test_side_stream_is_caught(tmp_path):
    record = run("side_stream", log_dir=tmp_path)
    assert "not complete on the current stream" in record["cases"][0]["error"]


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_cuda_illegal_address_is_caught_and_the_next_case_runs(tmp_path):
    record = run("illegal_address", n_cases=2, log_dir=tmp_path)
    assert [c["status"] for c in record["cases"]] == ["fail", "fail"]
    assert all("CUDA error" in c["error"] or "crashed" in c["error"] for c in record["cases"]), record["cases"]


def test_crash_does_not_stop_later_cases(tmp_path):
    record = run("exits", n_cases=2, log_dir=tmp_path)
    assert [c["status"] for c in record["cases"]] == ["fail", "fail"]
    assert all("exited with code 3" in c["error"] for c in record["cases"])


def test_secret_seed_invisible_and_prints_do_not_leak(tmp_path, monkeypatch):
    monkeypatch.setenv("POPCORN_SEED", "4242")
    record = run("honest_peeker", log_dir=tmp_path)
    assert record["passed"], record
    from eval import report

    assert report.popcorn(record).count("check: pass") == 1  # the submission's print went to the log
