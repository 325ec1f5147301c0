"""This fixture's own evaluator (its own contract: forward(x)), in the runner's protocol."""
import os
import sys

import torch

from reference import make, reference_forward
from submission import forward

out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
x = make(8)
good = torch.equal(forward(x), reference_forward(x))
print(f"{sys.argv[1]}-count: 1", file=out)
print(f"{sys.argv[1]}.0.status: {'pass' if good else 'fail'}", file=out)
print(f"check: {'pass' if good else 'fail'}", file=out)
out.close()
sys.exit(0 if good else 112)
