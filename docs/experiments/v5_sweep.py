"""Write a copy of submission/v5.py that compiles in many more launch configurations, for
`python -m eval tune` to time on a new GPU (issue: v5 at the floor on every Hopper GPU).

The candidates (CANDIDATES below) were chosen on a CPU with ptxas (nvcc 13.0, sm_90a, `-Xptxas -v`):
every (threads per row group, rows per thread, block, steps in flight, 16-byte words per step) of
  one-group blocks (vector in registers) of 128 or 256 threads, rows 2 or 4, steps 1-4, words 1-2;
  several-group blocks (vector in shared memory) of (32|64, 128), (64|128, 256) threads, steps 1-2;
  small groups (16|32 of 128) with one word per step, steps 1-3, for the short-K case;
  (seventh session) 8 rows per thread with one word per step, and 512-thread blocks of 4 rows;
with, for each, the one or two register caps (min blocks per SM) that give the most resident blocks
without spilling and at least 16 warps per SM, and no more steps in flight than a thread of the
benchmark shapes has. Plus the kernels v5 already compiles in.

Usage (repo root), on the GPU to tune for:
  python docs/experiments/v5_sweep.py OUT.py && python -m eval tune OUT.py --runs 40 --write
  python docs/experiments/v5_sweep.py --adopt OUT.py   # its TUNED row into submission/v5.py, kernels added
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CANDIDATES = [
    (8, 2, 128, 2, 1, 1), (16, 2, 128, 1, 1, 8), (16, 2, 128, 1, 1, 10), (16, 2, 128, 2, 1, 1),
    (16, 2, 128, 2, 1, 6), (16, 2, 128, 2, 1, 8), (16, 2, 128, 3, 1, 5), (16, 2, 128, 3, 1, 6),
    (16, 4, 128, 1, 1, 6), (16, 4, 128, 1, 1, 8), (16, 4, 128, 2, 1, 5), (16, 4, 128, 2, 1, 6),
    (16, 4, 128, 3, 1, 4), (32, 2, 128, 1, 1, 10), (32, 2, 128, 1, 2, 8), (32, 2, 128, 2, 1, 1),
    (32, 2, 128, 2, 1, 6), (32, 2, 128, 2, 1, 8), (32, 2, 128, 2, 2, 6), (32, 2, 128, 3, 1, 5),
    (32, 2, 128, 3, 1, 6), (32, 4, 128, 1, 1, 8), (32, 4, 128, 1, 2, 6), (32, 4, 128, 2, 1, 6),
    (32, 4, 128, 2, 2, 4), (32, 4, 128, 3, 1, 4), (64, 2, 128, 1, 1, 10), (64, 2, 128, 1, 2, 8),
    (64, 2, 128, 2, 1, 1), (64, 2, 128, 2, 1, 8), (64, 2, 128, 2, 2, 6), (64, 2, 256, 1, 1, 5),
    (64, 2, 256, 1, 2, 4), (64, 2, 256, 2, 1, 4), (64, 2, 256, 2, 2, 3), (64, 4, 128, 1, 1, 8),
    (64, 4, 128, 1, 2, 6), (64, 4, 128, 2, 1, 6), (64, 4, 128, 2, 2, 4), (64, 4, 256, 1, 1, 4),
    (64, 4, 256, 1, 2, 3), (64, 4, 256, 2, 1, 3), (64, 4, 256, 2, 2, 2), (128, 2, 128, 1, 1, 4),
    (128, 2, 128, 1, 1, 8), (128, 2, 128, 1, 2, 6), (128, 2, 128, 1, 2, 8), (128, 2, 128, 2, 1, 6),
    (128, 2, 128, 2, 1, 8), (128, 2, 128, 2, 2, 4), (128, 2, 128, 2, 2, 5), (128, 2, 128, 3, 1, 5),
    (128, 2, 128, 3, 1, 6), (128, 2, 128, 4, 1, 4), (128, 2, 256, 1, 1, 5), (128, 2, 256, 1, 2, 4),
    (128, 2, 256, 2, 1, 4), (128, 2, 256, 2, 2, 3), (128, 4, 128, 1, 1, 6), (128, 4, 128, 1, 1, 8),
    (128, 4, 128, 1, 2, 5), (128, 4, 128, 1, 2, 6), (128, 4, 128, 2, 1, 4), (128, 4, 128, 2, 1, 5),
    (128, 4, 128, 2, 2, 4), (128, 4, 128, 3, 1, 4), (128, 4, 256, 1, 1, 4), (128, 4, 256, 1, 2, 3),
    (128, 4, 256, 2, 1, 3), (128, 4, 256, 2, 2, 2), (256, 2, 256, 1, 1, 2), (256, 2, 256, 1, 1, 4),
    (256, 2, 256, 1, 2, 3), (256, 2, 256, 1, 2, 4), (256, 2, 256, 2, 1, 3), (256, 2, 256, 2, 1, 4),
    (256, 4, 256, 1, 1, 3), (256, 4, 256, 1, 1, 4), (256, 4, 256, 1, 2, 2), (256, 4, 256, 1, 2, 3),
    (256, 4, 256, 2, 1, 2),
    # seventh session: 8 rows per thread (the vector's decode shared by twice the rows; 127-128
    # registers) and 512-thread blocks of 4 rows (64 registers, 32 warps per SM)
    (32, 8, 128, 1, 1, 4), (64, 8, 128, 1, 1, 4), (64, 8, 256, 1, 1, 2), (128, 8, 128, 1, 1, 4),
    (256, 8, 256, 1, 1, 2), (512, 4, 512, 1, 1, 2),
]


def sweep_source(candidates=CANDIDATES) -> str:
    """v5's source with KERNELS = the candidates (and v5's own), CONFIGS = each with no split, and
    its own extension name (so it never replaces v5's build)."""
    src = (ROOT / "submission" / "v5.py").read_text()
    namespace: dict = {}
    exec(re.search(r"^KERNELS = \[.*?\]$", src, re.S | re.M).group(0), namespace)
    kernels = sorted(set(map(tuple, candidates)) | set(namespace["KERNELS"]))
    src, n1 = re.subn(r"^KERNELS = \[.*?\]$", "KERNELS = " + repr(kernels), src, count=1, flags=re.S | re.M)
    src, n2 = re.subn(r"^CONFIGS = .*$", "CONFIGS = [kernel + (1,) for kernel in KERNELS]", src, count=1, flags=re.M)
    src, n3 = re.subn(r'name="nvfp4_gemv_v5"', 'name="nvfp4_gemv_v5_sweep"', src, count=1)
    assert n1 == n2 == n3 == 1, "submission/v5.py changed shape: update docs/experiments/v5_sweep.py"
    return src


def adopt(sweep_file: Path, target: Path = ROOT / "submission" / "v5.py") -> str:
    """Copy the TUNED rows `eval tune SWEEP --write` put into the sweep file into v5, and compile in
    the kernels those rows use (KERNELS gains them; CONFIGS follows KERNELS)."""
    sys.path.insert(0, str(ROOT))
    from eval import tune

    swept, current = tune.assigned_literal(sweep_file, "TUNED"), tune.assigned_literal(target, "TUNED")
    for key, row in swept.items():
        if row != current.get(key):
            tune.write_row(target, tune.TuneResult("", True, key, row))
    kernels, table = tune.assigned_literal(target, "KERNELS"), tune.assigned_literal(target, "TUNED")
    needed = [cfg[:6] for row in table.values() for cfg in row.values()]
    kernels += [k for k in dict.fromkeys(needed) if k not in kernels]
    src = target.read_text()
    src = re.sub(r"^KERNELS = \[.*?\]$", "KERNELS = [" + ",\n           ".join(
        ", ".join(map(repr, kernels[i:i + 4])) for i in range(0, len(kernels), 4)) + "]", src, count=1,
        flags=re.S | re.M)
    target.write_text(src)
    return f"{target}: TUNED rows {sorted(k[0] for k in table)}, {len(kernels)} kernels"


if __name__ == "__main__":
    if sys.argv[1] == "--adopt":
        print(adopt(Path(sys.argv[2])))
    else:
        Path(sys.argv[1]).write_text(sweep_source())
        print(f"{sys.argv[1]}: {len(CANDIDATES)} candidates")
