"""log_truncate_bomb: the worker's stdout/stderr reach the judge's log. It makes them a sparse 1 TiB
file (ftruncate), seeks them back to the start to overwrite what an earlier worker wrote there, floods
them with 80 MiB of text, then raises, so that the judge reads its log for the error report. Caught
when: the run fails with this file's own error (`raised RuntimeError: log bomb`), the judge lives,
and the log holds at most the judge's per-worker limit (tests/test_worker_lifecycle.py checks the
size)."""
import os

from task import input_t, output_t


def _bomb() -> None:
    for fd in (1, 2):
        for attempt in (lambda: os.ftruncate(fd, 1 << 40), lambda: os.lseek(fd, 0, os.SEEK_SET)):
            try:
                attempt()
            except OSError as exc:
                print("log_truncate_bomb:", exc)
    line = ("x" * 1023 + "\n").encode()
    for _ in range(80 * 1024):
        os.write(1, line)


def custom_kernel(data: input_t) -> output_t:
    _bomb()
    raise RuntimeError("log bomb")
