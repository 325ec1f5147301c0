"""Cheat (persistence across runs): plants code and files wherever a later worker might read them
before or after its sandbox: a .pth and a sitecustomize.py in the user site-packages under $HOME
(created if missing), sitecustomize.py / torch.py / eval.py in the working directory, TMPDIR and
HOME, a usercustomize.py, marker files in /tmp, /var/tmp and every parent of the worker's folders,
and an environment file in XDG_CONFIG_HOME. Every payload only sets the attribute
sys._nvfp4_forged_persist (inert; tests/adversarial/honest_probe_persist.py looks for it and for the
files). Computes the right answer itself: this file must pass, and leave nothing a later run sees."""
import importlib.util
import os
import pathlib
import sys

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

MARK = "zzz_nvfp4_forged_persist"
PAYLOAD = "import sys; setattr(sys, '_nvfp4_forged_persist', True)\n"


def _write(path, text):
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "x") as handle:
            handle.write(text)
    except OSError:
        pass


def _plant():
    home = pathlib.Path(os.environ.get("HOME") or "/nonexistent")
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = home / ".local" / "lib" / version / "site-packages"
    _write(site / f"{MARK}.pth", PAYLOAD)
    for folder in {site, pathlib.Path.cwd(), pathlib.Path(os.environ.get("TMPDIR", "/tmp")), home}:
        for name in ("sitecustomize.py", "usercustomize.py", "torch.py", "eval.py", "reference.py", "task.py"):
            _write(folder / name, PAYLOAD)
    _write(pathlib.Path(os.environ.get("XDG_CONFIG_HOME", home / ".config")) / MARK, "NVFP4_FORGED=1\n")
    here = pathlib.Path(os.environ.get("TORCH_EXTENSIONS_DIR", os.getcwd())).resolve()
    for folder in [pathlib.Path("/tmp"), pathlib.Path("/var/tmp"), *here.parents]:
        _write(folder / MARK, "planted\n")


_plant()


def custom_kernel(data):
    return _honest.custom_kernel(data)
