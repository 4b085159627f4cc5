"""The documentation: every public name documented, no broken link, maths rendered offline.

The tests that read the built site (``make docs`` writes it to ``docs/_build/html``; CI builds
it before the test suite runs) skip without it, except under CI, where a missing site is a
failure; ``make test`` says when they will skip. The others need no build.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import json
import os
import re
import textwrap
import threading
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.helpers import CHROMEDRIVER, CHROMIUM, headless_chromium

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "docs" / "_build" / "html"
IN_CI = bool(os.environ.get("CI"))


def _api_modules():
    """``docs/api_modules.py``, the list of modules the reference documents."""
    spec = importlib.util.spec_from_file_location("api_modules", ROOT / "docs" / "api_modules.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _public_names() -> list[tuple[str, str, object]]:
    """``(module, name, object)`` for every name of every documented module's ``__all__``."""
    out = []
    for module in _api_modules().documented_modules():
        mod = importlib.import_module(module)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not name.startswith("__") and not inspect.ismodule(obj):
                out.append((module, name, obj))
    return out


@pytest.fixture(scope="module")
def site() -> Path:
    if not (SITE / "objects.inv").exists():
        if IN_CI:
            pytest.fail("docs/_build/html is missing: CI must run `make docs` before the tests")
        pytest.skip("the documentation is not built (run `make docs` first)")
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


def test_every_module_of_the_package_is_in_the_reference():
    documented = set(_api_modules().documented_modules())
    package = ROOT / "botorch_pref"
    for child in sorted(package.iterdir()):
        name = child.stem if child.suffix == ".py" else child.name
        if name.startswith("_") or not (child.suffix == ".py" or (child / "__init__.py").exists()):
            continue
        module = importlib.import_module(f"botorch_pref.{name}")
        if hasattr(module, "__all__"):
            assert f"botorch_pref.{name}" in documented, name
        else:  # a package without __all__ stands for its modules that have one
            inner = [m for m in documented if m.startswith(f"botorch_pref.{name}.")]
            assert inner, f"botorch_pref.{name}: none of its modules is in the reference"


def test_every_public_name_has_a_docstring_of_its_own():
    """Not one inherited from a base class (torch's ``Module`` says "Initialize internal ...")."""
    missing = []
    for module, name, obj in _public_names():
        if inspect.isclass(obj):
            own = vars(obj).get("__doc__")
            if own and re.fullmatch(rf"{name}\(.*\)", own.strip()):
                own = None  # the signature a NamedTuple or dataclass writes for itself
        elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
            own = obj.__doc__
        else:
            continue  # constants: the build checks their ``#:`` comments
        if not (own and own.strip()):
            missing.append(f"{module}.{name}")
    assert not missing, f"public names without a docstring of their own: {missing}"


def test_every_public_name_is_in_the_api_reference(documented):
    missing = []
    for module, name, obj in _public_names():
        is_code = inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj)
        qualname = getattr(obj, "__qualname__", None) if is_code else None
        home = getattr(obj, "__module__", None)
        candidates = {f"{module}.{name}"}
        if qualname and home:
            candidates.add(f"{home}.{qualname}")
        if qualname is None:  # a constant or type alias: documented where it is assigned
            candidates |= {d for d in documented if d.endswith(f".{name}")}
        if not candidates & documented:
            missing.append(f"{module}.{name}")
    assert not missing, f"not in the API reference: {missing}"


def test_no_page_shows_an_inherited_torch_docstring(site):
    pages = sorted((site / "_generated" / "api").glob("*.html"))
    assert pages
    for page in pages:
        assert "Initialize internal Module state" not in page.read_text(encoding="utf-8"), page


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


GUIDE_BLOCKS = [
    (path.relative_to(ROOT).as_posix(), index, code)
    for path in sorted((ROOT / "docs").rglob("*.md"))
    if "_build" not in path.parts and "_generated" not in path.parts
    for index, code in enumerate(
        re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)
    )
]


@pytest.mark.parametrize(
    "code", [c for _, _, c in GUIDE_BLOCKS], ids=[f"{p}[{i}]" for p, i, _ in GUIDE_BLOCKS]
)
def test_the_guides_python_examples_run(code, capsys):
    for extra in ("ax", "starlette"):
        if re.search(rf"^\s*(from|import) {extra}\b", code, flags=re.M):
            pytest.importorskip(extra)
    # a block inside a list item is indented with it
    exec(compile(textwrap.dedent(code), "guide example", "exec"), {"__name__": "guide"})


def test_every_page_of_the_site_is_built(site):
    pages = ["index", "getting-started", "maths", "benchmarks", "changelog"]
    pages += [f"guides/{p.stem}" for p in (ROOT / "docs" / "guides").glob("*.md")]
    pages += ["_generated/api/index", "_generated/tutorials/index"]
    for page in pages:
        assert (site / f"{page}.html").exists(), page


class _Links(HTMLParser):
    """The links (``href``, ``src``) and the anchors (``id``, ``name``) of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.anchors: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if value is None:
                continue
            if key in ("href", "src") and not (tag == "link" and ("rel", "preconnect") in attrs):
                self.links.append(value)
            elif key in ("id", "name"):
                self.anchors.add(value)


@functools.cache
def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser


def test_no_internal_link_is_broken(site):
    broken = []
    for page in sorted(site.rglob("*.html")):
        for link in _parse(page).links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith("//") or link == "#":
                continue  # an external link (the browser test checks none is needed)
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {link}")
            elif parts.fragment and target.suffix == ".html":
                if unquote(parts.fragment) not in _parse(target).anchors:
                    broken.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    assert not broken, f"{len(broken)} broken links: {broken[:20]}"


def test_benchmark_results_are_current_tables(site):
    results = ROOT / "benchmarks" / "RESULTS.md"
    assert len(results.read_text(encoding="utf-8").splitlines()) <= 1500
    page = _Text()
    page.feed((site / "benchmarks.html").read_text(encoding="utf-8"))
    assert len(page.words()) <= 3000


class _Text(HTMLParser):
    """The words of a page's article (what a reader reads; no navigation, no scripts)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.skip = 0
        self.chunks: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "article" or self.depth:
            self.depth += 1
        if tag in ("script", "style"):
            self.skip += 1

    def handle_endtag(self, tag: str) -> None:
        if self.depth:
            self.depth -= 1
        if tag in ("script", "style") and self.skip:
            self.skip -= 1

    def handle_data(self, data: str) -> None:
        if self.depth and not self.skip:
            self.chunks.append(data)

    def words(self) -> list[str]:
        return re.findall(r"[\w.+-]*\w", " ".join(self.chunks))


# --- the maths renders offline, in a real browser ------------------------------------------


@pytest.fixture(scope="module")
def served_site(site):
    """The built site on a local HTTP server (as a reader would open it), and its URL."""

    class Quiet(SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(site), **kwargs)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def offline_browser():
    """Headless Chromium that cannot resolve any host but this machine, logging requests."""
    if not IN_CI:
        pytest.importorskip("selenium")
        if CHROMIUM is None or CHROMEDRIVER is None:
            pytest.skip("no Chromium/chromedriver (CI installs them)")
    driver = headless_chromium(
        "--disable-background-networking",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        logging={"performance": "ALL"},
    )
    driver.set_script_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


RAW_TEX = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$|\\frac|\\mathcal")


@pytest.mark.parametrize(
    "page",
    ["_generated/tutorials/01_preference_gp_1d.html", "maths.html", "guides/lfpl.html"],
)
def test_maths_renders_offline_and_no_request_leaves_the_machine(
    page, served_site, offline_browser
):
    driver = offline_browser
    driver.get_log("performance")  # drop the entries of earlier pages
    driver.get(f"{served_site}/{page}")
    rendered = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const count = () => document.querySelectorAll('mjx-container').length;"
        "if (!window.MathJax || !MathJax.startup) { done(-1); return; }"
        "MathJax.startup.promise.then(() => done(count()), () => done(-2));"
    )
    assert rendered > 0, f"{page}: MathJax did not render (status {rendered})"
    errors = driver.execute_script("return document.querySelectorAll('mjx-merror').length")
    assert errors == 0, f"{page}: {errors} formulas MathJax could not typeset"
    visible = driver.execute_script("return document.body.innerText")
    assert not RAW_TEX.search(visible), f"{page}: raw TeX on the page: {RAW_TEX.search(visible)}"
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    assert urls, "no request was logged"
    away = [u for u in urls if not u.startswith((served_site, "data:", "blob:", "about:"))]
    assert not away, f"{page}: requests that leave the machine: {away}"
