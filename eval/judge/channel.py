"""The judge's handle on one worker process, under its old name: this module only re-exports.

It held six jobs in one file; each now has a module of its own, named by its role:
  eval/judge/worker_start.py  WorkerProcess, how a worker starts (sandbox levels, environment, uid,
                              the compiled part), prebuild
  eval/judge/wire.py          frames and replies: WorkerFailure, Reply, the HMAC, nonce and echo checks
  eval/judge/accounting.py    /proc (stat, schedstat), compiler detection, Deadline (build time)
  eval/judge/file_policy.py   what a worker may read and write (the Landlock path lists)
  eval/judge/lifecycle.py     Claim, sweep_dead, neighbours, freeze, kill, shared-memory sweep
New code imports the role module. A test that monkeypatches a name must patch the module that
looks it up (the role module): setting it here changes nothing there.
"""
from __future__ import annotations

from eval import problem_folder  # noqa: F401
from eval.cases import ROOT  # noqa: F401
from eval.judge import build_cache, disk_quota, text, worker_log  # noqa: F401
from eval.judge.accounting import (  # noqa: F401
    COMPILER_GAP_S, COMPILER_SHARE, COMPILER_WINDOW_S, COMPILERS, Deadline, _beneath_any, _build_tool, _compilers,
    _cpu_ns, _only_tool_code, _processes, _run_ns, _running, _schedstat, _start_time, _stat, _tool_folders)
from eval.judge.file_policy import (  # noqa: F401
    DEVICE_FILES, HARNESS_FOLDERS, PROBLEM_FILES, READ_ENV, SECRET_FILES, SHARED_MEMORY, SYSTEM_FOLDERS, TOOLKITS,
    TOOLS, _around, _beneath, _device_paths, _problem_files, _python_paths, _readable_by_others, _readable_paths,
    _shipped_submissions, _toolkit_paths, _user_paths)
from eval.judge.lifecycle import (  # noqa: F401
    Claim, Control, _kill_rest, _kill_worker, _live_workers, _reaper, _signal_uid, _signal_worker,
    _sweep_shared_memory, sweep_dead)
from eval.judge.wire import (  # noqa: F401
    REPLY_KINDS, TEXT_HEADER_LIMIT, Reply, Requests, WorkerFailure, _death_reason, _echo_matches, _parse_info,
    _steps_match)
from eval.judge.worker_start import (  # noqa: F401
    _NATIVE, BOOT, DEFAULT_HELLO_TIMEOUT_S, DEFAULT_LOAD_TIMEOUT_S, ENV_PASSED, ENV_PREFIXES, RESOURCE_ERRORS,
    SANDBOX_LEVELS, STAGED_INCLUDES, WORKER_NPROC, WORKER_UIDS, Native, Prebuilt, Private, WorkerProcess,
    _own_tree, _phases, _staged_headers, _worker_env, make_judge_undumpable, native, prebuild, worker_uid)
from eval.worker import build  # noqa: F401
from eval.worker.sandbox import UID_LEVELS  # noqa: F401
