"""The built documentation: every public name in the API reference, tutorials with figures.

These tests read the site that ``make docs`` builds into ``docs/_build/html`` (CI builds it
before the test suite runs). Without a built site they skip, except under CI, where a missing
site is a failure.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "docs" / "_build" / "html"


def _api_modules() -> list[str]:
    """``API_MODULES`` from ``docs/conf.py``, read without running the configuration."""
    tree = ast.parse((ROOT / "docs" / "conf.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "API_MODULES":
            return ast.literal_eval(node.value)
    raise AssertionError("docs/conf.py defines no API_MODULES")


@pytest.fixture(scope="module")
def site() -> Path:
    if not (SITE / "objects.inv").exists():
        if os.environ.get("CI"):
            pytest.fail("docs/_build/html is missing: CI must run `make docs` before the tests")
        pytest.skip("the documentation is not built (run `make docs`)")
    return SITE


@pytest.fixture(scope="module")
def documented(site: Path) -> set[str]:
    from sphinx.util.inventory import InventoryFile

    with open(site / "objects.inv", "rb") as f:
        inventory = InventoryFile.load(f, "", lambda *parts: "/".join(parts))
    names: set[str] = set()
    data = getattr(inventory, "data", inventory)
    for domain, entries in data.items():
        if domain.startswith("py:"):
            names.update(entries)
    return names


def test_every_subpackage_is_in_the_reference():
    package = ROOT / "botorch_pref"
    subpackages = {
        f"botorch_pref.{p.parent.name}"
        for p in package.glob("*/__init__.py")
        if p.parent.name not in {"web", "integrations"}
    }
    assert subpackages <= set(_api_modules())


@pytest.mark.parametrize("module", _api_modules())
def test_every_public_name_is_in_the_api_reference(module, documented):
    mod = importlib.import_module(module)
    missing = []
    for name in getattr(mod, "__all__", []):
        obj = getattr(mod, name)
        if name.startswith("__") or inspect.ismodule(obj):
            continue
        is_code = inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj)
        qualname = getattr(obj, "__qualname__", None) if is_code else None
        home = getattr(obj, "__module__", None)
        candidates = {f"{module}.{name}"}
        if qualname and home:
            candidates.add(f"{home}.{qualname}")
        if qualname is None:  # a constant or type alias: documented where it is assigned
            candidates |= {d for d in documented if d.endswith(f".{name}")}
        if not candidates & documented:
            missing.append(name)
    assert not missing, f"{module}: not in the API reference: {missing}"


def test_tutorial_pages_hold_their_figures_and_no_errors(site):
    notebooks = sorted((ROOT / "tutorials").glob("*.ipynb"))
    assert notebooks
    for nb in notebooks:
        page = site / "_generated" / "tutorials" / f"{nb.stem}.html"
        assert page.exists(), f"{page} was not built"
        html = page.read_text(encoding="utf-8")
        assert re.search(r"<img[^>]+src=", html), f"{nb.name}: no figure on its page"
        assert "Traceback (most recent call last)" not in html, f"{nb.name}: an error cell"
        assert 'class="output traceback' not in html, f"{nb.name}: an error cell"


def test_maths_and_reference_pages_are_built(site):
    for page in ["index.html", "maths.html", "_generated/api/index.html", "changelog.html"]:
        assert (site / page).exists(), page
