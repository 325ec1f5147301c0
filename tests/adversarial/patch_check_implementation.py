"""Cheat: replaces check_implementation (and the leaderboard's verbose_allclose, this repo's
mismatch_report) in every loaded module with versions that always pass, then returns zeros without
computing anything. Works wherever the checker runs in the submission's own process."""
import sys

import torch


def _always_pass(*args, **kwargs):
    return True, ""


def _no_mismatches(*args, **kwargs):
    return []


_FORGERIES = {
    "check_implementation": _always_pass,
    "verbose_allclose": _no_mismatches,
    "mismatch_report": _no_mismatches,
}


def _patch_everything():
    try:
        import reference  # noqa: F401  (the problem's own module, on sys.path in both designs)
    except Exception:
        pass
    for module in list(sys.modules.values()):
        try:
            namespace = vars(module)
        except TypeError:
            continue
        for name, forged in _FORGERIES.items():
            try:
                current = namespace.get(name)
                if callable(current) and current is not forged:
                    setattr(module, name, forged)
            except Exception:
                pass


_patch_everything()


def custom_kernel(data):
    _patch_everything()  # modules the harness imported after us
    return torch.zeros_like(data[-1])
