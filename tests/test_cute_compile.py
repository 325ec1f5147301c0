"""The CuTe DSL submissions import and compile without a GPU: the software-decode path for sm_90a
(Hopper) and the hardware-cvt path for sm_100a (Blackwell). Skipped where the DSL is not installed."""
import importlib.util
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("cutlass") is None, reason="nvidia-cutlass-dsl not installed")

COMPILE = """
import importlib.util, sys
sys.path.insert(0, {root!r})
spec = importlib.util.spec_from_file_location("sub", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
hw = {hw}
configs = getattr(module, "CONFIGS", None)
if configs and isinstance(configs[0], tuple):
    for config in configs:
        module.compile_kernel(hw, *config)
else:
    module.compile_kernel(hw)
print("compiled")
"""


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("name", ["v0", "v1", "v2", "v3", "v4"])
def test_cute_submission_compiles(name, arch):
    code = COMPILE.format(root=str(ROOT), path=str(ROOT / "submission" / f"{name}.py"), hw=arch == "sm_100a")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "CUTE_DSL_ARCH": arch})
    assert out.returncode == 0 and "compiled" in out.stdout, (out.stdout + out.stderr)[-3000:]
