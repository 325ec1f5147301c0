"""eval.api: a submission (path or source text) in, a typed RunRecord out; options checked with
one-line ValueErrors; the command line gets the same records through it."""
import pytest

from eval import api, problem_folder
from eval.records import SCHEMA_VERSION, RunRecord
from tests.conftest import ROOT

TORCH_REF = ROOT / "submission" / "torch_ref.py"


def test_source_text_and_path_give_typed_records(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_RESULTS_DIR", str(tmp_path))
    problem_folder.use(ROOT)
    record = api.judge(TORCH_REF.read_text(), "test", cases="smoke", timeout=120.0)
    assert isinstance(record, RunRecord) and record.passed and record.schema == SCHEMA_VERSION
    assert [c.status for c in record.cases] == ["pass"] * len(record.cases)
    timed = api.judge(TORCH_REF, "benchmark", cases=[{"m": 128, "k": 256, "l": 1, "seed": 7}], timeout=120.0)
    assert timed.passed and timed.cases[0].stats.mean > 0
    assert RunRecord.from_json(timed.to_json()).cases[0].stats.mean == timed.cases[0].stats.mean


def test_options_are_checked():
    problem_folder.use(ROOT)
    with pytest.raises(ValueError, match="mode 'bogus'"):
        api.judge(TORCH_REF, "bogus")
    with pytest.raises(ValueError, match="--timeout must be positive"):
        api.options(timeout=0)
    with pytest.raises(ValueError, match="timing method"):
        api.options(method="sometimes")


def test_judge_many_streams_each_line_as_it_is_judged(tmp_path):
    """eval.api.judge_many (#39): batch's lines, one per candidate, as each is judged; a path and a
    source text; the wrong one fails with its reason, and a rerun on the same JSONL judges nothing."""
    from eval import api

    honest = (ROOT / "submission" / "torch_ref.py").read_text()
    wrong = honest + "\n\n_honest = custom_kernel\n\n\ndef custom_kernel(data):\n    return _honest(data) + 1\n"
    jsonl = tmp_path / "lines.jsonl"
    lines = list(api.judge_many([ROOT / "submission" / "torch_ref.py", wrong], "test", ["--cases", "smoke"], jsonl=jsonl))
    assert len(lines) == 2
    by_id = {line["id"]: line for line in lines}
    path_line = by_id[str((ROOT / "submission" / "torch_ref.py").resolve())]
    assert path_line["passed"] and path_line["record"]["passed"], path_line["reason"]
    source_line = by_id["source-1"]
    assert not source_line["passed"] and source_line["reason"] and source_line["record"] is not None
    assert len(jsonl.read_text().splitlines()) == 2
    assert list(api.judge_many([ROOT / "submission" / "torch_ref.py"], "test", ["--cases", "smoke"], jsonl=jsonl)) == []
