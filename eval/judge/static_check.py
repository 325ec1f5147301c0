"""Static pre-check of a submission with kernelguard, run by the judge before the worker starts; never
imports the submission.

kernelguard (GPU MODE's rule-based hack detector, `pip install kernelguard`, standard library only)
reads the source as text and AST: `kernelguard.analyze_code(source)["matched_patterns"]` is a list of
`{"pattern": RULE_ID, "severity": ..., "evidence": MESSAGE}`. It gives no line numbers; `_locate` finds
one by removing statements (in copies of the text) until the finding disappears.

Only the rules in FAILING_RULES fail a submission; every other finding is shown as a warning. A source
that does not parse gives no findings: the worker reports the syntax error itself.
"""
from __future__ import annotations

import ast
import dataclasses
import io
import time
import warnings
from pathlib import Path

# Rules that fail a submission. Each was checked on kernelguard 0.3.2: no finding on any of our honest
# submissions (submission/*.py now and all 29 earlier versions of them in git history), none on 46
# honest variants written to probe them (kernel/launcher caches keyed by shape or pointer, lazy
# first-call compile, reused output buffers, CUDA graphs, side streams, codegen, __main__ self-tests),
# and each matches one precise construct:
#   GLOBALS_MUTATION              a subscript write into `<fn>.__globals__[...]`
#   MODULE_MUTATION               `mod.attr = ...` on an imported reference / utils / eval / __main__
#   CODE_REPLACEMENT              assignment to `<fn>.__code__`
#   FRAME_WALK_MUTATION           a subscript write through a frame's f_globals / f_locals (directly,
#                                 through an alias or a helper's parameter)
#   TORCH_VALIDATION_MONKEYPATCH  assignment / setattr to torch.triu or torch.linalg.householder_product
#   TOKEN_PASTE_CUDA_API          a `##` macro together with CUDA runtime names split across its arguments
#   INPUT_PASSTHROUGH_OUTPUT      the entrypoint returns one of its arguments `.float()`, no compute
#   INPUT_REDUCTION_OUTPUT        the entrypoint returns torch.any / torch.all of an argument
#   SELF_MATMUL_OUTPUT            the entrypoint returns an argument multiplied by itself (or its .T)
#   LAST_CALL_REPLAY              (AST) the entrypoint returns an output saved by an earlier call: first-call
#                                 sentinel, identity / pointer match, default-argument, function-attribute,
#                                 closure, contextvar or generator state
#   POINTER_REPLAY                (AST) the entrypoint returns a stored output when data_ptr() / id() matches
#   CONFIG_CACHE_EXPLOIT          (AST) the entrypoint returns a cache hit with no call on that path and
#                                 stores its own output in that cache
#   SHAPE_OUTPUT_REPLAY           (AST) an output saved in shape/config-keyed state returned as is
#   RESULT_BANK_REPLAY, TIMED_INPUT_REPLAY, BENCHMARK_SHAPE_REPLAY, REFERENCE_PRECOMPUTE_REPLAY
#                                 fingerprints of known replay exploits (several specific names and
#                                 constructs together); narrow, but nothing honest has them
FAILING_RULES: frozenset[str] = frozenset({
    "GLOBALS_MUTATION", "MODULE_MUTATION", "CODE_REPLACEMENT", "FRAME_WALK_MUTATION",
    "TORCH_VALIDATION_MONKEYPATCH", "TOKEN_PASTE_CUDA_API",
    "INPUT_PASSTHROUGH_OUTPUT", "INPUT_REDUCTION_OUTPUT", "SELF_MATMUL_OUTPUT",
    "LAST_CALL_REPLAY", "POINTER_REPLAY", "CONFIG_CACHE_EXPLOIT", "SHAPE_OUTPUT_REPLAY",
    "RESULT_BANK_REPLAY", "TIMED_INPUT_REPLAY", "BENCHMARK_SHAPE_REPLAY", "REFERENCE_PRECOMPUTE_REPLAY",
})
# Warn only: rules kernelguard itself rates "hard" that an honest variant triggered, or that match words:
#   OUTPUT_REPLAY_CACHE           `return <name containing "cache">[key](...)` or `x = cache.get(k); if x is
#                                 not None: return x(...)` in the entrypoint: an honest launcher cache
#   TIMER_MONKEYPATCH             regexes over the text, strings included: a docstring saying "we never set
#                                 torch.cuda.synchronize = ...", or `class _NoopEvent` (optional profiling);
#                                 a Python patch cannot reach the worker's native timing anyway
#   FAKE_BENCHMARK_EMIT           any print in the entrypoint whose text has the word "benchmark" (a debug
#                                 print); the worker's stdout goes to a log, never to the report
#   HARNESS_RUNTIME_PATCHING      sys.modules anywhere + setattr(obj, name_variable, ...) anywhere + any
#                                 string equal to a harness name (e.g. "generate_input")
#   EVALUATOR_MODE_BRANCH         sys.argv anywhere + a string "test"/"benchmark"/"leaderboard" anywhere
#                                 (a `__main__` self-test); the worker's argv holds only descriptor numbers
#   TENSOR_INSTANCE_METHOD_OVERRIDE  any `name.double = ...` / `name.detach = ...` (`cfg.double = True`)
#   OBFUSCATED_EXEC               exec of generated code anywhere + any `.decode()` call anywhere in the file
#   RUNTIME_PACKAGE_INSTALL       any subprocess call with shell=True in the entrypoint (a lazy nvcc build)
#   BENCHMARK_UNSAFE_ALGO_DISPATCH, INPUT_STRUCTURE_TRUNCATION_DISPATCH  keyword counts tuned on other problems
#   SEQUENCE_BATCH_GRAPH          a variable name (batch_graph, call_sequence...) next to cudaGraphLaunch
# and every rule kernelguard rates "support" or "telemetry" (it never filters on them either):
#   EVALUATOR_EXPLOIT TRUSTED_MODULE_IMPORT GLOBALS_ACCESS PARTIAL_GRAPH_KEY STDIO_REDIRECT SCALED_MM_REF
#   DECODE_MM_REF PREPROCESS_CACHE WORKSPACE_CACHE RUNNER_PLAN_CACHE CUDA_GRAPH_REPLAY SILENT_FALLBACK
#   TRIVIAL_PROBE TORCH_COMPILE_CACHE CUDA_GRAPH_PYTHON HARDCODED_SHAPES UNSYNC_MULTISTREAM
#   CUDA_EVENT_DISABLE_TIMING FRAME_WALK_ACCESS SYS_MODULES_ACCESS CODE_ACCESS DYNAMIC_EXECUTION
#   MODULE_RELOAD THREAD_INJECTION LAZY_TENSOR PRECISION_DOWNGRADE
# (SCORE_* and DUPLICATE_SPAM / NEAR_CLONE_SPAM need run metadata or a corpus: a code scan never gives them.)

LOCATE_BUDGET_S = 2.0  # time spent finding line numbers, per file; past it a finding keeps line None


@dataclasses.dataclass(frozen=True)
class Finding:
    rule: str
    line: int | None
    message: str
    fails: bool


_kernelguard = None


def _load():
    global _kernelguard
    if _kernelguard is None:
        try:
            import kernelguard
        except Exception:  # absent, or an interpreter it does not support (it needs Python 3.11+)
            _kernelguard = False
        else:
            _kernelguard = kernelguard
    return _kernelguard or None


def available() -> bool:
    """Whether kernelguard can be imported here (when not, scan() returns [] and the caller says so)."""
    return _load() is not None


def scan(path: Path) -> list[Finding]:
    """kernelguard's findings on the file's source, failing ones first, then by line."""
    kg = _load()
    if kg is None:
        return []
    try:
        source = Path(path).read_text(encoding="utf-8")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings of the submission's own source
            ast.parse(source)
            hits = kg.analyze_code(source, compute_structural_hash=False)["matched_patterns"]
            deadline = time.monotonic() + LOCATE_BUDGET_S
            findings = []
            for hit in hits:
                rule, message = str(hit["pattern"]), str(hit.get("evidence", ""))
                findings.append(Finding(rule, _locate(kg, source, rule, message, deadline), message,
                                        rule in FAILING_RULES))
    except Exception:  # unreadable, does not parse, or kernelguard itself failed
        return []
    return sorted(findings, key=lambda f: (not f.fails, f.line is None, f.line or 0))


def describe(f: Finding) -> str:
    where = f" (line {f.line})" if f.line is not None else ""
    return f"kernelguard: {f.rule}{where}: {f.message}"


# --- line numbers -------------------------------------------------------------------------------------
# kernelguard reports no lines. A finding's line is that of the last statement whose removal (replaced
# by `pass`, in a copy of the text) makes the finding disappear, refined into that statement's body, and
# for a statement of several lines (e.g. a string holding CUDA source) to its last line whose blanking
# does. Only kernelguard's detector that produced the finding is rerun on each copy.

def _locate(kg, source: str, rule: str, message: str, deadline: float) -> int | None:
    try:
        detectors = list(kg.CODE_DETECTORS)
        build = kg.build_submission_facts
    except AttributeError:  # a kernelguard without these internals: no lines
        return None

    def reports(detector, text_or_facts) -> bool:
        return any(h.get("pattern") == rule and h.get("evidence") == message for h in detector(text_or_facts))

    try:
        facts = build(source)
        detector = next((d for d in detectors if reports(d, facts)), None)
    except Exception:
        return None
    if detector is None:
        return None
    lines = io.StringIO(source, newline="").readlines()  # split where ast counts lines (\n, \r\n, \r)

    def gone(new_lines: list[str]) -> bool:
        if time.monotonic() > deadline:
            raise TimeoutError
        text = "".join(new_lines)
        try:
            ast.parse(text)
        except (SyntaxError, ValueError):
            return False  # not a removal kernelguard could judge (its AST rules would see no tree)
        return not reports(detector, build(text))

    def without(node: ast.stmt) -> list[str]:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        last = node.end_lineno or node.lineno
        indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
        return lines[:first] + [indent + "pass\n"] + ["\n"] * (last - first - 1) + lines[last:]

    def bodies(node: ast.AST) -> list[list[ast.stmt]]:
        out = [getattr(node, name) for name in ("body", "orelse", "finalbody")
               if isinstance(getattr(node, name, None), list)]
        out += [h.body for h in getattr(node, "handlers", [])] + [c.body for c in getattr(node, "cases", [])]
        return [b for b in out if b and isinstance(b[0], ast.stmt)]

    try:
        block = ast.parse(source).body
        found = None
        while block:
            hit = next((s for s in reversed(block) if gone(without(s))), None)
            if hit is None:
                break
            found = hit
            block = [s for b in bodies(hit) for s in b]
        if found is None:
            return None
        if not bodies(found) and (found.end_lineno or found.lineno) > found.lineno:
            for n in range(found.end_lineno, found.lineno - 1, -1):
                if gone(lines[: n - 1] + ["\n"] + lines[n:]):
                    return n
        return found.lineno
    except Exception:  # out of time, or kernelguard failed on a copy: the finding stands without a line
        return None
