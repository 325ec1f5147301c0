"""Broken: calls sys.exit."""
import sys


def custom_kernel(data):
    sys.exit(0)
