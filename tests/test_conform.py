"""`python -m eval conform` on a fake checkout of our own (tests/problems/conventions: one folder per
convention the leaderboard's folders use, and a minimal evaluator in its runner's protocol, written
here): the same verdict as that evaluator on every row where it runs; the FP4-GEMM reference, which
cannot run without Blackwell, judged by ours through the exact emulation in the judge."""
import ctypes
import os
import subprocess
import sys

import torch

from eval import cases, problem_folder
from tests.conftest import ROOT

CONVENTIONS = ROOT / "tests" / "problems" / "conventions"


def test_conform_agrees_with_the_evaluator_on_every_convention(tmp_path):
    env = {**os.environ, "EVAL_RESULTS_DIR": str(tmp_path)}
    env.pop(problem_folder.DIR_ENV, None)
    out = subprocess.run([sys.executable, "-m", "eval", "conform", str(CONVENTIONS), "--format", "markdown"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): line for line in out.stdout.splitlines()
            if line.startswith("| conventions/")}
    assert len(rows) == 13, out.stdout
    for (problem, solution), line in rows.items():
        if "fp4_reference" in problem:  # the evaluator needs an FP4 GEMM: both sides emulate it, labelled
            expected = "fail (emulated)" if "wrong" in solution else "pass (emulated)"
            assert expected in line and "FP4 _scaled_mm emulated" in line, line
        assert "| yes |" in line, line
    assert "0 different" in out.stdout and "2 of those compared ran the official evaluator" in out.stdout


def test_conform_judges_a_solution_of_ones_own_in_each_folder(tmp_path):
    env = {**os.environ, "EVAL_RESULTS_DIR": str(tmp_path)}
    env.pop(problem_folder.DIR_ENV, None)
    mine = tmp_path / "mine.py"
    mine.write_text((CONVENTIONS / "list_keys" / "submission.py").read_text())
    out = subprocess.run([sys.executable, "-m", "eval", "conform", str(CONVENTIONS), "--only", "list_keys",
                          "--solutions", "^submission.py", "--add", str(mine)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "2 solution(s): 2 same verdict" in out.stdout and str(mine) in out.stdout, out.stdout


def test_timing_method_is_the_declared_evaluators():
    assert problem_folder.declared_timing(CONVENTIONS / "batched_evaluator") == \
        problem_folder.Timing("batched", 7, "../eval_better_bench.py")
    assert problem_folder.declared_timing(CONVENTIONS / "list_keys").method == "per-call"
    assert problem_folder.declared_timing(ROOT).method == "per-call"


EVALUATOR_CALLS = """
def run_benchmarking(logger, pool, tests):
    run_single_benchmark(pool, tests[0], False, 100, 10e7)
    for idx, test in enumerate(tests):
        result = run_single_benchmark(pool, test, False, 100, 10e9)


def main():
    if mode == "leaderboard":
        run_single_benchmark(pool, tests[0], False, 100, 1e7)
        for i in range(len(tests)):
            result = run_single_benchmark(pool, tests[i], True, 100, 30e9)
"""


def test_budgets_are_the_evaluators_own(monkeypatch):
    """A per-call series whose eval.py stops at 100 runs is timed with at most 100, not nvidia's 200."""
    from types import SimpleNamespace

    from eval.judge import modes

    budgets = ((100, 1e8), (100, 1e10), (100, 1e7), (100, 3e10))
    assert problem_folder.evaluator_budgets(EVALUATOR_CALLS) == budgets
    assert problem_folder.evaluator_budgets(EVALUATOR_CALLS.replace("True", "False")) == ()  # not the shape known
    assert problem_folder.evaluator_budgets((CONVENTIONS / "eval.py").read_text()) == ()
    assert problem_folder.declared_timing(ROOT).budgets == ()  # the repository's own problem: the defaults
    timing = problem_folder.Timing("per-call", 50, "../eval.py", budgets)
    monkeypatch.setattr(problem_folder, "current", lambda: SimpleNamespace(timing=timing))
    assert modes.budgets(False) == {"warmup": (100, 1e8), "case": (100, 1e10)}
    assert modes.budgets(True) == {"warmup": (100, 1e7), "case": (100, 3e10)}
    timing = problem_folder.Timing("per-call", 50, "eval")
    assert modes.budgets(False) == modes.BENCHMARK_BUDGET and modes.budgets(True) == modes.LEADERBOARD_BUDGET


def test_list_keys_and_the_series_utils(monkeypatch):
    monkeypatch.delenv(problem_folder.DIR_ENV, raising=False)
    try:
        problem = problem_folder.use(CONVENTIONS / "list_keys")
        assert sys.modules["utils"].__file__ == str(CONVENTIONS / "utils.py")  # task.yml: ../utils.py
        case = cases.make_case({"sizes": [3, 17, 64], "width": 8, "seed": 21})
        assert case.spec == "sizes: [3, 17, 64]; width: 8; seed: 21"  # as the runner writes it
        assert case.key == "3,17,64x8"
        from eval.judge import verdict
        assert len(verdict.generate(case.args, 21)) == 3  # generate_input got a tuple
        assert problem.name == "list_keys"
    finally:
        problem_folder.use(ROOT)


def test_an_input_left_undefined_is_writable_even_when_two_generations_agree(monkeypatch):
    """zero_d_output's torch.empty(1): two generations in the judge held the same bytes (fresh zero
    pages alike), the worker's held others, and an honest solution failed as "modified its input"."""
    monkeypatch.delenv(problem_folder.DIR_ENV, raising=False)
    from eval.judge import modes, verdict

    try:
        problem_folder.use(CONVENTIONS / "zero_d_output")
        big = 1 << 22  # 16 MiB: fresh pages from the OS, zeros in both plain generations
        real = problem_folder.current().reference.generate_input
        monkeypatch.setattr(problem_folder.current().reference, "generate_input",
                            lambda size, seed: (real(size, seed)[0], torch.empty(big)))
        ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD fixed: 16 MiB is always fresh pages
        args = {"size": 1023, "seed": 1}
        one, two = verdict.generate(args, 1), verdict.generate(args, 1)
        assert verdict.input_hash(one[1]) == verdict.input_hash(two[1])  # what the old rule compared
        del one, two
        modes._PROFILES.clear()
        assert modes.case_profile(args).outputs == {1}
    finally:
        modes._PROFILES.clear()
        problem_folder.use(ROOT)
