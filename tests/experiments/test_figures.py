"""Figures written light (auditsel.results.figures): a palette PNG at FIGURE_DPI whose
pixels keep the figure's colours, and a re-render of an existing PNG that is idempotent."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from PIL import Image

from auditsel.results.figures import FIGURE_DPI, PALETTE_COLOURS, save_figure, shrink_png


def _figure():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1], color="#ff0000", lw=6)
    ax.fill_between([0, 1], [0.2, 0.2], [0.4, 0.4], color="C8", alpha=0.2)
    return fig


def test_save_figure_writes_a_small_palette_png_with_the_figures_colours(tmp_path):
    fig = _figure()
    path = save_figure(fig, tmp_path / "a.png")
    fig.savefig(tmp_path / "full.png", dpi=110)
    plt.close(fig)
    with Image.open(path) as image:
        assert image.mode == "P" and image.size == (4 * FIGURE_DPI, 3 * FIGURE_DPI)
        assert round(image.info["dpi"][0]) == FIGURE_DPI
        colours = image.convert("RGB").getcolors(maxcolors=10_000)
    assert len(colours) <= PALETTE_COLOURS
    # the thick red line keeps its colour (within the palette's rounding)
    red = [c for n, c in colours if c[0] > 200 and c[1] < 60 and c[2] < 60]
    assert red, colours
    assert path.stat().st_size < (tmp_path / "full.png").stat().st_size / 2


def test_shrink_png_brings_a_png_to_the_standard_once(tmp_path):
    fig = _figure()
    fig.savefig(tmp_path / "b.png", dpi=110)
    plt.close(fig)
    before = (tmp_path / "b.png").stat().st_size
    assert shrink_png(tmp_path / "b.png") is True
    with Image.open(tmp_path / "b.png") as image:
        assert image.mode == "P" and image.size == (
            round(440 * FIGURE_DPI / 110),
            round(330 * FIGURE_DPI / 110),
        )
        pixels = np.asarray(image.convert("RGB"))
    assert (tmp_path / "b.png").stat().st_size < before
    assert shrink_png(tmp_path / "b.png") is False  # already at the standard: left as it is
    with Image.open(tmp_path / "b.png") as again:
        assert np.array_equal(np.asarray(again.convert("RGB")), pixels)


def test_save_figure_takes_the_pixels_savefig_would_write(tmp_path):
    """The canvas's pixels (no PNG written and decoded again) give the PNG of the savefig
    route byte for byte, on a figure with text, a log axis and a legend; the figure's own dpi
    is left as it was."""
    import io

    from auditsel.results.figures import _palette_png

    fig = _figure()
    ax = fig.axes[0]
    ax.set_yscale("log")
    ax.set_title("trade-off, 10^-5")
    ax.legend(["a line"])
    dpi = fig.get_dpi()
    path = save_figure(fig, tmp_path / "canvas.png")
    assert fig.get_dpi() == dpi
    raw = io.BytesIO()
    fig.savefig(raw, format="png", dpi=FIGURE_DPI)
    raw.seek(0)
    with Image.open(raw) as image:
        assert path.read_bytes() == _palette_png(image)
    plt.close(fig)
