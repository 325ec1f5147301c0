"""`python -m eval batch --ray ADDRESS`: the same judging as eval/batch.py, spread over a Ray cluster.

One Ray actor per GPU (`num_gpus=1`: Ray pins it with CUDA_VISIBLE_DEVICES), or on a cluster
without GPUs `--jobs` actors of one CPU each. An actor receives a candidate's source text (not a
path: the caller's files need not exist on its node), writes it where the sandboxed worker can read
it, and runs batch.judge_one there: the same judge process, worker and sandbox as a local batch, on
the node that holds the GPU (a judge process kept by the actor across its candidates, as batch's
slots keep theirs: eval/kept_judge.py). The record comes back to the caller, which streams it to the
JSONL as each finishes (resume as batch's: source hash and options). A candidate whose actor dies
under it (its node lost) is judged again on another actor, up to MAX_ATTEMPTS actors, and has one line
in the JSONL whatever happened; the dead actor is replaced where the cluster still has room (a
replacement that cannot be placed within START_S, its node's GPUs gone, is given up). A candidate
that outlives its limit costs only itself: its line says why and its actor is replaced.

ADDRESS: `local` starts a cluster on this host for the batch; `auto`, `host:port` or `ray://...`
join one that is running, and ship the harness to it as the job's working directory. Ray is an
optional dependency (`missing()` says how to get it); all networking is Ray's.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
import socket
import tempfile
import time
from pathlib import Path

from eval import batch, cases, kept_judge, problem_folder

INSTALL_HINT = ("--ray needs Ray: pip install ray (on the GPU machine: .ci/stage-ray.sh here, then "
                "`source .ray/activate.sh` there)")
OVERDUE_S = 60.0  # beyond judge_one's own limit: then the actor itself is killed and replaced
MAX_ATTEMPTS = 2  # actors a candidate may see die under it (a lost node) before its line says so
START_S = 120.0  # a replacement actor that is not placed by then (no GPU left for it) is given up
SHIP_EXCLUDES = [".git/", "results/", ".ray/", ".device/", ".whl/", ".refk/", ".official/", ".redteam/", "__pycache__/"]


def missing() -> str | None:
    """Why --ray cannot run here (one line), or None."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return INSTALL_HINT
    return None


class Judge:
    """The actor: one GPU (or one CPU slot) of some node; judges one candidate at a time there, in a
    judge process it keeps across its candidates (EVAL_BATCH_KEPT=0: one per candidate)."""

    def __init__(self):
        self.kept = None

    def ready(self) -> str:
        """Answered once the actor is placed and started: its host."""
        return socket.gethostname()

    def judge(self, cid: str, source: str, sha256: str, shown: str, mode: str, args: list[str], limit: float,
              problem: str | None, secret: int | None = None) -> dict:
        """judge_one on a copy of the source; its line names the file as the caller knows it (shown)."""
        device = os.environ.get("CUDA_VISIBLE_DEVICES") or None  # what Ray pinned this actor to
        with tempfile.TemporaryDirectory(prefix="ray-candidate-") as folder:
            os.chmod(folder, 0o755)  # the worker's own uid must read it, as a local file would be
            path = Path(folder) / f"{sha256[:16]}.py"
            path.write_text(source)
            path.chmod(0o644)
            root = Path(problem) if problem else problem_folder.ROOT
            if self.kept is None and kept_judge.enabled():
                self.kept = kept_judge.KeptJudge(batch.judge_env(device, secret), problem_folder.ROOT)
            if self.kept is None:  # a judge process per candidate: the secret seed reaches it as it would the kept one
                from eval import cases

                cases._SECRET[:] = [secret]
            line = batch.judge_one(batch.Candidate(cid, path, sha256), mode, args, device, limit, root, kept=self.kept)
        line = json.loads(json.dumps(line).replace(json.dumps(str(path))[1:-1], json.dumps(shown)[1:-1]))
        return {**line, "host": socket.gethostname()}


@dataclasses.dataclass
class Job:
    """One candidate in flight: the actor judging it and since when."""
    actor: object
    candidate: batch.Candidate
    started: float


def connect(ray, address: str, jobs: int | None) -> None:
    """Start (`local`) or join a cluster. Joining ships this harness as the job's working directory,
    so every node judges with the caller's code and problem files."""
    quiet = {"include_dashboard": False, "logging_level": logging.WARNING, "log_to_driver": False}
    if address == "local":
        ray.init(address="local", num_cpus=max(os.cpu_count() or 1, jobs or 1), **quiet)  # always a new one
        return
    env_vars = {k: v for k, v in os.environ.items() if k.startswith("EVAL_") and k != problem_folder.DIR_ENV}
    runtime_env = {"working_dir": str(problem_folder.ROOT), "excludes": SHIP_EXCLUDES, "env_vars": env_vars}
    ray.init(address=address, runtime_env=runtime_env, **{k: v for k, v in quiet.items() if k != "include_dashboard"})


def answers(address: str, within_s: float = 5.0) -> None:
    """ConnectionError (one line) when nothing listens where the cluster should be: ray.init would
    retry for minutes, printing warnings, before it gave up. `auto` is RAY_ADDRESS where that is set;
    `local` and an address Ray resolves itself are left to Ray."""
    target = os.environ.get("RAY_ADDRESS", "") if address == "auto" else address
    host, _, port = target.split("://", 1)[-1].rpartition(":")
    if address == "local" or not port.isdigit():
        return
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=within_s).close()
    except OSError as exc:
        raise ConnectionError(f"cannot reach a Ray cluster at {target}: nothing answers there ({exc.strerror or exc}); "
                              f"start one with `ray start --head` or name another with --ray") from None


def actor_options(ray, jobs: int | None, mode: str = "test") -> tuple[int, dict]:
    """How many actors and what each holds: a GPU each, else one CPU each (`jobs` of them for
    `test`, one for the timed modes: batch.cpu_jobs)."""
    resources = ray.cluster_resources()
    gpus = int(resources.get("GPU", 0))
    if gpus:
        return (min(jobs, gpus) if jobs else gpus), {"num_gpus": 1, "num_cpus": 0}
    return max(1, min(batch.cpu_jobs(mode, jobs), int(resources.get("CPU", 1)))), {"num_cpus": 1}


def problem_arg() -> str | None:
    """The problem folder for the actors: None for this harness's own (each node has its copy)."""
    root = problem_folder.current().root
    return None if root == problem_folder.ROOT else str(root)


def lost_line(candidate: batch.Candidate, reason: str, started: float) -> dict:
    """The line of a candidate whose actor died or was killed: it costs only itself."""
    return {"id": candidate.id, "sha256": candidate.sha256, "passed": False, "reason": reason,
            "geomean_ns": None, "device": None, "seconds": round(time.monotonic() - started, 2), "record": None}


def run(candidates: list[batch.Candidate], mode: str, args: list[str], jsonl: Path, address: str,
        jobs: int | None = None, limit: float = 1800.0, progress=None) -> list[dict]:
    """Judge every candidate not yet in jsonl on the cluster at `address`; returns this run's lines
    (in finishing order). ConnectionError (one line) when the cluster cannot be reached."""
    key = batch.options_key(mode, args)
    todo = collections.deque(batch.pending(candidates, key, jsonl))
    if not todo:
        return []
    answers(address)
    import ray

    try:
        connect(ray, address, jobs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ConnectionError(f"cannot reach a Ray cluster at {address}: {batch.last_error(str(exc))}") from exc
    try:
        return _drive(ray, todo, mode, args, jsonl, key, jobs, limit, progress)
    finally:
        ray.shutdown()


def _drive(ray, todo: collections.deque, mode, args, jsonl: Path, key: str, jobs, limit: float, progress) -> list[dict]:
    count, resources = actor_options(ray, jobs, mode)
    actor_class = ray.remote(max_restarts=0, **resources)(Judge)
    problem = problem_arg()
    secret = cases.secret_seed()  # POPCORN_SEED, as this command took it (sent to each actor's judges)
    running: dict = {}  # a judge task's ref -> its Job
    starting: dict = {}  # an actor's ready() ref -> (the actor, since when)
    attempts: collections.Counter = collections.Counter()  # actors that died under each candidate
    lines: list[dict] = []

    def start() -> None:
        """A new actor; it gets a candidate once it is placed and answers ready()."""
        actor = actor_class.remote()
        starting[actor.ready.remote()] = (actor, time.monotonic())

    def submit(actor) -> None:
        """Give the actor the next candidate (an actor left without one is dropped at shutdown)."""
        if todo:
            candidate = todo.popleft()
            source = candidate.path.read_text(errors="replace")
            ref = actor.judge.remote(candidate.id, source, candidate.sha256, str(candidate.path), mode, args,
                                     limit, problem, secret)
            running[ref] = Job(actor, candidate, time.monotonic())

    def finish(line: dict) -> None:
        line = batch.save(jsonl, {**line, "options": key, "mode": mode})
        lines.append(line)
        if progress:
            progress(line)

    for _ in range(min(count, len(todo))):
        start()
    while running or (starting and todo):
        ready, _ = ray.wait(list(running) + list(starting), num_returns=1, timeout=5.0)
        for ref in ready:
            if ref in starting:
                actor, _ = starting.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.RayError:  # it could not start: its place is not taken again
                    continue
                submit(actor)
                continue
            job = running.pop(ref)
            try:
                line = ray.get(ref)
            except ray.exceptions.RayError as exc:  # the actor died under it (its node lost): judged elsewhere
                attempts[job.candidate.id] += 1
                _kill(ray, job.actor)
                if attempts[job.candidate.id] < MAX_ATTEMPTS:
                    todo.appendleft(job.candidate)
                else:
                    finish(lost_line(job.candidate, f"the Ray actors judging it died {attempts[job.candidate.id]} "
                                                    f"times: {batch.last_error(str(exc))}", job.started))
                start()
                continue
            if attempts[job.candidate.id]:
                line["retried"] = attempts[job.candidate.id]  # judged again after its actor died
            finish(line)
            submit(job.actor)
        now = time.monotonic()
        for ref, job in list(running.items()):
            if now - job.started > limit + OVERDUE_S:
                running.pop(ref)
                finish(lost_line(job.candidate, f"its Ray actor did not answer within {limit:.0f} s (killed)",
                                 job.started))
                _kill(ray, job.actor)
                start()
        for ref, (actor, since) in list(starting.items()):
            if now - since > START_S:  # not placed: the cluster has no room for it now
                starting.pop(ref)
                _kill(ray, actor)
    for candidate in todo:  # no actor could take them: not judged, so not written (a resume judges them)
        lines.append({**lost_line(candidate, "no Ray actor could be placed to judge it (the cluster lost its "
                                             "resources)", time.monotonic()), "infrastructure": True})
    return lines


def _kill(ray, actor) -> None:
    """Kill an actor (it may be dead already)."""
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # noqa: BLE001 (gone already: nothing to kill)
        pass
