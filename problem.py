"""What the harness may know about the NVFP4 GEMV beyond the leaderboard's contract (the optional
problem module; eval/problem_folder.py lists the hooks).

The contract (task.yml, reference.py's generate_input / check_implementation, custom_kernel) says
how to make inputs and how to check an output. This adds: the names of the 7 inputs and which one a
kernel writes (c); the input bytes the judge overwrites with fresh random values right before each
start event (canaries) and their range in the case's data distribution; the distribution that holds
every value the format can (for the narrow-data check); the bytes a GEMV must move (floor, GB/s,
"faster than memory allows"); the task's B200 speed-of-light table; the BF16 GEMV baseline; and the
accuracy metrics on quantized Gaussian data. Runs in the judge and, for `baseline`, in a harness
worker that holds no submission.
"""
from __future__ import annotations

import os
import re

NAME = "NVFP4 GEMV"
INPUT_NAMES = ("a", "b", "sfa", "sfb", "sfa_permuted", "sfb_permuted", "c")
WRITABLE_INPUTS = (6,)  # c, pre-filled with random values
DISTRIBUTIONS = ("leaderboard", "stress", "quantized")
DIST_ENV = "NVFP4_GEMV_DIST"  # reference.generate_input's default distribution
WORKER_ENV = (DIST_ENV,)
A_CHUNKS = 64  # 16-byte chunks of a overwritten per run, each at a random phase of its own
CHUNK = 16
SCALE_CANDIDATES = 512  # 4-byte scale chunks of sfa that a run may overwrite (fixed per case) ...
SCALE_PICKS = 16  # ... and how many of them each run overwrites (both layouts, the same bytes)
VECTOR_SCALE_PICKS = 8  # 4-byte chunks of the vector's scales (sfb row 0) overwritten per run
SCALE_VALUES = {"leaderboard": [0x00, 0x38, 0x40],  # e4m3 0, 1, 2: the leaderboard's scales
                "stress": list(range(0x01, 0x40)), "quantized": list(range(0x01, 0x7F))}
N_PADDED = 128  # rows of b and sfb; row 0 is the vector
FULL_RANGE = {"dist": "stress"}  # every FP4 code in both nibbles, scales over the e4m3 range
NARROW_NOTE = ("correct only on narrow data: right on the leaderboard's inputs (FP4 high nibble 0, scales 0..2) "
               "but wrong on full-range data (every FP4 code, scales over the e4m3 range)")
BASELINE_NAME = "BF16"
ACCURACY_OVERRIDES = {"dist": "quantized"}
ACCURACY_NOTE = ("on quantized Gaussian data; vs fp32 = against the unquantized product, "
                 "quant. rel = the exact NVFP4 reference's own error")


def dist_of(args: dict) -> str:
    return args.get("dist") or os.environ.get(DIST_ENV) or "leaderboard"


def validate_case(args: dict) -> None:
    from reference import validate_shape

    missing = [key for key in ("m", "k", "l") if key not in args]
    if missing:
        raise ValueError(f"lacks {', '.join(missing)}: every case needs m, k, l and seed")
    validate_shape(args["m"], args["k"], args["l"])
    if args.get("dist") is not None and args["dist"] not in DISTRIBUTIONS:
        raise ValueError(f"dist {args['dist']!r} is not one of {', '.join(DISTRIBUTIONS)}")


def canary_regions(args: dict) -> list:
    """Input bytes overwritten with fresh random values (of the case's distribution) right before
    each start event, in eval/worker/native.cpp's region format: the whole vector b[0, :, l] for
    every l; A_CHUNKS 16-byte chunks spread over all of a, each at a phase of its own; and 4-byte
    chunks of the scales (SCALE_PICKS of sfa, VECTOR_SCALE_PICKS of the vector's sfb row), written
    with the same bytes in the plain and the permuted layout."""
    m, k, l = args["m"], args["k"], args["l"]
    dist = dist_of(args)
    mask = 0x03 if dist == "leaderboard" else 0xFF  # leaderboard bytes are 0..3
    half = k // 2
    regions: list = [[1, 0, N_PADDED * half, half, l, 0, mask]]  # b's storage is [l, 128, k/2]
    total = m * l * half  # a's storage is [l, m, k/2]
    height = min(A_CHUNKS, total // CHUNK)
    pitch = (total // height) // CHUNK * CHUNK
    regions.append([0, 0, pitch, CHUNK, height, pitch - CHUNK, mask])
    sf_k = k // 16
    if m % 128 or sf_k % 4:
        return regions  # no permuted layout: the scales stay as generated
    values = SCALE_VALUES[dist]
    import random

    chosen = random.Random(args["seed"]).sample(range(l * m * (sf_k // 4)), min(SCALE_CANDIDATES, l * m * (sf_k // 4)))
    sfa = [divmod(divmod(c, sf_k // 4)[0], m) + (c % (sf_k // 4),) for c in chosen]  # (l, m, 4-chunk of k)
    regions.append(_scale_table(2, [_plain(li, mi, rk, m, sf_k) for li, mi, rk in sfa], SCALE_PICKS, values))
    regions.append(_scale_table(4, [_permuted(li, mi, rk, m, sf_k) for li, mi, rk in sfa], SCALE_PICKS, values,
                                link=len(regions) - 1))
    vector = [(li, 0, rk) for li in range(l) for rk in range(sf_k // 4)]
    picks = min(VECTOR_SCALE_PICKS, len(vector))
    regions.append(_scale_table(3, [_plain(li, 0, rk, N_PADDED, sf_k) for li, _, rk in vector], picks, values))
    regions.append(_scale_table(5, [_permuted(li, 0, rk, N_PADDED, sf_k) for li, _, rk in vector], picks, values,
                                link=len(regions) - 1))
    return regions


def _scale_table(arg: int, offsets: list, picks: int, values: list, link: int = -1) -> dict:
    return {"arg": arg, "width": 4, "offsets": offsets, "picks": picks, "values": values, "link": link}


def _plain(li: int, mi: int, rk: int, rows: int, sf_k: int) -> int:
    """Byte offset of scales [mi, 4rk:4rk+4, li] in the plain layout's storage [l, rows, sf_k]."""
    return (li * rows + mi) * sf_k + rk * 4


def _permuted(li: int, mi: int, rk: int, rows: int, sf_k: int) -> int:
    """The same four scales in the permuted storage [l, rows/128, sf_k/4, 32, 4, 4] (row = rm*128 +
    a*32 + b is stored at [l, rm, rk, b, a, :])."""
    rm, within = divmod(mi, 128)
    a, b = divmod(within, 32)
    return ((((li * (rows // 128) + rm) * (sf_k // 4) + rk) * 32 + b) * 4 + a) * 4


def bytes_moved(args: dict) -> int:
    """Fewest bytes one GEMV must move: A and its scales, the vector and its scales, C written."""
    m, k, l = args["m"], args["k"], args["l"]
    return m * (k // 2) * l + m * (k // 16) * l + (k // 2) * l + (k // 16) * l + m * l * 2


_SOL_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+([0-9.]+)\s*$")


def speed_of_light_ns(args: dict, gpu_name: str) -> float | None:
    """task.yml's B200 speed-of-light table (in its description), on a B200 only."""
    if "B200" not in gpu_name:
        return None
    import yaml

    from eval.problem_folder import current

    description = str(yaml.safe_load(current().task_file.read_text()).get("description", ""))
    for line in description.splitlines():
        match = _SOL_ROW.match(line)
        if match and tuple(map(int, match.groups()[:3])) == (args["m"], args["k"], args["l"]):
            return float(match.group(4)) * 1e3
    return None


def baseline(args: dict):
    """The case's GEMV in bf16 on the dequantized data: torch.bmm -> cuBLAS. (launch, data)."""
    import torch

    import reference

    a, b, sfa, sfb, _, _, _ = reference.generate_input(**args)
    mat = reference.dequantize(a, sfa).to(torch.bfloat16).permute(2, 0, 1).contiguous()  # [l, m, k]
    vec = reference.dequantize(b[0:1], sfb[0:1]).to(torch.bfloat16).permute(2, 1, 0).contiguous()  # [l, k, 1]
    out = torch.empty(mat.shape[0], mat.shape[1], 1, dtype=torch.bfloat16, device=mat.device)
    return (lambda: torch.bmm(mat, vec, out=out)), (mat, vec, out)


def baseline_bytes(args: dict) -> int:
    m, k, l = args["m"], args["k"], args["l"]
    return (m * k + k + m) * l * 2


def accuracy(args: dict, output) -> dict:
    """Relative error, Pearson and max error of output against the unquantized fp32 product, and
    the same for the exact reference (the quantization's own error). args carry dist=quantized."""
    import torch

    import reference

    data = reference.generate_input(**args)
    torch.manual_seed(args["seed"])  # generate_real draws the same numbers after the same seed
    a_real, b_real = reference.generate_real(args["m"], args["k"], args["l"])
    exact = torch.einsum("mkl,kl->ml", a_real.double(), b_real[0].double()).unsqueeze(1)
    return {"vs_fp32": _errors(output, exact), "reference_vs_fp32": _errors(reference.ref_kernel(data), exact)}


def _errors(out, ref) -> dict:
    import torch

    o, r = out.double().flatten(), ref.double().flatten()
    return {"rel_err": float((o - r).norm() / r.norm()), "pearson": float(torch.corrcoef(torch.stack((o, r)))[0, 1]),
            "max_abs_err": float((o - r).abs().max()), "ref_rms": float(r.pow(2).mean().sqrt())}
