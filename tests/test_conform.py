"""`python -m eval conform` on a fake checkout of our own (tests/problems/conventions: one folder per
convention the leaderboard's folders use, and a minimal evaluator in its runner's protocol, written
here): the same verdict as that evaluator on every row where it runs; the FP4-GEMM reference, which
cannot run without Blackwell, judged by ours through the exact emulation in the judge."""
import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from eval import cases, problem_folder
from tests.conftest import ROOT

CONVENTIONS = ROOT / "tests" / "problems" / "conventions"


@pytest.fixture(scope="module")
def conventions(tmp_path_factory):
    """(the finished command, its JSONL of rows) of `conform` on every convention: judged once for
    the test of its verdicts and for the one that adds a solution of one's own (which reuses these
    rows, as a rerun does, and judges only its own file)."""
    folder = tmp_path_factory.mktemp("conventions")
    env = {**os.environ, "EVAL_RESULTS_DIR": str(folder)}
    env.pop(problem_folder.DIR_ENV, None)
    jsonl = folder / "conventions.jsonl"
    out = subprocess.run([sys.executable, "-m", "eval", "conform", str(CONVENTIONS), "--format", "markdown",
                          "--jsonl", str(jsonl)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    return out, jsonl


def test_conform_agrees_with_the_evaluator_on_every_convention(conventions):
    out, _ = conventions
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


def test_conform_judges_a_solution_of_ones_own_in_each_folder(tmp_path, conventions):
    import shutil

    from eval import conform

    env = {**os.environ, "EVAL_RESULTS_DIR": str(tmp_path)}
    env.pop(problem_folder.DIR_ENV, None)
    mine = tmp_path / "mine.py"
    mine.write_text((CONVENTIONS / "list_keys" / "submission.py").read_text())
    jsonl = tmp_path / "rows.jsonl"  # the conventions' rows: list_keys/submission.py is decided already
    shutil.copy(conventions[1], jsonl)
    before = len(conform.read_rows(jsonl))
    out = subprocess.run([sys.executable, "-m", "eval", "conform", str(CONVENTIONS), "--only", "list_keys",
                          "--solutions", "^submission.py", "--add", str(mine), "--jsonl", str(jsonl)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "2 solution(s): 2 same verdict" in out.stdout and str(mine) in out.stdout, out.stdout
    assert [r.solution for r in conform.read_rows(jsonl)[before:]] == [str(mine.resolve())]  # its own file judged


def test_timing_method_is_the_declared_evaluators():
    assert problem_folder.declared_timing(CONVENTIONS / "batched_evaluator") == \
        problem_folder.Timing("batched", 7, "../eval_better_bench.py")
    assert problem_folder.declared_timing(CONVENTIONS / "list_keys").method == "per-call"
    assert problem_folder.declared_timing(ROOT).method == "per-call"


HOST_TIMED = """
def time_one(test, recheck, max_repeats, max_time_ns):
    for i in range(max_repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        out = custom_kernel(data)
        torch.cuda.synchronize()
        t1 = time.perf_counter_ns()
        runs.append(t1 - t0)
        if i > 1:
            s = calculate_stats(runs)
            if s.err / s.mean < 0.01 or s.mean * s.runs > max_time_ns:
                break
"""

EVENT_TIMED = """
def flush():
    pass


def time_one(test, recheck, max_repeats, max_time_ns):
    for i in range(max_repeats):
        torch.cuda.synchronize()
        # clear_l2_cache()  (a comment is no flush)
        {flush}
        a.record()
        out = custom_kernel(data)
        b.record()
        total = time.perf_counter_ns() - begun
        if (
            i > 1 and total > 2e8
        ):
            s = calculate_stats(runs)
            if s.err / s.mean < 0.002 or s.mean * s.runs > max_time_ns:
                break
"""


def test_the_clock_flush_and_stop_rule_are_read_from_the_evaluators_loop():
    """The first pmpp series and amd time with perf_counter_ns around the call and a synchronize, no L2
    flush; bioml's events without a flush; the stop rule's threshold and minimum wall time differ too."""
    assert problem_folder.evaluator_clock(HOST_TIMED) == ("host", False)
    assert problem_folder.evaluator_stop_rule(HOST_TIMED) == (0.01, 0.0)
    assert problem_folder.evaluator_clock(EVENT_TIMED.format(flush="clear_l2_cache()")) == ("events", True)
    assert problem_folder.evaluator_clock(EVENT_TIMED.format(flush="pass")) == ("events", False)
    assert problem_folder.evaluator_stop_rule(EVENT_TIMED) == (0.002, 2e8)
    assert problem_folder.evaluator_clock("") == ("events", True)  # nothing to read: the defaults
    assert problem_folder.evaluator_stop_rule("") == (0.001, 1e8)
    assert problem_folder.declared_timing(ROOT).clock == "events" and problem_folder.declared_timing(ROOT).flush


def test_the_judge_asks_the_worker_for_the_folders_clock(monkeypatch):
    from types import SimpleNamespace

    from eval.judge import runner

    timing = problem_folder.Timing("per-call", 50, "../eval.py", (), "host", False, 0.01, 0.0)
    monkeypatch.setattr(problem_folder, "current", lambda: SimpleNamespace(timing=timing))
    monkeypatch.setattr(runner.torch.cuda, "is_available", lambda: True)
    params = runner.runs_params({"seed": 1}, runner.Options(), (100, 1e9), False, check=False)
    assert params["host_clock"] is True and params["flush"] is False
    assert (params["stop_rel_err"], params["stop_min_ns"]) == (0.01, 0.0)
    from eval.stats import should_stop
    runs = [100.0, 101.0, 99.0, 100.0]
    assert should_stop(runs, 1.0, 1e12, rel_err=0.01, min_elapsed_ns=0.0)  # 0.4 % < 1 %, no minimum wall time
    assert not should_stop(runs, 1.0, 1e12)  # the defaults: 100 ms first, 0.1 %


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
        # what the old rule compared: two plain generations, alike where both got fresh zero pages (not
        # in every process: one that ran other tests may be handed reused memory), so not asserted
        one, two = verdict.generate(args, 1), verdict.generate(args, 1)
        del one, two
        modes.forget_profiles()
        assert modes.case_outputs(args) == {1}
    finally:
        modes.forget_profiles()
        problem_folder.use(ROOT)



def test_a_case_is_generated_once_before_the_worker_starts(monkeypatch):
    """bioml/trimul draws its 3 GiB cauchy input on the CPU (13-25 s a draw on an H200 host): the judge
    generates a case once before the trial is asked for; its second generation (which finds the inputs
    left undefined) is made beside the trial, and the trial's first call is judged on a copy of the
    profile's own input taken before ref_kernel ran, so no generation is made twice in the judge."""
    monkeypatch.delenv(problem_folder.DIR_ENV, raising=False)
    from eval.judge import modes

    try:
        problem_folder.use(CONVENTIONS / "zero_d_output")
        real = problem_folder.current().reference.generate_input
        seeds = []
        monkeypatch.setattr(problem_folder.current().reference, "generate_input",
                            lambda size, seed: seeds.append(seed) or real(size, seed))
        ref = problem_folder.current().reference.ref_kernel
        monkeypatch.setattr(problem_folder.current().reference, "ref_kernel",  # one that works in place
                            lambda data: ref(data) + data[0].mul_(0).sum())
        args = {"size": 1023, "seed": 7}
        modes.forget_profiles()
        steps = modes.trial_steps(args)
        assert seeds == [7]  # the profile: one generation

        class Asked:  # the worker's side: what had been generated when the trial was asked for
            def call(self, op, payload):
                self.seen = list(seeds)
                return "reply"

        runner = Asked()
        reply, made = modes._trial_inputs(runner, {"args": args}, args, steps)
        assert reply == "reply" and runner.seen[:1] == [7] and len(made) == len(steps)
        assert seeds.count(7) == 2 and len(seeds) == 1 + 1 + (len(steps) - 1), seeds  # profile, undefined, the new steps
        assert torch.equal(made[0][0], real(1023, 7)[0])  # the case's own input as generated, before ref_kernel
        assert modes.case_outputs(args) == {0, 1} and seeds.count(7) == 2  # the input ref_kernel writes, the undefined one (found once)
        assert modes.take_first_input(args) is None  # the copy is handed out once
    finally:
        modes.forget_profiles()
        problem_folder.use(ROOT)

# -- #37: every series' conventions (tests/problems/series) ------------------------------------------

SERIES = ROOT / "tests" / "problems" / "series"


def _conform(*args, tmp_path, timeout=900):
    env = {**os.environ, "EVAL_RESULTS_DIR": str(tmp_path / "results")}
    env.pop(problem_folder.DIR_ENV, None)
    return subprocess.run([sys.executable, "-m", "eval", "conform", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_conform_on_every_convention_streams_resumes_and_limits_each_solution(tmp_path):
    """Error-string and (ok, message) checkers, a single tensor in and a pair out, nested inputs with
    plain values, files staged from another series (source ../../../conventions/...), a missing
    package (cannot run here on both sides, never a failure), a hang (its row only, within its limit),
    a folder of its own contract (a row all the same); each row in the markdown and the JSONL as it
    is decided, the per-series table last, and a rerun reuses every row."""
    from eval import conform

    md, jsonl = tmp_path / "conform.md", tmp_path / "conform.jsonl"
    out = _conform(SERIES, "--jobs", "3", "--limit", "60", "--format", "markdown", "-o", md, tmp_path=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rows = {(r.problem.split("/")[-1], r.solution): r for r in conform.read_rows(jsonl)}
    assert len(rows) == 12, sorted(rows)
    for name in ("older/strings", "borrowed/single_tensor", "borrowed/nested"):
        folder = name.split("/")[-1]
        right = rows[(folder, "submission.py")]
        wrong = next(r for (f, s), r in rows.items() if f == folder and s.startswith("solutions/wrong/"))
        assert (right.official.passed, right.ours.passed, right.agree) == (True, True, True), right
        assert (wrong.official.ran, wrong.official.passed, wrong.ours.passed, wrong.agree) == (True, False, False, True), wrong
    assert "mismatch: max difference" in rows[("strings", "solutions/wrong/off_by_one.py")].ours.reason  # the error string
    package = rows[("needs_package", "submission.py")]
    for side in (package.official, package.ours):
        assert not side.ran and side.reason == "cannot run here: needs nosuchpkg_conform (pip install nosuchpkg-conform)"
    hang = rows[("hang", "solutions/forever.py")]
    assert not hang.official.ran and not hang.ours.ran and "60 s" in hang.ours.reason and "60 s" in hang.official.reason
    assert rows[("hang", "submission.py")].agree is True  # the hang cost its own row only
    own = rows[("own_contract", "submission.py")]
    assert own.official.passed and own.ours.ran and own.ours.passed and own.agree is True, own  # its evaluator, sandboxed
    assert rows[("no_tensor", "submission.py")].agree is True and rows[("no_tensor", "submission.py")].ours.passed
    cuda = rows[("cuda_only", "submission.py")]
    if not torch.cuda.is_available():
        assert cuda.official.reason == cuda.ours.reason == "cannot run here: needs a CUDA GPU", cuda
    text = md.read_text()
    assert text.count("| series/") == 12 + 2 and "| series | rows | same | differ |" in text  # rows, then per series
    assert out.stdout.rstrip().splitlines()[-1].startswith("| all | 12 |"), out.stdout[-1500:]
    again = _conform(SERIES, "--jobs", "3", "--limit", "60", "--format", "markdown", "-o", md, tmp_path=tmp_path,
                     timeout=120)
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == out.stdout.splitlines()[-1], again.stderr[-2000:]
    assert len(jsonl.read_text().splitlines()) == 12  # nothing decided twice


def test_structures_flatten_in_the_workers_order():
    data = (torch.zeros(2), {"weights": {"w1": torch.ones(3), "w2": torch.ones(1)}, "config": {"dim": 4, "act": "relu"}},
            [torch.zeros(5), 2, "note", None])
    tensors, names = problem_folder.flatten(data)
    assert [t.numel() for t in tensors] == [2, 3, 1, 5]
    assert names == ["data[0]", "data[1]['weights']['w1']", "data[1]['weights']['w2']", "data[2][0]"]
    assert problem_folder.flatten(torch.ones(4))[1] == ["data"]
    assert problem_folder.flatten({"dim": 3, "eps": 1e-5}) == ([], [])  # no tensor: nothing to hash, no failure
    copy = problem_folder.replace_tensors(data, [t + 1 for t in tensors])
    assert copy[1]["config"] == data[1]["config"] and copy[2][1:] == [2, "note", None]
    assert torch.equal(copy[1]["weights"]["w2"], torch.full((1,), 2.0)) and isinstance(copy[2], list)
    geqrf = torch.geqrf(torch.eye(3))
    rebuilt = problem_folder.replace_tensors(geqrf, list(geqrf))
    assert type(rebuilt) is type(geqrf) and torch.equal(rebuilt.tau, geqrf.tau)


def test_every_checker_convention():
    from eval.judge.verdict import checker_verdict

    assert checker_verdict((True, "fine")) == (True, "fine")
    assert checker_verdict((False, "mismatch")) == (False, "mismatch")
    assert checker_verdict("") == (True, "") and checker_verdict(None) == (True, "")
    assert checker_verdict("mismatch found! 3 elements") == (False, "mismatch found! 3 elements")
    assert checker_verdict(True) == (True, "") and checker_verdict(False)[0] is False
    assert checker_verdict(torch.tensor(True)) == (True, "")


def test_what_a_run_needs_that_this_machine_lacks(tmp_path):
    from eval import needs

    assert needs.what_is_missing("raised ModuleNotFoundError: No module named 'helion'", True) == \
        "helion (pip install helion)"
    assert needs.what_is_missing("ModuleNotFoundError: No module named 'cutlass.cute'", True) == \
        "cutlass (pip install nvidia-cutlass-dsl)"
    assert needs.what_is_missing("No module named 'json.foo'", False) is None  # the standard library's: a bug
    (tmp_path / "mykernel.py").write_text("")
    assert needs.what_is_missing("No module named 'mykernel'", False, tmp_path) is None  # its own, missing: its fault
    assert needs.what_is_missing("AssertionError: Torch not compiled with CUDA enabled", False) == "a CUDA GPU"
    assert needs.what_is_missing("AssertionError: Torch not compiled with CUDA enabled", True) is None
    assert needs.what_is_missing("mismatch found! 3 elements differ", False) is None
    assert needs.what_is_missing("raised OSError: CUDA_HOME environment variable is not set.", False) == "a CUDA GPU"
    assert needs.what_is_missing("raised OSError: CUDA_HOME environment variable is not set.", True) == \
        "the CUDA toolkit (nvcc; set CUDA_HOME)"
    assert needs.what_is_missing("No CUDA GPU available. This script requires a GPU.", False) == "a CUDA GPU"
    # a CUTLASS header the contest's image has and this machine lacks: nvcc's words and emulation's line (as
    # measured on an H200, tests/blackwell/cutlass_headers_fp4_cvt.py without .cutlass staged); not one of its own
    cutlass = "CUTLASS's C++ headers (.ci/stage-cutlass.sh stages them in .cutlass/)"
    assert needs.what_is_missing("x.cu:3:10: fatal error: cutlass/numeric_types.h: No such file or directory", True) == cutlass
    assert needs.what_is_missing("build of 'b200_x' failed (nvcc, emulated for sm_90a): it includes cutlass/numeric_types.h "
                                 "(line 18), which is not installed here (a header of the contest's environment)", True) == cutlass
    assert needs.what_is_missing("x.cu:3:10: fatal error: cute/tensor.hpp: No such file or directory", False) == cutlass
    assert needs.what_is_missing("x.cu:3:10: fatal error: mykernel.h: No such file or directory", True) is None


def test_a_stopped_run_keeps_its_rows_ends_its_runs_and_a_rerun_resumes(tmp_path):
    """SIGTERM while a solution hangs: the rows decided so far stay in the JSONL and the markdown,
    the runs under way end with conform (no judge or evaluator left running), and a rerun decides
    only what is missing."""
    import signal
    import time

    from eval import conform

    md, jsonl = tmp_path / "conform.md", tmp_path / "conform.jsonl"
    env = {**os.environ, "EVAL_RESULTS_DIR": str(tmp_path / "results")}
    env.pop(problem_folder.DIR_ENV, None)
    args = [sys.executable, "-m", "eval", "conform", str(SERIES), "--only", "hang", "--jobs", "2",
            "--format", "markdown", "-o", str(md)]
    proc = subprocess.Popen([*args, "--limit", "600"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and len(conform.read_rows(jsonl)) < 1:
        time.sleep(2)
    assert [r.solution for r in conform.read_rows(jsonl)] == ["submission.py"]
    children = [int(p.parent.name) for p in Path("/proc").glob("[0-9]*/stat")
                if p.read_text().rsplit(")", 1)[1].split()[1] == str(proc.pid)]
    assert children  # the hanging solution's runs
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    assert all(not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
               for pid in children)
    assert [r.solution for r in conform.read_rows(jsonl)] == ["submission.py"]  # nothing decided by the stop
    assert "| series/borrowed/hang | submission.py | pass | pass | yes |" in md.read_text()
    # only the hang is left to decide: each side waits out the limit whatever the machine's load
    again = subprocess.run([*args, "--limit", "10"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    rows = conform.read_rows(jsonl)
    assert len(rows) == 2 and len(jsonl.read_text().splitlines()) == 2 and "within 10 s" in rows[1].ours.reason


def test_a_reference_that_imports_a_missing_package_is_cannot_run_before_any_worker(tmp_path):
    """amd_202602's reference.py imports aiter: on a machine without it every solution is "cannot run
    here: needs aiter", exit 113, found in the judge (the problem's code), not "crashed" in a worker."""
    folder = tmp_path / "refneeds"
    folder.mkdir()
    for name in ("task.py", "task.yml"):
        (folder / name).write_text((SERIES / "borrowed" / "needs_package" / name).read_text()
                                   .replace("../../../conventions", str(CONVENTIONS)))
    (folder / "reference.py").write_text("import nosuchref_conform\n" + (
        SERIES / "borrowed" / "single_tensor" / "reference.py").read_text())
    (folder / "submission.py").write_text("def custom_kernel(data):\n    return data\n")
    out = subprocess.run([sys.executable, "-m", "eval", "--problem", str(folder), "test", str(folder / "submission.py")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "EVAL_RESULTS_DIR": str(tmp_path / "results")})
    assert out.returncode == 113, out.stdout[-2000:] + out.stderr[-2000:]
    assert "cannot run here: needs nosuchref_conform (pip install nosuchref-conform) (the problem's reference.py)" \
        in out.stdout, out.stdout
    assert "starting a worker" not in out.stdout + out.stderr


def test_a_multi_gpu_folder_says_what_it_needs_on_both_sides(tmp_path, monkeypatch):
    """amd_distributed's folders (multi_gpu: true, world_size 8): neither side runs on fewer GPUs,
    and each says why in one line instead of a generate_input traceback or a port clash."""
    from eval import conform

    folder = tmp_path / "all2all"
    folder.mkdir()
    (folder / "task.yml").write_text('files:\n  - {"name": "submission.py", "source": "@SUBMISSION@"}\n'
                                     '  - {"name": "eval.py", "source": "../eval.py"}\nmulti_gpu: true\n'
                                     'config:\n  main: "eval.py"\ntests:\n  - {"world_size": 8, "m": 64, "seed": 1}\n'
                                     'benchmarks:\n  - {"world_size": 4, "m": 64, "seed": 2}\n')
    for name in ("task.py", "reference.py", "submission.py"):
        (folder / name).write_text("")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert conform.our_layout(folder).startswith("a multi-GPU problem (task.yml multi_gpu: true, world_size 8)")
    side, evaluator = conform.official(folder, folder / "submission.py", "test", False)
    assert not side.ran and side.reason == "cannot run here: needs 8 GPUs (multi_gpu, world_size 8); this machine has 2"
    assert evaluator == "../eval.py"


def test_a_folder_of_its_own_contract_is_judged_by_its_evaluator_in_the_sandbox(tmp_path):
    """princeton's cross_entropy_py has no task.py: its submission defines its own functions and its
    eval.py checks them. `test` runs that evaluator inside a sandboxed worker (its verdict, our
    sandbox), a wrong file fails with exit 112, and a command that needs custom_kernel says it cannot."""
    folder = SERIES / "borrowed" / "own_contract"
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def forward(x):\n    return x * 2\n")
    env = {**os.environ, "EVAL_RESULTS_DIR": str(tmp_path / "results")}

    def run(*args):
        return subprocess.run([sys.executable, "-m", "eval", "--problem", str(folder), *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=300, env=env)

    good = run("test", str(folder / "submission.py"), "--format", "json")
    assert good.returncode == 0, good.stdout[-2000:] + good.stderr[-2000:]
    record = json.loads(good.stdout)
    assert record["passed"] and record["environment"]["sandbox"] and record["cases"][0]["status"] == "pass"
    assert "its own contract" in record["cases"][0]["warnings"][0]
    bad = run("test", str(wrong))
    assert bad.returncode == 112 and "check: fail" in bad.stdout, bad.stdout[-2000:]
    other = run("profile", str(wrong))
    assert other.returncode == 2 and "has its own contract" in other.stderr and len(other.stderr.splitlines()) == 1


def test_an_input_with_state_of_its_own_gets_a_new_input_each_call(monkeypatch):
    """amd/mla-decode hands a KVCache module (its cache and the length filled so far) beside its
    tensors: refilled tensors cannot reset it, so the same-buffers call is not made (with a warning)
    and the other calls keep their own reasons."""
    import dataclasses

    from eval.judge import modes, runner

    class KVCache(torch.nn.Module):
        pass

    @dataclasses.dataclass
    class Config:
        n: int

    assert problem_folder.opaque((Config(1), torch.ones(2), KVCache())) == ["Config", "KVCache"]
    assert problem_folder.opaque({"x": torch.ones(2), "cfg": {"dim": 3, "dtype": torch.float16}, "s": "a"}) == []
    plain = runner.CaseProfile(2, frozenset(), 8, frozenset())
    stateful = dataclasses.replace(plain, opaque=("KVCache",))
    args = cases.select_cases("smoke")[0].args
    monkeypatch.setattr(modes, "case_profile", lambda args: plain)
    assert [s["reuse"] for s in modes.trial_steps(args)][:3] == [False, True, False]
    monkeypatch.setattr(modes, "case_profile", lambda args: stateful)
    assert [s["reuse"] for s in modes.trial_steps(args)][:2] == [False, False]


def test_an_output_is_expected_where_the_inputs_are(monkeypatch):
    """On a GPU machine a problem may generate CPU tensors (the convention fixtures do): the output is
    expected on the CPU like them, not refused as "on cpu, expected cuda"; GPU inputs still want a GPU
    output, and an input without tensors takes the judge's device."""
    from eval.judge import verdict

    monkeypatch.setattr(verdict, "device", lambda: "cuda")  # as on the GPU machine
    assert verdict.input_device((torch.ones(2), {"n": 3})) == "cpu"
    assert verdict.input_device({"n": 3}) == "cuda"
    values = torch.arange(3, dtype=torch.float32)
    entry = {"dtype": "Float", "device": "cpu", "blob": [0, 12], "sizes": [3], "strides": [1], "offset": 0}
    out = verdict.rebuild(entry, values.numpy().tobytes(), verdict.input_device((values,)))
    assert not out.problem and torch.equal(out.tensor, values)
    refused = verdict.rebuild(entry, values.numpy().tobytes())
    assert refused.problem == "output is on cpu, expected cuda like the inputs"


def test_timing_rows_run_benchmark_mode_a_gpu_each_in_swapped_rounds(monkeypatch):
    """--timing: both sides' benchmark mode on the row's GPU, the order swapped each round, the means
    over the rounds and each round kept; rows spread one per GPU (no evaluator runs here)."""
    import threading

    from eval import conform

    calls = []
    lock = threading.Lock()

    def official(folder, solution, mode, timing, emulate, limit, device):
        with lock:
            calls.append(("official", folder.name, mode, timing, device))
        return conform.Side(True, True, means_ns=[100.0 + len([c for c in calls if c[0] == "official"])]), "eval.py"

    def ours(folder, solution, mode, emulate, timing, limit, device):
        with lock:
            calls.append(("ours", folder.name, mode, timing, device))
        return conform.Side(True, True, means_ns=[110.0])

    monkeypatch.setattr(conform, "official", official)
    monkeypatch.setattr(conform, "ours", ours)
    monkeypatch.setattr(conform, "devices", lambda: ["0", "1"])
    rows = conform.conform(CONVENTIONS, timing=True, only="list_keys|dict_inputs", solutions="^submission.py$",
                           rounds=3)
    assert len(rows) == 2 and all(r.timing and r.agree for r in rows)
    for row in rows:
        mine = [c for c in calls if c[1] == Path(row.problem).name]
        assert [c[0] for c in mine] == ["official", "ours", "ours", "official", "official", "ours"]
        assert {c[2] for c in mine} == {"benchmark"} and all(c[3] for c in mine)
        assert len({c[4] for c in mine}) == 1  # one GPU for the row's every run
        assert len(row.official.rounds_ns) == 3 and len(row.ours.rounds_ns) == 3
        assert row.official.means_ns == [sum(r[0] for r in row.official.rounds_ns) / 3]
        low, high = row.ratio_ranges[0]
        assert low <= row.ratios[0] <= high and high > low
    assert {c[4] for c in calls} == {"0", "1"}  # the two rows on the two GPUs


def test_a_timing_row_of_fewer_rounds_than_asked_is_timed_again(monkeypatch, tmp_path):
    """Resume reuses a timing row only where it has the rounds asked for (or a side that failed)."""
    from eval import conform

    runs = []
    def side(who, mean):
        runs.append(who)
        return conform.Side(True, True, means_ns=[mean])

    monkeypatch.setattr(conform, "official", lambda *a: (side("official", 100.0), "eval.py"))
    monkeypatch.setattr(conform, "ours", lambda *a: side("ours", 110.0))
    monkeypatch.setattr(conform, "devices", lambda: ["0"])
    jsonl = tmp_path / "rows.jsonl"
    picked = dict(timing=True, only="list_keys", solutions="^submission.py$", jsonl=jsonl)
    conform.conform(CONVENTIONS, rounds=1, **picked)
    assert len(runs) == 2
    conform.conform(CONVENTIONS, rounds=1, **picked)
    assert len(runs) == 2  # the same rounds: reused
    rows = conform.conform(CONVENTIONS, rounds=2, **picked)
    assert len(runs) == 6 and len(rows[0].ours.rounds_ns) == 2  # more rounds asked: timed again


def test_a_timing_row_stops_at_the_first_round_a_side_fails(monkeypatch):
    from eval import conform

    monkeypatch.setattr(conform, "official", lambda *a: (conform.Side(True, True, means_ns=[1.0]), "eval.py"))
    monkeypatch.setattr(conform, "ours", lambda *a: conform.Side(True, False, "mismatch", []))
    monkeypatch.setattr(conform, "devices", lambda: ["0"])
    [row] = conform.conform(CONVENTIONS, timing=True, only="list_keys", solutions="^submission.py$", rounds=4)
    assert row.agree is False and row.ours.reason == "mismatch" and len(row.official.rounds_ns) == 1
    assert row.ratios == [] and row.ratio_ranges == []
