"""Inputs nested as trimul's: (x, {weights: {w_in, w_out}, config: {dim, eps, act}}, [bias, 2, "note"]);
the output one tensor; check_implementation from the other series' utils.py, (ok, message); one weight
drawn from torch's global generator."""
import torch
from utils import make_match_reference


def generate_input(batch: int, n: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, n, generator=gen)
    # w_out from torch's global generator, not gen (as trimul draws its weights): one input all the same
    # within one evaluator process; the judge and the worker each seed it from the case's seed
    weights = {"w_in": torch.randn(n, n, generator=gen), "w_out": torch.randn(n, n)}
    config = {"dim": n, "eps": 1e-5, "act": "relu", "layers": [1, 2]}
    return x, {"weights": weights, "config": config}, [torch.randn(n, generator=gen), 2, "note"]


def ref_kernel(data):
    x, params, extra = data
    w, cfg = params["weights"], params["config"]
    h = torch.relu(x @ w["w_in"]) if cfg["act"] == "relu" else x @ w["w_in"]
    return (h @ w["w_out"]) * extra[1] + extra[0]


check_implementation = make_match_reference(ref_kernel, rtol=1e-4, atol=1e-4)
