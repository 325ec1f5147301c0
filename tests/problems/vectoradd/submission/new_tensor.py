"""Honest: returns a new tensor and leaves the pre-allocated output alone."""
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, _ = data
    return a + b
