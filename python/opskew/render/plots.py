"""What every plot shares: a matplotlib figure rendered in memory, so that it
goes through the one writer (opskew.output.write_file) like every output."""

from __future__ import annotations

import io


def figure_bytes(fig, fmt: str, **kw) -> bytes:
    """A matplotlib figure rendered in memory (savefig into a BytesIO), for
    write_file: plots go through the one writer like every output."""
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, **kw)
    return buf.getvalue()
