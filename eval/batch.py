"""`python -m eval batch CANDIDATES...`: judge many candidates with the same options, one judge per
GPU of this host at a time, one JSON line per candidate as it finishes; a rerun skips what is judged.

CANDIDATES: submission files, folders of them, or JSONL files of {"id": ..., "source": ...} (the
sources are written under the output's folder, named by their hash). Each candidate is judged as its
own `python -m eval` command line (the judge, which starts its sandboxed workers as always) in a judge
process kept for its slot (eval/kept_judge.py; EVAL_BATCH_KEPT=0: a process per candidate), pinned to
one GPU with CUDA_VISIBLE_DEVICES; on a machine without CUDA, `--jobs` judges run at once for `test` and
one at a time for the timed modes (the cores are what is timed there). A candidate that
hangs past its limit, crashes or wrecks its CUDA context costs only itself: its workers are killed
(past the limit, its judge process too, and the slot starts a new one) and its line says why. Resume: a candidate whose source hash and options already have a line
in the output is not judged again. Builds run ahead on the CPU cores (sandboxed, no GPU), so a GPU
slot is held only for a candidate's import, tests and timing. This module never imports candidate
code.
"""
from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from eval import cases, kept_judge, problem_folder

GRACE_S = 120.0  # beyond the judge's own limits (worker start, builds): then the whole judge is killed
TIMED_MODES = ("benchmark", "leaderboard")
STOP_GRACE_S = kept_judge.STOP_GRACE_S  # a judge past its limit gets this long to close its workers before SIGKILL


@dataclasses.dataclass(frozen=True)
class Candidate:
    id: str
    path: Path
    sha256: str


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def collect(inputs: list[Path], sources_dir: Path) -> list[Candidate]:
    """Every candidate the inputs name, in order, each once (by id)."""
    found: dict[str, Candidate] = {}
    for item in inputs:
        if item.is_dir():
            paths = sorted(item.glob("*.py"))
        elif item.suffix == ".jsonl":
            paths = []
            for entry in _entries(item):  # every line checked before any source is stored
                source = entry["source"].encode()
                path = _store_source(sources_dir, source)
                cid = str(entry.get("id") or path.stem)
                found.setdefault(cid, Candidate(cid, path, _sha(source)))
            continue
        else:
            paths = [item]
        for path in paths:
            found.setdefault(str(path), Candidate(str(path), path.resolve(), _sha(path.read_bytes())))
    return list(found.values())


def _entries(jsonl: Path) -> list[dict]:
    """The {"id", "source"} lines of a JSONL of candidates; ValueError naming file:line for a bad one."""
    entries = []
    for number, line in enumerate(jsonl.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{jsonl}:{number}: not a JSON line ({exc})") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("source"), str):
            raise ValueError(f"{jsonl}:{number}: each line needs a \"source\" string (and an \"id\")")
        entries.append(entry)
    return entries


def _store_source(sources_dir: Path, source: bytes) -> Path:
    """A JSONL candidate's source as a file named by its hash, in a folder only its owner may list
    (0711: a worker, or another user, can open a file of it only by a name it cannot guess; a
    worker's uid must still read its own, so the files stay 0644)."""
    sources_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(sources_dir, 0o711)
    path = sources_dir / f"{_sha(source)[:16]}.py"
    path.write_bytes(source)
    os.chmod(path, 0o644)
    return path


def options_key(mode: str, args: list[str]) -> str:
    """What makes two judgements of the same source comparable: the mode, the options, the problem."""
    return _sha(json.dumps([mode, args, str(problem_folder.current().root)]).encode())[:16]


def judged(jsonl: Path) -> set:
    """(source hash, options key) of every line already in the output."""
    done = set()
    if jsonl.is_file():
        for line in jsonl.read_text().splitlines():
            try:
                entry = json.loads(line)
                done.add((entry["sha256"], entry["options"]))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a killed run: judged again
    return done


def slots(jobs: int | None, mode: str = "test") -> list[str | None]:
    """One slot per GPU (its index for CUDA_VISIBLE_DEVICES), or `jobs` CPU slots; but one only for
    timed modes without CUDA (see cpu_jobs)."""
    import torch

    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        return [str(i) for i in range(count)][: jobs or count]
    return [None] * cpu_jobs(mode, jobs)


def cpu_jobs(mode: str, jobs: int | None) -> int:
    """Judges at once on CPUs: `jobs` for `test`, one for timed modes. On the CPU the cores are what
    is timed: a judge beside another shares them, and a candidate that keeps every core busy (its
    worker may start as many processes as it likes) would make its neighbours' times what it wants."""
    return 1 if mode in TIMED_MODES else max(1, jobs or 1)


def last_error(stderr: str) -> str:
    """The line of a process's stderr that says what went wrong: its last exception line, else its
    last line."""
    lines = [l.strip() for l in stderr.strip().splitlines() if l.strip()]
    errors = [l for l in lines if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", l)]
    return (errors or lines or ["no output"])[-1][:300]


REQUIRE_FULL_ENV = "EVAL_REQUIRE_FULL_SANDBOX"  # read by eval/judge/modes.py Runner


def judge_env(device: str | None, secret: int | None = None) -> dict:
    """A judge's environment: pinned to its GPU, the problem from its command line, full sandbox asked,
    and the secret seed this batch was given (POPCORN_SEED: the command line took it out of this
    process's environment as it started; the judges need it back)."""
    env = dict(os.environ)
    env.pop(problem_folder.DIR_ENV, None)
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    env[REQUIRE_FULL_ENV] = "1"  # no candidate judged below full unless the user chose a level (--sandbox)
    if secret is not None:
        env[cases.SECRET_SEED_ENV] = str(secret)
    return env


def judge_one(candidate: Candidate, mode: str, args: list[str], device: str | None, limit: float | None,
              problem: Path | None = None, kept=None) -> dict:
    """One candidate through a judge process (on `problem`, else the current folder): `kept`'s
    (eval/kept_judge.py: a process kept across the slot's candidates), else one of its own; its
    record, or why there is none."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="batch-") as scratch:
        out = Path(scratch) / "record.json"
        argv = ["--problem", str(problem or problem_folder.current().root), mode, str(candidate.path), *args,
                "--format", "json", "-o", str(out)]
        if kept is not None:
            code, stderr, error = kept.judge(argv, Path(scratch) / "stderr.txt", limit)
        else:
            code, stderr, error = _own_process(argv, device, limit)
        # only a judge that ended the command by itself wrote the record: one killed by a signal may have
        # been killed by what it judged, after that wrote a record of its own there (red team round 6)
        ended = error is None and code is not None and code >= 0
        record = json.loads(out.read_text()) if ended and out.is_file() else None
    infrastructure = record is None and error is None  # the judge itself failed (a full disk, a bug): not a verdict
    if infrastructure:
        how = "gone" if code is None else f"exit {code}" if code >= 0 else f"killed by signal {-code}"
        error = f"no record (judge {how}): {last_error(stderr or '')}"
    passed = bool(record and record.get("passed"))
    reason = error or (record or {}).get("error") or next(
        (c.get("error") for c in (record or {}).get("cases", []) if c.get("status") != "pass"), None)
    return {"id": candidate.id, "sha256": candidate.sha256, "passed": passed, "reason": reason,
            "geomean_ns": (record or {}).get("geomean_ns"), "device": device,
            "seconds": round(time.monotonic() - started, 2), "record": record,
            **({"judge_pid": kept.pid} if kept is not None else {}),
            **({"infrastructure": True} if infrastructure else {})}


def _own_process(argv: list[str], device: str | None, limit: float | None) -> tuple[int | None, str, str | None]:
    """A judge process of its own for one candidate: (exit code, stderr, error at the limit)."""
    proc = subprocess.Popen([sys.executable, "-m", "eval", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, errors="replace", env=judge_env(device, cases.secret_seed()), start_new_session=True,
                            cwd=problem_folder.ROOT)
    try:
        _, stderr = proc.communicate(timeout=limit)
        return proc.returncode, stderr or "", None
    except subprocess.TimeoutExpired:
        return None, stop_judge(proc), f"the judge did not finish within {limit:.0f} s (killed)"


def stop_judge(proc: subprocess.Popen) -> str:
    """End a judge that ran past its limit: SIGTERM first (it closes its workers on the way out),
    SIGKILL to its process group after STOP_GRACE_S; then whatever its workers left (a judge killed
    outright cannot clean up) is swept. Returns its stderr."""
    from eval.judge import lifecycle

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        _, stderr = proc.communicate(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate()
    except ProcessLookupError:
        _, stderr = proc.communicate()
    lifecycle.sweep_dead()
    return stderr or ""


def pending(candidates: list[Candidate], key: str, jsonl: Path) -> list[Candidate]:
    """The candidates without a line of these options in jsonl yet (resume)."""
    done = judged(jsonl)
    return [c for c in candidates if (c.sha256, key) not in done]


def append_line(jsonl: Path, line: dict) -> None:
    """One whole JSON line per write, flushed and synced at once (a killed run loses at most a cut
    line, which resume judges again). A new file is created 0600: other candidates' verdicts are
    nobody else's to read."""
    jsonl.parent.mkdir(parents=True, exist_ok=True)
    with open(os.open(jsonl, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600), "a") as handle:
        handle.write(json.dumps(line) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def save(jsonl: Path, line: dict) -> dict:
    """Append a judged line to jsonl, except one whose judge gave no record ("infrastructure": kept
    out, so a resume judges it again); a write that fails (a full disk) marks the line so and lets
    the caller go on. Returns the line."""
    if not line.get("infrastructure"):
        try:
            append_line(jsonl, line)
        except OSError as exc:
            line["reason"] = f"{line.get('reason') or 'judged'}; not saved to {jsonl}: {exc}"
            line["infrastructure"] = True
    return line


BUILDS_ENV = "EVAL_BATCH_BUILDS"  # builders at once on the CPU cores (0: no builds ahead of the GPU slots)


def build_jobs() -> int:
    """Candidates built at once ahead of the GPU slots: EVAL_BATCH_BUILDS, else a quarter of the cores
    (at least 1, at most 8: a build of CUDA code takes a core or more of its own)."""
    if os.environ.get(BUILDS_ENV):
        try:
            return max(0, int(os.environ[BUILDS_ENV]))
        except ValueError:
            raise ValueError(f"{BUILDS_ENV}={os.environ[BUILDS_ENV]} is not a whole number") from None
    return max(1, min(8, (os.cpu_count() or 1) // 4))


def builds_ahead(mode: str, devices: list[str | None]) -> bool:
    """Whether builders run beside the slots (`slots()`): not on a host without CUDA in a timed mode
    (the cores are what it times), nor where EVAL_BATCH_BUILDS is 0."""
    return build_jobs() > 0 and not (mode in TIMED_MODES and all(d is None for d in devices))


def prebuild_one(candidate: Candidate, emulate: bool, limit: float, import_timeout: float | None = None) -> dict:
    """The candidate's builds, made in a worker that sees no GPU and kept in the build cache under its
    source's key (eval/judge/worker_start.py prebuild), so that its judge's worker finds them and holds
    its GPU slot only for the import, the tests and the timing. Best effort: a failure here is said in
    the line and the judge builds (and fails, or not) as always."""
    from eval.judge import worker_start

    built = worker_start.prebuild(candidate.path, emulate, limit, import_timeout=import_timeout)
    return {"ok": built.ok, "seconds": round(built.seconds, 2), **({"reason": built.reason[:200]} if built.reason else {})}


def run(candidates: list[Candidate], mode: str, args: list[str], jsonl: Path, jobs: int | None = None,
        limit: float = 1800.0, progress=None) -> list[dict]:
    """Judge every candidate not yet in jsonl; returns this run's lines (in finishing order). A line
    whose judge gave no record (it died: a disk a neighbour filled, a harness bug) is returned with
    "infrastructure": true and not written, so that a resume judges that candidate again.

    Builds are pipelined: build_jobs() builders on the CPU cores build candidates in order ahead of
    the slots; a slot takes the next candidate whose build ended, else the last one nobody builds yet
    (a slot never waits for a build that has not started). A built candidate's line says how long
    its build took (`prebuild`), and its judge finds the builds in the cache. A line's `seconds` are
    how long its judge held the slot."""
    from eval.judge import worker_start

    worker_start.make_judge_undumpable()  # its environ (POPCORN_SEED) and open files are no worker's to read
    key = options_key(mode, args)
    todo = pending(candidates, key, jsonl)
    devices = slots(jobs, mode)
    builders = build_jobs() if todo and builds_ahead(mode, devices) else 0
    emulate = "--emulate-blackwell" in args
    # bounded as its judge's import would be: --timeout, extended while compilers run up to the build limit
    build_limit, import_bound = min(limit, worker_start.DEFAULT_LOAD_TIMEOUT_S), _import_bound(args)
    unstarted = collections.deque(todo)  # neither being built nor judged yet
    built: queue.Queue = queue.Queue()  # (candidate, its prebuild), in the order builds end
    state = threading.Condition()
    left = [len(todo)]  # candidates not yet taken by a slot
    lines: list[dict] = []
    lock = threading.Lock()

    def builder():
        while True:
            with state:
                if not unstarted:
                    return
                candidate = unstarted.popleft()
            try:
                done = prebuild_one(candidate, emulate, build_limit, import_bound)
            except Exception as exc:  # noqa: BLE001 - the judge builds as always
                done = {"ok": False, "seconds": None, "reason": f"{type(exc).__name__}: {exc}"[:200]}
            with state:
                built.put((candidate, done))
                state.notify_all()

    def take():
        """The next candidate for a slot: one whose build ended, else one nobody builds yet (its judge
        builds it: a slot never waits for a build that has not started), else wait for a build."""
        with state:
            while True:
                if not left[0]:
                    return None
                try:
                    item = built.get_nowait()
                except queue.Empty:
                    item = None
                if item is None and unstarted:
                    item = (unstarted.pop(), None)  # the last in line: the builders take from the front
                if item is not None:
                    left[0] -= 1
                    return item
                state.wait(1.0)

    for _ in range(min(builders, len(todo))):
        threading.Thread(target=builder, name="eval-batch-build", daemon=True).start()

    def worker(device):
        kept = kept_judge.KeptJudge(judge_env(device, cases.secret_seed()), problem_folder.ROOT) \
            if kept_judge.enabled() else None
        try:
            while True:
                item = take()
                if item is None:
                    return
                candidate, prebuilt = item
                line = {**judge_one(candidate, mode, args, device, limit, kept=kept), "options": key, "mode": mode}
                if prebuilt is not None:
                    line["prebuild"] = prebuilt
                with lock:
                    lines.append(save(jsonl, line))
                    if progress:
                        progress(line)
        finally:
            if kept is not None:
                kept.close()

    threads = [threading.Thread(target=worker, args=(device,), daemon=True) for device in devices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return lines


def _import_bound(args: list[str]) -> float:
    """The judge's own bound on an import without compilers running (its --timeout), at most the build
    limit. A build ahead is bounded the same way: past it, only while compilers keep busy."""
    from eval.judge.worker_start import DEFAULT_LOAD_TIMEOUT_S

    if "--timeout" in args[:-1]:
        try:
            return min(float(args[args.index("--timeout") + 1]), DEFAULT_LOAD_TIMEOUT_S)
        except ValueError:
            pass
    return DEFAULT_LOAD_TIMEOUT_S


def busy_share(lines: list[dict], wall_s: float, slot_count: int) -> float | None:
    """The share of the batch's wall time its slots were held by a judge (GPU-busy, on a GPU host)."""
    if not lines or wall_s <= 0 or slot_count <= 0:
        return None
    return min(1.0, sum(line.get("seconds") or 0.0 for line in lines) / (wall_s * slot_count))


def standings(jsonl: Path, key: str | None = None) -> list[dict]:
    """Every judged line (of these options), passing ones first by geomean, then the rest."""
    entries = []
    if jsonl.is_file():
        for line in jsonl.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if key is None or entry.get("options") == key:
                entries.append(entry)
    return sorted(entries, key=lambda e: (not e.get("passed"), e.get("geomean_ns") or float("inf"), e.get("id")))
