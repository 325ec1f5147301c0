"""The judge's static pre-check (eval/judge/static_check.py): kernelguard on a submission's source."""
import dataclasses
import textwrap
from pathlib import Path

import pytest

kernelguard = pytest.importorskip("kernelguard")

from eval.judge import static_check  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HONEST = sorted((ROOT / "submission").glob("*.py"))

# each cheat: (source, failing rule expected, the text of the line it should point at)
POINTER_REPLAY = ("""\
    import torch
    _last_ptr = None
    _last_out = None


    def custom_kernel(data):
        global _last_ptr, _last_out
        a, b, c = data[0], data[1], data[-1]
        if a.data_ptr() == _last_ptr:
            return _last_out
        out = (a.float() @ b.float()).half()
        _last_ptr = a.data_ptr()
        _last_out = out
        return out
    """, "POINTER_REPLAY", "_last_out = out")

FIRST_CALL_REPLAY = ('''\
    """Computes once, then hands back the first answer."""
    import torch
    _saved = None


    def custom_kernel(data):
        global _saved
        if _saved is None:
            _saved = (data[0].float() @ data[1].float()).half()
        return _saved
    ''', "LAST_CALL_REPLAY", "return _saved")

MODULE_MUTATION = ("""\
    import reference


    def custom_kernel(data):
        return data[-1]


    reference.check_implementation = lambda *args, **kwargs: (True, "")
    """, "MODULE_MUTATION", "reference.check_implementation =")

GLOBALS_MUTATION = ("""\
    def custom_kernel(data):
        custom_kernel.__globals__["check_implementation"] = lambda *args: (True, "")
        return data[-1]
    """, "GLOBALS_MUTATION", "__globals__[")


def write(tmp_path, source, name="sub.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def line_of(path, text):
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_kernelguard_available():
    assert static_check.available()


def test_failing_rules_are_kernelguard_rules():
    assert static_check.FAILING_RULES <= set(kernelguard.BASE_RULE_REGISTRY)


@pytest.mark.parametrize("path", HONEST, ids=lambda p: p.name)
def test_honest_submissions_do_not_fail(path):
    failing = [static_check.describe(f) for f in static_check.scan(path) if f.fails]
    assert failing == []


@pytest.mark.parametrize("case", [POINTER_REPLAY, FIRST_CALL_REPLAY, MODULE_MUTATION, GLOBALS_MUTATION],
                         ids=lambda c: c[1])
def test_cheat_is_caught_at_its_line(tmp_path, case):
    source, rule, marker = case
    path = write(tmp_path, source)
    findings = static_check.scan(path)
    caught = [f for f in findings if f.rule == rule]
    assert caught, [static_check.describe(f) for f in findings]
    assert all(f.fails for f in caught)
    assert line_of(path, marker) in {f.line for f in caught}
    assert findings[0].fails  # failing findings come first


def test_honest_launcher_cache_only_warns(tmp_path):
    # kernelguard flags this as OUTPUT_REPLAY_CACHE (a name containing "cache" returned from the
    # entrypoint), but it launches a kernel on every call: that rule must not fail a submission
    path = write(tmp_path, """\
        import torch
        _launcher_cache = {}


        def _build(key):
            return lambda a, b, c: torch.matmul(a, b, out=c)


        def custom_kernel(data):
            a, b, c = data[0], data[1], data[-1]
            key = tuple(a.shape)
            if key not in _launcher_cache:
                _launcher_cache[key] = _build(key)
            return _launcher_cache[key](a, b, c)
        """)
    findings = static_check.scan(path)
    assert any(f.rule == "OUTPUT_REPLAY_CACHE" for f in findings)
    assert not any(f.fails for f in findings)


def test_syntax_error_gives_no_findings(tmp_path):
    path = write(tmp_path, """\
        def custom_kernel(data)
            return data[-1]
        """)
    assert static_check.scan(path) == []


def test_scan_never_runs_the_submission(tmp_path):
    marker = tmp_path / "ran"
    path = write(tmp_path, f"""\
        open({str(marker)!r}, "w").close()
        raise SystemExit(3)
        """)
    static_check.scan(path)
    assert not marker.exists()


def test_describe():
    finding = static_check.Finding("POINTER_REPLAY", 12, "returns saved output", True)
    assert static_check.describe(finding) == "kernelguard: POINTER_REPLAY (line 12): returns saved output"
    assert static_check.describe(dataclasses.replace(finding, line=None)) == (
        "kernelguard: POINTER_REPLAY: returns saved output")


def test_without_kernelguard_scan_is_empty(tmp_path, monkeypatch):
    monkeypatch.setattr(static_check, "_kernelguard", False)
    assert not static_check.available()
    assert static_check.scan(write(tmp_path, GLOBALS_MUTATION[0])) == []
