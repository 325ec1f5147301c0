"""Broken: raises."""


def custom_kernel(data):
    raise RuntimeError("kernel exploded")
