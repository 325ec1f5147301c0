"""#40 diagnosis control: v5 called after the host spent as long as l2_side_copy's queueing
(one 4 MiB copy launch per 4 MiB of A and its scales, about 6 us each): the host's pace alone."""
import importlib.util
import pathlib
import time

_spec = importlib.util.spec_from_file_location("_honest_v5", pathlib.Path(__file__).parents[3] / "submission" / "v5.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def custom_kernel(data):
    n = data[0].untyped_storage().nbytes() + data[2].untyped_storage().nbytes()
    end = time.perf_counter() + 6e-6 * (n // (4 << 20) + 1)
    while time.perf_counter() < end:
        pass
    return _honest.custom_kernel(data)
