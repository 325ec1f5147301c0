def custom_kernel(data):
    return data["weight"] @ data["vector"]
