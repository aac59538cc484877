"""What every plot shares: matplotlib, an optional extra (opskew[plot]),
loaded when a plot is drawn, and a figure rendered in memory, so that it
goes through the one writer (opskew.output.write_file) like every output."""

from __future__ import annotations

import io

from opskew.output import write_file
from opskew.vocab import NO_MATPLOTLIB


def figure_bytes(fig, fmt: str, **kw) -> bytes:
    """A matplotlib figure rendered in memory (savefig into a BytesIO), for
    write_file: plots go through the one writer like every output."""
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, **kw)
    return buf.getvalue()


def pyplot():
    """matplotlib's pyplot on the Agg backend; ImportError in one line
    without matplotlib (an optional extra: opskew[plot])."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError("plot needs matplotlib (pip install 'opskew[plot]')") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(plt, fig, path: str) -> None:
    """The figure to `path` (PNG or SVG by its suffix) through the one writer."""
    fig.tight_layout()
    data = figure_bytes(fig, "svg" if path.lower().endswith(".svg") else "png", dpi=120)
    plt.close(fig)
    write_file(path, data)


# What a plot request says without matplotlib (an optional extra), after
# "--plot" or "plot skipped: it".


def plot_unavailable() -> str | None:
    """None when matplotlib imports; else, in one line, why a plot that was
    not asked for by name (sweep's default one) is skipped."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return f"plot skipped: it {NO_MATPLOTLIB} (--no-plot leaves it out)"
    return None
