"""`make setup`: install what the harness needs, only where it is missing (standard library only).

torch is pinned to 2.13.0 when absent (on these machines that installs a local CPU build; a bare
`torch` would pull GBs of CUDA wheels). An existing torch (e.g. the GPU machine's) is kept.
"""
import importlib.util
import subprocess
import sys

NEEDED = {  # import name -> pip requirement
    "torch": "torch==2.13.0",
    "yaml": "pyyaml",
    "click": "click",
    "rich": "rich",
    "pytest": "pytest",
    "matplotlib": "matplotlib",
    "numpy": "numpy",
}


def missing() -> list[str]:
    return [req for name, req in NEEDED.items() if importlib.util.find_spec(name) is None]


def main() -> int:
    todo = missing()
    if not todo:
        return 0
    print(f"installing: {' '.join(todo)}", file=sys.stderr)
    done = subprocess.call([sys.executable, "-m", "pip", "install", "-q", *todo])
    if done != 0:
        print(f"error: pip could not install {' '.join(todo)}; install them by hand and rerun", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
