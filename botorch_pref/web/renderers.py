"""Renderers: how one option of a query is drawn on the answering page.

A renderer turns a design ``{name: value}`` into a :class:`Rendered`; the page escapes all its
text and shows pictures and sounds through ``data:`` URIs only (``<img>`` never runs scripts,
so an SVG is shown safely too).

* ``table`` (default): each parameter's value with a bar showing its place within its bounds.
* ``colour``: parameters naming a colour (see :mod:`botorch_pref.web.colour`) as a swatch.
* a user renderer ``module:function`` or ``path/to/file.py:function`` (loaded like the terminal's
  ``--renderer``), called as ``function({name: value})`` for each option. It returns PNG, JPEG,
  GIF or WebP bytes, WAV/OGG/MP3/AAC bytes (an audio player), an SVG string, an image object
  (a PIL image or a matplotlib figure, closed once drawn if pyplot holds it), or other text
  (shown escaped).
"""

from __future__ import annotations

import base64
import io
import math
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botorch_pref.web import colour

__all__ = ["BUILTIN", "Rendered", "RendererSet", "Row", "default_renderer", "to_rendered"]

#: The renderers every server has.
BUILTIN = ("table", "colour")


@dataclass(frozen=True)
class Row:
    """A table line: a parameter's value and its bounds.

    Attributes:
        name: Parameter name.
        value: Its value, formatted.
        number: Its value.
        low: Lower bound.
        high: Upper bound.
    """

    name: str
    value: str
    number: float
    low: float
    high: float


@dataclass(frozen=True)
class Rendered:
    """One drawn option.

    Attributes:
        kind: ``"table"``, ``"image"``, ``"audio"`` or ``"text"``.
        rows: The parameter table (shown for every kind, under the picture).
        src: A ``data:`` URI for ``image`` and ``audio``.
        text: Text for ``text`` (escaped when shown), or a caption.
    """

    kind: str
    rows: tuple[Row, ...] = ()
    src: str = ""
    text: str = ""


def format_value(value: float, low: float | None = None, high: float | None = None) -> str:
    """A number as the pages show it: 4 significant digits, more inside narrow bounds.

    Within ``[low, high]`` the digits resolve a ten-thousandth of the range, so two options
    between 1e6 and 1e6 + 1, or years 2020.1 and 2020.4, do not look alike.

    Args:
        value: The number.
        low: The lower bound of its parameter, if any.
        high: The upper bound.

    Returns:
        The text.
    """
    digits = 4
    if low is not None and high is not None and high > low:
        scale = max(abs(low), abs(high), abs(value))
        if scale > 0:
            digits = min(15, max(4, 4 + math.ceil(math.log10(scale / (high - low)))))
    return f"{value:.{digits}g}"


def _rows(values: Mapping[str, float], bounds: Mapping[str, tuple[float, float]]) -> tuple:
    rows = []
    for name, v in values.items():
        low, high = float(bounds[name][0]), float(bounds[name][1])
        rows.append(Row(name, format_value(float(v), low, high), float(v), low, high))
    return tuple(rows)


def _data_uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


_MAGIC: tuple[tuple[bytes, int, str, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "image", "image/png"),
    (b"\xff\xd8\xff", 0, "image", "image/jpeg"),
    (b"GIF8", 0, "image", "image/gif"),
    (b"WEBP", 8, "image", "image/webp"),
    (b"WAVE", 8, "audio", "audio/wav"),
    (b"OggS", 0, "audio", "audio/ogg"),
    (b"ID3", 0, "audio", "audio/mpeg"),
)
#: PIL modes a PNG holds as they are; other images are converted to RGB first.
_PNG_MODES = frozenset({"1", "L", "LA", "P", "RGB", "RGBA", "I;16"})
#: Modes converted otherwise: those with transparency, 16-bit ones of another byte order.
_CONVERT: dict[str, tuple[str, ...]] = {"La": ("LA",), "PA": ("RGBA",), "RGBa": ("RGBA",)}
_CONVERT.update({m: ("I", "I;16") for m in ("I;16B", "I;16L", "I;16N")})  # not via I;16: clips


def _mpeg_frame(data: bytes) -> str | None:
    """The MIME type of an MPEG audio frame header that ``data`` starts with, as an MP3 or an
    AAC stream (ADTS) without an ID3 tag does, else ``None``.

    Both start with 11 set sync bits; layer bits ``00`` mark ADTS (AAC), and a reserved
    version, bitrate or sampling rate marks no MPEG audio frame at all."""
    if len(data) < 4 or data[0] != 0xFF or data[1] & 0xE0 != 0xE0:
        return None
    if data[1] & 0xF6 == 0xF0:  # 12 sync bits, layer 00: ADTS
        return "audio/aac"
    version, layer = (data[1] >> 3) & 3, (data[1] >> 1) & 3
    if version == 1 or layer == 0 or data[2] >> 4 == 15 or (data[2] >> 2) & 3 == 3:
        return None
    return "audio/mpeg"


def _png_image(image: Any) -> bytes:
    """A PIL image as PNG, in a mode PNG holds (transparency and 16-bit values kept)."""
    mode = getattr(image, "mode", "RGB")
    if mode not in _PNG_MODES:  # CMYK, float, 32-bit, premultiplied alpha, ...
        for target in _CONVERT.get(mode, ("RGB",)):
            image = image.convert(target)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _figure_png(figure: Any) -> bytes:
    """A matplotlib figure as PNG; one that pyplot holds is closed (else each stays open)."""
    buf = io.BytesIO()
    figure.savefig(buf, format="png", dpi=80)
    pyplot = sys.modules.get("matplotlib.pyplot")  # a pyplot figure means pyplot was imported
    if pyplot is not None:
        pyplot.close(figure)
    return buf.getvalue()


def to_rendered(out: Any, rows: tuple[Row, ...]) -> Rendered:
    """Turn a user renderer's return value into a :class:`Rendered`.

    Args:
        out: What the renderer returned.
        rows: The option's parameter table.

    Returns:
        The drawn option.

    Raises:
        TypeError: For bytes of an unknown format or an object that is no image.
    """
    if out is None:
        return Rendered("table", rows)
    if isinstance(out, (bytes, bytearray, memoryview)):
        data = bytes(out)
        for magic, offset, kind, mime in _MAGIC:
            if data[offset : offset + len(magic)] == magic:
                return Rendered(kind, rows, src=_data_uri(mime, data))
        frame = _mpeg_frame(data)
        if frame is not None:
            return Rendered("audio", rows, src=_data_uri(frame, data))
        raise TypeError(
            "the renderer returned bytes that are not PNG/JPEG/GIF/WebP or WAV/OGG/MP3/AAC"
        )
    if isinstance(out, str):
        svg = out.lstrip("\ufeff \t\r\n")
        head = svg[:200].lower()
        prolog = head.startswith(("<?xml", "<!doctype svg", "<!--"))
        if head.startswith("<svg") or (prolog and "<svg" in svg[:4000].lower()):
            return Rendered("image", rows, src=_data_uri("image/svg+xml", svg.encode("utf-8")))
        return Rendered("text", rows, text=out)
    if hasattr(out, "savefig"):  # a matplotlib figure
        return Rendered("image", rows, src=_data_uri("image/png", _figure_png(out)))
    if hasattr(out, "save") and hasattr(out, "size"):  # a PIL image
        return Rendered("image", rows, src=_data_uri("image/png", _png_image(out)))
    raise TypeError(f"the renderer returned a {type(out).__name__}, not an image, sound or text")


def _swatch_svg(hex_code: str) -> bytes:
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="200" height="140" viewBox="0 0 200 140">'
        f'<rect x="0" y="0" width="200" height="140" rx="10" fill="{hex_code}"/></svg>'
    ).encode("ascii")


def render_colour(values: Mapping[str, float], bounds: Mapping[str, tuple[float, float]]):
    """The ``colour`` renderer (falls back to ``table`` when no colour is named).

    Args:
        values: The design.
        bounds: ``{name: (low, high)}``.

    Returns:
        The drawn option.
    """
    rows = _rows(values, bounds)
    space = colour.colour_space(list(values))
    if space is None:
        return Rendered("table", rows)
    code = colour.hex_colour(colour.to_rgb(values, bounds, space))
    return Rendered("image", rows, src=_data_uri("image/svg+xml", _swatch_svg(code)), text=code)


def default_renderer(names: Sequence[str]) -> str:
    """The renderer a session gets when none was chosen: ``colour`` for colours, else ``table``.

    Args:
        names: The parameter names.

    Returns:
        The renderer's name.
    """
    return "colour" if colour.colour_space(names) is not None else "table"


class RendererSet:
    """The renderers a server offers: the built-in ones and those named on its command line.

    Args:
        user: ``module:function`` specs of user renderers (loaded now; a bad one raises).
    """

    def __init__(self, user: Sequence[str] = ()) -> None:
        from botorch_pref.sessions.session_command import load_renderer

        self._user: dict[str, Callable[[Any], Any]] = {spec: load_renderer(spec) for spec in user}
        self._cache: OrderedDict[tuple, Rendered] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def names(self) -> tuple[str, ...]:
        """Every renderer's name."""
        return (*BUILTIN, *self._user)

    def render(
        self, name: str, values: Mapping[str, float], bounds: Mapping[str, tuple[float, float]]
    ) -> Rendered:
        """Draw one option.

        A failing user renderer, or one this server was not started with, gives the table with
        a note instead of an error page.

        Args:
            name: The renderer's name.
            values: The design.
            bounds: ``{name: (low, high)}``.

        Returns:
            The drawn option (the last 512 are kept: a page refresh does not draw again).
        """
        key = (name, tuple(values.items()), tuple(bounds.items()))
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        drawn = self._draw(name, values, bounds)
        with self._lock:
            self._cache[key] = drawn
            while len(self._cache) > 512:
                self._cache.popitem(last=False)
        return drawn

    def _draw(
        self, name: str, values: Mapping[str, float], bounds: Mapping[str, tuple[float, float]]
    ) -> Rendered:
        if name == "auto":  # by the parameter names
            name = default_renderer(list(values))
        if name == "colour":
            return render_colour(values, bounds)
        rows = _rows(values, bounds)
        if name == "table":
            return Rendered("table", rows)
        func = self._user.get(name)
        if func is None:
            return Rendered("table", rows, text=f"(renderer {name} is not loaded)")
        try:
            return to_rendered(func(dict(values)), rows)
        except (Exception, SystemExit) as err:  # a user's renderer must not take the page down
            return Rendered("table", rows, text=f"(the renderer failed: {type(err).__name__})")
