"""`python -m eval doctor`, what a user runs first on a new machine: the level, each layer, the start
time, workers side by side; exit 1 exactly when it lists a problem, each with what to do where there
is something to do. Here on the CPU machine (the GPU machines run it in .ci/gpu-verify)."""
import json
import subprocess
import sys

from conftest import ROOT


def test_doctor_reports_the_level_the_layers_and_side_by_side_and_exits_by_its_verdict(tmp_path):
    out = tmp_path / "doctor.json"
    run = subprocess.run([sys.executable, "-m", "eval", "doctor", "--workers", "2", "-o", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    report = json.loads(out.read_text())
    text = run.stdout
    assert report["level"] == "full" and "level this machine reaches: full" in text
    assert report["side by side"]["workers"] == 2 and report["side by side"]["reached"] == 2
    assert (run.returncode == 1) == bool(report["problems"]), (run.returncode, report["problems"])
    assert ("verdict: NOT OK" in text) == bool(report["problems"])
    if not report["cuda in the judge"]:
        assert "with CUDA" not in text and "(no CUDA on this machine)" in text
    for problem in report["problems"]:
        if problem.startswith("layer uid: kept root"):
            assert "chmod -R o+rX" in problem  # what to do, not only what is wrong
    layers = [line for line in text.splitlines()[text.splitlines().index("layers:") + 1:] if line.startswith("  ")]
    starts = {len(line) - len(line[2:].split("  ", 1)[-1].lstrip()) for line in layers if "  " in line[2:]}
    assert len(starts) == 1, layers  # one column for the states, whatever the longest layer's name
