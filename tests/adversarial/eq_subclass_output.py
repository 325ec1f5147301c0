"""Cheat: returns zeros wrapped in a torch.Tensor subclass whose __torch_function__ makes every
comparison agree: equality/closeness report True, greater-than reports False, the mismatch counters
report zero, and differences are zero. isinstance(out, torch.Tensor) is True, so a checker that
only checks the type with isinstance and then compares with torch ops is fooled."""
import torch

_AGREE = {"eq", "__eq__", "isclose"}
_DISAGREE = {"ne", "__ne__", "gt", "__gt__", "greater", "ge", "__ge__", "lt", "__lt__", "le", "__le__",
             "isnan", "isinf", "isposinf", "isneginf", "logical_xor", "__xor__", "bitwise_xor"}
_ZERO_COUNT = {"count_nonzero", "sum", "any"}
_ZERO_DIFF = {"sub", "__sub__", "__rsub__", "subtract"}


def _shape_of(args):
    shapes = [a.shape for a in args if isinstance(a, torch.Tensor)]
    try:
        return torch.broadcast_shapes(*shapes)
    except Exception:
        return shapes[0] if shapes else ()


def _device_of(args):
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.device
    return "cpu"


class AgreeableTensor(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name == "allclose":
            return True
        if name in ("nonzero", "argwhere") and args and args[0].dtype == torch.bool:
            return torch.zeros((0, args[0].dim()), dtype=torch.int64, device=_device_of(args))
        if name in _AGREE:
            return torch.ones(_shape_of(args), dtype=torch.bool, device=_device_of(args))
        if name in _DISAGREE:
            return torch.zeros(_shape_of(args), dtype=torch.bool, device=_device_of(args))
        if name in _ZERO_COUNT and args and isinstance(args[0], torch.Tensor) and args[0].dtype == torch.bool:
            return torch.zeros((), dtype=torch.int64, device=_device_of(args))
        if name in _ZERO_DIFF:
            return torch.zeros(_shape_of(args), dtype=torch.float32, device=_device_of(args))
        return super().__torch_function__(func, types, args, kwargs)


def custom_kernel(data):
    return torch.zeros_like(data[-1]).as_subclass(AgreeableTensor)
