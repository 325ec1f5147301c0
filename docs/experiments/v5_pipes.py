"""Variants of v5's Hopper decode that move its selector arithmetic from the integer ALU pipe to the
FMA pipe (eighth session, issue: v5 and v4 at the floor on every Hopper GPU).

Per 32-bit word of A, v5 spends LOP3 (code ^ 0x8888..), 2 SHF (>> 16), 4 PRMT on the ALU pipe and
4 IDP on the FMA pipe (both 16 lanes per cycle per SM sub-partition on Hopper). The SASS of the case-1
loop counts 353 ALU-pipe and ~182 IMAD/IDP instructions per 128 B of A. Variants:
  hi      the two >> 16 become IMAD.HI by a pinned 2^16 (ptxas cannot turn it back into a shift)
  hinot   as hi, and code ^ 0x8888.. becomes ~code by IMAD (code * -1 + -1, pinned -1): the complement
          also flips the magnitude bits, so the negative lookup uses the reversed table
  hi1     only the first >> 16 (of the code itself) becomes IMAD.HI
Usage (repo root): python docs/experiments/v5_pipes.py DIR  -> DIR/v5_<variant>.py, each its own
extension name; then `python -m eval compare submission/v5.py DIR/v5_hi.py` on the GPU.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PINS = '''__device__ __forceinline__ uint32_t pinned_lut_low(uint32_t* s_lut_low) {
    if (threadIdx.x < 32) s_lut_low[threadIdx.x] = 0x03020100u;
    __syncthreads();
    return s_lut_low[threadIdx.x % 32];
}'''
PINS_NEW = '''// lo: the table's low word; y: 2^16 (x >> 16 as IMAD.HI); z: -1 (~x as IMAD); w: the reversed table's
// low word (bytes 12, 8, 6, 4: the lookup of a complemented code)
__device__ __forceinline__ uint4 pinned_lut_low(uint4* s_pins) {
    if (threadIdx.x < 32) s_pins[threadIdx.x] = make_uint4(0x03020100u, 0x10000u, 0xFFFFFFFFu, 0x0406080Cu);
    __syncthreads();
    return s_pins[threadIdx.x % 32];
}'''
LUT4 = '''    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(0x0C080604u), "r"(sel));
    return r;
}'''
HELPERS = LUT4 + '''
__device__ __forceinline__ uint32_t mulhi_pinned(uint32_t x, uint32_t y) {
    uint32_t r;
    asm("mul.hi.u32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(y));
    return r;
}
__device__ __forceinline__ uint32_t not_pinned(uint32_t x, uint32_t minus1) {
    uint32_t r;
    asm("mad.lo.u32 %0, %1, %2, %2;" : "=r"(r) : "r"(x), "r"(minus1));
    return r;
}
__device__ __forceinline__ uint32_t lut4_reversed(uint32_t sel, uint32_t rlo) {
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(rlo), "r"(0x00010203u), "r"(sel));
    return r;
}'''
DOT8 = '''    const uint32_t wn = w ^ 0x88888888u;
    pos = __dp4a((int)lut4(w, lo), (int)b_lo, pos);
    neg = __dp4a((int)lut4(wn, lo), (int)b_lo, neg);
    pos = __dp4a((int)lut4(w >> 16, lo), (int)b_hi, pos);
    neg = __dp4a((int)lut4(wn >> 16, lo), (int)b_hi, neg);'''
DOT8_NEW = {
    "hi": '''    const uint32_t wn = w ^ 0x88888888u;
    const uint32_t w_hi = mulhi_pinned(w, pins.y), wn_hi = mulhi_pinned(wn, pins.y);
    pos = __dp4a((int)lut4(w, pins.x), (int)b_lo, pos);
    neg = __dp4a((int)lut4(wn, pins.x), (int)b_lo, neg);
    pos = __dp4a((int)lut4(w_hi, pins.x), (int)b_hi, pos);
    neg = __dp4a((int)lut4(wn_hi, pins.x), (int)b_hi, neg);''',
    "hinot": '''    const uint32_t w_hi = mulhi_pinned(w, pins.y);
    const uint32_t wn = not_pinned(w, pins.z), wn_hi = not_pinned(w_hi, pins.z);
    pos = __dp4a((int)lut4(w, pins.x), (int)b_lo, pos);
    neg = __dp4a((int)lut4_reversed(wn, pins.w), (int)b_lo, neg);
    pos = __dp4a((int)lut4(w_hi, pins.x), (int)b_hi, pos);
    neg = __dp4a((int)lut4_reversed(wn_hi, pins.w), (int)b_hi, neg);''',
    "hi1": '''    const uint32_t wn = w ^ 0x88888888u;
    const uint32_t w_hi = mulhi_pinned(w, pins.y);
    pos = __dp4a((int)lut4(w, pins.x), (int)b_lo, pos);
    neg = __dp4a((int)lut4(wn, pins.x), (int)b_lo, neg);
    pos = __dp4a((int)lut4(w_hi, pins.x), (int)b_hi, pos);
    neg = __dp4a((int)lut4(wn >> 16, pins.x), (int)b_hi, neg);''',
}
EDITS = [  # (old, new, count) common to every variant: the pinned word becomes four
    ("void dot8(uint32_t w, uint32_t b_lo, uint32_t b_hi, uint32_t lo, int& pos, int& neg)",
     "void dot8(uint32_t w, uint32_t b_lo, uint32_t b_hi, uint4 pins, int& pos, int& neg)", 1),
    ("float2 sfb, uint32_t lo, float acc)", "float2 sfb, uint4 pins, float acc)", 1),
    ("lo, p0, n0);", "pins, p0, n0);", 2),
    ("lo, p1, n1);", "pins, p1, n1);", 2),
    ("    __shared__ uint32_t s_lut_low[32];\n    const uint32_t lo = pinned_lut_low(s_lut_low);",
     "    __shared__ uint4 s_pins[32];\n    const uint4 lo = pinned_lut_low(s_pins);", 1),
    ('name="nvfp4_gemv_v5"', None, 1),
]


def variant(name: str, src: str) -> str:
    edits = EDITS + [(PINS, PINS_NEW, 1), (LUT4, HELPERS, 1), (DOT8, DOT8_NEW[name], 1)]
    for old, new, count in edits:
        assert src.count(old) == count, f"submission/v5.py changed shape: {old[:60]!r}"
        src = src.replace(old, new if new is not None else f'name="nvfp4_gemv_v5_{name}"')
    return src


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    base = (ROOT / "submission" / "v5.py").read_text()
    for name in DOT8_NEW:
        (out / f"v5_{name}.py").write_text(variant(name, base))
        print(out / f"v5_{name}.py")
