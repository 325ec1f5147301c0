"""Builds the worker's compiled part (native.cpp and the parts it includes, native/*.h) once per
machine and source version, and says where it is. The judge builds it before it starts a worker;
the worker only loads the file (it never compiles anything of ours). Needs a C++ compiler and
ninja; no CUDA toolkit (the CUDA driver is opened at run time)."""
from __future__ import annotations

import hashlib
import os
import stat
import sys
from pathlib import Path

SOURCE = Path(__file__).with_name("native.cpp")
# its parts by role, which it #includes: one translation unit, compiled once (native.cpp says why)
PARTS = tuple(sorted(SOURCE.with_name("native").glob("*.h")))
SOURCES = (SOURCE, *PARTS)
# no exported symbol but the module's entry point; the GOT resolved at load and then read-only
HARDENING_CFLAGS = ["-O2", "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-fstack-protector-strong"]
HARDENING_LDFLAGS = ["-Wl,-z,relro", "-Wl,-z,now", "-Wl,-z,noexecstack"]


def cache_root() -> Path:
    """Where builds and worker caches live: readable by an unprivileged worker when we run as root."""
    if os.environ.get("EVAL_CACHE"):
        return Path(os.environ["EVAL_CACHE"])
    if os.geteuid() == 0:
        return Path("/var/tmp/gpumode-eval")
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpumode-eval"


def owned(path: Path) -> Path:
    """path, where it is this user's alone: not a link, owned by our uid, writable by nobody else.
    Whoever made the cache folder first (it sits in /var/tmp, where anyone may make one) could
    otherwise plant the worker's library or the machine's sandbox level (red team, 2026-11-27)."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise RuntimeError(f"{path} is not this user's alone (owner uid {info.st_uid}, mode "
                           f"{oct(info.st_mode & 0o7777)}{', a link' if stat.S_ISLNK(info.st_mode) else ''}): another "
                           "user could plant the harness's files there; remove it, or set EVAL_CACHE to a folder of your own")
    return path


def owned_root() -> Path:
    """The cache root, made if missing, checked to be ours alone."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    return owned(root)


def module_name() -> str:
    digest = hashlib.sha256()
    for path in (*SOURCES, Path(__file__)):  # any part changed (or renamed): another name, a fresh build
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest = digest.hexdigest()[:12]
    return f"eval_worker_native_{digest}"


def built() -> bool:
    """Whether this version's shared library is already built here (no compiler started)."""
    name = module_name()
    return (owned_root() / "native" / name / f"{name}.so").is_file()


def build(verbose: bool = False) -> Path:
    """Compile if needed; return the path of the shared library."""
    name = module_name()
    directory = owned_root() / "native" / name
    target = directory / f"{name}.so"
    if target.is_file():
        for path in (directory.parent, directory, target):
            owned(path)
        return target  # before importing cpp_extension: seconds of setuptools for every judge
    import torch.utils.cpp_extension as ext

    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(cache_root(), 0o755)
    os.chmod(directory.parent, 0o755)
    headers = [d for d in (os.environ.get("CUDA_HOME", "/usr/local/cuda") + "/include",) if Path(d, "cuda.h").is_file()]
    ext.load(name=name, sources=[str(SOURCE)], build_directory=str(directory), extra_cflags=HARDENING_CFLAGS,
             extra_ldflags=HARDENING_LDFLAGS, extra_include_paths=headers, verbose=verbose,
             with_cuda=False)  # cuda.h only checks driver constants
    for path in [directory, *directory.iterdir()]:
        os.chmod(path, 0o755 if path.is_dir() or path.suffix == ".so" else 0o644)
    return target


def load(path: str):
    """Import the built library (inside the worker)."""
    import importlib.machinery
    import importlib.util

    name = Path(path).stem
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


if __name__ == "__main__":
    print(build(verbose="-v" in sys.argv))
