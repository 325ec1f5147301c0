"""A minimal evaluator in the leaderboard runner's protocol, written for these fixtures (not the
leaderboard's): `python eval.py test|benchmark CASES` in a folder holding submission.py, task.py,
reference.py and utils.py; cases one per line as "key: value; ..." (an integer, a [list] or
(tuple) of integers given as a tuple, else the text); "key: value" lines to the file descriptor in
POPCORN_FD; exit 0 when every case passed, 112 when one failed. Benchmarks time batches of
NUM_ITERATIONS_PER_BENCHMARK calls on distinct inputs (host clock; these fixtures run on the CPU)."""
import copy
import os
import re
import sys
import time

NUM_ITERATIONS_PER_BENCHMARK = 7


def parse(line):
    case = {}
    for part in filter(str.strip, line.split(";")):
        key, _, value = part.partition(":")
        value = value.strip()
        if re.fullmatch(r"[+-]?\d+", value):
            case[key.strip()] = int(value)
        elif value[:1] in "[(":
            case[key.strip()] = tuple(int(v) for v in value[1:-1].split(",") if v.strip())
        else:
            case[key.strip()] = value
    return case


def main():
    mode, cases_file = sys.argv[1], sys.argv[2]
    out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
    from reference import check_implementation, generate_input
    from submission import custom_kernel

    cases = [parse(l) for l in open(cases_file).read().splitlines() if l.strip()]
    passed = True
    print(f"{mode}-count: {len(cases)}", file=out)
    for i, case in enumerate(cases):
        print(f"{mode}.{i}.spec: {'; '.join(f'{k}: {v}' for k, v in case.items())}", file=out)
        inputs = [generate_input(**{**case, "seed": case["seed"] + 13 * j}) for j in range(NUM_ITERATIONS_PER_BENCHMARK)]
        try:
            outputs = [custom_kernel(copy.deepcopy(d)) for d in inputs]
        except Exception as exc:  # the solution raised: a failed case
            outputs, good, message = [], False, f"{type(exc).__name__}: {exc}"
        for d, o in zip(inputs, outputs):  # the reference raising ends the run (exit 1)
            good, message = check_implementation(d, o)
            if not good:
                break
        if not good:
            passed = False
            print(f"{mode}.{i}.status: fail", file=out)
            print(f"{mode}.{i}.error: {message}", file=out)
            continue
        if mode == "benchmark":
            times = []
            for _ in range(5):
                start = time.perf_counter_ns()
                for d in inputs:
                    custom_kernel(d)
                times.append((time.perf_counter_ns() - start) / len(inputs))
            print(f"{mode}.{i}.mean: {sum(times) / len(times)}", file=out)
        print(f"{mode}.{i}.status: pass", file=out)
    print(f"check: {'pass' if passed else 'fail'}", file=out)
    out.close()
    sys.exit(0 if passed else 112)


if __name__ == "__main__":
    main()
