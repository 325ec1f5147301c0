import torch
input_t = tuple
output_t = torch.Tensor
