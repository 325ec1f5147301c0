"""Honest (imports a lot): pulls in a wide set of standard-library and torch modules at import
(multiprocessing, threading, ctypes, inspect, gc, asyncio, socket, pickle, json, subprocess,
signal, tempfile, torch.utils.cpp_extension, torch.nn.functional, ... and triton/numpy when present)
without using them for anything but the honest computation. Must pass."""
import argparse  # noqa: F401
import asyncio  # noqa: F401
import collections  # noqa: F401
import concurrent.futures  # noqa: F401
import ctypes  # noqa: F401
import dataclasses  # noqa: F401
import functools  # noqa: F401
import gc  # noqa: F401
import hashlib  # noqa: F401
import importlib
import importlib.util
import inspect  # noqa: F401
import io  # noqa: F401
import itertools  # noqa: F401
import json  # noqa: F401
import logging  # noqa: F401
import math  # noqa: F401
import multiprocessing  # noqa: F401
import os  # noqa: F401
import pathlib
import pickle  # noqa: F401
import random  # noqa: F401
import re  # noqa: F401
import shutil  # noqa: F401
import signal  # noqa: F401
import socket  # noqa: F401
import struct  # noqa: F401
import subprocess  # noqa: F401
import tempfile  # noqa: F401
import threading  # noqa: F401
import traceback  # noqa: F401
import types  # noqa: F401
import typing  # noqa: F401
import warnings  # noqa: F401
import weakref  # noqa: F401

import torch
import torch.nn.functional  # noqa: F401
import torch.utils.cpp_extension  # noqa: F401
import torch.profiler  # noqa: F401

for _optional in ("numpy", "triton", "triton.language", "cutlass", "yaml"):
    try:
        importlib.import_module(_optional)
    except Exception:
        pass

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def custom_kernel(data):
    return _honest.custom_kernel(data)
