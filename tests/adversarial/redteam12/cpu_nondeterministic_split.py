"""Reply splitting (max_blob) x stop rule: each call returns a NEW tensor whose last bit flips on an
alternating element (still within tolerance), so no run is byte-identical to the kept one and every run
carries its bytes (as a big-output case would). With a monkeypatched small max_blob (see run_split.py)
the judge must ask again and re-apply the stop rule over all samples; all outputs are still judged.
Harness should: PASS, every run judged (honest but nondeterministic)."""
import torch

_n = [0]


def custom_kernel(data):
    a, b, out = data
    r = (a.float() + b.float()).half()
    _n[0] += 1
    flat = r.view(-1).view(torch.int16)
    flat[_n[0] % flat.numel()] ^= 1      # one ulp somewhere different each call
    return r
