"""Sphinx configuration of the botorch-pref documentation (built by ``make docs``).

The build is self-contained and offline: the API reference is generated from the package's
``__all__`` lists (see :func:`_write_api_pages`), the tutorial notebooks are copied from
``tutorials/`` and executed by myst-nb on every build, and warnings are errors (``-W``).
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import shutil
import sys
from pathlib import Path

from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
GENERATED = HERE / "_generated"

project = "botorch-pref"
author = "botorch-pref contributors"
copyright = "2026, botorch-pref contributors"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
]

#: Every module whose ``__all__`` is public API, each with a page of the reference.
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
]
OPTIONAL_API_MODULES = [
    "botorch_pref.web",
    "botorch_pref.integrations.ax",
    "botorch_pref.integrations.bope",
]

source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "README.md"]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

# Notebooks: executed on every build (so their outputs come from the current code), in a
# temporary directory, with a cell timeout; a failing cell fails the build.
nb_execution_mode = "force"
if os.environ.get("BOTORCH_PREF_DOCS_QUICK"):  # a quick look at prose and API pages only
    nb_execution_mode = "off"
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_in_temp = True
nb_merge_streams = True

autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_class_signature = "separated"
autosummary_generate = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # NamedTuple fields are documented once, by autodoc
suppress_warnings = ["myst.header"]

html_theme = "furo"
html_title = "botorch-pref"
html_static_path: list[str] = []


def _canonical(module: str, name: str) -> tuple[str, object]:
    """The object a public name refers to and the module that defines it."""
    obj = getattr(importlib.import_module(module), name)
    home = getattr(obj, "__module__", None) if not inspect.ismodule(obj) else obj.__name__
    return (home or module), obj


def _directive(obj: object) -> str:
    if inspect.isclass(obj):
        return "autoclass"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return "autofunction"
    return "autodata"


def _data_home(name: str, module: str) -> str:
    """The module whose source assigns ``name`` at top level (where its ``#:`` comment is)."""
    pattern = re.compile(rf"^{re.escape(name)}\s*(:|=)", re.MULTILINE)
    for path in sorted((ROOT / "botorch_pref").rglob("*.py")):
        if pattern.search(path.read_text(encoding="utf-8")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return module


def _write_api_pages() -> None:
    """One page per public module: each name of its ``__all__`` documented where it is defined.

    A name that several modules export (``botorch_pref.PairwiseLaplaceGP`` is
    ``botorch_pref.models.pairwise.PairwiseLaplaceGP``) is described once, on the page of the
    first module in :data:`API_MODULES` that exports it, under its defining module's path;
    other pages link to it.
    """
    out = GENERATED / "api"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    described: dict[str, str] = {}
    pages = []
    modules = API_MODULES + [m for m in OPTIONAL_API_MODULES if _importable(m)]
    for module in modules:
        mod = importlib.import_module(module)
        doc = inspect.getdoc(mod) or ""
        summary = doc.splitlines()[0] if doc else ""
        lines = [f"# `{module}`", "", summary, ""]
        for name in sorted(getattr(mod, "__all__", [])):
            if name.startswith("__"):
                continue
            home, obj = _canonical(module, name)
            if inspect.ismodule(obj):
                continue
            directive = _directive(obj)
            if directive == "autodata":
                home = _data_home(name, module)
                target = f"{home}.{name}"
            else:
                target = f"{home}.{getattr(obj, '__qualname__', name)}"
            if target in described or "<" in target:
                lines += [f"- `{name}`: see {{py:obj}}`{target}`", ""]
                continue
            described[target] = module
            if not _check_documented(name, home, obj, directive):
                continue
            options = ["   :no-value:"] if directive == "autodata" else []
            lines += ["```{eval-rst}", f".. {directive}:: {target}", *options, "```", ""]
        page = module.replace(".", "-")
        (out / f"{page}.md").write_text("\n".join(lines))
        pages.append(page)
    toc = "\n".join(pages)
    (out / "index.md").write_text(
        "# API reference\n\nGenerated from the docstrings of every public name "
        "(each module's `__all__`).\n\n```{toctree}\n:maxdepth: 1\n\n" + toc + "\n```\n"
    )


def _check_documented(name: str, home: str, obj: object, directive: str) -> bool:
    """Whether a public name has a docstring of its own; if not, it is reported as a warning.

    A class or function needs a docstring; a constant needs a ``#:`` comment where it is
    assigned. Under ``-W`` a missing one fails the build.
    """
    if directive == "autodata":
        documented = ("", name) in ModuleAnalyzer.for_module(home).find_attr_docs()
    else:
        documented = bool(obj.__doc__ and obj.__doc__.strip())
    if not documented:
        MISSING.append(f"{home}.{name}")
    return documented


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def _copy_tutorials() -> None:
    """The notebooks of ``tutorials/`` (committed without outputs), executed by the build."""
    out = GENERATED / "tutorials"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    notebooks = sorted((ROOT / "tutorials").glob("*.ipynb"))
    for nb in notebooks:
        shutil.copy2(nb, out / nb.name)
    toc = "\n".join(nb.stem for nb in notebooks)
    (out / "index.md").write_text(
        "# Tutorials\n\nEach notebook answers one question with figures. They are executed "
        "when the documentation is built, so every output below comes from the current code."
        "\n\n```{toctree}\n:maxdepth: 1\n\n" + toc + "\n```\n"
    )


# Notebook kernels inherit the build's environment: no busy-waiting OpenMP threads, and never
# real MovieLens data in the LFPL tutorial. (MPLBACKEND stays unset: the kernels' inline backend
# is what puts the figures on the pages.)
os.environ.pop("MPLBACKEND", None)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("BOTORCH_PREF_MOVIELENS", "synthetic")
MISSING: list[str] = []


def _report_missing(app: object) -> None:
    for target in MISSING:
        logger.warning("public name without a docstring: %s", target, type="botorch_pref")


def setup(app: object) -> dict[str, bool]:
    """Generate the API and tutorial pages; report public names without docstrings."""
    _write_api_pages()
    _copy_tutorials()
    app.connect("builder-inited", _report_missing)
    return {"parallel_read_safe": True}
