"""The build-time rule (eval/judge/accounting.py Deadline): past --timeout an import goes on only while
real build tools keep busy. Unit tests of its parts on scripted looks and on real processes."""
import mmap
import subprocess
import sys

from eval.judge import accounting, channel


def scripted(monkeypatch, looks):
    """_compilers answers each look from `looks` in turn: ({(pid, start): busy ns}, {foreign keys})."""
    answers = iter(looks)
    monkeypatch.setattr(accounting, "_compilers", lambda session: next(answers))


def run(deadline, times):
    return [deadline._compiling(t) for t in times]


def test_busy_compilers_buy_time_and_idle_ones_do_not(monkeypatch):
    second = 10 ** 9
    scripted(monkeypatch, [({(1, 5): 3 * second}, set())] + [({(1, 5): (3 + i) * second}, set()) for i in range(1, 30)])
    assert all(run(channel.Deadline(15, 900, 0), range(100, 130)))  # one core busy all along
    scripted(monkeypatch, [({(1, 5): 3 * second}, set())] + [({(1, 5): 3 * second}, set())] * 29)
    verdicts = run(channel.Deadline(15, 900, 0), range(100, 130))
    assert verdicts[0] and not all(verdicts) and not verdicts[-1]  # its credit runs out, then no more time


def test_a_short_gap_between_builds_is_not_the_end(monkeypatch):
    second = 10 ** 9
    scripted(monkeypatch, [({}, set()), ({(2, 7): second}, set()), ({}, set()), ({(3, 9): second}, set())])
    assert run(channel.Deadline(15, 900, 0), [100, 101, 102, 103]) == [True, True, True, True]
    scripted(monkeypatch, [({}, set())] * 10)
    assert not all(run(channel.Deadline(15, 900, 0), range(100, 110)))  # no compiler at all: ends


def test_a_process_once_foreign_never_counts_and_none_counts_twice(monkeypatch):
    second = 10 ** 9
    looks = [({(4, 1): second}, set()), ({}, {(4, 1)})] + [({(4, 1): (2 + i) * second}, set()) for i in range(28)]
    scripted(monkeypatch, looks)
    verdicts = run(channel.Deadline(15, 900, 0), range(100, 130))
    assert not verdicts[-1]  # it burned a core after the look that found foreign code in it: no matter
    scripted(monkeypatch, [({(5, 1): 8 * second}, set()), ({}, set()), ({(5, 1): 8 * second}, set())] * 10)
    deadline = channel.Deadline(15, 900, 0)
    run(deadline, range(100, 130))
    assert sum(ns for _, ns in deadline.looks) <= 8 * second  # back again, its past is not counted again


def test_anonymous_executable_memory_or_a_foreign_library_is_not_a_tools_code():
    folders = channel._tool_folders()
    plain = subprocess.Popen(["sleep", "30"])
    jit = subprocess.Popen([sys.executable, "-c", "import mmap, time; m = mmap.mmap(-1, 4096, "
                            f"prot={mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC}); time.sleep(30)"])
    try:
        import time

        time.sleep(1.0)
        assert channel._only_tool_code(plain.pid, folders)
        assert not channel._only_tool_code(jit.pid, folders)
    finally:
        for process in (plain, jit):
            process.kill()
            process.wait()


def test_build_tools_by_their_installed_names():
    for name in ("cc1plus", "x86_64-linux-gnu-g++-12", "ld.bfd", "x86_64-linux-gnu-as", "lto1", "lto-wrapper", "nvcc",
                 "ptxas", "ninja"):
        assert channel._build_tool(name), name
    for name in ("python3.11", "sleep", "sh", "bash"):
        assert not channel._build_tool(name), name
