"""Checks that catch submissions which only look correct (runs inside the worker).

checked_run calls custom_kernel the way an honest kernel must survive, and fails with one reason:
  * it returns the pre-filled c unchanged;
  * its output is wrong, or not yet complete on the current stream when it returns (work left on
    another stream: a copy queued right after the call sees the unfinished output);
  * it modified one of its inputs;
  * it returns a stale result when called again with new contents in the same buffers, or with new
    buffers (results cached by pointer, shape, seed or call count).
The leaderboard mode adds the timed-loop recheck with a new seed every run (timing.time_per_call).
"""
from __future__ import annotations

from typing import Callable

import torch

from eval.timing import CaseFailed, clone_data, sync

INPUT_NAMES = ("a", "b", "sfa", "sfb", "sfa_permuted", "sfb_permuted")
SEED_STEP_SAME_BUFFERS = 1_000_003
SEED_STEP_NEW_BUFFERS = 2_000_003


def checked_run(kernel: Callable, make_input: Callable[[int], tuple], check: Callable, seed: int) -> None:
    data = make_input(seed)
    given = clone_data(data)
    prefilled_c = given[-1].clone()
    output = kernel(given)
    snapshot = output.clone() if isinstance(output, torch.Tensor) else output  # before any sync
    sync()
    if _is_unchanged(output, prefilled_c):
        raise CaseFailed("returned the pre-filled c unchanged: custom_kernel must compute and write the result")
    good, message = check(data, output)
    if not good:
        raise CaseFailed(message)
    good, _ = check(data, snapshot)
    if not good:
        raise CaseFailed(
            "output was not complete on the current stream when custom_kernel returned "
            "(work left on another stream? synchronize it with the current stream before returning)"
        )
    _expect_inputs_untouched(data, given)

    fresh = make_input(seed + SEED_STEP_SAME_BUFFERS)
    for buffer, new in zip(given, fresh):
        _raw(buffer).copy_(_raw(new))
    output = kernel(given)
    sync()
    good, message = check(fresh, output)
    if not good:
        raise CaseFailed(
            "wrong result when called again with new data in the same buffers "
            f"(a result cached from an earlier call?): {message}"
        )

    fresh = make_input(seed + SEED_STEP_NEW_BUFFERS)
    output = kernel(clone_data(fresh))
    sync()
    good, message = check(fresh, output)
    if not good:
        raise CaseFailed(f"wrong result when called a third time with new buffers (cached result?): {message}")


def _raw(t: torch.Tensor) -> torch.Tensor:
    """A byte view for copying (float4 tensors have no copy kernel of their own)."""
    return t.view(torch.uint8) if t.dtype != torch.float16 else t


def _is_unchanged(output, prefilled_c: torch.Tensor) -> bool:
    return (
        isinstance(output, torch.Tensor)
        and output.shape == prefilled_c.shape
        and output.dtype == prefilled_c.dtype
        and output.device == prefilled_c.device
        and torch.equal(output, prefilled_c)
    )


def _expect_inputs_untouched(original: tuple, given: tuple) -> None:
    for name, before, after in zip(INPUT_NAMES, original, given):
        if not torch.equal(_raw(before), _raw(after)):
            raise CaseFailed(f"modified its input `{name}`: custom_kernel may write only c")

