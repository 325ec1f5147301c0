"""The worker's compiled part: it builds here (CI's compile check), its frames carry an HMAC-SHA256
that Python's hmac agrees with, one reply per nonce, no measurement kinds through reply(), and the
key never reaches Python."""
import hashlib
import hmac
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

from eval.judge import channel, worker_start
from eval.worker import build
from tests.conftest import ROOT

SCRIPT = r"""
import os, sys, torch
from eval.worker import build
native = build.load(sys.argv[1])
key_fd, reply_fd = int(sys.argv[2]), int(sys.argv[3])
native.open_channel(key_fd, reply_fd, "", False, 4.0, False)
native.reply("n1", "ready", "hello")
for call in (lambda: native.reply("n1", "text", "again"), lambda: native.reply("n2", "runs", "{}"),
             lambda: native.open_channel(key_fd, reply_fd, "", False, 4.0, False)):
    try:
        call()
        print("ALLOWED")
    except RuntimeError as exc:
        print("refused:", exc)
print("key visible:", any(isinstance(v, bytes) and len(v) == 32 for v in globals().values()))
"""


def test_native_builds_signs_and_refuses():
    lib = build.build()
    key = os.urandom(32)
    key_r, key_w = os.pipe()
    os.write(key_w, key)
    os.close(key_w)
    rep_r, rep_w = os.pipe()
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(lib), str(key_r), str(rep_w)], cwd=ROOT,
                         pass_fds=(key_r, rep_w), capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    os.close(key_r)
    os.close(rep_w)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("refused:") and "already answered" in lines[0]
    assert lines[1].startswith("refused:") and "reply kind" in lines[1]
    assert lines[2].startswith("refused:") and "already open" in lines[2]
    assert lines[3] == "key visible: False"
    frame = os.read(rep_r, 1 << 16)
    os.close(rep_r)
    assert frame[:4] == b"NVF1"
    header_len, blob_len = struct.unpack("<IQ", frame[4:16])
    header = frame[16:16 + header_len]
    mac = frame[16 + header_len + blob_len:16 + header_len + blob_len + 32]
    assert hmac.compare_digest(mac, hmac.new(key, hashlib.sha256(header).digest(), hashlib.sha256).digest())
    assert json.loads(header) == {"nonce": "n1", "kind": "ready", "text": "hello"}
    assert len(frame) == 16 + header_len + blob_len + 32  # exactly one frame: the refused calls wrote nothing


def test_echo_must_match_what_was_asked():
    asked = {"cuda": False, "max_repeats": 200, "canary": [[1, 0, 16384, 128, 2, 0, 3]], "seed": 7}
    assert channel._echo_matches(asked, {**asked, "extra": 1})
    assert not channel._echo_matches(asked, {**asked, "max_repeats": 3})
    assert not channel._echo_matches(asked, {**asked, "canary": []})
    assert not channel._echo_matches(asked, {k: v for k, v in asked.items() if k != "seed"})


def test_secret_seed_applies_to_every_case_set_of_a_command():
    """POPCORN_SEED is read once and combined into tests and benchmarks alike (it used to reach the
    first set only), and it is gone from the environment afterwards."""
    code = ("import os; from eval import cases; t = cases.select_cases('tests'); b = cases.select_cases('benchmarks');"
            "print(t[0].args['seed'], b[0].args['seed'], 'POPCORN_SEED' in os.environ)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "POPCORN_SEED": "4242"})
    from eval.cases import combine_seed

    expected = combine_seed(1111, 4242)
    assert out.stdout.split() == [str(expected), str(expected), "False"], out.stderr


def test_flush_kernel_ptx_assembles_for_hopper_and_blackwell(tmp_path):
    """The flush-and-wait kernel is PTX JIT-compiled by the driver at run time; ptxas checks it here."""
    import re
    import shutil

    import pytest

    ptxas = shutil.which("ptxas") or (shutil.which("nvcc") and str(Path(shutil.which("nvcc")).parent / "ptxas"))
    if not ptxas or not Path(ptxas).exists():
        pytest.skip("ptxas (CUDA toolkit) not installed")
    ptx = re.search(r'FLUSH_PTX = R"PTX\((.*?)\)PTX"', "\n".join(p.read_text() for p in build.SOURCES), re.S).group(1)
    (tmp_path / "flush.ptx").write_text(ptx)
    for arch in ("sm_90a", "sm_100a"):
        out = subprocess.run([ptxas, "-v", f"-arch={arch}", str(tmp_path / "flush.ptx"), "-o",
                              str(tmp_path / f"{arch}.cubin")], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        # wait_flush holds every SM with two blocks of 1024 threads: 32 registers a thread at most (64K an SM)
        used = re.search(r"entry function 'wait_flush'.*?Used (\d+) registers", out.stdout + out.stderr, re.S)
        assert used and int(used.group(1)) <= 32, out.stdout + out.stderr


def test_a_reply_that_contradicts_its_canary_seed_fails_the_case():
    """The judge re-derives the canary positions from the signed seed; positions that do not follow
    (a forged or corrupted reply) are a failure with a reason, never a crash."""
    import pytest

    import problem
    from eval.judge import verdict
    from reference import generate_input

    args = {"m": 128, "k": 256, "l": 1, "seed": 5}
    regions = problem.canary_regions(args)
    good = [start for start, _ in verdict.canary_plan(regions, 77)]
    data = verdict.apply_canary(generate_input(**args), regions, {"seed": "77", "starts": good})
    assert len(data) == 7
    with pytest.raises(channel.WorkerFailure, match="reply failed authentication"):
        verdict.apply_canary(generate_input(**args), regions,
                                 {"seed": "77", "starts": [good[0], [good[1][0] + 16, *good[1][1:]], *good[2:]]})


def test_native_part_formats_without_iostreams():
    """Where the toolchain links libstdc++ statically into the extension (the GPU machine's does),
    its std::locale and torch's disagree on facet ids and formatting a number through an ostream
    crashes the worker (seen on the H100). native.cpp builds its text with snprintf only."""
    import re

    assert len(build.SOURCES) > 1  # native.cpp and the parts it includes (eval/worker/native/*.h)
    for path in build.SOURCES:
        code = re.sub(r"//[^\n]*", "", path.read_text())  # comments may name what is avoided
        for banned in ("<sstream>", "<iostream>", "<ostream>", "ostringstream", "std::cout", "std::cerr"):
            assert banned not in code, f"{path.name} uses {banned}"


def test_sandbox_level_chosen_by_the_user(monkeypatch, tmp_path):
    """EVAL_SANDBOX picks where the judge starts (full, no-uid, none); anything else is one
    line naming the choices, before a worker is started."""
    import pytest

    monkeypatch.setenv("EVAL_SANDBOX", "bogus")
    with pytest.raises(channel.WorkerFailure, match="EVAL_SANDBOX=bogus is not one of full, cuda-first, no-uid, none"):
        channel.WorkerProcess(None, tmp_path / "w.log").start(60)
    monkeypatch.setenv("EVAL_SANDBOX", "none")
    worker = channel.WorkerProcess(None, tmp_path / "w.log")
    try:
        assert "EVAL_SANDBOX=none" in worker.start(120)["sandbox"]["sandbox"]
    finally:
        worker.close()
    monkeypatch.delenv("EVAL_SANDBOX")  # the user's choice held for that worker only: the next is sandboxed
    worker = channel.WorkerProcess(None, tmp_path / "w2.log")
    try:
        layers = worker.start(120)["sandbox"]
        assert "sandbox" not in layers and layers.get("seccomp") == "on", layers
    finally:
        worker.close()


def test_the_step_down_keeps_the_uid_and_every_layer_but_the_order(monkeypatch, tmp_path):
    """EVAL_SANDBOX=cuda-first (the judge's first step down, where the full order breaks CUDA):
    torch starts before the per-thread layers, so the threads it started are reported outside them,
    but the uid change, Landlock and seccomp are all on; at full, the driver's start is reported."""
    monkeypatch.setenv("EVAL_SANDBOX", "cuda-first")
    worker = channel.WorkerProcess(None, tmp_path / "w.log")
    try:
        layers = worker.start(120)["sandbox"]
    finally:
        worker.close()
    assert "cuda driver" not in layers and layers.get("seccomp") == "on", layers
    assert layers["landlock"].startswith("on"), layers
    if os.geteuid() == 0 and channel.worker_uid(None) is not None:
        assert layers["uid"].startswith("dropped"), layers
    monkeypatch.delenv("EVAL_SANDBOX")
    worker = channel.WorkerProcess(None, tmp_path / "w2.log")
    try:
        layers = worker.start(120)["sandbox"]
    finally:
        worker.close()
    assert layers["cuda driver"].startswith(("on", "n/a")), layers
    assert layers["threads"].startswith("one"), layers
    # no-uid keeps root without capabilities: its folders stay root's, or it could not enter them
    # (the emulation makes its build folders there: PermissionError on the H100 when they were a uid's)
    from eval import cases
    from eval.judge import modes

    monkeypatch.setenv("EVAL_SANDBOX", "no-uid")
    record = modes.run_tests(ROOT / "tests" / "blackwell" / "scaled_mm_fp4.py", cases.select_cases("smoke")[:1],
                             modes.Options(timeout=120.0, load_timeout=300.0, log_dir=tmp_path / "logs",
                                           wall_cap_s=2.0, baseline=False, emulate_blackwell=True))
    assert record.passed, record.error or [c.error for c in record.cases]
    if os.geteuid() == 0:
        assert record.environment.sandbox["uid"].startswith("kept root"), record.environment.sandbox


def _fake_machine(monkeypatch, tmp_path, hello):
    import torch

    from eval.judge import levels

    monkeypatch.setenv("EVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(levels, "machine_key", lambda: {"host": "test", "driver": "580"})
    monkeypatch.setattr(channel.WorkerProcess, "_hello", hello)
    monkeypatch.setattr(channel.WorkerProcess, "_load", lambda self, *a: None)
    monkeypatch.setattr(channel.WorkerProcess, "close", lambda self: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("EVAL_SANDBOX", raising=False)
    return levels


def test_the_machines_level_is_found_once_and_every_later_worker_starts_there(monkeypatch, tmp_path):
    """The hello (signed before the submission exists) says whether CUDA works: the first judge tries
    full, then cuda-first, and keeps the answer; every later worker starts at cuda-first directly,
    and its record says it is below full and why."""
    tried = []

    def hello(self, level):
        tried.append(level)
        self.uid = channel.worker_uid(None) if level in channel.UID_LEVELS else None
        return {"cuda": level != "full", "sandbox": {},
                "cuda_error": "RuntimeError: ... Error 304: OS call failed or operation not supported on this OS"}

    levels = _fake_machine(monkeypatch, tmp_path, hello)
    info = channel.WorkerProcess(None, tmp_path / "w.log").start(60)
    assert tried == ["full", "cuda-first"] and levels.known()["level"] == "cuda-first"
    assert info["sandbox"]["sandbox level"].startswith("cuda-first: below full, the best this machine reaches "
                                                       "(CUDA failed at full (RuntimeError")
    info = channel.WorkerProcess(None, tmp_path / "w2.log").start(60)
    assert tried[2:] == ["cuda-first"] and info["sandbox"]["sandbox level"].startswith("cuda-first: below full")


def test_a_worker_that_fails_at_the_machines_level_beside_others_does_not_step_down(monkeypatch, tmp_path):
    """Side by side, a worker whose CUDA fails at the kept level is a one-line failure: no worker
    lowers its own sandbox (a neighbour could be the cause), and the kept level stays."""
    import pytest

    tried = []

    def hello(self, level):
        tried.append(level)
        return {"cuda": False, "sandbox": {}, "cuda_error": "RuntimeError: Error 304"}

    levels = _fake_machine(monkeypatch, tmp_path, hello)
    levels.remember("full", [])
    monkeypatch.setattr(worker_start, "_live_workers", lambda own: 3)
    with pytest.raises(channel.WorkerFailure, match="at sandbox level full .this machine's level, 3 other worker"):
        channel.WorkerProcess(None, tmp_path / "w.log").start(60)
    assert tried == ["full"] and levels.known()["level"] == "full"


def test_a_kept_level_is_trusted_only_from_the_judges_own_unshared_file(monkeypatch, tmp_path):
    """A level file anyone else could write (a worker planting "none") is not read: the level is
    found again."""
    tried = []

    def hello(self, level):
        tried.append(level)
        return {"cuda": True, "sandbox": {}}

    levels = _fake_machine(monkeypatch, tmp_path, hello)
    levels.remember("none", [])
    os.chmod(levels.cache_file(), 0o666)
    info = channel.WorkerProcess(None, tmp_path / "w.log").start(60)
    assert tried == ["full"] and info["sandbox"]["sandbox level"] == "full" and levels.known()["level"] == "full"


def test_a_full_gpu_is_no_reason_to_step_down(monkeypatch, tmp_path):
    """A neighbour that fills the GPU's memory while a worker says hello must not talk its judge into
    less sandbox: an out-of-memory CUDA failure is one line, and the level stays where it was."""
    import pytest
    import torch

    tried = []

    def hello(self, level):
        tried.append(level)
        return {"cuda": False, "cuda_error": "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB",
                "sandbox": {}}

    levels = _fake_machine(monkeypatch, tmp_path, hello)
    with pytest.raises(channel.WorkerFailure, match="for want of GPU resources, not because of its sandbox"):
        channel.WorkerProcess(None, tmp_path / "w.log").start(60)
    assert tried == ["full"] and levels.known() is None


SHA_CHECK = r"""
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <algorithm>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif
#include "sha256.h"
int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    size_t n = strtoull(argv[i], nullptr, 10);
    std::string data(n, '\0');
    for (size_t j = 0; j < n; j++) data[j] = (char)(j * 131 + (j >> 7));
    for (int portable = 0; portable < 2; portable++) {
      sha::g_portable = portable;
      sha::Ctx c;  // in pieces of growing odd sizes: the buffered path and whole blocks both
      size_t off = 0, step = 1;
      while (off < n) { size_t t = std::min(step, n - off); sha::update(c, (const uint8_t*)data.data() + off, t); off += t; step = step * 3 + 1; }
      uint8_t out[32];
      sha::final(c, out);
      printf("%zu %d %s\n", n, portable, sha::hex(out, 32).c_str());
    }
  }
}
"""


def test_sha256_matches_hashlib_on_both_paths(tmp_path):
    """The worker signs every reply with its own SHA-256: the SHA-NI path (where the CPU has it) and
    the portable one give hashlib's digest at every length around the block edges."""
    source = tmp_path / "sha_check.cpp"
    source.write_text(SHA_CHECK)
    binary = tmp_path / "sha_check"
    subprocess.run(["g++", "-O2", "-I", str(ROOT / "eval" / "worker" / "native"), "-o", str(binary), str(source)],
                   check=True, capture_output=True, timeout=120)
    sizes = [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 1000, 65536 + 17, 3_000_001]
    done = subprocess.run([str(binary), *map(str, sizes)], check=True, capture_output=True, text=True, timeout=60)
    got = [line.split() for line in done.stdout.splitlines()]
    assert len(got) == 2 * len(sizes)
    for n, _, digest in got:
        data = bytes((j * 131 + (j >> 7)) & 0xFF for j in range(int(n)))
        assert digest == hashlib.sha256(data).hexdigest(), n
