"""What every typed result shares: it holds a command's document (the JSON
the command line writes), exposes its fields as read-only attributes, and
gives it back unchanged (`to_dict()`); `load()` reads one back from a file.
No torch, no formatting: the text and the HTML are the renderers'
(opskew.render), reached through `__str__` and `_repr_html_`."""

from __future__ import annotations

import io
import json
import os

from opskew.errors import UsageError
from opskew.results.views import lazy

html = lazy("html.html")


def flat(d: dict, prefix: str = "") -> dict:
    """One row: nested dicts joined with `_`, a `[low, high]` interval split."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat(v, key + "_"))
        elif k == "ci95" and isinstance(v, (list, tuple)) and len(v) == 2:
            out[key + "_low"], out[key + "_high"] = v
        else:
            out[key] = v
    return out


def field(key: str, doc: str | None = None, *, of: str | None = None, required: bool = False) -> property:
    """A typed result's read-only property for a field of its document:
    `data.get(key)` (None where it is absent), `data[key]` where `required`
    (KeyError where it is absent), or with `of` a member of a nested object,
    `data[of].get(key)` (None where either is absent)."""
    if required:
        def get(self):
            return self._data[key]
    elif of is None:
        def get(self):
            return self._data.get(key)
    else:
        def get(self):
            return (self._data.get(of) or {}).get(key)
    return property(get, doc=doc)


class Result:
    """A command's result: the fields of its JSON as attributes (`r.verdict`,
    `r["schema"]`), `kind` the command. `to_dict()` is the JSON the command
    line writes. Subclasses name their `KIND` and `SCHEMAS` and add typed
    properties for the figures people read first."""

    KIND = ""
    SCHEMAS: tuple = ()

    def __init__(self, data: dict, options=None, kind: str | None = None):
        object.__setattr__(self, "kind", kind or self.KIND)
        object.__setattr__(self, "_data", data)
        object.__setattr__(self, "_options", options)

    # -- the document
    def __getattr__(self, name):
        data = object.__getattribute__(self, "_data")
        if name in data:
            return data[name]
        raise AttributeError(f"{self.kind} result has no field {name!r}; fields: {', '.join(data)}")

    def __setattr__(self, name, value):
        raise AttributeError("a Result is read-only; to_dict() gives a copy to change")

    def __getitem__(self, key):
        return self._data[key]

    def __contains__(self, key):
        return key in self._data

    def keys(self):
        return self._data.keys()

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(self._data))

    def to_dict(self) -> dict:
        """A copy of exactly the JSON the command line writes."""
        return json.loads(json.dumps(self._data, default=str))

    @property
    def options(self):
        """The options the result was computed with (None when loaded)."""
        return self._options

    def option(self, name: str, default=None):
        return getattr(self._options, name, default)

    schema = field("schema")
    status = field("status")

    @classmethod
    def from_dict(cls, data: dict, options=None) -> "Result":
        """The result of a document (a dict as `to_dict()` gives): of the
        class whose schema it carries when called on Result itself."""
        if not isinstance(data, dict):
            raise UsageError(f"an opskew result is a JSON object, not {type(data).__name__}")
        if cls is Result:
            kind = KINDS.get(data.get("schema"))
            if kind is None:
                raise UsageError(f"not an opskew result this version reads (schema {data.get('schema')!r}; "
                                 f"known: {', '.join(sorted(KINDS))})")
            return kind(data, options)
        return cls(data, options)

    # -- for people: the renderers' text and HTML
    def render_text(self, out) -> None:
        """Writes the text the command line prints."""
        out.write(json.dumps(self._data, indent=2, default=str) + "\n")

    def __repr__(self) -> str:
        buf = io.StringIO()
        self.render_text(buf)
        return buf.getvalue().rstrip("\n")

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return html(self.kind, self._data, top=self.option("top", 30), rows=self.rows())

    # -- rows
    def rows(self) -> list:
        """The per-item rows `to_pandas()` tabulates, as flat dicts."""
        return []

    def to_pandas(self):
        """A pandas DataFrame of `rows()`. pandas is not a dependency of
        opskew: ImportError when it is not installed."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Result.to_pandas() needs pandas, which opskew does not depend on: "
                              "pip install pandas (or use .rows(), a list of dicts)") from None
        return pd.DataFrame(self.rows())


# schema -> Result subclass, filled by each kind's module (opskew.results).
KINDS: dict = {}


def register(cls):
    """Class decorator: `cls` reads the documents of its SCHEMAS."""
    for s in cls.SCHEMAS:
        KINDS[s] = cls
    return cls


def load(path) -> Result:
    """The result in an opskew JSON file (`opskew C --json` or `to_dict()`
    written out), as its typed class."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"{path} is not JSON: {exc}") from None
    return Result.from_dict(data)
