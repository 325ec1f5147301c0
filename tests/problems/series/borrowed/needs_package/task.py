import torch
input_t = object
output_t = object
