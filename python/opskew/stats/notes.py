"""Notes as records (docs/design.md, "Notes"): what a computation says of
its result, as a code, its figures and a severity, never as a sentence;
opskew.render.notes says each in words. A note that is still a sentence
(a calibration's, the CUDA audit's) travels as the record of code "text".
No torch, no formatting."""

from __future__ import annotations

import json


def note(code: str, severity: str = "caveat", **figures) -> dict:
    """A note: its `code` (render.notes.TEXT's key), `severity` ("caveat":
    a figure to read with care; "advice": what to change) and its figures."""
    return {"code": code, "severity": severity, **figures}


def text(sentence: str, severity: str = "caveat") -> dict:
    """A note that is a sentence already."""
    return note("text", severity, text=sentence)


def _key(n) -> str:
    return json.dumps(n, sort_keys=True, default=str)


def merged(*groups) -> list:
    """The notes of `groups`, each once (the same code and figures), in one
    order whatever order they came in: by code, then figures. A sentence
    (an older report's note) is taken as a "text" note."""
    out = {}
    for group in groups:
        for n in group or ():
            n = text(n) if isinstance(n, str) else n
            out.setdefault(_key(n), n)
    return sorted(out.values(), key=lambda n: (n.get("code", ""), _key(n)))
