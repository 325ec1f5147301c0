"""Broken: kills its own process."""
import os


def custom_kernel(data):
    os._exit(3)
