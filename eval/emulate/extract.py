"""What `--emulate-blackwell` would build for a submission, checked without a GPU.

For each `load_inline` / `load` call the submission makes at import (captured by running it with
those two replaced by recorders, `task` stubbed), the CUDA source and the flags torch would give nvcc
are built three ways: as written (its own Blackwell targets), for sm_90a with plain nvcc (what an
H100 needs without emulation), and for sm_90a through eval/worker/nvcc_emulate.py (what the worker
runs with the flag). For each Triton `tl.inline_asm_elementwise`, its asm is put in a small PTX
kernel (operands as registers of the constraint's type, as LLVM substitutes them) and assembled
for sm_100a, sm_90a, and sm_90a rewritten. Host-only CUDA libraries that torch's headers include
(cuBLAS, cuSPARSE, cuSOLVER) get declaration stubs when the toolkit lacks them: device code, the
only part checked, does not depend on them.

Usage: python -m eval.emulate.extract FILE... [--jobs N]   (one line per file; EXTRACT_JSON=PATH keeps every
result, EXTRACT_INCLUDE=DIR[:DIR] adds include folders, e.g. CUTLASS's, as the contest machine had them)
"""
from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAND_IN = ROOT / "eval" / "worker" / "nvcc_emulate.py"

CAPTURE = r"""
import json, os, sys, types
task = types.ModuleType("task")
task.input_t = task.output_t = object
sys.modules["task"] = task
from torch.utils import cpp_extension
builds = []
class Stop(Exception):
    pass
def record(kind):
    def call(*args, **kwargs):
        names = ("name", "cpp_sources", "cuda_sources") if kind == "load_inline" else ("name", "sources")
        kw = dict(zip(names, args)); kw.update(kwargs)
        if kind == "load":
            kw["cuda_sources"] = [open(s).read() for s in kw.get("sources", []) if s.endswith(".cu")]
        keep = {k: v for k, v in kw.items() if isinstance(v, (str, list, tuple, bool, type(None)))}
        keep["kind"] = kind
        keep["TORCH_CUDA_ARCH_LIST"] = os.environ.get("TORCH_CUDA_ARCH_LIST")
        builds.append(keep)
        return types.SimpleNamespace()
    return call
cpp_extension.load_inline = record("load_inline")
cpp_extension.load = record("load")
error = None
path = sys.argv[1]
source = open(path).read()
g = {"__name__": "submission", "__file__": path}
try:
    exec(compile(source, path, "exec"), g)
except BaseException as exc:  # after the builds: the rest of the import needs a GPU
    error = f"{type(exc).__name__}: {exc}"[:300]
if not builds:  # built lazily, inside a function: its arguments evaluated with the module's globals
    import ast
    for node in ast.walk(ast.parse(source)):
        func = getattr(node, "func", None)
        kind = getattr(func, "attr", getattr(func, "id", None))
        if not isinstance(node, ast.Call) or kind not in ("load_inline", "load"):
            continue
        def value(expr):
            try:
                return eval(compile(ast.Expression(expr), path, "eval"), g)
            except Exception:
                return None
        args = [value(a) for a in node.args]
        kwargs = {k.arg: value(k.value) for k in node.keywords if k.arg}
        try:
            cpp_extension.__dict__[kind](*args, **{k: v for k, v in kwargs.items() if v is not None})
        except Exception:
            pass
print("@@CAPTURE@@" + json.dumps({"builds": builds, "error": error}))
"""

STUBS = {
    "cublas_v2.h": "typedef struct cublasContext* cublasHandle_t;\ntypedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;\n",
    "cublasLt.h": "typedef struct cublasLtContext* cublasLtHandle_t;\n",
    "cusparse.h": "typedef struct cusparseContext* cusparseHandle_t;\n"
                  "typedef enum { CUSPARSE_STATUS_SUCCESS = 0 } cusparseStatus_t;\n",
    "cusolverDn.h": '#include "cusolver_common.h"\ntypedef struct cusolverDnContext* cusolverDnHandle_t;\n',
    "cusolver_common.h": "typedef enum { CUSOLVER_STATUS_SUCCESS = 0 } cusolverStatus_t;\n",
    "c10/cuda/impl/cuda_cmake_macros.h": "",
}


def capture(path: str) -> dict:
    """The load_inline / load calls the submission makes at import, with their arguments."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    path = os.path.abspath(path)
    out = subprocess.run([sys.executable, "-c", CAPTURE, path], capture_output=True, text=True, env=env,
                         timeout=300, cwd=os.path.dirname(path))
    for line in out.stdout.splitlines():
        if line.startswith("@@CAPTURE@@"):
            return json.loads(line[len("@@CAPTURE@@"):])
    return {"builds": [], "error": (out.stderr.strip().splitlines() or ["no output"])[-1][:300]}


def include_flags(stub: Path) -> list[str]:
    import torch

    base = Path(torch.__file__).parent / "include"
    nvcc_include = Path(subprocess.run(["which", "nvcc"], capture_output=True, text=True).stdout.strip()).parents[1] / "include"
    for name, text in STUBS.items():
        if not (nvcc_include / name).exists():
            (stub / name).parent.mkdir(parents=True, exist_ok=True)
            (stub / name).write_text("#pragma once\n" + text)
    extra = [f"-I{d}" for d in os.environ.get("EXTRACT_INCLUDE", "").split(os.pathsep) if d]  # e.g. CUTLASS's
    return [*extra, f"-I{stub}", f"-I{base}", f"-I{base / 'torch' / 'csrc' / 'api' / 'include'}",
            f"-I{sysconfig.get_paths()['include']}"]


def nvcc_flags(build: dict) -> list[str]:
    """torch's flags for the build (cpp_extension's ninja file), arch flags as torch would add them."""
    from torch.utils import cpp_extension

    extra = [str(f) for f in build.get("extra_cuda_cflags") or []]
    flags = [f"-DTORCH_EXTENSION_NAME={build.get('name', 'ext')}", *cpp_extension.COMMON_NVCC_FLAGS]
    if not any(re.match(r"-{1,2}(gencode|generate-code|arch|gpu-architecture)\b", f) for f in extra):
        arch = build.get("TORCH_CUDA_ARCH_LIST")
        if arch:
            old = os.environ.get("TORCH_CUDA_ARCH_LIST")
            os.environ["TORCH_CUDA_ARCH_LIST"] = arch
            try:
                flags += cpp_extension._get_cuda_arch_flags(extra)
            finally:
                os.environ.pop("TORCH_CUDA_ARCH_LIST") if old is None else os.environ.update(TORCH_CUDA_ARCH_LIST=old)
        else:  # torch would use the GPU it sees: on the contest machine, a B200
            flags.append("-gencode=arch=compute_100a,code=sm_100a")
    flags += ["--compiler-options", "-fPIC", *extra]
    if not any(f.startswith("-std=") for f in flags):
        flags.append("-std=c++17")
    return [f for f in flags if not f.startswith("-Xptxas=-v")]


def first_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if re.search(r"error|fatal|ptxas", ln, re.I)
             and "warning" not in ln.lower()]
    return (lines or [ln.strip() for ln in text.splitlines() if ln.strip()][-1:] or ["?"])[0][:240]


def build_cuda(build: dict, folder: Path) -> dict:
    """The three nvcc builds of one captured load_inline/load."""
    from eval.worker import nvcc_emulate

    sources = build.get("cuda_sources") or []
    text = "\n".join(sources) if isinstance(sources, (list, tuple)) else str(sources)
    if not build.get("no_implicit_headers"):
        text = "#include <torch/extension.h>\n" + text
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "k.cu").write_text(text)
    common = include_flags(folder / "stub") + ["-c", "k.cu", "-o", "k.o"]
    flags = nvcc_flags(build)

    def run(head, args):
        out = subprocess.run([*head, *args, *common], cwd=folder, capture_output=True, text=True, timeout=1200,
                             env={**os.environ, "EVAL_REAL_NVCC": "nvcc"})
        return {"ok": out.returncode == 0, "error": "" if out.returncode == 0 else first_error(out.stderr + out.stdout)}

    return {"as_written": run(["nvcc"], flags),
            "sm_90a_plain": run(["nvcc"], nvcc_emulate.retarget(flags, "90a")),
            "sm_90a_emulated": run([sys.executable, str(STAND_IN), "90a"], flags),
            "flags": " ".join(shlex.quote(f) for f in flags if not f.startswith("-D") or "arch" in f)}


REG = {"r": ".b32", "f": ".f32", "h": ".b16", "l": ".b64", "d": ".f64", "c": ".b16"}


def triton_asm(source: str) -> list[tuple[str, str, int]]:
    """(asm, constraints, line) of every tl.inline_asm_elementwise with literal asm and constraints
    (asm given by a module-level name, tl.constexpr(...) included, is resolved)."""
    tree = ast.parse(source)
    names = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Call) and value.args:
                value = value.args[0]
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                names[node.targets[0].id] = value.value

    def literal(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return names.get(node.id)
        return None

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "inline_asm_elementwise":
            args = dict(zip(("asm", "constraints"), node.args))
            args.update({k.arg: k.value for k in node.keywords})
            asm, constraints = literal(args.get("asm")), literal(args.get("constraints"))
            if asm and constraints:
                found.append((asm, constraints, node.lineno))
    return found


def triton_ptx(asm: str, constraints: str, target: str) -> str:
    """The asm in a kernel of its own, $N replaced by a register of its constraint's type."""
    decls, regs = [], []
    for i, c in enumerate(x.strip().lstrip("=") for x in constraints.split(",")):
        typ = REG.get(c, ".b32")
        decls.append(f".reg {typ} %o{i};")
        regs.append(f"%o{i}")
    body = re.sub(r"\$(\d+)", lambda m: regs[int(m.group(1))], asm)
    return (f".version 8.8\n.target {target}\n.address_size 64\n.visible .entry k() {{\n"
            + "\n".join(decls) + f"\n{body}\nret;\n}}\n")


def build_triton(asm: str, constraints: str, folder: Path) -> dict:
    from eval.worker import nvcc_emulate

    folder.mkdir(parents=True, exist_ok=True)

    def ptxas(target, text):
        (folder / "k.ptx").write_text(text)
        out = subprocess.run(["ptxas", f"-arch={target}", "k.ptx", "-o", "k.o"], cwd=folder, capture_output=True,
                             text=True)
        return {"ok": out.returncode == 0, "error": "" if out.returncode == 0 else first_error(out.stderr)}

    return {"as_written": ptxas("sm_100a", triton_ptx(asm, constraints, "sm_100a")),
            "sm_90a_plain": ptxas("sm_90a", triton_ptx(asm, constraints, "sm_90a")),
            "sm_90a_emulated": ptxas("sm_90a", nvcc_emulate.rewrite_ptx(triton_ptx(asm, constraints, "sm_90a")))}


def check(path: str, work: Path) -> dict:
    """Every build of one submission, and the judge's reading of its source."""
    from eval.judge import blackwell

    source = Path(path).read_text()
    feature = blackwell.find(source)
    result = {"file": path, "feature": f"{feature.what} (line {feature.line})" if feature else None, "builds": []}
    for i, (asm, constraints, line) in enumerate(triton_asm(source)):
        result["builds"].append({"what": f"triton inline asm (line {line})",
                                 **build_triton(asm, constraints, work / f"triton{i}")})
    if re.search(r"\bload(_inline)?\s*\(", source):
        captured = capture(path)
        result["import_error"] = captured["error"]
        for i, build in enumerate(captured["builds"]):
            result["builds"].append({"what": f"{build['kind']} {build.get('name')!r}",
                                     **build_cuda(build, work / f"cuda{i}")})
    return result


def summary(result: dict) -> str:
    builds = result["builds"]
    if not builds:
        return f"{result['file']}: no CUDA/Triton build to check here; the judge reads: {result['feature']}"
    parts = []
    for b in builds:
        state = lambda k: "ok" if b[k]["ok"] else "FAIL"  # noqa: E731
        line = (f"{b['what']}: as written {state('as_written')}, sm_90a plain {state('sm_90a_plain')}, "
                f"sm_90a emulated {state('sm_90a_emulated')}")
        if not b["sm_90a_emulated"]["ok"]:
            line += f" [{b['sm_90a_emulated']['error']}]"
        elif not b["as_written"]["ok"]:
            line += f" [as written: {b['as_written']['error']}]"
        parts.append(line)
    return f"{result['file']}: " + "; ".join(parts)


def main(argv: list[str]) -> int:
    jobs = 2
    if "--jobs" in argv:
        i = argv.index("--jobs")
        jobs, argv = int(argv[i + 1]), argv[:i] + argv[i + 2:]
    with tempfile.TemporaryDirectory(prefix="extract-") as tmp:
        with ThreadPoolExecutor(jobs) as pool:
            results = list(pool.map(lambda a: check(a[1], Path(tmp) / str(a[0])), enumerate(argv)))
    for r in results:
        print(summary(r))
    if os.environ.get("EXTRACT_JSON"):
        Path(os.environ["EXTRACT_JSON"]).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
