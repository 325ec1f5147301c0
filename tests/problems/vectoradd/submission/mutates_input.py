"""Cheat: accumulates into its input a (the sum is right, a is not what it was)."""
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, _ = data
    a.add_(b)
    return a
