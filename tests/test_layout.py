"""The package's shape: module and function sizes, and imports that follow the layering.

The layering is CONTRIBUTING.md's: a module imports only from its own layer and the layers
below it, and no two modules import each other, directly or through others.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "botorch_pref"
MAX_MODULE_LINES = 650
MAX_FUNCTION_LINES = 90

# Still over the limits, to be split; remove an entry once it is split (a stale entry fails).
LONG_MODULES: set[str] = set()
LONG_FUNCTIONS: set[str] = set()

# Layer of each top-level module or subpackage: imports go to the same or a lower layer.
LAYERS = {
    "checks": 0,
    "runtime": 0,
    "test_functions": 0,
    "likelihoods": 0,
    "users": 1,
    "graded_users": 1,
    "data": 1,
    "inference": 2,
    "lfpl": 2,
    "models": 3,
    "acquisition": 4,
    "optim": 4,
    "diagnostics": 4,
    "integrations": 4,
    "loop": 5,
    "demo": 6,
    "__init__": 6,
    "sessions": 7,
    "web": 8,
    "cli": 9,
}
# Imports against the layering or in a cycle that are known, to be removed ("importer -> imported").
KNOWN_VIOLATIONS: set[str] = set()


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("botorch_pref", *path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            length = node.end_lineno - start + 1
            doc = node.body[0]
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
                length -= doc.end_lineno - doc.lineno + 1  # the docstring is not code
            yield node.name, length


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``module`` imports (at any depth of its code)."""
    found = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], base]
                ).strip(".")
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            names = subs if len(subs) == len(node.names) else [base, *subs]
        else:
            continue
        found.update(n for n in names if n in modules and n != module)
    return found


def _layer(module: str) -> int:
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else "__init__"
    assert name in LAYERS, f"{module}: add {name!r} to LAYERS (and to CONTRIBUTING's layout)"
    return LAYERS[name]


def test_no_module_is_too_long():
    too_long = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if len(path.read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES:
            too_long.add(rel)
    assert too_long <= LONG_MODULES, f"split these modules: {sorted(too_long - LONG_MODULES)}"
    assert LONG_MODULES <= too_long, f"no longer too long: {sorted(LONG_MODULES - too_long)}"


def test_no_function_is_too_long():
    too_long = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        for name, length in _functions(ast.parse(path.read_text(encoding="utf-8"))):
            if length > MAX_FUNCTION_LINES:
                too_long[f"{rel}::{name}"] = length
    new = {k: v for k, v in too_long.items() if k not in LONG_FUNCTIONS}
    assert not new, f"split these functions (lines): {new}"
    stale = LONG_FUNCTIONS - set(too_long)
    assert not stale, f"no longer too long: {sorted(stale)}"


def test_no_two_modules_share_a_name():
    """A module's name says what it holds, so two modules never share one (``__init__``
    aside)."""
    where: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            where.setdefault(path.name, []).append(path.relative_to(PACKAGE).as_posix())
    assert {name: places for name, places in where.items() if len(places) > 1} == {}


def test_no_private_name_is_imported_from_another_module():
    """What several modules use is public where it is defined (dunders such as
    ``__version__`` aside)."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (
                node.level or (node.module or "").startswith("botorch_pref")
            ):
                found += [
                    f"{path.relative_to(PACKAGE).as_posix()}: {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert found == []


@pytest.fixture(scope="module")
def imports() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _imports(m, p, modules) for m, p in modules.items()}


def _against_layering(imports: dict[str, set[str]]) -> set[str]:
    return {
        f"{m} -> {n}" for m, targets in imports.items() for n in targets if _layer(n) > _layer(m)
    }


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its modules, the first repeated at the end), or ``None``."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for target in sorted(edges.get(module, ())):
            found = visit(target, [*path, module])
            if found:
                return found
        done.add(module)
        return None

    for module in sorted(edges):
        found = visit(module, [])
        if found:
            return found
    return None


def test_imports_follow_the_layering(imports):
    assert _against_layering(imports) - KNOWN_VIOLATIONS == set()


def test_no_import_cycles(imports):
    edges = {
        m: {n for n in targets if f"{m} -> {n}" not in KNOWN_VIOLATIONS}
        for m, targets in imports.items()
    }
    assert _cycle(edges) is None


def test_the_checks_find_what_they_look_for(imports):
    """An upward import and a cycle are found; the import reader sees real imports."""
    upward = {"botorch_pref.models.pairwise": {"botorch_pref.loop.state"}}
    assert _against_layering(upward) == {"botorch_pref.models.pairwise -> botorch_pref.loop.state"}
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None
    assert {"botorch_pref.loop", "botorch_pref.sessions.exchange"} <= imports[
        "botorch_pref.sessions.session"
    ]
    serve_imports = imports["botorch_pref.web.serve_command"]
    assert "botorch_pref.web.colour_demo" in serve_imports  # inside a function
