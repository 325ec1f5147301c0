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


# wanted but not required: CuTe DSL (the v0-v4 submissions; their CPU compile checks skip without it),
# kernelguard and Ray.
# The GPU machine has no registry: a failed install there is reported and set-up goes on.
OPTIONAL = {"cutlass": "nvidia-cutlass-dsl==4.8.1",
            # the static pre-check (eval/judge/static_check.py); without it the judge notes it is skipped
            "kernelguard": "kernelguard==0.3.2; python_version >= '3.11'",
            # `batch --ray` and tests/test_ray.py (on the GPU machine: .ci/stage-ray.sh stages it)
            "ray": "ray",
            # `make test` in two processes (without it, one)
            "xdist": "pytest-xdist"}


def missing() -> list[str]:
    return [req for name, req in NEEDED.items() if importlib.util.find_spec(name) is None]


def install_optional() -> None:
    todo = [req for name, req in OPTIONAL.items() if importlib.util.find_spec(name) is None]
    quick = ["--retries", "1", "--timeout", "15"]  # offline machines: fail fast
    for req in todo:
        if subprocess.call([sys.executable, "-m", "pip", "install", "-q", *quick, req]) != 0:
            print(f"note: could not install {req} (optional: what needs it is skipped with a note)", file=sys.stderr)


def install_harness() -> None:
    """The harness itself, editable (`pip install -e . --no-deps`): `from eval import api` then works
    from any folder, and `python -m eval` too. Skipped when this checkout is already the one
    installed; a failure is a note (inside the repository everything works without it)."""
    from pathlib import Path

    import re

    root = Path(__file__).resolve().parent.parent
    named = re.search(r'^name\s*=\s*"([^"]+)"', (root / "pyproject.toml").read_text(), re.M)
    if not named:
        return
    # already installed from this checkout: `import eval` from another folder finds this one (the
    # distribution's metadata is no guide: the checkout's own egg-info shadows it from here)
    probe = subprocess.run([sys.executable, "-c", "import eval; print(eval.__file__)"], cwd="/",
                           capture_output=True, text=True)
    if probe.returncode == 0 and probe.stdout.strip() and \
            Path(probe.stdout.strip()).resolve().is_relative_to(root):
        return
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--retries", "1", "--timeout", "15",
               "-e", str(root)]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    # a registry gives pip its build tools; without one, the setuptools and wheel already installed
    if subprocess.call(command, **quiet) != 0 and subprocess.call([*command, "--no-build-isolation"], **quiet) != 0:
        print(f"note: could not install the harness ({' '.join(command)}); `from eval import api` works from the "
              f"repository's folder, or with PYTHONPATH={root}", file=sys.stderr)


def build_native() -> None:
    """The worker's compiled part (eval/worker/build.py), built now rather than by the first judge: a
    first run's answer then waits for no build of ours (30 s on the GPU machine, 1-2 minutes on a small
    CPU). A failure is said and set-up goes on: the judge says it again, in one line, where it needs it."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    try:
        from eval.worker import build

        if build.built():
            return
    except Exception:  # noqa: BLE001 - the build below says what is wrong
        pass
    print("building the worker's C++ part (once per machine and version of it)", file=sys.stderr)
    code = subprocess.call([sys.executable, "-c", "from eval.worker import build; build.build()"], cwd=root,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if code != 0:
        print("note: the worker's C++ part did not build here (it needs g++ and ninja); the first run says why",
              file=sys.stderr)


def main() -> int:
    todo = missing()
    if not todo:
        install_optional()
        install_harness()
        build_native()
        return 0
    print(f"installing: {' '.join(todo)}", file=sys.stderr)
    done = subprocess.call([sys.executable, "-m", "pip", "install", "-q", *todo])
    if done != 0:
        print(f"error: pip could not install {' '.join(todo)}; install them by hand and rerun", file=sys.stderr)
        return 2
    install_optional()
    install_harness()
    build_native()
    return 0


if __name__ == "__main__":
    sys.exit(main())
