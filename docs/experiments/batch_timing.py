"""Measurement for issue #26 (a script, not a test): what one candidate costs in a batch, and how many
candidates per hour a host's GPUs judge.

    python docs/experiments/batch_timing.py [--sub submission/v5.py] [--runs 5]
        `benchmark` of an already-built honest submission, runs+1 times (the first, which may build
        and measure floors on a fresh machine, is shown apart). Each run is judged twice:
        - as `batch` judges it (batch.judge_one: its own judge process): the per-candidate wall time;
        - in this process through eval.api, with timers around the judge's steps (exclusive times):
            worker start   the sandboxed worker up to its signed hello (WorkerProcess._hello)
            build/cache    the import of the submission: a build, or a hit in the compile cache
                           (WorkerProcess._load; the cache column: hit when the compile cache held
                           this source's builds, miss when it built them or has none to build)
            tests          the obligatory correctness call before each case (modes.check_trial)
            timing         the warm-up and the timed runs, every output checked (modes.timed)
            floors         this GPU's floors (baselines.ensure_floors: cached after the first run)
            baseline       the BF16 baseline timed in a harness worker (modes._add_baseline)
            judge          the rest: static check, environment, records
          and `judge process` = the batch's wall time minus this in-process total (the judge's
          Python start, torch import, CUDA context).
        The record itself carries none of these phases (docs/record-schema.md); the worker log
        (record.log) has the worker's own output only.

    python docs/experiments/batch_timing.py --throughput [--count 40] [--passes one,all,ray] [--out DIR]
        A mixed batch generated from submission/torch_ref.py into DIR (correct ones with a comment
        each, wrong ones with an edited result, ones that crash in custom_kernel, ones that hang at
        import), judged with `benchmark` in each pass: one (1 GPU, --jobs 1: each candidate alone on
        the host), all (every GPU), ray (every GPU through a Ray cluster started here, `--ray
        local`; Ray importable, e.g. `source .ray/activate.sh`): candidates per hour of each, the
        ratios to the first pass, the verdicts' agreement, and each honest candidate's per-case means
        in each pass against the first. One honest candidate is judged first, uncounted (the
        harness's native part and this GPU's floors). --budget-s skips a pass that would not fit.
        --compiled N adds N v5 variants (docs/experiments/v5_variants.py), built first on the CPU
        cores unless --pipelined (then the first pass builds them as batch does, ahead of its slots,
        and the report states the build seconds beside the slot seconds). Each pass's lines and wall
        time stay in DIR ({pass}.jsonl, {pass}.meta.json); --reference DIR2 takes an earlier run's
        passes (e.g. 1 GPU, judged in a call of its own) as the first ones to compare with.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from eval import api, baselines, batch, problem_folder  # noqa: E402
from eval.judge import build_cache, channel, modes  # noqa: E402

PHASES = ("worker start", "build/cache", "tests", "timing", "floors", "baseline", "judge")
SEALED = ("floors", "baseline")  # their workers and timed runs count as theirs


# -- per-candidate breakdown ------------------------------------------------------------------------

class PhaseClock:
    """Exclusive seconds per phase, from wrappers around the judge's functions (this process only)."""

    def __init__(self):
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.stack: list[list] = []  # [phase, started, children's seconds]
        self.cache_hits: list[bool] = []

    def wrap(self, owner, name: str, phase: str) -> None:
        inner = getattr(owner, name)
        clock = self

        def wrapper(*args, **kwargs):
            if clock.stack and clock.stack[-1][0] in SEALED:
                return inner(*args, **kwargs)
            clock.stack.append([phase, time.perf_counter(), 0.0])
            try:
                return inner(*args, **kwargs)
            finally:
                _, started, children = clock.stack.pop()
                total = time.perf_counter() - started
                clock.seconds[phase] += total - children
                if clock.stack:
                    clock.stack[-1][2] += total
        setattr(owner, name, wrapper)

    def install(self) -> None:
        self.wrap(channel.WorkerProcess, "_hello", "worker start")
        self.wrap(channel.WorkerProcess, "_load", "build/cache")
        self.wrap(modes, "check_trial", "tests")
        self.wrap(modes, "timed", "timing")
        self.wrap(baselines, "ensure_floors", "floors")
        self.wrap(modes, "_add_baseline", "baseline")
        seed = build_cache.seed

        def seeded(*args, **kwargs):
            hit = seed(*args, **kwargs)
            self.cache_hits.append(hit)
            return hit
        build_cache.seed = seeded

    def take(self) -> tuple[dict, list]:
        seconds, hits = dict(self.seconds), list(self.cache_hits)
        self.seconds, self.cache_hits = dict.fromkeys(PHASES, 0.0), []
        return seconds, hits


def one_run(sub: Path, clock: PhaseClock, limit: float, cases: str | None) -> dict:
    """The batch's wall time for the candidate, then the in-process phases of the same judgement."""
    args = ["--cases", cases] if cases else []
    line = batch.judge_one(batch.Candidate(sub.name, sub.resolve(), "-"), "benchmark", args, None, limit)
    started = time.perf_counter()
    record = api.judge(sub, "benchmark", cases=cases)
    total = time.perf_counter() - started
    phases, hits = clock.take()
    phases["judge"] = total - sum(v for k, v in phases.items() if k != "judge")
    return {"batch_s": line["seconds"], "batch_passed": line["passed"], "reason": line["reason"],
            "api_s": total, "phases": phases, "cache_hit": all(hits) if hits else None,
            "passed": record.passed, "geomean_us": (record.geomean_ns or 0) / 1e3}


def breakdown(sub: Path, runs: int, limit: float, cases: str | None) -> None:
    clock = PhaseClock()
    clock.install()
    print(f"benchmark of {sub}, {runs} warm run(s) after a first one; seconds")
    print(f"{'run':>5} {'batch wall':>10} {'judge proc':>10} {'in-proc':>8} " +
          " ".join(f"{p:>12}" for p in PHASES) + "  cache  verdict")
    rows = []
    for number in range(runs + 1):
        row = one_run(sub, clock, limit, cases)
        rows.append(row)
        _print_row("first" if number == 0 else str(number), row)
    warm = rows[1:] or rows
    mean = {"batch_s": statistics.mean(r["batch_s"] for r in warm), "api_s": statistics.mean(r["api_s"] for r in warm),
            "phases": {p: statistics.mean(r["phases"][p] for r in warm) for p in PHASES}, "cache_hit": None,
            "passed": all(r["passed"] and r["batch_passed"] for r in warm),
            "geomean_us": statistics.mean(r["geomean_us"] for r in warm)}
    _print_row("mean", mean)
    print(f"per-candidate wall time of `benchmark` in a batch (warm mean): {mean['batch_s']:.1f} s "
          f"(target <= 10 s); first run {rows[0]['batch_s']:.1f} s")


def _print_row(label: str, row: dict) -> None:
    judge_proc = row["batch_s"] - row["api_s"]
    hit = {True: "hit", False: "miss", None: "-"}[row["cache_hit"]]
    verdict = f"pass {row['geomean_us']:.2f} µs" if row["passed"] else f"FAIL {row.get('reason')}"
    print(f"{label:>5} {row['batch_s']:>10.2f} {judge_proc:>10.2f} {row['api_s']:>8.2f} " +
          " ".join(f"{row['phases'][p]:>12.2f}" for p in PHASES) + f"  {hit:>5}  {verdict}", flush=True)


# -- throughput --------------------------------------------------------------------------------------

HANG = "import time\ntime.sleep(3600)\n\ndef custom_kernel(data):\n    return None\n"
CRASH_CALL = "\n    import os\n    os.abort()\n"


def generate(folder: Path, count: int) -> dict[str, str]:
    """count candidates from torch_ref.py and small edits: about half correct, a fifth wrong, the
    rest crashing or hanging. Returns name -> kind."""
    source = (ROOT / "submission" / "torch_ref.py").read_text()
    assert "\n    return c\n" in source and "def custom_kernel(data" in source
    kinds = {"wrong": round(count * 0.2), "crash": round(count * 0.15), "hang": round(count * 0.1)}
    kinds["honest"] = count - sum(kinds.values())
    folder.mkdir(parents=True, exist_ok=True)
    made = {}
    for kind, many in kinds.items():
        for i in range(many):
            if kind == "honest":
                text = f"# candidate {i}: torch_ref unchanged\n{source}"
            elif kind == "wrong":
                text = source.replace("\n    return c\n", f"\n    return c * {2 + i}\n")
            elif kind == "crash":
                head, tail = source.split("def custom_kernel(data", 1)
                signature, body = tail.split("\n", 1)
                text = f"{head}def custom_kernel(data{signature}{CRASH_CALL}{body}# crash {i}\n"
            else:
                text = f"# hang {i}\n{HANG}"
            name = f"{kind}{i:02d}.py"
            (folder / name).write_text(text)
            made[name] = kind
    return made


def judge_pass(label: str, candidates: list, out: Path, args: list[str], limit: float, jobs=None,
               ray_address=None, env=None) -> dict:
    """One pass over every candidate (with env set meanwhile); its wall time, lines and candidates per hour."""
    import os

    out.unlink(missing_ok=True)
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})

    done = []

    def show(line):
        print(f"  [{label}] {line['id']}: {'pass' if line['passed'] else 'FAIL'} {line['seconds']:.0f} s "
              f"(device {line['device']})", flush=True)
        done.append(line.get("device"))  # the wall so far, in case the pass is stopped before its end
        out.with_suffix(".meta.json").write_text(json.dumps({"label": label, "wall_s": time.monotonic() - started,
                                                             "slots": len(set(done)), "incomplete": True}))
    started = time.monotonic()
    if ray_address:
        from eval import batch_ray
        lines = batch_ray.run(candidates, "benchmark", args, out, ray_address, jobs, limit, show)
    else:
        lines = batch.run(candidates, "benchmark", args, out, jobs, limit, show)
    wall = time.monotonic() - started
    for key, value in saved.items():
        os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
    slots = len({line.get("device") for line in lines}) or 1
    meta = {"label": label, "wall_s": wall, "slots": slots, "builds": os.environ.get(batch.BUILDS_ENV) or batch.build_jobs()}
    out.with_suffix(".meta.json").write_text(json.dumps(meta))
    return {**meta, "per_hour": len(lines) / wall * 3600, "lines": {Path(l["id"]).name: l for l in lines}}


def load_pass(jsonl: Path) -> dict:
    """A pass judged earlier (its JSONL and meta beside it), as judge_pass returns one."""
    meta = json.loads(jsonl.with_suffix(".meta.json").read_text())
    lines = [json.loads(text) for text in jsonl.read_text().splitlines() if text.strip()]
    return {**meta, "label": meta["label"] + " (reference)", "per_hour": len(lines) / meta["wall_s"] * 3600,
            "lines": {Path(l["id"]).name: l for l in lines}}


def case_means(line: dict) -> dict:
    return {c["spec"]: c["stats"]["mean"] for c in (line.get("record") or {}).get("cases", []) if c.get("stats")}


def compare_means(alone: dict, busy: dict, kinds: dict) -> tuple[float, list]:
    """Per honest candidate and case: busy mean / alone mean; the worst |ratio - 1|."""
    ratios = []
    for name, kind in kinds.items():
        if kind != "honest" or name not in alone or name not in busy:
            continue
        a, b = case_means(alone[name]), case_means(busy[name])
        ratios += [(name, spec, b[spec] / a[spec]) for spec in a if spec in b]
    worst = max((abs(r - 1) for _, _, r in ratios), default=math.nan)
    return worst, ratios


PASSES = {"one": ("1 GPU", {"jobs": 1}), "all": ("all GPUs", {}), "ray": ("Ray local", {"ray_address": "local"}),
          "fresh": ("1 GPU, a judge process per candidate", {"jobs": 1, "env": {"EVAL_BATCH_KEPT": "0"}}),
          "ray-auto": ("Ray cluster (auto)", {"ray_address": "auto"})}


def throughput(count: int, timeout: float, limit: float, chosen: list[str], out_dir: Path, budget_s: float,
               cases: str | None, compiled: int = 0, pipelined: bool = False, reference: Path | None = None) -> None:
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    folder = out_dir / "candidates"
    kinds = generate(folder, count)
    if compiled:  # v5 variants (docs/experiments/v5_variants.py): a build of their own each
        sys.path.insert(0, str(ROOT / "docs" / "experiments"))
        import v5_variants

        kinds.update(v5_variants.make(folder, compiled, max(1, compiled // 10)))
    candidates = batch.collect([folder], out_dir / "sources")
    args = ["--timeout", str(timeout)] + (["--cases", cases] if cases else [])
    print(f"{len(candidates)} candidates ({', '.join(f'{k}: {list(kinds.values()).count(k)}' for k in sorted(set(kinds.values())))}) "
          f"on {gpus or 'no'} GPU(s) of {torch.cuda.get_device_name(0) if gpus else 'this CPU host'}", flush=True)
    started = time.monotonic()
    warm = [c for c in candidates if kinds[Path(c.id).name] == "honest"][:1]
    judge_pass("warm-up", [batch.Candidate("warm-up", warm[0].path, "warm-up")], out_dir / "warm.jsonl", args, limit, 1)
    if compiled and not pipelined:  # every build first, on the CPU cores as batch's builders make them: each pass then judges warm
        prebuild_all(candidates, kinds, min(limit, 600.0))
    passes = [load_pass(path) for path in sorted(reference.glob("*.jsonl"))
              if path.stem in PASSES and path.stem not in chosen] if reference else []
    for p in passes:
        print(f"reference: {p['label']}, {len(p['lines'])} lines, {p['wall_s']:.0f} s", flush=True)
    for name in chosen:
        label, extra = PASSES[name]
        if passes:
            one = next((p for p in passes if p["label"] == PASSES["one"][0]), None)
            expected = one["wall_s"] / max(1, gpus) if one else passes[-1]["wall_s"]
            if time.monotonic() - started + expected > budget_s:
                print(f"skipped {label}: it would take about {expected:.0f} s, past --budget-s {budget_s:.0f}", flush=True)
                continue
        passes.append(judge_pass(label, candidates, out_dir / f"{name}.jsonl", args, limit, **extra))
    report(passes, kinds)


def prebuild_all(candidates: list, kinds: dict, limit: float) -> None:
    """The compiled candidates' builds, batch.build_jobs() at once (as batch's builders run them):
    each one's build seconds, so that a candidate's time with its build is stated beside the slot's."""
    from concurrent.futures import ThreadPoolExecutor

    todo = [c for c in candidates if Path(c.id).name.startswith("v5var")]
    started = time.monotonic()
    with ThreadPoolExecutor(max(1, batch.build_jobs())) as pool:
        built = list(pool.map(lambda c: (c, batch.prebuild_one(c, False, limit)), todo))
    wall = time.monotonic() - started
    seconds = [b["seconds"] for c, b in built if b["ok"] and b["seconds"]]
    print(f"builds: {len(todo)} compiled candidates, {batch.build_jobs()} at once, {wall:.0f} s wall; "
          f"{sum(b['ok'] for _, b in built)} built, mean {statistics.mean(seconds) if seconds else 0:.1f} s a build "
          f"({sum(seconds) / max(1, len(todo)):.1f} s of build a candidate)", flush=True)
    for c, b in built:
        if not b["ok"]:
            print(f"  build failed: {Path(c.id).name} ({kinds.get(Path(c.id).name)}): {b.get('reason', '')[:120]}", flush=True)


def family(name: str) -> str:
    return "compiled" if name.startswith("v5var") else "torch_ref"


def _mean(values: list) -> str:
    return f"{statistics.mean(values):.2f}" if values else "-"


def report(passes: list, kinds: dict) -> None:
    one = passes[0]  # the reference pass: 1 GPU, alone on the host, when it ran
    print(f"\n{'pass':>38} {'wall s':>8} {'cand/h':>8} {'× first':>8} {'slot s':>7} {'honest s':>9} "
          f"{'compiled':>9} {'torch_ref':>9} {'busy %':>7}  verdicts as the first pass")
    for p in passes:
        same = all(p["lines"][n]["passed"] == one["lines"][n]["passed"] for n in one["lines"] if n in p["lines"])
        lines = p["lines"]
        honest = {n: line["seconds"] for n, line in lines.items() if kinds.get(n) == "honest"}
        busy = sum(line["seconds"] for line in lines.values()) / (p["wall_s"] * p.get("slots", 1)) * 100
        print(f"{p['label']:>38} {p['wall_s']:>8.0f} {p['per_hour']:>8.0f} {p['per_hour'] / one['per_hour']:>8.2f} "
              f"{_mean([l['seconds'] for l in lines.values()]):>7} {_mean(list(honest.values())):>9} "
              f"{_mean([s for n, s in honest.items() if family(n) == 'compiled']):>9} "
              f"{_mean([s for n, s in honest.items() if family(n) == 'torch_ref']):>9} {busy:>7.1f}  "
              f"{'same' if same and len(lines) == len(one['lines']) else 'DIFFERENT'}")
        builds = [line["prebuild"]["seconds"] for n, line in lines.items()
                  if family(n) == "compiled" and (line.get("prebuild") or {}).get("ok") and line["prebuild"].get("seconds")]
        if builds:
            slot = [line["seconds"] for n, line in lines.items() if family(n) == "compiled" and kinds.get(n) == "honest"]
            print(f"{'':>38} builds pipelined ({p.get('builds')} at once): {len(builds)} built, {statistics.mean(builds):.1f} s "
                  f"a build; an honest compiled candidate's slot {_mean(slot)} s, with its build {statistics.mean(slot) + statistics.mean(builds):.1f} s; "
                  f"the pass's wall per candidate {p['wall_s'] / len(lines):.2f} s (builds included, pipelined)")
    for p in passes[1:]:
        worst, ratios = compare_means(one["lines"], p["lines"], kinds)
        print(f"\nhonest candidates' means, {p['label']} (busy) / {one['label']} (alone): worst |ratio - 1| = "
              f"{worst * 100:.2f} %")
        for fam in ("compiled", "torch_ref"):
            mine = [r for n, _, r in ratios if family(n) == fam]
            if mine:
                print(f"  {fam}: {len(mine)} case means, worst |ratio - 1| {max(abs(r - 1) for r in mine) * 100:.2f} %, "
                      f"mean ratio {statistics.mean(mine):.4f}")
        for name, spec, ratio in ratios:
            print(f"  {name} {spec}: {ratio:.4f}")
    expected = {n: kinds[n] == "honest" for n in kinds}
    wrong = [n for n, line in one["lines"].items() if line["passed"] != expected[n]]
    print(f"\nverdicts as generated (honest pass, the rest fail): {'yes' if not wrong else 'NO: ' + ', '.join(wrong)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sub", type=Path, default=ROOT / "submission" / "v5.py")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--throughput", action="store_true")
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--passes", default="one,all", help="throughput passes in order, from one (1 GPU), fresh (1 GPU, a judge process per candidate), "
                        "ray-auto (the Ray cluster running here), all "
                        "(every GPU), ray (every GPU through `--ray local`); the first is the reference")
    parser.add_argument("--timeout", type=float, default=20.0, help="per case (hanging candidates cost this)")
    parser.add_argument("--limit", type=float, default=600.0, help="per candidate")
    parser.add_argument("--cases", default=None, help="case set (default: benchmark's own)")
    parser.add_argument("--compiled", type=int, default=0, help="also this many compiled v5 variants "
                        "(docs/experiments/v5_variants.py), built first")
    parser.add_argument("--pipelined", action="store_true", help="no builds first: the first pass builds ahead of its slots, as batch does")
    parser.add_argument("--reference", type=Path, default=None, help="a folder of passes judged earlier (--out of another run): the first to compare with")
    parser.add_argument("--budget-s", type=float, default=540.0, help="skip a throughput pass that would end past this")
    parser.add_argument("--out", type=Path, default=None, help="folder for candidates and JSONLs (default: a temp one)")
    options = parser.parse_args()
    passes = options.passes.split(",")
    if not set(passes) <= set(PASSES) or not passes:
        parser.error(f"--passes: a comma-separated list of {', '.join(PASSES)}")
    problem_folder.use(ROOT)
    if not options.throughput:
        breakdown(options.sub, options.runs, options.limit, options.cases)
        return
    with (contextlib.nullcontext(options.out) if options.out else tempfile.TemporaryDirectory()) as out:
        throughput(options.count, options.timeout, options.limit, passes, Path(out), options.budget_s, options.cases,
                   options.compiled, options.pipelined, options.reference)
        print(f"\njudged lines: {Path(out)}/*.jsonl", flush=True)


if __name__ == "__main__":
    main()
