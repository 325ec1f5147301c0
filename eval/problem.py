"""What the judge needs to know about this problem beyond the leaderboard's contract (NVFP4 GEMV).

The contract (task.yml, reference.py's generate_input / check_implementation, custom_kernel) says
how to make inputs and how to check an output. To judge a run that the submission cannot have
prepared for, the judge also needs: which input bytes it may overwrite with fresh random values right
before the start event (the canaries, and the bytes' range in the case's data distribution), which
inputs a kernel must not modify, where the pre-filled output is, and which distribution covers every
value the format can hold (for the narrow-data check).
"""
from __future__ import annotations

import os

INPUT_NAMES = ("a", "b", "sfa", "sfb", "sfa_permuted", "sfb_permuted")  # a kernel may write only c
OUTPUT_ARG = 6  # c, pre-filled with random values
A_CHUNKS = 64  # 16-byte chunks of a overwritten per run, at a random phase
CHUNK = 16
N_PADDED = 128  # rows of b and sfb; row 0 is the vector
FULL_RANGE = {"dist": "stress"}  # every FP4 code in both nibbles, scales over the e4m3 range
NARROW_NOTE = ("correct only on narrow data: right on the leaderboard's inputs (FP4 high nibble 0, scales 0..2) "
               "but wrong on full-range data (every FP4 code, scales over the e4m3 range)")


def dist_of(args: dict) -> str:
    return args.get("dist") or os.environ.get("NVFP4_GEMV_DIST") or "leaderboard"


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
