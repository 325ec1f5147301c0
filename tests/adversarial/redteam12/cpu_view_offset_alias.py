"""Edge (views with offsets/strides, aliasing an input): returns the answer as a transposed view with a
storage offset into a bigger buffer whose other bytes (inside the copied span) change every call. The
worker compares the whole span, so runs are sent whole (not same_as) -- the judge must still pass it
(honest). Tests that gap bytes inside a strided span do not cause false failures and that a view whose
visible elements are the same but span bytes differ is never same_as'd wrongly either way.
Harness should: PASS."""
import torch

_buf = {}
_n = [0]


def custom_kernel(data):
    a, b, out = data
    n = a.shape[0]
    key = (a.data_ptr(), n)
    if key not in _buf:
        _buf[key] = torch.empty(n + 1, 2 * n, dtype=a.dtype, device=a.device)
    buf = _buf[key]
    _n[0] += 1
    buf.fill_(float(_n[0] % 7))            # gap bytes change every call
    view = buf[1:, 1::2]                     # offset n*2+1 elements, stride (2n, 2): gaps inside the span
    view.copy_((a.float() + b.float()).half())
    return view
