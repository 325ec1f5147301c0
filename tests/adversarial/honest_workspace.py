"""Honest (workspace): allocates a float32 decode workspace once per (device, shape) and reuses it on
every call (it decodes A into the workspace in place), writing the final fp16 result into c. Must
pass: the returned tensor is c, never the reused workspace."""
import torch

_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
_workspaces = {}
_tables = {}


def _workspace(device, rows, k):
    key = (str(device), rows, k)
    if key not in _workspaces:
        _workspaces[key] = torch.empty((rows, k), dtype=torch.float32, device=device)
        _tables[str(device)] = torch.tensor(_E2M1, dtype=torch.float32, device=device)
    return _workspaces[key], _tables[str(device)]


def _decode_into(out, packed, scales, table):
    raw = packed.view(torch.uint8)
    pairs = out.view(raw.shape[0], -1, 2)
    pairs[:, :, 0] = table[(raw & 0xF).long()]
    pairs[:, :, 1] = table[(raw >> 4).long()]
    out.view(raw.shape[0], -1, 16).mul_(scales.float().unsqueeze(-1))
    return out


def custom_kernel(data):
    a, b, sfa, sfb, _, _, c = data
    m, half_k, l = a.shape
    k = half_k * 2
    mat, table = _workspace(a.device, m, k)
    vec_ws, _ = _workspace(a.device, 1, k)
    for li in range(l):
        _decode_into(mat, a[:, :, li], sfa[:, :, li], table)
        _decode_into(vec_ws, b[0:1, :, li], sfb[0:1, :, li], table)
        c[:, 0, li] = (mat @ vec_ws[0]).to(torch.float16)
    return c
