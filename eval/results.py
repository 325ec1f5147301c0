"""Result records: what a run measured, with where it ran, written under results/ as JSON.

Files are written atomically (a temporary file, then a hard link to a new name) and never replace
an existing file: a second run in the same second gets a numbered name.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

from eval.cases import ROOT

def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# every file the harness writes (records, reports, charts, logs) gets the mode a plain open() gives:
# 0644 under the usual umask (mkstemp alone would leave 0600); batch's verdict JSONL is the exception
FILE_MODE = 0o666 & ~_umask()

RESULTS_DIR = Path(os.environ.get("EVAL_RESULTS_DIR", ROOT / "results"))  # tests point it elsewhere
REQUIRED_KEYS = ("schema", "mode", "submission", "environment", "cases")


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def shown(path) -> str:
    """A path as a report shows it: relative to the current folder when inside it, else absolute
    (a path one can open from where the command ran)."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def now_stamp() -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "x"


def write_new(payload: dict, stem: str, directory: Path | None = None) -> Path:
    """Write JSON to directory/stem.json (or stem-2.json, ...) without ever replacing a file.
    The directory defaults to RESULTS_DIR as it is when called."""
    directory = Path(directory) if directory is not None else RESULTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, indent=1, sort_keys=False, default=_jsonable)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=directory)
    os.fchmod(fd, FILE_MODE)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        for n in range(1, 10_000):
            target = directory / (f"{stem}.json" if n == 1 else f"{stem}-{n}.json")
            try:
                os.link(tmp, target)  # fails if target exists: nothing is overwritten
                return target
            except FileExistsError:
                continue
        raise OSError(f"no free result name for {stem} in {directory}")
    finally:
        os.unlink(tmp)


def write_text_new(text: str, path: Path) -> Path:
    """Atomically write a text/binary companion file, replacing only our own previous copy."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    os.fchmod(fd, FILE_MODE)
    with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as handle:
        handle.write(text)
    os.replace(tmp, path)
    return path


def _jsonable(value):
    import dataclasses

    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    return str(value)


def record_stem(mode: str, submission: str) -> str:
    return f"{now_stamp()}-{mode}-{slug(Path(submission).stem)}"


def save_record(record) -> Path:
    """Write a RunRecord as a new result file under RESULTS_DIR. A failed record whose worker log is
    empty (the worker raised nothing: the judge found the fault) gets the reasons written there, so
    that the log the report names says something."""
    path = write_new(record.to_json(), record_stem(record.mode, record.submission or "none"))
    log = Path(record.log) if getattr(record, "log", None) else None
    if not record.passed and log is not None and log.is_file() and not log.stat().st_size:
        reasons = [record.error] if record.error else []
        reasons += [f"{c.label}: {c.error}" for c in record.cases if getattr(c, "error", None)]
        try:
            with open(log, "a") as out:
                out.write("the worker wrote nothing: the judge found these faults (its own checks of the outputs)\n"
                          + "".join(f"  {line}\n" for line in reasons[:50]))
        except OSError:
            pass
    return path


def load_record(path: Path):
    """Read a result JSON as a RunRecord; raise ValueError with a readable message if it is not one
    of ours."""
    from eval.records import RunRecord

    try:
        record = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON ({exc.msg} at line {exc.lineno})")
    missing = [key for key in REQUIRED_KEYS if key not in record] if isinstance(record, dict) else REQUIRED_KEYS
    if missing:
        raise ValueError(f"{path} is not a result file of this harness (missing {', '.join(missing)})")
    return RunRecord.from_json(record)
