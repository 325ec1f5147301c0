"""Broken: not valid Python."""
def custom_kernel(data)
    return data[-1]
