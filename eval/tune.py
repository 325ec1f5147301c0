"""Time every launch configuration a submission offers on each case (python -m eval.tune SUB).

A tunable submission exposes CONFIGS (a list) and run_with(data, config). Timing is the harness's
per-call method (L2 flushed, events around the call, median of `runs`); every configuration's output
is checked first. Prints every configuration per case, the best last.
"""
import statistics
import sys
from pathlib import Path

from eval import cases as case_files
from eval import ops, timing

import reference


def tune(sub: str, case_set: str = "benchmarks", runs: int = 100) -> None:
    ops.load_submission(Path(sub))  # imports the file as the module `submission`
    module = sys.modules["submission"]
    configs = getattr(module, "CONFIGS", None)
    if not configs:
        raise SystemExit(f"{sub} exposes no CONFIGS to tune")
    flusher = timing.L2Flusher()
    for case in case_files.select_cases(case_set):
        data = reference.generate_input(**case.args)
        m, k, l = case.shape
        rows = []
        for cfg in configs:
            try:
                out = module.run_with(timing.clone_data(data), cfg)
            except Exception as exc:  # a configuration that does not fit this shape
                rows.append((float("inf"), cfg, f"skip: {str(exc).splitlines()[0][:60]}"))
                continue
            good, msg = reference.check_implementation(data, out)
            if not good:
                rows.append((float("inf"), cfg, "WRONG"))
                continue
            samples = timing.event_samples(lambda: module.run_with(data, cfg), flusher, runs)
            rows.append((statistics.median(samples), cfg, ""))
        rows.sort(key=lambda r: r[0])
        print(f"== {case.label}  default={module.choose_config(m, k, l)}")
        for med, cfg, note in reversed(rows):
            print(f"   {str(cfg):<18} {med / 1e3:8.2f} µs {note}")


if __name__ == "__main__":
    tune(*sys.argv[1:2], *(sys.argv[2:3] or ["benchmarks"]))
