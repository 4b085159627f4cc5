"""Edge cases of the answering page's renderers, each once a defect."""

from __future__ import annotations

import base64
import io

import pytest

from botorch_pref.web.renderers import Rendered, to_rendered

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402


def _decoded(drawn: Rendered) -> Image.Image:
    """The PNG a drawn option shows, read back."""
    assert drawn.src.startswith("data:image/png;base64,")
    return Image.open(io.BytesIO(base64.b64decode(drawn.src.split(",", 1)[1])))


def test_a_pyplot_figure_is_closed_once_drawn():
    """A figure made with pyplot was left registered there: every option drawn kept one."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    before = set(plt.get_fignums())
    fig = plt.figure(figsize=(1, 1))
    fig.gca().plot([0, 1], [1, 0])
    drawn = to_rendered(fig, ())
    assert drawn.kind == "image" and _decoded(drawn).size[0] > 0
    assert set(plt.get_fignums()) == before
    # a figure made without pyplot is drawn as before
    from matplotlib.figure import Figure

    assert to_rendered(Figure(figsize=(1, 1)), ()).kind == "image"


@pytest.mark.parametrize(
    ("mode", "value", "shown"),
    [
        ("La", (100, 128), (199, 199, 199, 128)),  # failed: no La -> RGB conversion
        ("RGBa", (100, 0, 0, 128), (199, 0, 0, 128)),  # lost its transparency
        ("PA", (0, 64), (0, 0, 0, 64)),
    ],
)
def test_images_with_premultiplied_alpha_keep_it(mode, value, shown):
    drawn = _decoded(to_rendered(Image.new(mode, (2, 2), value), ()))
    assert drawn.mode == "RGBA" or drawn.mode == "LA"
    assert drawn.convert("RGBA").getpixel((0, 0)) == shown


@pytest.mark.parametrize("mode", ["I;16", "I;16B", "I;16L", "I;16N"])
def test_16_bit_images_of_any_byte_order_keep_their_values(mode):
    """I;16B/L/N went through RGB, so every value above 255 was shown white."""
    image = Image.new(mode, (2, 1))
    image.putpixel((0, 0), 1000)
    image.putpixel((1, 0), 60000)
    drawn = _decoded(to_rendered(image, ()))
    assert drawn.convert("I").getpixel((0, 0)) == 1000
    assert drawn.convert("I").getpixel((1, 0)) == 60000


def test_aac_and_reserved_frame_headers_are_not_labelled_mp3():
    """Any 11 sync bits counted as MP3: AAC (ADTS) streams were labelled ``audio/mpeg``."""
    tail = b"\x00" * 12
    for adts in (b"\xff\xf1\x50\x80", b"\xff\xf9\x50\x80"):  # MPEG-4 and MPEG-2 AAC
        drawn = to_rendered(adts + tail, ())
        assert drawn.kind == "audio" and drawn.src.startswith("data:audio/aac;base64,")
    for mp3 in (b"\xff\xfb\x90\x00", b"\xff\xf3\x90\x00", b"\xff\xe3\x90\x00"):
        assert to_rendered(mp3 + tail, ()).src.startswith("data:audio/mpeg;base64,")
    # reserved version (01), bitrate index 1111 or sampling-rate index 11: no MPEG audio frame
    for bad in (b"\xff\xeb\x90\x00", b"\xff\xfb\xf0\x00", b"\xff\xfb\x9c\x00"):
        with pytest.raises(TypeError):
            to_rendered(bad + tail, ())
