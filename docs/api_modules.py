"""Which modules the API reference documents (read by ``conf.py`` and by ``tests/test_docs.py``).

Every module listed in :data:`API_MODULES`, and every other module or package directly under
``botorch_pref``, whose ``__all__`` is its public API gets a page of the reference (the listed
ones first, in that order). A package without ``__all__`` (``botorch_pref.web``,
``botorch_pref.integrations``) stands for its submodules: each of them that has an ``__all__``
gets a page, so a new module's public names are in the reference without an edit here. A
module that cannot be imported (an optional extra that is not installed) is left out.
"""

from __future__ import annotations

import importlib
import pkgutil

#: The main public packages and modules, in the order of the reference's table of contents
#: (the other modules directly under ``botorch_pref`` follow them).
API_MODULES = [
    "botorch_pref",
    "botorch_pref.models",
    "botorch_pref.likelihoods",
    "botorch_pref.data",
    "botorch_pref.inference",
    "botorch_pref.acquisition",
    "botorch_pref.loop",
    "botorch_pref.optim",
    "botorch_pref.users",
    "botorch_pref.test_functions",
    "botorch_pref.diagnostics",
    "botorch_pref.sessions",
    "botorch_pref.lfpl",
    "botorch_pref.web",
    "botorch_pref.integrations",
]


def _import(name: str) -> object | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def documented_modules() -> list[str]:
    """The modules with a page of the reference, packages without ``__all__`` expanded."""
    root = importlib.import_module("botorch_pref")
    others = sorted(
        info.name
        for info in pkgutil.iter_modules(root.__path__, prefix="botorch_pref.")
        if info.name not in API_MODULES
    )
    out: list[str] = []
    for name in API_MODULES + others:
        module = _import(name)
        if module is None:
            continue
        if hasattr(module, "__all__"):
            out.append(name)
            continue
        for info in pkgutil.iter_modules(module.__path__, prefix=f"{name}."):
            child = _import(info.name)
            if child is not None and hasattr(child, "__all__"):
                out.append(info.name)
    return out
