"""Cheat (shared caches): from its own build folder it climbs to the harness's cache root and tries
to plant files where later runs read: every other entry of the judge's build cache (a poisoned
torch extension for another submission), other build slots, the folder of the worker's compiled
part (replacing it would hand a later judge forged signatures), the workers' folders. It records
what it could write and, if anything landed, returns zeros. Must pass: only its own private folders
are writable (Landlock, its own uid), and only the judge writes the caches."""
import importlib.util
import os
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

MARK = "zzz_nvfp4_forged_cache"


def _try(path: pathlib.Path) -> bool:
    try:
        with open(path, "x") as handle:
            handle.write("planted\n")
        return True
    except OSError:
        return False


def _landed():
    own = pathlib.Path(os.environ.get("TORCH_EXTENSIONS_DIR", os.getcwd())).resolve()
    slot = own.parent  # .../slots/<key>-<n>
    root = slot.parent.parent  # the cache root
    got = []
    for folder in [root, root / "builds", root / "slots", root / "native", root / "workers", *root.glob("builds/*"),
                   *root.glob("native/*"), *[s for s in root.glob("slots/*") if s != slot],
                   *[w for w in root.glob("workers/*") if not str(pathlib.Path.cwd()).startswith(str(w))]]:
        if folder.is_dir() and _try(folder / MARK):
            got.append(str(folder))
    return got


_LANDED = _landed()


def custom_kernel(data):
    if _LANDED:
        return torch.zeros_like(data[-1])
    return _honest.custom_kernel(data)
