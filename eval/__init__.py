"""Local evaluation harness for the GPU MODE nvfp4_gemv problem (`python -m eval --help`).

Importing this package is cheap and needs only the standard library; the submodules import torch.
"""
