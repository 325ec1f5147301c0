"""v4: CuTe DSL, per-shape tuning of v3, and a cheaper software FP4 decode on Hopper.

Adds over v3: a thread owns R rows instead of one, so each decoded vector chunk feeds R rows; the
tile shape (threads per row TK, rows per thread R, threads per CTA) is chosen per benchmark shape and
device from a table measured with `python -m eval.tune`, with a rule for any other valid shape. Below
sm_100 the FP4 codes become int8 through a byte lookup (prmt, whose sign-replicate mode splits
positive and negative codes) and int8 dot products (dp4a), exact; sm_100+ keeps the hardware cvt and
fma.rn.f16x2. Rows are declared 16-byte aligned (cute.assume), so A and b load as ld.global.v4; each
thread loads one K tile (A, the vector, and one 32-bit word of 4 scales per row) before decoding it.
v4.5: the plain scale layout instead of the permuted one (a row's scale words for consecutive K tiles
are consecutive, so a warp's scale loads coalesce); the prmt table's low word pinned in an ordinary
register (as a literal ptxas copied it before every prmt); a tile option that decodes the vector once
per CTA into shared memory. v4.6 (this version): the rows' A and scale words, and on the per-thread
path the vector and its scale word, load with v5's instruction (ld.global.nc; 16-byte pieces with L1
no-allocate and a 256-byte L2 prefetch) instead of a plain ld.global (the shared-vector path still
loads its slab of the vector plainly), and a tile may cap registers (fifth element, CTAs per SM),
which makes ptxas keep a 4-row tile's loads together instead of spreading them through the decode. Tiles per device (TUNED, keyed by device_key(); `python
-m eval tune submission/v4.py --write`); the compiled kernel's arguments are packed once per tile and
shape (host cost 9-14 us a call). Measured (`make rank`, 2026-11-22, floors in the same call): H100
29.80 / 52.81 / 17.13 us = 1.07 / 1.04 / 1.04 x the read floor (v4.5: 33.65 / 57.43 / 19.23); H200
23.28 / 40.84 / 14.62 us = 1.08 / 1.09 / 1.10 x (v4.5: 25.98 / 43.92 / 15.93); see docs/perf-notes.md
(tenth session).
"""
import ctypes
import math

import torch

import cutlass
import cutlass.cute as cute
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import make_ptr
from cutlass.cutlass_dsl import T, dsl_user_op

from task import input_t, output_t

TILE_M, TILE_K = 128, 64  # the scale layout's atom: 128 rows, 4 scale blocks of 16
c_dtype = cutlass.Float16
THREADS_PER_ROW = 4


def _asm(result_type, args, text, constraints, loc=None, ip=None):
    return llvm.inline_asm(result_type, [a.ir_value(loc=loc, ip=ip) for a in args], text, constraints,
                           has_side_effects=False, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)


@dsl_user_op
def fp4_pair(word: cutlass.Int32, i: int, *, loc=None, ip=None) -> cutlass.Int32:
    """Codes 2i and 2i+1 of a word of 8 as half2 bits, exact (sm_100+ hardware conversion)."""
    text = (f"{{\n\t.reg .b8 q;\n\t.reg .b32 t;\n\tshr.u32 t, $1, {8 * i};\n\tcvt.u8.u32 q, t;\n\t"
            "cvt.rn.f16x2.e2m1x2 $0, q;\n\t}")
    return cutlass.Int32(_asm(T.i32(), [cutlass.Int32(word)], text, "=r,r", loc, ip))


@dsl_user_op
def hfma2(a: cutlass.Int32, b: cutlass.Int32, c: cutlass.Int32, *, loc=None, ip=None) -> cutlass.Int32:
    return cutlass.Int32(_asm(T.i32(), [cutlass.Int32(a), cutlass.Int32(b), cutlass.Int32(c)],
                              "fma.rn.f16x2 $0, $1, $2, $3;", "=r,r,r,r", loc, ip))


@dsl_user_op
def half2_sum(h: cutlass.Int32, *, loc=None, ip=None) -> cutlass.Float32:
    return cutlass.Float32(_asm(T.f32(), [cutlass.Int32(h)],
                                "{\n\t.reg .b16 lo, hi;\n\t.reg .f32 x, y;\n\tmov.b32 {lo, hi}, $1;\n\t"
                                "cvt.f32.f16 x, lo;\n\tcvt.f32.f16 y, hi;\n\tadd.f32 $0, x, y;\n\t}", "=f,r", loc, ip))


@dsl_user_op
def e4m3_pair(word: cutlass.Int32, i: int, *, loc=None, ip=None) -> cutlass.Int32:
    """Scale bytes 2i and 2i+1 of a word as half2 bits (cvt.rn.f16x2.e4m3x2, native from sm_89)."""
    half = "l" if i == 0 else "h"
    text = ("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, $1;\n\t"
            f"cvt.rn.f16x2.e4m3x2 $0, {half};\n\t}}")
    return cutlass.Int32(_asm(T.i32(), [cutlass.Int32(word)], text, "=r,r", loc, ip))


@dsl_user_op
def half_to_f32(h2: cutlass.Int32, i: int, *, loc=None, ip=None) -> cutlass.Float32:
    """Lane i of half2 bits as f32."""
    half = "l" if i == 0 else "h"
    text = f"{{\n\t.reg .b16 l, h;\n\tmov.b32 {{l, h}}, $1;\n\tcvt.f32.f16 $0, {half};\n\t}}"
    return cutlass.Float32(_asm(T.f32(), [cutlass.Int32(h2)], text, "=f,r", loc, ip))


@dsl_user_op
def load_words(address: cutlass.Int64, n: int, *, loc=None, ip=None) -> list:
    """n (1 or 4) 32-bit words at a global address, read-only: v5's load instruction (ld.global.nc; for
    16 bytes L1 not allocated and a 256-byte L2 prefetch), measured 7-11 % faster than the plain
    ld.global the tensor loads emit. (Where ptxas places the loads is set by the tile's register cap,
    not by this: docs/perf-notes.md, tenth session.)"""
    addr = [cutlass.Int64(address).ir_value(loc=loc, ip=ip)]
    if n == 1:
        return [cutlass.Int32(llvm.inline_asm(T.i32(), addr, "ld.global.nc.b32 $0, [$1];", "=r,l",
                                              has_side_effects=True, is_align_stack=False,
                                              asm_dialect=llvm.AsmDialect.AD_ATT))]
    words = llvm.inline_asm(llvm.StructType.get_literal([T.i32()] * 4), addr,
                            "ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l",
                            has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return [cutlass.Int32(llvm.extractvalue(T.i32(), words, [i], loc=loc, ip=ip)) for i in range(4)]


def tile_words(tile) -> list:
    """A K tile's 8 words of codes (a slice of 8 Int32 in global memory), as two 16-byte loads."""
    address = tile.iterator.toint()
    return load_words(address, 4) + load_words(address + 16, 4)


def scale_word(scales: cute.Tensor, coord: tuple) -> cutlass.Int32:
    """One 32-bit word of scales (a row's 4 scales of one K tile) at coord."""
    return load_words((scales.iterator + scales.layout(coord)).toint(), 1)[0]


def scales4(word: cutlass.Int32) -> list:
    """The 4 e4m3 scales of one row and one K tile (one 32-bit word of the scales) as f32."""
    pairs = [e4m3_pair(word, 0), e4m3_pair(word, 1)]
    return [half_to_f32(pairs[blk // 2], blk % 2) for blk in range(4)]


# prmt table: byte i of {LUT_LOW, 0x0C080604} is 2x the e2m1 magnitude of code i; a selector nibble
# with bit 3 set (a negative code) returns the table byte's sign, 0. The high word is an immediate in
# the SASS; the low word comes in as `lo`, a register the kernel reads back from shared memory at a
# per-lane address (in the kernel): as a literal ptxas keeps it in a uniform register and copies it
# before every prmt (145 IMAD.U32 in a 4-row one-tile loop of ~700 instructions)
LUT_LOW = 0x03020100
_LUT_HI = "mov.b32 hi, 0x0C080604;\n\t"


@dsl_user_op
def signed4(codes: cutlass.Int32, lo: cutlass.Int32, *, loc=None, ip=None) -> cutlass.Int32:
    """4 codes (low 16 bits) -> 4 signed int8 lanes of 2x their value (the vector's side)."""
    text = ("{\n\t.reg .b32 hi, p, n;\n\t" + _LUT_HI +
            "prmt.b32 p, $2, hi, $1;\n\txor.b32 n, $1, 0x8888;\n\tprmt.b32 n, $2, hi, n;\n\t"
            "sub.u32 n, 0x80808080, n;\n\txor.b32 n, n, 0x80808080;\n\tor.b32 $0, n, p;\n\t}")
    return cutlass.Int32(_asm(T.i32(), [cutlass.Int32(codes), cutlass.Int32(lo)], text, "=r,r,r", loc, ip))


@dsl_user_op
def block_dot(w0: cutlass.Int32, w1: cutlass.Int32, b0: cutlass.Int32, b1: cutlass.Int32, b2: cutlass.Int32,
              b3: cutlass.Int32, lo: cutlass.Int32, *, loc=None, ip=None) -> cutlass.Float32:
    """Sum over one 16-code block (two words of A) of (2a)(2b), exact, as f32: positive and negative
    codes of A looked up separately (prmt) and dotted with the vector's int8 lanes (dp4a)."""
    def word(w, lo_b, hi_b):
        return (f"prmt.b32 t, $7, hi, {w};\n\tdp4a.s32.s32 p, t, {lo_b}, p;\n\t"
                f"xor.b32 x, {w}, 0x88888888;\n\tprmt.b32 t, $7, hi, x;\n\tdp4a.s32.s32 n, t, {lo_b}, n;\n\t"
                f"shr.u32 t, {w}, 16;\n\tprmt.b32 t, $7, hi, t;\n\tdp4a.s32.s32 p, t, {hi_b}, p;\n\t"
                f"shr.u32 t, x, 16;\n\tprmt.b32 t, $7, hi, t;\n\tdp4a.s32.s32 n, t, {hi_b}, n;\n\t")
    text = ("{\n\t.reg .b32 hi, t, x, p, n;\n\t" + _LUT_HI + "mov.b32 p, 0;\n\tmov.b32 n, 0;\n\t"
            + word("$1", "$3", "$4") + word("$2", "$5", "$6") +
            "sub.s32 p, p, n;\n\tcvt.rn.f32.s32 $0, p;\n\t}")
    args = [cutlass.Int32(v) for v in (w0, w1, b0, b1, b2, b3, lo)]
    return cutlass.Float32(_asm(T.f32(), args, text, "=f,r,r,r,r,r,r,r", loc, ip))


def dot_tile(acc, a_words, sfa_words, b_dec: list, sfb: list, lo, rows: int, hw: bool) -> None:
    """acc[r] += one K tile (4 scale blocks) of each of the thread's rows against the decoded vector
    b_dec (a list of its words: half2 pairs on the hardware path, else int8 lanes of 2x value) and its
    scales sfb (f32; on the int8 path already x 1/4). Traced inline (Python loops only)."""
    for r in range(rows):
        sfa = scales4(sfa_words[r])
        for blk in range(TILE_K // 16):
            scale = sfa[blk] * sfb[blk]
            if hw:
                part_sum = cutlass.Int32(0)
                for w in range(2):
                    word = 2 * blk + w
                    for i in range(4):
                        part_sum = hfma2(fp4_pair(a_words[r, word], i), b_dec[4 * word + i], part_sum)
                acc[r] = acc[r] + half2_sum(part_sum) * scale
            else:
                dot = block_dot(a_words[r, 2 * blk], a_words[r, 2 * blk + 1], *b_dec[4 * blk:4 * blk + 4], lo)
                acc[r] = acc[r] + dot * scale


def load_rows(rows_at: tuple, a_words, sfa_words, k_tile) -> None:
    """Issue the loads of one K tile of the thread's rows: A's words and one scale word per row.
    Traced inline (no control flow)."""
    gA32, mSFA, r0, row0, tile, bidz, rows = rows_at
    for r in range(rows):
        for i, word in enumerate(tile_words(gA32[r0 + r, None, tile, k_tile, bidz])):
            a_words[r, i] = word
        sfa_words[r] = scale_word(mSFA, (row0 + r, k_tile, bidz))


def compute_tile(acc, a_words, sfa_words, b_words, sfb_word, lo, rows: int, hw: bool) -> None:
    """Decode one tile of the vector once for all R rows (half2 pairs on the hardware path, else int8
    lanes of 2x value) and accumulate the rows' dot products. Traced inline."""
    sfb = scales4(sfb_word)
    if hw:
        b_list = [fp4_pair(b_words[word], i) for word in range(TILE_K // 8) for i in range(4)]
    else:
        b_list = []
        for word in range(TILE_K // 8):
            b_list += [signed4(b_words[word], lo), signed4(b_words[word] >> 16, lo)]
        sfb = [x * 0.25 for x in sfb]  # the int8 lanes carry 2a and 2b: (2a)(2b) = 4ab
    dot_tile(acc, a_words, sfa_words, b_list, sfb, lo, rows, hw)


@cute.kernel
def kernel(mA32: cute.Tensor, mB32: cute.Tensor, mSFA: cute.Tensor, mSFB: cute.Tensor, mC: cute.Tensor,
           tk: cutlass.Constexpr, rows: cutlass.Constexpr, hw: cutlass.Constexpr, threads: cutlass.Constexpr,
           shared: cutlass.Constexpr):
    bidx, _, bidz = cute.arch.block_idx()
    tidx, _, _ = cute.arch.thread_idx()
    rows_per_cta = (threads // tk) * rows
    ctas_per_tile = TILE_M // rows_per_cta
    tile, part = bidx // ctas_per_tile, bidx % ctas_per_tile   # 128-row tile, and which rows of it
    r0 = part * rows_per_cta + (tidx // tk) * rows              # first of this thread's rows in the tile
    row0 = tile * TILE_M + r0
    kq = tidx % tk                                              # this thread's share of the K tiles

    word_tiler = (TILE_M, TILE_K // 8)
    gA32 = cute.local_tile(mA32, word_tiler, (None, None, None))
    gB32 = cute.local_tile(mB32, word_tiler, (None, None, None))

    acc = cute.make_rmem_tensor(cute.make_layout((rows,)), cutlass.Float32)
    for r in cutlass.range_constexpr(rows):
        acc[r] = cutlass.Float32(0.0)
    smem = cutlass.utils.SmemAllocator()
    lo = cutlass.Int32(LUT_LOW)
    if cutlass.const_expr(not hw):
        # the prmt table's low word as an ordinary register: written once, read back per lane
        lut = smem.allocate_tensor(cutlass.Int32, cute.make_layout((32,)), 16)
        if tidx < 32:
            lut[tidx] = cutlass.Int32(LUT_LOW)
        cute.arch.barrier()
        lo = lut[tidx % 32]
    k_tiles = mSFA.layout[1].shape
    rows_at = (gA32, mSFA, r0, row0, tile, bidz, rows)
    a_words = cute.make_rmem_tensor(cute.make_layout((rows, TILE_K // 8)), cutlass.Int32)
    sfa_words = cute.make_rmem_tensor(cute.make_layout((rows,)), cutlass.Int32)
    if cutlass.const_expr(shared and not hw):
        # The CTA's groups of tk threads take the same K tiles, one slab of tk tiles per iteration:
        # the CTA decodes each slab of the vector once, every thread a word or a few of it, into one
        # of two shared buffers (one barrier per iteration), instead of each thread decoding its own
        # tile of it for its R rows. Buffer layout: decoded word d of tile q at (d % 4, q, d // 4), so
        # a thread reads its tile as 4 x 16 bytes and consecutive threads read consecutive 16 bytes.
        vec = smem.allocate_tensor(cutlass.Int32, cute.make_layout((4, tk, 4, 2), stride=(1, 4, 4 * tk, 16 * tk)), 16)
        vsf = smem.allocate_tensor(cutlass.Float32, cute.make_layout((4, tk, 2), stride=(1, 4, 4 * tk)), 16)
        slab_words = 8 * tk                      # packed words of the vector per slab
        mine = (slab_words + threads - 1) // threads
        for slab in range(0, k_tiles, tk):
            buf = (slab // tk) % 2
            k_tile = slab + kq
            v_words = cute.make_rmem_tensor(cute.make_layout((mine,)), cutlass.Int32)
            sfb_word = cute.make_rmem_tensor(cute.make_layout((1,)), cutlass.Int32)
            # every load of the slab first (the rows' tile, this thread's vector words and scale
            # word), then the decode: one wait on memory per slab
            if k_tile < k_tiles:
                load_rows(rows_at, a_words, sfa_words, k_tile)
            for i in cutlass.range_constexpr(mine):
                w = tidx + i * threads
                if w < slab_words:
                    if slab + w // 8 < k_tiles:
                        v_words[i] = mB32[0, slab * 8 + w, bidz]
            if tidx < tk:
                if slab + tidx < k_tiles:
                    sfb_word[0] = mSFB[0, slab + tidx, bidz]
            for i in cutlass.range_constexpr(mine):
                w = tidx + i * threads
                if w < slab_words:
                    if slab + w // 8 < k_tiles:
                        q, word = w // 8, w % 8
                        vec[2 * (word % 2), q, word // 2, buf] = signed4(v_words[i], lo)
                        vec[2 * (word % 2) + 1, q, word // 2, buf] = signed4(v_words[i] >> 16, lo)
            if tidx < tk:
                if slab + tidx < k_tiles:
                    s4 = scales4(sfb_word[0])
                    for blk in cutlass.range_constexpr(4):
                        vsf[blk, tidx, buf] = s4[blk] * 0.25  # the int8 lanes carry 2a and 2b: (2a)(2b) = 4ab
            cute.arch.barrier()
            if k_tile < k_tiles:
                b_dec = cute.make_rmem_tensor(cute.make_layout((4, 4), stride=(1, 4)), cutlass.Int32)
                for j in cutlass.range_constexpr(4):
                    b_dec[None, j].store(vec[None, kq, j, buf].load())
                sfb = []
                b_list = []
                for blk in cutlass.range_constexpr(4):
                    sfb.append(vsf[blk, kq, buf])
                for d in cutlass.range_constexpr(16):
                    b_list.append(b_dec[d % 4, d // 4])
                dot_tile(acc, a_words, sfa_words, b_list, sfb, lo, rows, hw)
    else:
        # each thread decodes the vector's tiles it uses: load a K tile (A, b and their scale words,
        # every load before any decode), then compute it. (A ring of two tiles, the next tile's
        # loads issued before this one's decode, was slower on every case: docs/perf-notes.md.)
        b_words = cute.make_rmem_tensor(cute.make_layout((TILE_K // 8,)), cutlass.Int32)
        sfb_word = cute.make_rmem_tensor(cute.make_layout((1,)), cutlass.Int32)
        for k_tile in range(kq, k_tiles, tk):
            for i, word in enumerate(tile_words(gB32[0, None, 0, k_tile, bidz])):
                b_words[i] = word
            sfb_word[0] = scale_word(mSFB, (0, k_tile, bidz))
            load_rows(rows_at, a_words, sfa_words, k_tile)
            compute_tile(acc, a_words, sfa_words, b_words, sfb_word[0], lo, rows, hw)

    # a row's sum over its tk threads: butterfly within the warp, then (tk > 32) the warps' partial
    # sums through shared memory
    lanes = min(tk, 32)
    for r in cutlass.range_constexpr(rows):
        total = acc[r]
        for offset in cutlass.range_constexpr(lanes.bit_length() - 1):
            total += cute.arch.shuffle_sync_bfly(total, offset=lanes >> (offset + 1))
        acc[r] = total
    if cutlass.const_expr(tk > 32):
        part = smem.allocate_tensor(cutlass.Float32, cute.make_layout((threads // 32, rows), stride=(rows, 1)), 16)
        if tidx % 32 == 0:
            for r in cutlass.range_constexpr(rows):
                part[tidx // 32, r] = acc[r]
        cute.arch.barrier()
        if kq == 0:
            first_warp = (tidx // tk) * (tk // 32)
            for r in cutlass.range_constexpr(rows):
                total = part[first_warp, r]
                for w in cutlass.range_constexpr(1, tk // 32):
                    total += part[first_warp + w, r]
                mC[row0 + r, 0, bidz] = total.to(cutlass.Float16)
    else:
        if kq == 0:
            for r in cutlass.range_constexpr(rows):
                mC[row0 + r, 0, bidz] = acc[r].to(cutlass.Float16)


def scale_words(ptr: cute.Pointer, mn: int, k: int, l: int) -> cute.Tensor:
    """The plain scales [mn, k/16, l] (memory order l, mn, k/16) read as 32-bit words (mn, k/64, l): a
    word holds one row's 4 scales of one 64-wide K tile, and the threads of a row, which take
    consecutive K tiles, read consecutive words. (The permuted layout [32, 4, mn/128, 4, k/64, l] keeps
    the same word per row and tile, but 512 bytes apart from tile to tile: each lane's scale load was
    its own 32-byte sector, 4x the bytes used.)"""
    k_tiles = cute.ceil_div(k, TILE_K)
    return cute.make_tensor(ptr, cute.make_layout((mn, k_tiles, l), stride=(k_tiles, 1, mn * k_tiles)))


@cute.jit
def my_kernel(a32_ptr: cute.Pointer, b32_ptr: cute.Pointer, sfa_ptr: cute.Pointer, sfb_ptr: cute.Pointer,
              c_ptr: cute.Pointer, problem_size: tuple, tk: cutlass.Constexpr, rows: cutlass.Constexpr,
              hw: cutlass.Constexpr, threads: cutlass.Constexpr, shared: cutlass.Constexpr,
              min_blocks: cutlass.Constexpr, carveout: cutlass.Constexpr):
    m, _, k, l = problem_size
    n_padded_128 = 128  # b and sfb are padded to 128 rows (row 0 is the vector)
    kw = cute.assume(k // 8, divby=8)  # 32-bit words of 8 codes per row (k % 64 == 0): rows stay 16-byte aligned, so loads vectorise
    a32 = cute.make_tensor(a32_ptr, cute.make_layout((m, kw, l), stride=(kw, 1, m * kw)))
    b32 = cute.make_tensor(b32_ptr, cute.make_layout((n_padded_128, kw, l), stride=(kw, 1, n_padded_128 * kw)))
    sfa = scale_words(sfa_ptr, m, k, l)
    sfb = scale_words(sfb_ptr, n_padded_128, k, l)
    c = cute.make_tensor(c_ptr, cute.make_layout((m, 1, l), stride=(1, 1, m)))
    ctas_per_tile = TILE_M // ((threads // tk) * rows)
    kernel(a32, b32, sfa, sfb, c, tk, rows, hw, threads, shared).launch(
        grid=(cute.ceil_div(m, TILE_M) * ctas_per_tile, 1, l), block=[threads, 1, 1], cluster=(1, 1, 1),
        min_blocks_per_mp=min_blocks, preferred_smem_carveout=carveout)


_compiled = {}


def hardware_fp4() -> bool:
    """sm_100 and newer convert e2m1 in hardware; everything older decodes in software."""
    return torch.cuda.get_device_capability()[0] >= 10


def compile_kernel(hw: bool, tk: int = THREADS_PER_ROW, rows: int = 1, threads: int = 128, shared: int = 0,
                   min_blocks: int = 0):
    """Compile once per (decode path, threads per row, rows per thread, threads per CTA, vector decoded
    once per CTA into shared memory, CTAs per SM the registers must allow: 0 leaves ptxas free) and
    cache; the first call compiles."""
    key = (hw, tk, rows, threads, shared, min_blocks)
    if key not in _compiled:
        # with a register cap the DSL sizes the shared-memory carveout from a device query, which needs
        # CUDA initialised (a fresh process has not); with no device, the driver's default carveout (-1)
        carveout = None
        if min_blocks > 1:
            if torch.cuda.is_available():
                torch.cuda.init()
            else:
                carveout = -1
        _compiled[key] = cute.compile(my_kernel, *pointers((0,) * 5), (0, 0, 0, 0), tk, rows, hw, threads, shared,
                                      min_blocks, carveout)
    return _compiled[key]


# my_kernel's pointer arguments: a, b, sfa, sfb (plain layouts), c, with their element type and alignment
POINTER_KINDS = ((cutlass.Int32, 16), (cutlass.Int32, 16), (cutlass.Int32, 32), (cutlass.Int32, 32), (c_dtype, 16))


def pointers(addresses) -> tuple:
    """The five pointer arguments of my_kernel at these addresses (in POINTER_KINDS order)."""
    gmem = cute.AddressSpace.gmem
    return tuple(make_ptr(dtype, address, gmem, assumed_align=align)
                 for (dtype, align), address in zip(POINTER_KINDS, addresses))


def buffers(data: input_t) -> tuple:
    """The tensors behind my_kernel's pointers, in its order (a, b, the plain scales, c), and the
    problem size it takes."""
    a, b, sfa, sfb, _, _, c = data
    m, kh, l = a.shape
    return (a, b, sfa, sfb, c), (m, 1, kh * 2, l)


def check_scale_strides(data: input_t) -> None:
    """my_kernel reads the plain scales as [l][rows][k/16] bytes, the leaderboard's layout."""
    for sf in data[2:4]:
        rows, sf_k, l = sf.shape
        if sf.stride() != (sf_k, 1, rows * sf_k):
            raise ValueError(f"v4 expects scales laid out [l][rows][k/16]; got strides {sf.stride()}")


# Tiles per device, keyed by what the device reports (device_key(): name, SMs, memory bandwidth GB/s,
# L2 MiB), then by (m, k, l): (threads per row, rows per thread, threads per CTA, vector decoded once
# per CTA into shared memory: 0 or 1, the hardware path, whose decode is one cvt a pair, ignores it;
# optionally CTAs per SM the registers must allow).
# Rows come from `python -m eval tune submission/v4.py --write` on that GPU (docs/perf-notes.md); a GPU not listed
# takes the row of the listed one nearest in bandwidth per SM, a shape not listed choose_config's rule.
# A CTA covers at most one 128-row tile: (threads / threads per row) x rows per thread <= 128.
# The B200 row is reasoned, not measured (no B200 here): it takes the H200's picks, the GPU nearest it
# in bytes per second per SM.
TUNED = {
    ('NVIDIA H100 80GB HBM3', 132, 3352, 50): {
        (7168, 16384, 1): (256, 4, 256, 0, 3),
        (4096, 7168, 8): (128, 4, 256, 1, 3),
        (7168, 2048, 4): (32, 2, 128, 1),
    },
    ('NVIDIA H200', 132, 4814, 60): {
        (7168, 16384, 1): (32, 2, 128, 1),
        (4096, 7168, 8): (16, 2, 128, 1, 8),
        (7168, 2048, 4): (32, 4, 128, 1, 6),
    },
    ('NVIDIA B200', 148, 8000, 126): {
        (7168, 16384, 1): (32, 2, 128, 1),
        (4096, 7168, 8): (16, 2, 128, 1, 8),
        (7168, 2048, 4): (32, 4, 128, 1, 6),
    },
}
CONFIGS = [(tk, rows, 128, 0) for tk in (4, 8, 16, 32, 64, 128) for rows in (1, 2, 4)]
CONFIGS += [(tk, rows, 256, 0) for tk in (32, 64, 128, 256) for rows in (2, 4)]
# the vector decoded once per CTA (several row groups per CTA) into shared memory
CONFIGS += [(tk, rows, 128, 1) for tk in (16, 32, 64) for rows in (2, 4)]
CONFIGS += [(tk, rows, 256, 1) for tk in (32, 64, 128) for rows in (2, 4)]
# with a register cap (CTAs per SM): ptxas then keeps a K tile's loads together (uncapped, it spreads
# a 4-row tile's loads through the decode to save registers: 61 registers, 3 waits on memory)
CONFIGS += [(256, 4, 256, 0, 2), (256, 4, 256, 0, 3), (128, 4, 128, 0, 4), (128, 4, 128, 0, 6),
            (64, 4, 128, 0, 6), (128, 4, 256, 1, 3),
            (32, 4, 128, 1, 6), (32, 4, 128, 1, 8), (64, 4, 128, 1, 6), (16, 4, 128, 1, 6),
            (16, 2, 128, 1, 8), (32, 2, 128, 1, 8)]


def device_key() -> tuple:
    """(name, SMs, memory bandwidth GB/s, L2 MiB) of the current GPU, as TUNED is keyed."""
    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    gb_s = round(2 * getattr(p, "memory_clock_rate", 0) * getattr(p, "memory_bus_width", 0) / 8 / 1e6)
    return p.name, p.multi_processor_count, gb_s, round(p.L2_cache_size / 2**20)


def device_row(key: tuple) -> dict:
    """TUNED's row for this device: its own, else one listed under the same name and SM count, else
    the one nearest in bandwidth per SM; {} when the device reports no bandwidth."""
    if key in TUNED:
        return TUNED[key]
    for listed, row in TUNED.items():
        if listed[:2] == key[:2]:
            return row
    if key[2] <= 0:
        return {}
    per_sm = key[2] / key[1]
    return min(TUNED.items(), key=lambda item: abs(math.log(item[0][2] / item[0][1] / per_sm)))[1]


def choose_config(m: int, k: int, l: int) -> tuple[int, int, int, int]:
    """This device's tuned tile, otherwise more threads for longer rows (each keeps >= 4 K tiles), 2 rows each."""
    tuned = device_row(device_key()).get((m, k, l))
    if tuned is not None:
        return tuned
    tk = 2
    while tk < 8 and k // 64 >= 8 * tk:
        tk *= 2
    return tk, 2, 128, 0


_launches: dict = {}


def _launch(data: input_t, config: tuple):
    """The compiled kernel's executor and its packed arguments, made once per tile and shape: the DSL's
    per-call argument conversion (pointer wrapping, signature checks) costs 30-40 us a call. The
    packed arguments point at each Pointer's address slot, so a call with other buffers only writes
    the new addresses there (checked once; else the arguments are rebuilt on every call)."""
    config = tuple(config)
    key = (config, data[0].shape)
    launch = _launches.get(key)
    if launch is None:
        check_scale_strides(data)
        compiled = compile_kernel(hardware_fp4(), *config)
        tensors, size = buffers(data)
        ptrs = pointers(t.data_ptr() for t in tensors)
        exe_args, adapted = compiled.generate_execution_args(*ptrs, size)
        slots = [getattr(p, "_desc", None) for p in ptrs]
        in_place = all(s is not None and getattr(exe_args[i], "value", exe_args[i]) == ctypes.addressof(s)
                       for i, s in enumerate(slots))
        launch = _launches[key] = (compiled, compiled.to(None), exe_args, slots if in_place else None, (ptrs, adapted))
    return launch


def _run(data: input_t, config: tuple) -> None:
    compiled, executor, exe_args, slots, _ = _launch(data, config)
    tensors, size = buffers(data)
    if slots is None:  # this DSL version packs pointers differently: the slow, general call
        compiled(*pointers(t.data_ptr() for t in tensors), size)
        return
    for slot, t in zip(slots, tensors):
        slot.value = t.data_ptr()
    executor.run_compiled_program(exe_args)


def run_with(data: input_t, config: tuple) -> output_t:
    _run(data, config)
    return data[-1]


_configs: dict = {}


def custom_kernel(data: input_t) -> output_t:
    shape = data[0].shape
    config = _configs.get(shape)
    if config is None:
        m, kh, l = shape
        config = _configs[shape] = choose_config(m, kh * 2, l)
    return run_with(data, config)
