"""torch_ref: pure-torch NVFP4 GEMV (decode + matmul). Runs on CPU and any GPU.

The baseline every other submission is compared against: FP4 codes are decoded through a 16-entry
table, FP8 scales by torch's own cast, then one fp32 matrix-vector product per batch (TF32 off).
Measured: see the README table (it is slow: it materialises A in fp32, 8x the bytes of the FP4 data).
"""
import torch

from task import input_t, output_t

_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
_tables: dict = {}


def _table(device) -> torch.Tensor:
    if device not in _tables:
        _tables[device] = torch.tensor(_E2M1, dtype=torch.float32, device=device)
    return _tables[device]


def _dequant(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """[rows, k/2] FP4 bytes and [rows, k/16] FP8 scales -> [rows, k] float32."""
    raw = packed.view(torch.uint8)
    lut = _table(raw.device)
    vals = torch.stack((lut[(raw & 0xF).int()], lut[(raw >> 4).int()]), dim=-1).flatten(-2)
    return (vals.view(raw.shape[0], -1, 16) * scales.float().unsqueeze(-1)).flatten(-2)


def custom_kernel(data: input_t) -> output_t:
    a, b, sfa, sfb, _, _, c = data
    allow_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 products must stay fp32
    try:
        for li in range(c.shape[2]):
            mat = _dequant(a[:, :, li], sfa[:, :, li])
            vec = _dequant(b[0:1, :, li], sfb[0:1, :, li])[0]
            c[:, 0, li] = (mat @ vec).to(torch.float16)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    return c
