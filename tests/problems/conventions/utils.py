"""The helpers a leaderboard series keeps beside its problems (utils.py), written for these fixtures:
the same names and behaviour the problems import (make_match_reference, DeterministicContext)."""
import torch


class DeterministicContext:
    """Deterministic algorithms inside the block, the previous setting restored after."""

    def __enter__(self):
        self.before = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True, warn_only=True)
        return self

    def __exit__(self, *exc):
        torch.use_deterministic_algorithms(self.before)
        return False


def make_match_reference(reference, rtol=1e-5, atol=1e-8):
    """check_implementation(data, output) -> (good, message): output against reference(data)."""

    def check(data, output):
        expected = reference(data)
        if not isinstance(output, torch.Tensor) or output.shape != expected.shape:
            return False, f"expected a tensor of shape {tuple(expected.shape)}"
        close = torch.isclose(output.to(torch.float64), expected.to(torch.float64), rtol=rtol, atol=atol)
        if bool(close.all()):
            return True, ""
        return False, f"mismatch found! {int((~close).sum())} elements differ"

    return check
