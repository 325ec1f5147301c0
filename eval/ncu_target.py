"""Process that Nsight Compute profiles (`python -m eval profile SUB --ncu`): imports the submission
in-process and runs each case once inside the NVTX range 'custom_kernel', after an untimed warm call."""
import sys
from pathlib import Path

from eval import cases as case_files
from eval import ops


def main(sub: str, case_set: str, dist: str | None = None) -> None:
    state = ops.WorkerState(sub)
    ops.op_load(state)
    for case in case_files.select_cases(case_set):
        args = dict(case.args, **({"dist": dist} if dist else {}))
        ops.op_profile(state, args, ncu=True)
        print(f"profiled {case.label}", file=sys.stderr)


if __name__ == "__main__":
    main(str(Path(sys.argv[1]).resolve()), *sys.argv[2:])
