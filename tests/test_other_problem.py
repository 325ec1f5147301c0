"""The harness on a second problem in the leaderboard's layout (tests/problems/vectoradd: task.yml,
task.py, reference.py, no problem.py): every mode runs with the generic checks and columns, bad input
is one line with exit 2, and the core names nothing of the NVFP4 GEMV."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from tests.conftest import ROOT

PROBLEM = ROOT / "tests" / "problems" / "vectoradd"
SUBS = PROBLEM / "submission"
RESULTS = tempfile.mkdtemp(prefix="vectoradd-results-")


def cli(*args, cwd=ROOT, problem=PROBLEM, timeout=300):
    env = {**os.environ, "EVAL_RESULTS_DIR": RESULTS, "PYTHONPATH": str(ROOT)}
    env.pop("EVAL_PROBLEM_DIR", None)
    head = ["--problem", str(problem)] if problem else []
    return subprocess.run([sys.executable, "-m", "eval", *head, *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.mark.parametrize("name,reason", [
    ("honest", None),
    ("new_tensor", None),
    ("wrong", "mismatch found!"),
    ("mutates_input", "modified its input `data[0]` (work done in place on an input carries over to the next call on that buffer): custom_kernel may write only its output (data[2])"),
    ("untouched", "returned the pre-filled data[2] unchanged"),
])
def test_test_mode_judges_the_other_problem(name, reason):
    out = cli("test", str(SUBS / f"{name}.py"), "--format", "json")
    assert "Traceback" not in out.stderr
    if reason is None:
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        assert '"label": "127"' in out.stdout  # the generic case label: its size
    else:
        assert out.returncode == 112 and reason in out.stdout, out.stdout[-2000:]


# an evaluator that declares few runs (the harness takes the folder's evaluator's own budgets,
# eval/problem_folder.py evaluator_budgets): the timed modes' columns and checks, at a cost a busy
# 2-core machine meets (the default leaderboard budget, 1000 rechecked runs a case, did not in 300 s)
FEW_RUNS_EVALUATOR = """def run_benchmarking(pool, tests):
    run_single_benchmark(pool, tests[0], False, 5, 1e7)
    for test in tests:
        run_single_benchmark(pool, test, False, 20, 1e8)


def run_leaderboard(pool, tests):
    run_single_benchmark(pool, tests[0], False, 5, 1e7)
    for test in tests:
        run_single_benchmark(pool, test, True, 20, 1e8)
"""


@pytest.fixture(scope="module")
def few_runs(tmp_path_factory):
    """A copy of the problem whose evaluator (task.yml: ../eval.py) declares a few runs a case."""
    base = tmp_path_factory.mktemp("few-runs")
    shutil.copytree(PROBLEM, base / "vectoradd")
    (base / "eval.py").write_text(FEW_RUNS_EVALUATOR)
    return base / "vectoradd"


def test_benchmark_and_leaderboard_have_the_generic_columns(few_runs):
    subs = few_runs / "submission"
    out = cli("benchmark", str(subs / "honest.py"), problem=few_runs)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "│ 384 " in out.stdout and "│ 512 " in out.stdout and "check: pass" in out.stdout
    assert "GB/s" not in out.stdout and "× floor" not in out.stdout  # no problem.py: no bytes, no floor
    out = cli("leaderboard", str(subs / "new_tensor.py"), problem=few_runs)
    assert out.returncode == 0 and "check: pass" in out.stdout, out.stdout[-3000:]
    out = cli("leaderboard", str(subs / "wrong.py"), problem=few_runs)
    assert out.returncode == 112 and "mismatch found!" in out.stdout


def test_ranking_by_from_task_yml(tmp_path):
    """The score follows task.yml's ranking_by (the leaderboard's problems all use geom)."""
    import json

    folder = tmp_path / "va"
    shutil.copytree(PROBLEM, folder)
    (folder / "task.yml").write_text((PROBLEM / "task.yml").read_text().replace('ranking_by: "geom"', 'ranking_by: "last"'))
    out = cli("benchmark", str(SUBS / "honest.py"), problem=folder)
    assert out.returncode == 0 and "score (last):" in out.stdout, out.stderr[-2000:]
    saved = json.loads(open(out.stderr.split("result: ")[1].split()[0]).read())
    assert saved["geomean_ns"] == saved["cases"][-1]["stats"]["mean"]


def test_rank_and_compare_on_the_other_problem():
    out = cli("rank", timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert re.search(r"\| 1 \| (honest|new_tensor) \|", out.stdout)
    assert "| — | wrong | skipped: test failed: 127: mismatch found!" in out.stdout
    assert "| — | mutates_input | skipped: test failed: 127: modified its input" in out.stdout
    out = cli("compare", str(SUBS / "honest.py"), str(SUBS / "new_tensor.py"), "--rounds", "2", "--per-round", "3")
    assert out.returncode == 0 and "geomean" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
    out = cli("compare", str(SUBS / "honest.py"), str(SUBS / "wrong.py"), "--rounds", "2", "--per-round", "3")
    assert out.returncode == 112 and "mismatch found!" in out.stdout + out.stderr


def test_run_from_inside_the_problem_folder():
    out = cli("test", "submission/honest.py", cwd=PROBLEM, problem=None)
    assert out.returncode == 0 and "│ 129 " in out.stdout, out.stderr[-2000:]


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    folder = tmp_path / "va"
    shutil.copytree(PROBLEM, folder)
    (folder / "task.yml").write_text((folder / "task.yml").read_text().replace('{"size": 127, "seed": 4242}',
                                                                                 '{"size": 127}'))
    checks = [
        (cli("test", str(SUBS / "honest.py"), problem=folder), "needs an integer seed"),
        (cli("test", str(SUBS / "honest.py"), "--dist", "stress"), "this problem defines no data distributions"),
        (cli("accuracy", str(SUBS / "honest.py")), "this problem has no accuracy mode"),
        (cli("test", str(SUBS / "honest.py"), problem=tmp_path), "is not a problem folder: it lacks task.yml"),
    ]
    for out, needle in checks:
        assert out.returncode == 2 and needle in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    (folder / "task.yml").write_text((PROBLEM / "task.yml").read_text().replace('ranking_by: "geom"', 'ranking_by: "best"'))
    out = cli("test", str(SUBS / "honest.py"), problem=folder)
    assert out.returncode == 2 and "ranking_by 'best' is not one of geom, mean, last" in out.stderr
    out = cli("sol")
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "no floor" in out.stderr or "needs a CUDA GPU" in out.stderr


CORE_BANNED = re.compile(r"(?i)nvfp4|gemv|\[\"[mkl]\"\]|e2m1x2 .*data|float4_e2m1")


def test_core_names_nothing_of_the_nvfp4_problem():
    """Everything NVFP4-specific lives in problem.py and reference.py; eval/ is the generic harness
    (eval/judge/blackwell.py, eval/worker/emulation.py and eval/emulate/ name Blackwell features a kernel
    may use and their stand-ins, FP4 among them, not this problem)."""
    found = []
    for path in sorted((ROOT / "eval").rglob("*")):
        if path.suffix not in (".py", ".cpp", ".yaml") or path.name in ("blackwell.py", "emulation.py") or \
                "emulate" in path.relative_to(ROOT).parts:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if CORE_BANNED.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_reference_is_self_contained():
    """reference.py imports nothing of the harness, so it drops into the leaderboard's layout beside
    its eval.py (which would shadow an `eval` package)."""
    for folder in (ROOT, PROBLEM):
        source = (folder / "reference.py").read_text()
        assert not re.search(r"^\s*(from|import)\s+eval\b", source, re.M), folder


def test_large_outputs_are_timed_in_several_replies(monkeypatch, tmp_path):
    """Where the outputs a reply carries reach max_blob, the worker ends that reply and the judge asks
    again for the rest, judges each reply, and applies the stop rule over all of them."""
    from eval import problem_folder
    from eval.cases import make_case
    from eval.judge import modes, runner as runner_module

    try:
        problem_folder.use(PROBLEM)
        case = make_case({"size": 64, "seed": 3})
        monkeypatch.setattr(runner_module, "MAX_REPLY_BYTES", 64 * 64 * 2)  # one run's output
        options = modes.Options(timeout=120, wall_cap_s=60.0, baseline=False, log_dir=tmp_path)
        calls = []
        runner = modes.Runner(SUBS / "honest.py", options)
        original = runner.call
        monkeypatch.setattr(runner, "call", lambda op, payload, timeout=None: calls.append(op) or original(op, payload))
        try:
            samples = modes.timed(runner, modes.new_case(case, options), options, (4, modes.NO_LIMIT), False)
        finally:
            runner.close()
        assert len(samples) == 4 and calls == ["runs"] * 4
    finally:
        problem_folder.use(ROOT)


def test_an_output_the_same_as_an_earlier_one_is_not_sent_again(monkeypatch, tmp_path):
    """Every run of a case without canaries has the same input: the worker sends the first output
    whole and each later one that is the same byte for byte as {"same_as": 0}; the judge accepts
    those only as references to an earlier whole output of the same input (#37: a 1.6 GB output was
    read back twice and judged again every run)."""
    from eval import problem_folder
    from eval.cases import make_case
    from eval.judge import modes, verdict

    try:
        problem_folder.use(PROBLEM)
        case = make_case({"size": 64, "seed": 3})
        options = modes.Options(timeout=120, wall_cap_s=60.0, baseline=False, log_dir=tmp_path)
        replies = []
        runner = modes.Runner(SUBS / "honest.py", options)
        original = runner.call
        monkeypatch.setattr(runner, "call", lambda op, payload, timeout=None: replies.append(original(op, payload)) or replies[-1])
        try:
            samples = modes.timed(runner, modes.new_case(case, options), options, (5, modes.NO_LIMIT), False)
        finally:
            runner.close()
        assert len(samples) == 5 and len(replies) == 1
        reply = replies[0]
        outs = [run["calls"][0]["out"] for run in reply.header["runs"]]
        assert "blob" in outs[0] and outs[1:] == [{"same_as": 0}] * 4 and len(reply.blob) == 64 * 64 * 2, outs
        assert modes.judge_runs(reply, case.args)[1] is None
        reply.header["runs"][2]["calls"][0]["out"] = {"same_as": 3}  # a later run: a lie
        with pytest.raises(verdict.Tampered):
            modes.judge_runs(reply, case.args)
        reply.header["runs"][2]["calls"][0]["out"] = {"same_as": 1}  # itself a reference: a lie
        with pytest.raises(verdict.Tampered):
            modes.judge_runs(reply, case.args)
    finally:
        problem_folder.use(ROOT)


def test_host_cost_batches_are_left_out_where_their_inputs_and_outputs_would_not_fit(monkeypatch):
    """The host-cost batches hold HOST_CALLS inputs and read back every output: a case whose bytes
    would pass HOST_COST_MAX_BYTES gets none (bioml/trimul's largest: over 200 GB) instead of a worker
    that runs out of memory."""
    from eval import problem_folder
    from eval.cases import make_case
    from eval.judge import modes, runner as runner_module

    try:
        problem_folder.use(PROBLEM)
        args = make_case({"size": 64, "seed": 3}).args
        assert modes.runs_params(args, modes.Options(), (10, 1e9), False, host_calls=20)["host_calls"] == 20
        monkeypatch.setattr(runner_module, "HOST_COST_MAX_BYTES", 20 * 64 * 64 * 2)
        assert modes.runs_params(args, modes.Options(), (10, 1e9), False, host_calls=20)["host_calls"] == 0
    finally:
        problem_folder.use(ROOT)


# -- #37: structures, conventions and "cannot run here" (tests/problems/series) -----------------------

SERIES = ROOT / "tests" / "problems" / "series"


def test_nested_inputs_are_hashed_wherever_their_tensors_are():
    """A weight modified in place inside a dict inside the input tuple is named by its path (the
    earlier rule hashed top-level tensors only, and failed "hash_args names no tensor" on a dict)."""
    out = cli("test", str(SERIES / "cheats" / "nested_in_place.py"), "--format", "json", problem=SERIES / "borrowed" / "nested")
    assert out.returncode == 112 and "modified its input `data[1]['weights']['w_out']`" in out.stdout, \
        out.stdout[-2000:] + out.stderr[-2000:]


def test_a_missing_package_cannot_run_here_with_its_own_exit_code():
    from eval import needs

    out = cli("test", str(SERIES / "borrowed" / "needs_package" / "submission.py"), problem=SERIES / "borrowed" / "needs_package")
    assert out.returncode == needs.EXIT_CANNOT_RUN, out.stdout[-2000:] + out.stderr[-2000:]
    assert "cannot run here: needs nosuchpkg_conform (pip install nosuchpkg-conform)" in out.stdout
    assert "FAIL" not in out.stdout and "Traceback" not in out.stderr


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without a CUDA GPU")
def test_a_cuda_only_reference_cannot_run_here_without_one():
    from eval import needs

    folder = SERIES / "borrowed" / "cuda_only"
    out = cli("test", str(folder / "submission.py"), "--format", "json", problem=folder)
    assert out.returncode == needs.EXIT_CANNOT_RUN and '"cannot_run": "a CUDA GPU"' in out.stdout, \
        out.stdout[-2000:] + out.stderr[-2000:]
    cases = __import__("json").loads(out.stdout)["cases"]  # the first case tells; the rest start no worker
    assert len(cases) == 2 and cases[1]["error"].startswith("not run: ") and "needs a CUDA GPU" in cases[1]["error"], cases


REFK = ROOT / ".refk" / "problems"


@pytest.mark.skipif(not (REFK / "linalg").is_dir(), reason="no reference-kernels checkout at .refk/problems")
def test_the_leaderboards_linalg_and_pmpp_folders_give_a_verdict_or_say_what_they_need():
    """Ours on the leaderboard's own folders (a checkout carried at .refk, read at run time only):
    linalg's single-tensor input and (Q, L) / torch.geqrf outputs with utils.py from ../../pmpp_v2, a
    verdict on the CPU; pmpp's CUDA-only references, "cannot run here: needs a CUDA GPU"."""
    import torch

    from eval import needs

    for name in ("eigh_py", "qr_py"):
        folder = REFK / "linalg" / name
        out = cli("test", str(folder / "submission.py"), "--cases", "tests:0", problem=folder, timeout=900)
        assert out.returncode == 0 and "check: pass" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
    if not torch.cuda.is_available():
        folder = REFK / "pmpp" / "vectoradd_py"
        out = cli("test", str(folder / "submission.py"), problem=folder)
        assert out.returncode == needs.EXIT_CANNOT_RUN and "cannot run here: needs a CUDA GPU" in out.stdout, out.stdout
