"""`--emulate-blackwell` for CUDA built through torch's load_inline / load: an nvcc stand-in
(PYTORCH_NVCC) that builds for this GPU instead of sm_100/sm_103, and rewrites the Blackwell-only
PTX the compiler front end passed through from inline asm into exact equivalents before ptxas sees it:

  cvt.rn.f16x2.e2m1x2 d, a     two FP4 codes -> two fp16 (high nibble -> high half), decoded exactly:
                               the code's 3 magnitude bits placed at fp16 bits 9..11 are value * 2^-14,
                               one exact multiply by 2^14 (mul.rn.f16x2) restores it, sign bit copied
  ld/st.global.*.v8 (32-bit)   256-bit loads and stores split into two 128-bit ones (.v4), as are
  ld/st.global.*.v4 (64-bit)   the 64-bit-element forms (two .v2)
  add/sub/mul/fma.rn.f32x2     packed pairs of f32 in a .b64: the same operation on each half (the
                               packed forms are defined element-wise, same rounding and modifiers)
  fma.rn.f32.f16 / .bf16       mixed precision: the f16/bf16 operands converted to f32 (exact), then
                               one f32 fma (the product of two f16 values is exact in f32 anyway)

What it cannot stand in for (tcgen05 / TMEM / UMMA, CuTe DSL SM100 atoms) still fails in ptxas, and
the judge names the feature. Usage: `python -m eval.worker.nvcc_emulate ARCH NVCC_ARGS...` (ARCH e.g.
90a), or by this file's path; the worker sets PYTORCH_NVCC to the latter. Runs in the submission's process tree: its outputs are
judged as always, and every time measured with it is labelled emulated.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

BLACKWELL_ARCH = re.compile(r"(?:compute|sm)_1[01]\d[af]?")

CVT_FP4 = re.compile(r"cvt\.rn\.f16x2\.e2m1x2\s+([%\w.]+)\s*,\s*([%\w.]+)\s*;")
WIDE = re.compile(r"(?P<op>ld|st)\.global(?P<quals>(?:\.[\w:]+)*?)\.(?P<vec>v8|v4)\.(?P<type>[bfsu](?:32|64))\s+"
                  r"(?P<rest>[^;]*);")


def cvt_fp4(match: re.Match, counter: list) -> str:
    counter[0] += 1
    d, a, n = match.group(1), match.group(2), counter[0]
    t = f"%emu_fp4_{n}_"
    return ("{\n"
            f"\t.reg .b32 {t}<7>;\n"
            f"\tcvt.u32.u8 {t}0, {a};\n"
            f"\tand.b32 {t}1, {t}0, 7;\n"             # low code's magnitude bits
            f"\tshl.b32 {t}1, {t}1, 9;\n"
            f"\tand.b32 {t}2, {t}0, 8;\n"             # low sign -> bit 15
            f"\tshl.b32 {t}2, {t}2, 12;\n"
            f"\tand.b32 {t}3, {t}0, 112;\n"           # high code's magnitude bits (4..6) -> 25..27
            f"\tshl.b32 {t}3, {t}3, 21;\n"
            f"\tand.b32 {t}4, {t}0, 128;\n"           # high sign (bit 7) -> bit 31
            f"\tshl.b32 {t}4, {t}4, 24;\n"
            f"\tor.b32 {t}5, {t}1, {t}2;\n"
            f"\tor.b32 {t}5, {t}5, {t}3;\n"
            f"\tor.b32 {t}5, {t}5, {t}4;\n"
            f"\tmov.b32 {t}6, 0x74007400;\n"          # 2^14 in both fp16 halves
            f"\tmul.rn.f16x2 {d}, {t}5, {t}6;\n"      # exact
            "}")


PACKED = re.compile(r"(?P<op>add|sub|mul|fma)(?P<mods>(?:\.(?:rn|rz|rm|rp|ftz|sat))*)\.f32x2\s+(?P<args>[^;]*);")
MIXED_FMA = re.compile(r"fma(?P<mods>(?:\.(?:rn|rz|rm|rp|ftz|sat|relu))*)\.f32\.(?P<src>f16|bf16)\s+(?P<args>[^;]*);")


def packed_f32x2(match: re.Match, counter: list) -> str:
    counter[0] += 1
    op, mods = match.group("op"), match.group("mods")
    regs = _split_operands(match.group("args"))
    d, sources = regs[0], regs[1:]
    t = f"%emu_x2_{counter[0]}_"
    lines = ["{", f"\t.reg .f32 {t}<{2 * len(sources) + 2}>;"]
    for i, src in enumerate(sources):
        lines.append(f"\tmov.b64 {{{t}{2 * i}, {t}{2 * i + 1}}}, {src};")
    out_lo, out_hi = 2 * len(sources), 2 * len(sources) + 1
    for half, out in ((0, out_lo), (1, out_hi)):
        operands = ", ".join(f"{t}{2 * i + half}" for i in range(len(sources)))
        lines.append(f"\t{op}{mods}.f32 {t}{out}, {operands};")
    lines += [f"\tmov.b64 {d}, {{{t}{out_lo}, {t}{out_hi}}};", "}"]
    return "\n".join(lines)


def mixed_fma(match: re.Match, counter: list) -> str:
    counter[0] += 1
    d, a, b, c = _split_operands(match.group("args"))
    t = f"%emu_mix_{counter[0]}_"
    src = match.group("src")
    return ("{\n"
            f"\t.reg .f32 {t}<2>;\n"
            f"\tcvt.f32.{src} {t}0, {a};\n"
            f"\tcvt.f32.{src} {t}1, {b};\n"
            f"\tfma{match.group('mods')}.f32 {d}, {t}0, {t}1, {c};\n"
            "}")


def _split_operands(text: str) -> list[str]:
    return [x.strip() for x in text.strip().strip("{}").split(",")]


def _address(addr: str, plus: int) -> str:
    inner = addr.strip()[1:-1].strip()
    m = re.match(r"^(.*?)([+-]\s*\d+)?$", inner)
    base, off = m.group(1).strip(), int(m.group(2).replace(" ", "")) if m.group(2) else 0
    return f"[{base}+{off + plus}]" if off + plus else f"[{base}]"


def split_wide(match: re.Match) -> str:
    vec, typ = match.group("vec"), match.group("type")
    bits = int(typ[1:])
    if (vec, bits) not in (("v8", 32), ("v4", 64)):
        return match.group(0)  # already 128 bits or narrower
    half = "v4" if vec == "v8" else "v2"
    quals = re.sub(r"\.L2::256B", "", match.group("quals"))
    head = f"{match.group('op')}.global{quals}.{half}.{typ}"
    rest = match.group("rest")
    if match.group("op") == "ld":
        regs_text, addr = rest.rsplit(",", 1)
        regs = _split_operands(regs_text)
        k = len(regs) // 2
        return (f"{head} {{{', '.join(regs[:k])}}}, {_address(addr, 0)};\n\t"
                f"{head} {{{', '.join(regs[k:])}}}, {_address(addr, 16)};")
    addr, regs_text = rest.split(",", 1)
    regs = _split_operands(regs_text)
    k = len(regs) // 2
    return (f"{head} {_address(addr, 0)}, {{{', '.join(regs[:k])}}};\n\t"
            f"{head} {_address(addr, 16)}, {{{', '.join(regs[k:])}}};")


def rewrite_ptx(text: str) -> str:
    counter = [0]
    text = CVT_FP4.sub(lambda m: cvt_fp4(m, counter), text)
    text = PACKED.sub(lambda m: packed_f32x2(m, counter), text)
    text = MIXED_FMA.sub(lambda m: mixed_fma(m, counter), text)
    return WIDE.sub(split_wide, text)


def retarget(args: list[str], arch: str) -> list[str]:
    """nvcc arguments with every sm_100/103/110 target replaced by this GPU's (e.g. 90a)."""
    out, skip, seen = [], False, False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg in ("-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code", "--gpu-code") and \
                i + 1 < len(args) and BLACKWELL_ARCH.search(args[i + 1]):
            skip = True
            continue
        if BLACKWELL_ARCH.search(arg) and arg.startswith(("-gencode", "--generate-code", "-arch", "--gpu-architecture",
                                                          "-code", "--gpu-code")):
            continue
        seen = seen or ("arch=compute_" in arg or arg.startswith(("-arch", "--gpu-architecture")))
        out.append(arg)
    return out + ([] if seen and any(f"compute_{arch}" in a for a in out) else
                  [f"-gencode=arch=compute_{arch},code=sm_{arch}"])


def compile_with_rewrite(arch: str, args: list[str]) -> int:
    """Run nvcc's own steps (--dryrun) with the PTX rewrite between the front end and ptxas."""
    nvcc = os.environ.get("EVAL_REAL_NVCC") or "nvcc"
    args, depfile = without_depfile(retarget(args, arch))
    with tempfile.TemporaryDirectory(prefix="nvcc-emulate-") as keep:
        plan = subprocess.run([nvcc, *args, "--dryrun", "--keep", "--keep-dir", keep], capture_output=True,
                              text=True)
        if plan.returncode != 0:
            sys.stderr.write(plan.stderr)
            return plan.returncode
        lines = ["set -ae"]
        for line in plan.stderr.splitlines():
            if not line.startswith("#$ "):
                continue
            command = line[3:]
            if command.startswith("--"):  # nvcc's own pseudo-steps ("-- Filter Dependencies --")
                continue
            assignment = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", command)
            lines.append(f"{assignment.group(1)}={shlex.quote(assignment.group(2))}" if assignment else command)
            ptx = re.search(r'-o\s+"?([^"\s]+\.ptx)"?', command)
            if "cicc" in command and ptx:
                lines.append(f"{shlex.quote(sys.executable)} {shlex.quote(os.path.abspath(__file__))} --rewrite "
                             f"{shlex.quote(ptx.group(1))}")
        code = subprocess.run(["bash", "-c", "\n".join(lines)]).returncode
    if code == 0 and depfile:
        write_depfile(depfile, args)
    return code


def without_depfile(args: list[str]) -> tuple[list[str], str | None]:
    """torch's ninja build asks nvcc for a dependency file (-MD -MF FILE); nvcc makes it in a step of
    its own that --dryrun cannot replay, so the stand-in drops the flags and writes the file itself."""
    out, depfile, skip = [], None, False
    for i, arg in enumerate(args):
        if skip:
            skip = False
        elif arg == "-MD":
            continue
        elif arg == "-MF" and i + 1 < len(args):
            depfile, skip = args[i + 1], True
        else:
            out.append(arg)
    return out, depfile


def write_depfile(path: str, args: list[str]) -> None:
    """The object depends on its source (enough for a one-off build: ninja rebuilds when the source changes)."""
    value = lambda flag: args[args.index(flag) + 1] if flag in args[:-1] else None  # noqa: E731
    target, source = value("-o"), value("-c")
    if target and source:
        Path(path).write_text(f"{target}: {source}\n")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--rewrite"]:
        path = Path(argv[1])
        path.write_text(rewrite_ptx(path.read_text()))
        return 0
    return compile_with_rewrite(argv[0], argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
