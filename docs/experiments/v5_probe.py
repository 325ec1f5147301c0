"""Probe where v5's time goes (GPU): the same kernel with parts of the work removed, timed like the
harness (median of per-call runs, L2 flushed). Variants:
  full       v5 as submitted
  loads      every load kept (A, SFA, and the vector where a thread holds its own chunk); the dot
             products and their vector decode replaced by an XOR of the loaded words
  no_sfa     full compute, but SFA replaced by a constant (no SFA loads)
  noalloc    full, but A always loaded with L1::no_allocate (V > 1 normally lets L1 keep the sector)
  i2f        full, but the integer dot products become float by I2F instead of the 2^23 bit trick
  pos_only   full, but A's negative codes skipped (wrong results): 6 of the 11 instructions per
             32-bit word of A gone; how much of the time the A decode is
$PROBE_VARIANTS (space-separated) picks some of them; default: all.
Run from the repo root: python docs/experiments/v5_probe.py [configs...]
"""
import importlib.util
import os
import re
import statistics
import sys
from pathlib import Path

from torch.utils.cpp_extension import load_inline

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]  # the repo, and probe_timing beside this file
import reference  # noqa: E402
import probe_timing as timing  # noqa: E402
from eval import cases  # noqa: E402
from eval.records import size_values  # noqa: E402

spec = importlib.util.spec_from_file_location("v5", ROOT / "submission" / "v5.py")
v5 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(v5)

# the Hopper path's decode and math for one 16-byte word of every row (the loads stay)
COMPUTE = re.compile(r"(#ifndef NVFP4_HW_CVT\n\s+uint4 b0, b1;.*?)(#else)", re.S)
LOADS_ONLY = """#ifndef NVFP4_HW_CVT
                    #pragma unroll
                    for (int r = 0; r < R; ++r)
                        acc[r] += __int_as_float((ring[i][r].codes[v].x ^ ring[i][r].codes[v].y ^ ring[i][r].codes[v].z
                                                  ^ ring[i][r].codes[v].w ^ ring[i][r].sf[0]) & 0x1u);
                    if constexpr (kVectorInRegs)
                        acc[0] += __int_as_float((vec_ring[i].codes[v].x ^ vec_ring[i].sf[0]) & 0x1u);
"""
ROW_LOAD = "load_chunk<V>(ring[i][r], a_rows + (size_t)r * row_words, sfa_rows + (size_t)r * ks, chunk0 + c);"
# the rows' codes only; their scales set to 1.0 (e4m3 0x38) instead of loaded
ROW_LOAD_NO_SFA = """{
            #pragma unroll
            for (int v = 0; v < V; ++v)
                ring[i][r].codes[v] = load_codes(a_rows + (size_t)r * row_words + (chunk0 + c) * V + v, V > 1);
            ring[i][r].sf[0] = 0x38383838u;
            ring[i][r].sf[(V - 1) / 2] = 0x38383838u;
        }"""


VARIANTS = ("full", "loads", "no_sfa", "noalloc", "i2f", "pos_only")


def variant(name: str) -> str:
    src = v5.CUDA_SRC
    if name == "loads":
        src = COMPUTE.sub(lambda m: LOADS_ONLY + m.group(2), src, count=1)
    elif name == "no_sfa":
        src = src.replace(ROW_LOAD, ROW_LOAD_NO_SFA)
    elif name == "noalloc":
        src = src.replace("load_codes(codes_row + c * V + v, V > 1)", "load_codes(codes_row + c * V + v, false)")
    elif name == "i2f":
        src = src.replace("return __int_as_float(0x4B400000 + x) - 12582912.f;", "return (float)x;")
    elif name == "pos_only":
        src = src.replace("    neg = __dp4a((int)lut4(wn, lo), (int)b_lo, neg);\n", "")
        src = src.replace("    neg = __dp4a((int)lut4(wn >> 16, lo), (int)b_hi, neg);\n", "")
    assert name == "full" or src != v5.CUDA_SRC, name
    return src


def build(name: str):
    return load_inline(name=f"nvfp4_probe_{name}", cpp_sources=v5.BINDING_SRC, cuda_sources=variant(name),
                       functions=["gemv"], extra_cuda_cflags=["-O3", "-std=c++17"], verbose=False)


def configs_for(case, configs: list) -> list:
    """The configurations to probe on a case: those given, else v5's own choice on this device."""
    return configs or [v5.choose_config(*size_values(case.args))]


def main(configs):
    os.environ["TORCH_CUDA_ARCH_LIST"] = v5._arch_list()
    flusher = timing.L2Flusher()
    names = os.environ.get("PROBE_VARIANTS", " ".join(VARIANTS)).split()
    mods = {name: build(name) for name in names}
    for case in cases.select_cases("benchmarks"):
        data = reference.generate_input(**case.args)
        a, b, sfa, sfb, _, _, c = data
        for cfg in configs_for(case, configs):
            m, _, l = a.shape
            partial, arrivals = v5._split_scratch(c.device, m * l if cfg[-1] > 1 else 0)  # split-K scratch
            row = []
            for name, mod in mods.items():
                samples = timing.event_samples(lambda: mod.gemv(a, b, sfa, sfb, c, *cfg, partial, arrivals),
                                               flusher, 60)
                row.append(f"{name} {statistics.median(samples) / 1e3:7.2f}")
            print(f"{case.label:<14} {str(cfg):<18} " + "  ".join(row), flush=True)


if __name__ == "__main__":
    main([tuple(int(x) for x in arg.split(",")) for arg in sys.argv[1:]])
