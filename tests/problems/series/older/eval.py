"""A minimal evaluator of the first series' vintage, written for these fixtures (not the leaderboard's):
`python eval.py test|benchmark CASES` with POPCORN_FD; check_implementation(data, output) returns an
error string, and an empty one (or None) is a match (`if error:`). Exit 0 when every case passed, 112
when one failed. Benchmarks time single calls with the host clock (CPU fixtures)."""
import os
import re
import sys
import time


def parse(line):
    case = {}
    for part in filter(str.strip, line.split(";")):
        key, _, value = part.partition(":")
        value = value.strip()
        case[key.strip()] = int(value) if re.fullmatch(r"[+-]?\d+", value) else value
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
        data = generate_input(**case)
        error = check_implementation(data, custom_kernel(generate_input(**case)))
        if error:
            passed = False
            print(f"{mode}.{i}.status: fail", file=out)
            print(f"{mode}.{i}.error: {error}", file=out)
            continue
        if mode == "benchmark":
            times = []
            for _ in range(20):
                start = time.perf_counter_ns()
                custom_kernel(data)
                times.append(time.perf_counter_ns() - start)
            print(f"{mode}.{i}.mean: {sum(times) / len(times)}", file=out)
        print(f"{mode}.{i}.status: pass", file=out)
    print(f"check: {'pass' if passed else 'fail'}", file=out)
    out.close()
    sys.exit(0 if passed else 112)


if __name__ == "__main__":
    main()
