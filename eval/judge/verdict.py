"""The judge's side of a check: rebuild what the worker's compiled part snapshotted, put the same
canary bytes into the judge's own copy of the inputs, and ask the problem's own checker.

Nothing here trusts the worker beyond the signed bytes: the inputs are regenerated here from the
seed, the canary bytes are re-derived from the canary seed (splitmix64, as native.cpp), and the
reference runs in this process.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
import secrets

import numpy as np
import torch

from eval import needs, problem_folder
from eval.emulate import scaled_mm
from eval.judge.wire import WorkerFailure
from eval.judge.text import one_line
from eval.records import generate_args

NOT_COMPLETE = ("output was not complete on the current stream when custom_kernel returned "
                "(work left on another stream? synchronize it with the current stream before returning)")
PREFILLED = "returned the pre-filled {} unchanged: custom_kernel must compute and write the result"
DTYPES = {"Half": torch.float16, "Float": torch.float32, "BFloat16": torch.bfloat16, "Double": torch.float64,
          "Byte": torch.uint8, "Char": torch.int8, "Short": torch.int16, "Int": torch.int32, "Long": torch.int64,
          "Bool": torch.bool, "Float8_e4m3fn": torch.float8_e4m3fn, "Float8_e5m2": torch.float8_e5m2}
MASK64 = (1 << 64) - 1


class Tampered(WorkerFailure):
    """The reply contradicts itself (e.g. canary positions that its seed does not give): the case
    fails with this reason wherever it is judged."""


def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def reference_calls_scaled_mm(root) -> bool:
    """The folder's reference (reference.py, or the utils.py beside it) calls torch._scaled_mm (a
    call, not a comment's or a docstring's mention)."""
    source = ""
    for name in ("reference.py", "utils.py"):
        try:
            source += (root / name).read_text(errors="replace")
        except OSError:
            pass
    return re.search(r"^[^#\n]*\b_scaled_mm\s*\(", source, re.M) is not None


@functools.lru_cache(maxsize=None)
def _reference_emulation(root) -> tuple:
    if not reference_calls_scaled_mm(root) or scaled_mm.fp4_available():
        return ()
    scaled_mm.install()
    return ("the reference's torch._scaled_mm on FP4 runs as an exact software GEMM in the judge "
            "(this GPU has no FP4 GEMM)",)


def reference_emulation() -> list[str]:
    """Where the folder's reference calls torch._scaled_mm, which needs FP4 support this GPU lacks:
    the exact stand-in (eval/emulate) in the judge's process only; a worker gets it only with
    --emulate-blackwell. Returns the label for the report. Decided once per problem folder."""
    return list(_reference_emulation(problem_folder.current().root))


def reference():
    """The problem's reference module as the judge runs it (with reference_emulation in place)."""
    reference_emulation()
    return problem_folder.current().reference


class _FilledEmpty(torch.overrides.TorchFunctionMode):
    """Fills every tensor the torch.empty family makes with random bytes, so that two generations of
    an input left undefined (torch.empty) always differ: fresh zero pages made two of them alike."""

    EMPTY = {torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty,
             torch.Tensor.new_empty_strided}

    def __init__(self):
        super().__init__()
        self.generators: dict = {}  # its own per device: the global generator generate_input may seed stays as it was

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in self.EMPTY and isinstance(out, torch.Tensor) and out.untyped_storage().nbytes():
            device = out.device
            if device not in self.generators:
                self.generators[device] = torch.Generator(device=device).manual_seed(secrets.randbits(63))
            raw = torch.empty(0, dtype=torch.uint8, device=device)  # the mode is off inside its handler
            raw.set_(out.untyped_storage()).random_(0, 256, generator=self.generators[device])
        return out


def generate_undefined_filled(args: dict, seed: int):
    """generate() with the inputs generate_input leaves undefined filled at random (see _FilledEmpty)."""
    with _FilledEmpty():
        return generate(args, seed)


def generate(args: dict, seed: int, overrides: dict | None = None):
    """The problem's generate_input in the judge; its failure is the problem's, one line (ConfigError)."""
    from eval.cases import ConfigError

    try:
        return problem_folder.generate_seeded(problem_folder.current().reference.generate_input,
                                              {**generate_args(args), **(overrides or {}), "seed": int(seed)})
    except Exception as exc:  # noqa: BLE001 - the problem's code, whatever it raises
        lacking = needs.what_is_missing(f"{type(exc).__name__}: {exc}", torch.cuda.is_available())
        if lacking:  # not the problem's fault, nor the submission's: not judged here
            raise WorkerFailure(f"{needs.PREFIX}needs {lacking} (the problem's generate_input: "
                                f"{type(exc).__name__}: {one_line(str(exc))[:120]})") from None
        where = "" if torch.cuda.is_available() else " (this machine has no CUDA GPU: run it on one)"
        raise ConfigError(f"the problem's generate_input failed for case {generate_args(args)}: "
                          f"{type(exc).__name__}: {one_line(str(exc))[:200]}{where}") from None


def tensors_of(data) -> list:
    """Every tensor of generate_input's result, in the worker's order (problem_folder.flatten)."""
    return problem_folder.flatten(data)[0]


# -- canaries -------------------------------------------------------------------------------------

def _splitmix(state: int, count: int) -> tuple[np.ndarray, int]:
    """The next `count` splitmix64 outputs after `state` (as native.cpp's SplitMix), and the new
    state. Output i only depends on state + (i+1)*gamma, so it vectorises (uint64 arithmetic wraps)."""
    steps = np.arange(1, count + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(state) + steps * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31)), (state + count * 0x9E3779B97F4A7C15) & MASK64


def canary_plan(regions: list, seed: int) -> list[tuple[list[int], bytes]]:
    """(first byte of each row or pick, bytes) per region, drawn exactly as native.cpp's plan_canary
    draws them: rect [arg, offset, pitch, width, height, jitter, mask] one phase per row then the
    bytes; table {arg, width, offsets, picks, values, link} draws until `picks` distinct picks, then the bytes; a
    linked table the same picks and bytes as its link."""
    state = seed & MASK64
    plan, picks_of = [], []
    for region in regions:
        if isinstance(region, dict):
            offsets, width, link = region["offsets"], region["width"], region.get("link", -1)
            if link >= 0:
                picks = picks_of[link]
                plan.append(([offsets[k] for k in picks], plan[link][1]))
                picks_of.append(picks)
                continue
            picks, seen = [], set()
            while len(picks) < region["picks"]:  # distinct, as native.cpp draws them: one draw each
                draws, _ = _splitmix(state, region["picks"] - len(picks))  # the next draws, taken in order
                used = 0
                for draw in draws.tolist():
                    used += 1
                    k = draw % len(offsets)
                    if k not in seen:
                        seen.add(k)
                        picks.append(k)
                        if len(picks) == region["picks"]:
                            break
                state = (state + used * 0x9E3779B97F4A7C15) & MASK64
            raw, state = _bytes(state, width * region["picks"])
            values = region.get("values") or []
            if values:
                raw = np.asarray(values, dtype=np.uint8)[raw.astype(np.int64) % len(values)]
            plan.append(([offsets[k] for k in picks], raw.tobytes()))
            picks_of.append(picks)
            continue
        arg, offset, pitch, width, height, jitter, mask = region
        draws, state = _splitmix(state, height)
        phases = (draws % np.uint64(jitter // width + 1)).astype(np.int64) * width
        starts = [offset + h * pitch + int(phases[h]) for h in range(height)]
        raw, state = _bytes(state, width * height)
        plan.append((starts, (raw & np.uint8(mask)).tobytes()))
        picks_of.append([])
    return plan


def _bytes(state: int, n: int) -> tuple[np.ndarray, int]:
    draws, state = _splitmix(state, (n + 7) // 8)
    return draws.astype("<u8").view(np.uint8)[:n], state


def _region_target(region) -> tuple[int, int]:
    return (region["arg"], region["width"]) if isinstance(region, dict) else (region[0], region[3])


def storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """A flat uint8 tensor over t's whole storage (writes go to t)."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def apply_canary(data: tuple, regions: list, canary: dict) -> tuple:
    """Write a run's canary bytes into data, in place, where the worker wrote them (the worker's
    inputs keep them too, so runs on the same inputs accumulate them in order)."""
    plan = canary_plan(regions, int(canary["seed"]))
    echoed = canary.get("starts", [])
    if len(echoed) != len(plan) or any([int(x) for x in e] != starts for e, (starts, _) in zip(echoed, plan)):
        raise Tampered("reply failed authentication: canary positions do not follow from its seed")
    items = tensors_of(data)
    for region, (starts, raw) in zip(regions, plan):
        arg, width = _region_target(region)
        flat = storage_bytes(items[arg])
        index = (np.asarray(starts, dtype=np.int64)[:, None] + np.arange(width, dtype=np.int64)).ravel()
        flat[torch.from_numpy(index).to(flat.device)] = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(flat.device)
    return data


def input_hash(t: torch.Tensor) -> str:
    return hashlib.sha256(storage_bytes(t).cpu().numpy().tobytes()).hexdigest()


# -- outputs --------------------------------------------------------------------------------------

@dataclasses.dataclass
class Output:
    tensor: object  # a tensor, or the structure of tensors (tuple, list, dict) custom_kernel returned
    problem: str = ""

    @property
    def tensors(self) -> list:
        return problem_folder.flatten(self.tensor)[0]


def input_device(data) -> str:
    """Where a case's input lives: cuda if any of its tensors is on the GPU, cpu if it has tensors
    and all are on the CPU (a problem whose generate_input makes CPU tensors on a GPU machine, as the
    repository's convention fixtures do), else the judge's device."""
    devices = {t.device.type for t in problem_folder.flatten(data)[0] if isinstance(t, torch.Tensor)}
    return "cuda" if "cuda" in devices else "cpu" if devices else device()


def rebuild(entry: dict | None, blob: bytes, expected: str | None = None) -> Output:
    """The output a snapshot describes, on the device of the inputs (expected: input_device; else the
    judge's): one tensor, or the tuple/list/dict of them (nested any way) custom_kernel returned, its
    tensors each rebuilt."""
    expected = expected or device()
    if entry is None:
        return Output(None, "no output snapshot")
    if entry.get("problem"):
        return Output(None, one_line(entry["problem"]))
    if "parts" in entry:
        return _rebuild_structure(entry, blob, expected)
    if "value" in entry:  # custom_kernel returned a plain number, string or None
        return Output(entry["value"])
    dtype = DTYPES.get(entry.get("dtype"))
    if dtype is None:
        return Output(None, f"output dtype {one_line(entry.get('dtype'), 40)} is not one the judge compares")
    if entry.get("device") != expected:
        return Output(None, f"output is on {one_line(entry.get('device'), 40)}, expected {expected} like the inputs")
    start, length = entry["blob"]
    if start < 0 or length < 0 or start + length > len(blob):
        raise Tampered("reply failed authentication: snapshot outside its data")
    if not length:
        raw = torch.empty(0, dtype=torch.uint8)
    elif expected != "cpu" and isinstance(blob, bytearray):  # read in place: .to() below makes the copy
        raw = torch.frombuffer(blob, dtype=torch.uint8, offset=start, count=length)
    else:
        raw = torch.frombuffer(bytearray(memoryview(blob)[start:start + length]), dtype=torch.uint8)
    itemsize = torch.empty(0, dtype=dtype).element_size()
    if length % itemsize:
        raise Tampered("reply failed authentication: snapshot length")
    values = raw.view(dtype) if length else torch.empty(0, dtype=dtype)
    try:
        tensor = values.as_strided(entry["sizes"], entry["strides"], entry["offset"])
    except RuntimeError as exc:
        raise Tampered(f"reply failed authentication: snapshot layout ({exc})")
    return Output(tensor.to(expected))


SEQUENCES = {"tuple": tuple, "list": list}


def _rebuild_structure(entry: dict, blob: bytes, expected: str) -> Output:
    parts = []
    for part in entry["parts"]:
        if isinstance(part, dict) and "value" in part:  # a plain number, string or None beside the tensors
            parts.append(part["value"])
            continue
        rebuilt = rebuild(part, blob, expected)
        if rebuilt.problem:
            return rebuilt
        parts.append(rebuilt.tensor)
    kind = entry.get("kind")
    if kind == "dict":
        keys = entry.get("keys") or []
        if len(keys) != len(parts):
            raise Tampered("reply failed authentication: output keys")
        return Output(dict(zip(keys, parts)))
    if kind not in SEQUENCES:
        raise Tampered("reply failed authentication: output structure")
    return Output(_sequence(kind, entry.get("type") or "", parts))


def _sequence(kind: str, type_name: str, parts: list):
    """A torch.return_types result (torch.geqrf's, torch.linalg.eigh's) as its own type, so that a
    checker reading .Q or .tau finds it; any other sequence as a plain tuple or list."""
    prefix = "torch.return_types."
    if kind == "tuple" and type_name.startswith(prefix):
        made = getattr(torch.return_types, type_name[len(prefix):], None)
        if isinstance(made, type) and issubclass(made, tuple):
            return problem_folder.rebuild_sequence(made, parts)
    return SEQUENCES[kind](parts)


def checker_verdict(result) -> tuple[bool, str]:
    """check_implementation's answer in every convention the leaderboard's evaluators have read:
    (ok, message) (pmpp_v2, nvidia, linalg...); an error string, '' or None for a match (pmpp, the
    first series: `if error:`); a bare bool. Anything else: falsy is a match, else its text is the
    reason (the older evaluators' `if error:` reading)."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], (bool, int, np.bool_)):
        return bool(result[0]), "" if result[1] is None else str(result[1])
    if isinstance(result, (bool, np.bool_)):
        return bool(result), "" if result else "check_implementation returned False"
    if result is None or isinstance(result, str):
        return not result, result or ""
    if isinstance(result, torch.Tensor) and result.numel() == 1:
        return bool(result.item()), "" if result.item() else "check_implementation returned False"
    return not result, "" if not result else one_line(str(result))


def check(data, output) -> tuple[bool, str]:
    """The problem's own check_implementation on (data, output), its answer read by checker_verdict."""
    return checker_verdict(reference().check_implementation(data, output))


def _like_output(t, out: list) -> bool:
    return isinstance(t, torch.Tensor) and any(t.shape == o.shape and t.dtype == o.dtype for o in out)


def _check(data, output) -> tuple[bool, str]:
    """The problem's own check_implementation, on a view of data whose tensors shaped like an
    output tensor are copies: a reference that writes its result into the output buffer (as the
    leaderboard's vectoradd does) must not change the judge's inputs for later runs."""
    outs = problem_folder.flatten(output)[0]
    items, _ = problem_folder.flatten(data)
    shielded = problem_folder.replace_tensors(data, [t.clone() if _like_output(t, outs) else t for t in items])
    return check(shielded, output)


def judge_output(data, entry: dict, blob: bytes, synced: dict | None = None) -> str | None:
    """None when the output is right; else the one-line reason."""
    where = input_device(data)
    out = rebuild(entry, blob, where)
    if out.problem:
        return out.problem
    items, names = problem_folder.flatten(data)
    outs = out.tensors
    prefilled = next((i for i, t in enumerate(items) for o in outs
                      if _like_output(t, [o]) and torch.equal(o, t)), None) if outs else None
    good, message = _check(data, out.tensor)
    if good:
        return None
    if synced is not None:
        later = rebuild(synced, blob, where)
        if not later.problem and _check(data, later.tensor)[0]:
            return NOT_COMPLETE
    if prefilled is not None:
        return PREFILLED.format(problem_folder.current().input_name(prefilled, names))
    return message


def same_as_judged(reply, i: int, slot: int) -> None:
    """A call whose output the worker found byte for byte the same as the one it sent whole in an
    earlier run of this reply ({"same_as": r}) is right where that one was: modes.judge_runs judged it
    against the same input (the same seed; no canary regions, so no run's canary changes it) and
    would have stopped at it. Anything else is a reply that lies: Tampered."""
    runs = reply.header["runs"]
    call = runs[i]["calls"][slot]
    r = call["out"]["same_as"]
    first = runs[r]["calls"][slot] if type(r) is int and 0 <= r < i and slot < len(runs[r]["calls"]) else {}
    if ("out" not in first or "same_as" in first["out"] or "synced" in call or "synced" in first
            or reply.header["params"]["canary"]
            or first.get("seed") != call["seed"]):
        raise Tampered(f"timed run {i + 1}: its output is given as the same as run {r}'s, which it cannot be")
