"""Honest (threads): splits each batch's rows into four chunks computed by a thread pool and waits for
all of them (future.result()) before returning. Must pass."""
import concurrent.futures
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="gemv")


def _rows(a, sfa, vec, c, li, r0, r1):
    mat = _honest._dequant(a[r0:r1, :, li], sfa[r0:r1, :, li])
    c[r0:r1, 0, li] = (mat @ vec).to(torch.float16)


def custom_kernel(data):
    a, b, sfa, sfb, _, _, c = data
    m = c.shape[0]
    step = max(1, (m + 3) // 4)
    futures = []
    for li in range(c.shape[2]):
        vec = _honest._dequant(b[0:1, :, li], sfb[0:1, :, li])[0]
        for r0 in range(0, m, step):
            futures.append(_pool.submit(_rows, a, sfa, vec, c, li, r0, min(m, r0 + step)))
    for future in futures:
        future.result()
    return c
