"""Examples cannot rot: every fenced block marked `runnable` in the README and docs/ runs here as
written.

    ```sh runnable           each `$ command` line runs in the repository (bash); it must exit 0, or
    $ command  # exit N      N where the line says so; on a machine without CUDA (where the shown
    output line             output was recorded) every output line below it must appear in what
    ...                     it printed (`...` skips; a line ending in `...` is a prefix)
    ```
    ```python runnable       runs in an empty folder outside the repository (the package install
    ...                     of `make setup`, else PYTHONPATH=<repository>) and must exit 0
    ```
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata

import pytest

from conftest import HAS_CUDA, ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w+)[ \t]+runnable[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def blocks():
    found = []
    for path in DOCS:
        for n, match in enumerate(FENCE.finditer(path.read_text())):
            found.append(pytest.param(match[1], match[2], id=f"{path.name}-{n}"))
    return found


def _env(tmp_path) -> dict:
    env = {**os.environ, "EVAL_RESULTS_DIR": str(tmp_path / "results")}
    for key in ("POPCORN_SEED", "POPCORN_FD", "EVAL_PROBLEM_DIR"):
        env.pop(key, None)
    return env


def _installed() -> bool:
    try:
        return str(ROOT.as_uri()) in (metadata.distribution("nvfp4-gemv").read_text("direct_url.json") or "")
    except metadata.PackageNotFoundError:
        return False


def commands(body: str):
    """(command, expected exit, expected output lines) for each `$ ` line."""
    out, current = [], None
    for line in body.splitlines():
        if line.startswith("$ "):
            command = line[2:]
            code = re.search(r"#\s*exit (\d+)\s*$", command)
            current = (command, int(code[1]) if code else 0, [])
            out.append(current)
        elif current is not None and line.strip():
            current[2].append(line)
    return out


def test_the_readme_and_docs_have_runnable_examples():
    kinds = [b.values[0] for b in blocks()]
    assert "sh" in kinds and "python" in kinds


@pytest.mark.parametrize("kind,body", blocks())
def test_example_runs_as_written(kind, body, tmp_path):
    env = _env(tmp_path)
    if kind == "python":
        if not _installed():
            env["PYTHONPATH"] = str(ROOT)
        folder = tmp_path / "elsewhere"
        folder.mkdir()
        done = subprocess.run([sys.executable, "-c", body], cwd=folder, env=env, capture_output=True, text=True,
                              timeout=900)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        return
    assert kind == "sh", f"runnable block of unknown kind {kind}"
    for command, code, expected in commands(body):
        done = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        printed = done.stdout + done.stderr
        assert done.returncode == code, f"{command}: exit {done.returncode}, not {code}\n{printed[-3000:]}"
        if HAS_CUDA:
            continue  # the output shown was recorded without CUDA
        lines = [line.rstrip() for line in printed.splitlines()]
        for want in expected:
            if want.strip() == "...":
                continue
            if want.endswith("..."):
                assert any(line.startswith(want[:-3]) for line in lines), f"{command}: no line {want!r}\n{printed[-3000:]}"
            else:
                assert want.rstrip() in lines, f"{command}: no line {want!r}\n{printed[-3000:]}"
