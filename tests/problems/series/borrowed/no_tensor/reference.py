"""No tensor anywhere: generate_input returns a dict of plain numbers and a list of floats, and
custom_kernel a plain float. Nothing to hash or canary; the output is still checked on every call."""
import random


def generate_input(batch: int, n: int, seed: int):
    rng = random.Random(seed)
    return {"scale": batch, "values": [rng.uniform(-1, 1) for _ in range(n)]}


def ref_kernel(data):
    return data["scale"] * sum(data["values"])


def check_implementation(data, output):
    expected = ref_kernel(data)
    if not isinstance(output, float) or abs(output - expected) > 1e-9 * max(1.0, abs(expected)):
        return False, f"expected {expected!r}, got {output!r}"
    return True, ""
