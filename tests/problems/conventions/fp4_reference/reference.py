"""C = A @ B.T with A [m, k] and B [n, k] in FP4 (two per byte, low nibble first), one e4m3 scale
per 16 elements along k; C in fp16. The reference is cuBLAS's block-scaled GEMM (Blackwell only)."""
import torch
from utils import make_match_reference


def to_blocked(scales):
    """[rows, cols] scales -> the flat swizzled layout block-scaled GEMMs read (128x4 tiles)."""
    rows, cols = scales.shape
    rb, cb = -(-rows // 128), -(-cols // 4)
    padded = torch.zeros(rb * 128, cb * 4, dtype=scales.dtype)
    padded[:rows, :cols] = scales
    tiles = padded.view(rb, 128, cb, 4).permute(0, 2, 1, 3).reshape(rb * cb, 4, 32, 4)
    return tiles.transpose(1, 2).reshape(-1)


def generate_input(m: int, n: int, k: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randint(0, 256, (m, k // 2), dtype=torch.uint8, generator=gen)
    b = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=gen)
    pick = torch.tensor([0x30, 0x38, 0x40], dtype=torch.uint8)  # e4m3 0.5, 1, 2
    sfa = pick[torch.randint(0, 3, (m, k // 16), generator=gen)].view(torch.float8_e4m3fn)
    sfb = pick[torch.randint(0, 3, (n, k // 16), generator=gen)].view(torch.float8_e4m3fn)
    return a, b, sfa, sfb, torch.empty(m, n, dtype=torch.float16)


def ref_kernel(data):
    a, b, sfa, sfb, _ = data
    fp4 = torch.float4_e2m1fn_x2
    return torch._scaled_mm(a.view(fp4), b.view(fp4).t(), to_blocked(sfa), to_blocked(sfb),
                            out_dtype=torch.float16)


check_implementation = make_match_reference(ref_kernel, rtol=1e-2, atol=1e-2)
