def custom_kernel(data):
    return float(data["scale"] * sum(data["values"]))
