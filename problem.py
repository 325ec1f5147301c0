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
A_CHUNKS = 64  # 16-byte chunks of a overwritten per run, at a random phase
CHUNK = 16
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


def canary_regions(args: dict) -> list[list[int]]:
    """[arg, offset, pitch, width, height, jitter, mask] byte regions of the inputs' storages:
    the whole vector b[0, :, l] for every l, and A_CHUNKS chunks of a spread over all of it."""
    m, k, l = args["m"], args["k"], args["l"]
    mask = 0x03 if dist_of(args) == "leaderboard" else 0xFF  # leaderboard bytes are 0..3
    half = k // 2
    regions = [[1, 0, N_PADDED * half, half, l, 0, mask]]  # b's storage is [l, 128, k/2]
    total = m * l * half  # a's storage is [l, m, k/2]
    height = min(A_CHUNKS, total // CHUNK)
    pitch = (total // height) // CHUNK * CHUNK
    regions.append([0, 0, pitch, CHUNK, height, pitch - CHUNK, mask])
    return regions


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
