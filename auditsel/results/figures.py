"""Figures written light: every committed plot is a small palette PNG.

Contract. A plot is a picture of numbers that result.json, rows.json or the tables hold; its
pixels are not data. `save_figure(fig, path)` renders a matplotlib figure at `FIGURE_DPI` dots
per inch, reduces it to an adaptive (octree) palette of at most `PALETTE_COLOURS` colours (no dithering:
lines and text stay sharp) and writes it optimised, atomically (`auditsel.files`), so that the
PNGs under results/ stay a small share of the repository. `shrink_png(path)` applies the same
standard to a PNG already written (resampled from the resolution recorded in the file), and
`python -m auditsel.results.figures FOLDER...` does so for every PNG below the folders: it
re-renders the committed plots without replaying a game (a PNG already at the standard is left
as it is).
"""

from __future__ import annotations

import argparse
import importlib
import io
import sys
from pathlib import Path
from typing import Any

from auditsel.files import atomic_write_bytes

FIGURE_DPI = 72
PALETTE_COLOURS = 64


def _palette_png(image: Any) -> bytes:
    from PIL import Image  # deferred: pillow is heavy

    rgb = image.convert("RGB")
    small = rgb.quantize(
        colors=PALETTE_COLOURS, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE
    )
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True, dpi=(FIGURE_DPI, FIGURE_DPI))
    return out.getvalue()


def prepare_plotting() -> None:
    """Import what the figures use (matplotlib's Figure, its Agg canvas and tickers, pillow):
    a third of a second, paid once per process, ahead of the first figure."""
    for module in (
        "numpy",
        "matplotlib.figure",
        "matplotlib.backends.backend_agg",
        "matplotlib.ticker",
        "PIL.Image",
    ):
        importlib.import_module(module)


def new_figure(size: tuple[float, float], grid: tuple[int, int] | None = None) -> tuple[Any, Any]:
    """(figure, axes) of `size` inches on matplotlib's Agg canvas, without pyplot: no global
    figure manager to close it from (a figure is freed with its last reference) and a tenth of
    a second less to import. `axes` is one Axes, or for a (rows, cols) `grid` a 2-d array."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # deferred: matplotlib is heavy
    from matplotlib.figure import Figure

    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
    return fig, fig.subplots() if grid is None else fig.subplots(*grid, squeeze=False)


def save_figure(fig: Any, path: str | Path) -> Path:
    """Write `fig` to `path` as a palette PNG at FIGURE_DPI (see the module docstring)."""
    from PIL import Image  # deferred: pillow is heavy

    # the canvas's pixels at FIGURE_DPI, as savefig renders them, taken without the round
    # trip through a compressed PNG that savefig would write and Image.open decode
    dpi = fig.get_dpi()
    fig.set_dpi(FIGURE_DPI)
    try:
        fig.canvas.draw()
        width, height = fig.canvas.get_width_height(physical=True)
        image = Image.frombuffer("RGBA", (width, height), fig.canvas.buffer_rgba(), "raw")
        data = _palette_png(image)
    finally:
        fig.set_dpi(dpi)
    atomic_write_bytes(path, data)
    return Path(path)


def shrink_png(path: str | Path) -> bool:
    """Bring one PNG to the standard (FIGURE_DPI, a palette); False when it already was."""
    from PIL import Image  # deferred: pillow is heavy

    with Image.open(path) as image:
        dpi = float(image.info.get("dpi", (FIGURE_DPI, FIGURE_DPI))[0])
        if image.mode == "P" and round(dpi) <= FIGURE_DPI:
            return False
        scale = min(FIGURE_DPI / dpi, 1.0) if dpi > 0 else 1.0
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        resized = image.convert("RGB").resize(size, Image.Resampling.LANCZOS)
        data = _palette_png(resized)
    atomic_write_bytes(path, data)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m auditsel.results.figures",
        description="Re-render every PNG below the folders at the house standard (no game is "
        "replayed).",
    )
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args(argv)
    changed = 0
    for folder in args.folders:
        for path in sorted(folder.rglob("*.png")):
            changed += shrink_png(path)
    print(f"{changed} PNG(s) re-rendered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
