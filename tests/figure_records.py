"""A helper for the plot tests: every figure a plot writer saves, recorded."""

import sys


def record_saved_figures(monkeypatch, record):
    """Call record(fig, path) for every figure a plot writer saves (through
    auditsel.results.figures.save_figure, wherever a module imported it), then save it;
    every figure drawn in this process."""
    from auditsel.results import figures

    original = figures.save_figure

    def save(fig, path):
        record(fig, path)
        return original(fig, path)

    for module in list(sys.modules.values()):
        if getattr(module, "save_figure", None) is original:
            monkeypatch.setattr(module, "save_figure", save)
