"""Cross-check of the harness's timing (GPU): times a submission on the benchmark shapes with plain
torch.cuda.Event pairs and its own L2 flush, without the harness's timing module, and prints the
median and mean per case to set beside `python -m eval benchmark SUB`.
Run from the repo root: python docs/experiments/independent_timing.py submission/torch_ref.py
"""
import importlib.util
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import reference  # noqa: E402

SHAPES = [(7168, 16384, 1), (4096, 7168, 8), (7168, 2048, 4)]


def main(path: str, runs: int = 100) -> None:
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    scratch = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")  # 256 MiB, > 5x the L2
    for m, k, l in SHAPES:
        data = reference.generate_input(m, k, l, seed=1111)
        module.custom_kernel(data)  # warm, compile
        times = []
        for _ in range(runs):
            torch.cuda.synchronize()
            scratch.fill_(1)
            torch.cuda._sleep(1_000_000)  # let the host queue the call before the start event
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            module.custom_kernel(data)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
        print(f"{m}x{k}x{l}: median {statistics.median(times):9.2f} µs  mean {statistics.fmean(times):9.2f} µs  "
              f"({runs} runs)")


if __name__ == "__main__":
    main(sys.argv[1])
