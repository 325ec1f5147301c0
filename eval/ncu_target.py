"""Process that Nsight Compute profiles (`python -m eval profile SUB --ncu`): imports the submission
in-process (no verdict is made here) and runs each case once inside the NVTX range 'custom_kernel',
after an untimed warm call."""
import sys
from pathlib import Path

from eval import cases as case_files
from eval import problem_folder
from eval.worker import driver, profiling


def main(sub: str, case_set: str, dist: str | None = None) -> None:
    module = driver.load_submission(Path(sub))
    for case in case_files.select_cases(case_set):
        args = dict(case.args, **({"dist": dist} if dist else {}))
        profiling.profile(module.custom_kernel, problem_folder.current().reference.generate_input(**args), ncu=True)
        print(f"profiled {case.label}", file=sys.stderr)


if __name__ == "__main__":
    main(str(Path(sys.argv[1]).resolve()), *sys.argv[2:])
