"""The off-stream watch's table (eval/worker/native/stream_table.h): generated from NVIDIA's headers,
never edited by hand, and right where the watch depends on it. The watch itself runs on the GPU
(tests/adversarial/l2_side_copy.py and the honest files of the adversarial suite)."""
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NATIVE = ROOT / "eval" / "worker" / "native"
ROW = re.compile(r"\{(\d+), (\d+), (\d+), (\d+), (-?\d+), (\d), \"(\w+)\"\}")
HEADERS = [p for p in sorted(pathlib.Path("/usr/local").glob("cuda*/include")) if (p / "generated_cuda_meta.h").exists()]


def rows():
    return {(int(d), int(cb)): (int(k), int(s), int(e), int(c), n)
            for d, cb, k, s, e, c, n in ROW.findall((NATIVE / "stream_table.h").read_text())}


def test_the_table_holds_what_the_watch_relies_on():
    t = rows()
    assert len(t) > 200
    assert t[(1, 307)] == (0, 40, -1, 0, "cuLaunchKernel")  # the flush kernel's launch: the watch's liveness
    assert t[(1, 442)][4] == "cuLaunchKernel_ptsz"  # watch.h CBID_LAUNCH_PTSZ
    assert t[(1, 281)][:2] == (0, 24) and t[(1, 514)][4] == "cuGraphLaunch"
    assert t[(1, 652)][3] == 1  # cuLaunchKernelEx: the stream in the launch configuration
    assert t[(1, 124)][0] == 6 and t[(1, 295)][0] == 2 and t[(1, 119)][0] == 1
    driver = {n: k for (d, _), (k, _, _, _, n) in t.items() if d == 1}
    assert all(cb < 1024 for (d, cb) in t if d == 1)  # watch.h CBID_LIMIT
    for name in ("cuMemcpyAsync", "cuMemsetD8Async_v2", "cuMemPrefetchAsync", "cuStreamWaitValue32_v2",
                 "cuStreamWriteValue32_v2", "cuStreamBatchMemOp_v2", "cuLaunchCooperativeKernel",
                 "cuMemcpyBatchAsync"):
        assert driver.get(name, driver.get(name.split("_v")[0])) == 0, name  # queues work: watched
    for name in ("cuStreamSynchronize", "cuStreamQuery", "cuLaunchHostFunc", "cuMemFreeAsync"):
        assert driver[name] == 5, name  # no GPU work: not watched


@pytest.mark.skipif(not HEADERS, reason="no CUDA toolkit headers here (the table is generated where they are)")
def test_the_table_is_what_the_generator_makes_from_the_headers():
    made = subprocess.run([sys.executable, str(NATIVE / "gen_stream_table.py"), str(HEADERS[-1])],
                          capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr[-2000:]
    assert made.stdout == (NATIVE / "stream_table.h").read_text(), "regenerate stream_table.h (see its first line)"
