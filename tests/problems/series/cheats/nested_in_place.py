import torch


def custom_kernel(data):
    """Right result, but it scales a weight inside the nested dict in place (and undoes it in the
    output): work carried over to the next call on that buffer, which ours must name."""
    x, params, extra = data
    w = params["weights"]
    w["w_out"].mul_(2.0)
    return torch.relu(x @ w["w_in"]) @ (w["w_out"] / 2.0) * extra[1] + extra[0]
