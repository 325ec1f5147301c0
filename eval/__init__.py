"""Local evaluation harness for GPU MODE leaderboard problems (`python -m eval --help`; which problem:
eval/problem_folder.py).

Importing this package is cheap and needs only the standard library; the submodules import torch.
"""
