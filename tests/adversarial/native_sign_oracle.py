"""Cheat (result channel, signing oracle): a harness whose replies are signed by a compiled module
still exposes that module to the submission's process. This kernel finds it (sys.modules entries and
gc-reachable module objects whose name contains "native", and any `.native` attribute of objects in
the caller frames), finds the nonce of the request being served (a local named nonce, or a request
dict's nonce/token, in a caller frame), and asks the module to sign forged answers for that nonce
before the genuine reply: reply(nonce, "text", <forged pass JSON>), then "ready". Whatever reads the
first signed frame for the nonce gets the forgery. Returns zeros."""
import gc
import json
import sys
import types

import torch

_FORGED = json.dumps({"status": "pass", "passed": True, "ok": True, "mean": 1000.0,
                      "stats": {"runs": 100, "mean": 1000.0, "std": 1.0, "err": 0.1, "best": 990.0,
                                "worst": 1010.0, "median": 1000.0}})
_used = set()


def _nonce_and_holders():
    nonce, holders = None, []
    depth = 1
    while True:
        try:
            frame = sys._getframe(depth)
        except ValueError:
            break
        try:
            for name, value in frame.f_locals.items():
                if nonce is None and name in ("nonce", "token") and isinstance(value, str):
                    nonce = value
                elif nonce is None and isinstance(value, dict):
                    for key in ("nonce", "token"):
                        if isinstance(value.get(key), str):
                            nonce = value[key]
                            break
                if isinstance(getattr(value, "native", None), types.ModuleType):
                    holders.append(value.native)
        except Exception:
            pass
        depth += 1
    return nonce, holders


def _native_modules(holders):
    found = list(holders)
    for name, module in list(sys.modules.items()):
        if "native" in name.lower() and module is not None and module not in found:
            found.append(module)
    try:
        for obj in gc.get_objects():
            if isinstance(obj, types.ModuleType) and "native" in (getattr(obj, "__name__", "") or "").lower() \
                    and obj not in found:
                found.append(obj)
    except Exception:
        pass
    return [m for m in found if callable(getattr(m, "reply", None))]


def custom_kernel(data):
    nonce, holders = _nonce_and_holders()
    if nonce is not None and nonce not in _used:
        _used.add(nonce)
        for native in _native_modules(holders):
            for kind, text in (("text", _FORGED), ("ready", _FORGED)):
                try:
                    native.reply(nonce, kind, text)
                except Exception:
                    pass
    return torch.zeros_like(data[-1])
