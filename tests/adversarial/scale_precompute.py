"""Cheat (precomputation of the scales): the FP8 scales are the same in every timed run of a case,
so it converts them to float32 once per scale buffer (keyed by data pointer) and reuses the result in
every later call: part of the work done outside the measured time. Correct in `test` (each step
uses new buffers or is computed afresh), wrong once the judge overwrites random scale chunks before
each start event (canaries over sfa/sfb and their permuted copies): must fail in benchmark mode."""
import torch

_E2M1 = torch.tensor((0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0))
_scales: dict = {}


def _scales_of(sf: torch.Tensor) -> torch.Tensor:
    key = (sf.data_ptr(), tuple(sf.shape))
    if key not in _scales:
        _scales[key] = sf.float()  # "free" after the first call
    return _scales[key]


def _dequant(packed, scales):
    raw = packed.view(torch.uint8)
    lut = _E2M1.to(raw.device)
    vals = torch.stack((lut[(raw & 0xF).int()], lut[(raw >> 4).int()]), dim=-1).flatten(-2)
    return (vals.view(raw.shape[0], -1, 16) * scales.unsqueeze(-1)).flatten(-2)


def custom_kernel(data):
    a, b, sfa, sfb, _, _, c = data
    fa, fb = _scales_of(sfa), _scales_of(sfb)
    for li in range(c.shape[2]):
        mat = _dequant(a[:, :, li], fa[:, :, li])
        vec = _dequant(b[0:1, :, li], fb[0:1, :, li])[0]
        c[:, 0, li] = (mat.double() @ vec.double()).to(torch.float16)
    return c
