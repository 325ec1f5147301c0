"""No import cycles among the modules of eval/, docs/layout.md names every one of them, and no module
of eval/judge or eval/worker passes 500 lines without saying why.

The graph is built statically (ast), from every import statement of every module: at the top, inside
a function, under `if TYPE_CHECKING` or in a try; a function-level import counts like any other (it
only moves the cycle to call time: the two modules still cannot be understood, tested or replaced
one without the other). An edge goes to the module an import names: `import eval.a.b` and
`from eval.a import b` (b a module) give eval.a.b, `from eval.a.b import name` gives eval.a.b.
A package's __init__ that Python runs on the way is not an edge of its own (eval's are import-free).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "eval"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of eval/ that the module `name` (at path) imports, anywhere in its text."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return {target for target in found if target in known and target != name}


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), each as one cycle through it."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return [cycle_through(component, edges) for component in components]


def cycle_through(component: list[str], edges: dict[str, set[str]]) -> list[str]:
    """One cycle from the component's first module back to it (breadth first: a shortest one)."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(edges[node] & members):
            if target == start:
                return paths[node] + [start]
            if target not in paths:
                paths[target] = paths[node] + [target]
                queue.append(target)
    return component


def test_the_cycle_finder_finds_a_cycle_and_only_one():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_function_level_and_relative_imports_count(tmp_path):
    known = {"eval.x", "eval.y", "eval.z"}
    path = tmp_path / "x.py"
    path.write_text("def f():\n    from eval import y\n    from .z import thing\n")
    assert imports_of("eval.x", path, known) == {"eval.y", "eval.z"}


def test_no_module_of_eval_is_part_of_an_import_cycle():
    found = cycles(graph())
    assert not found, "import cycles in eval/ (function-level imports count):\n" + "\n".join(
        "  " + " -> ".join(cycle) for cycle in found)


def test_docs_layout_names_every_module_of_eval():
    """docs/layout.md is the map of eval/: a module it does not name is a module nobody placed."""
    layout = (ROOT / "docs" / "layout.md").read_text()
    named = set(re.findall(r"[\w/]+\.(?:py|cpp|h)\b", layout))
    sources = [p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".cpp", ".h") and "__pycache__" not in p.parts
               and p.name != "__init__.py"]
    missing = sorted(str(p.relative_to(ROOT)) for p in sources
                     if str(p.relative_to(ROOT)) not in named and str(p.relative_to(PACKAGE)) not in named)
    assert not missing, f"docs/layout.md does not name: {', '.join(missing)}"


MAX_LINES = 500  # a module of eval/judge or eval/worker past this says why (REASON in its first lines)
REASON = "over 500 lines because"


def test_no_judge_or_worker_module_is_over_500_lines_without_a_stated_reason():
    """A module that grows past MAX_LINES is a room where something can hide: split it by role, or
    say in its docstring (or header comment) why not, with the words of REASON."""
    long = []
    for folder in (PACKAGE / "judge", PACKAGE / "worker"):
        for path in sorted(folder.rglob("*")):
            if path.suffix not in (".py", ".cpp", ".h") or "__pycache__" in path.parts:
                continue
            lines = path.read_text().splitlines()
            if len(lines) > MAX_LINES and REASON not in " ".join(lines[:40]):
                long.append(f"{path.relative_to(ROOT)} ({len(lines)} lines)")
    assert not long, "split by role, or state the reason (" + REASON + "...): " + ", ".join(long)
