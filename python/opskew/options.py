"""Each command's options, declared once, without argparse.

A command's module declares its options by calling `add_argument` (and
`add_argument_group`) on a `Spec`, with argparse's own keywords, so the
declaration reads like a parser's. The command line (opskew.cli) replays a
Spec onto a real argparse parser; the Python API (opskew.api) checks and
converts keyword arguments against the same Spec and builds the command's
typed options object (`Spec.options_class()`: a dataclass whose fields are the
options' destinations, with the command line's defaults). One declaration, so
the API's defaults are the command line's by construction.
"""

from __future__ import annotations

import dataclasses
import math
import os

class OptionValueError(ValueError):
    """An option's type function refuses the text; the message says why (the
    command line prints it as argparse prints an ArgumentTypeError's)."""


def finite_float(text: str) -> float:
    """The type of every real-valued option: a finite number. float() takes
    'nan' and 'inf', which then hung the warm-up (`--warmup nan`), silenced
    the skew verdict (`--threshold nan`) and reached JSON outputs as NaN,
    which strict parsers refuse."""
    try:
        v = float(text)
    except ValueError:
        raise OptionValueError(f"not a number: {text!r}") from None
    if not math.isfinite(v):
        raise OptionValueError(f"not a finite number: {text!r}")
    return v


# argparse's own spelling of "the rest of the command line" (argparse.REMAINDER).
REMAINDER = "..."


@dataclasses.dataclass(frozen=True)
class Option:
    """One `add_argument` call: its flags (or positional name) and keywords."""
    flags: tuple
    kwargs: dict
    group: str | None = None  # the title of the argument group it was declared in

    @property
    def dest(self) -> str:
        if "dest" in self.kwargs:
            return self.kwargs["dest"]
        longs = [f for f in self.flags if f.startswith("--")]
        name = (longs or list(self.flags))[0].lstrip("-")
        return name.replace("-", "_")

    @property
    def default(self):
        if "default" in self.kwargs:
            return self.kwargs["default"]
        action = self.kwargs.get("action")
        if action == "store_true":
            return False
        if action == "store_false":
            return True
        return None

    @property
    def type(self):
        return self.kwargs.get("type")

    @property
    def choices(self):
        return self.kwargs.get("choices")

    @property
    def appends(self) -> bool:
        return self.kwargs.get("action") == "append"

    @property
    def plain_text(self) -> bool:
        """A value stored as given (a path, a list of names, a name): no type
        function, no flag action."""
        return self.kwargs.get("action") in (None, "store") and self.type is None


class _Group:
    def __init__(self, spec: "Spec", title: str, description: str | None):
        self._spec, self.title, self.description = spec, title, description

    def add_argument(self, *flags, **kwargs) -> None:
        self._spec._options.append(Option(tuple(flags), dict(kwargs), self.title))


class Spec:
    """A command's declared options, in declaration order."""

    def __init__(self, command: str):
        self.command = command
        self._options: list = []
        self.groups: dict = {}  # title -> description
        self._class = None

    def add_argument(self, *flags, **kwargs) -> None:
        self._options.append(Option(tuple(flags), dict(kwargs)))

    def add_argument_group(self, title: str, description: str | None = None) -> _Group:
        self.groups.setdefault(title, description)
        return _Group(self, title, description)

    @property
    def options(self) -> tuple:
        return tuple(self._options)

    def by_dest(self) -> dict:
        return {o.dest: o for o in self._options}

    def defaults(self) -> dict:
        """Each destination's default (a list default as a fresh copy)."""
        return {o.dest: (list(o.default) if isinstance(o.default, list) else o.default) for o in self._options}

    def options_class(self):
        """The command's typed options: a dataclass of every destination, with
        its default (made once, after the last declaration)."""
        if self._class is not None and len(self._class.__dataclass_fields__) == len(self.by_dest()):
            return self._class
        fields = []
        for dest, default in self.defaults().items():
            if isinstance(default, list):
                f = dataclasses.field(default_factory=lambda d=tuple(default): list(d))
            else:
                f = dataclasses.field(default=default)
            fields.append((dest, object, f))
        cls_name = "".join(p.capitalize() for p in self.command.split("_")) + "Options"
        self._class = dataclasses.make_dataclass(cls_name, fields)
        return self._class


def declared(command: str, declare) -> tuple:
    """(the Spec of `command`, filled by `declare(spec)`, the module's
    declaration of its options; its options class)."""
    spec = Spec(command)
    declare(spec)
    return spec, spec.options_class()


def convert(spec: Spec, command: str, options: dict, *, refused: dict, fixed: dict):
    """The command's options object from the API's keyword arguments, each
    checked and converted as the command line would take its text: an
    unknown name is a TypeError naming the valid ones (and, for an option of
    the command line only, what to use instead: `refused`); a value the
    option's type or choices refuse is a ValueError naming it. `fixed`:
    fields the API sets itself (the target, the inputs)."""
    by_dest = spec.by_dest()
    values = spec.defaults()
    valid = sorted(d for d in by_dest if d not in refused and d not in fixed)
    for name, value in options.items():
        if name not in valid:
            why = f" ({refused[name]})" if name in refused and name not in fixed else ""
            raise TypeError(f"opskew.{command}() got an unexpected keyword argument {name!r}{why}; "
                            f"valid: {', '.join(valid)}")
        o = by_dest[name]
        try:
            value = _converted(o, value)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"opskew.{command}(): {name}={value!r}: {exc}") from None
        for v in value if isinstance(value, list) else [value]:
            if o.choices is not None and v not in o.choices:
                raise ValueError(f"opskew.{command}(): {name}={v!r}: choose from "
                                 f"{', '.join(map(repr, o.choices))}")
        values[name] = value
    extra = {k: v for k, v in fixed.items() if k not in values}  # the API's own (a callable workload)
    values.update((k, v) for k, v in fixed.items() if k in values)
    for name in ("json", "csv"):
        if name in values:
            values[name] = None
    if "fail_on_skew" in values:
        values["fail_on_skew"] = False
    opts = spec.options_class()(**values)
    for k, v in extra.items():
        setattr(opts, k, v)
    return opts


def _converted(o: Option, value):
    if o.appends:  # --op, --instrument, --need: one or a list
        value = [value] if isinstance(value, str) else list(value)
        if o.type:
            value = [o.type(v) if isinstance(v, str) else v for v in value]
        return value
    if o.type and (isinstance(value, str) or (o.type is not int and isinstance(value, (int, float))
                                              and not isinstance(value, bool))):
        return o.type(str(value) if not isinstance(value, str) else value)  # finite_float checks nan, inf
    if o.type is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"expected a whole number, got {type(value).__name__}")
    if o.plain_text and value is not None:
        # A text option (a path, a comma-separated list, a name): a path
        # object or a list is taken as the command line's text.
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        elif isinstance(value, (list, tuple)) and all(isinstance(v, (str, int)) for v in value):
            value = ",".join(map(str, value))
        if not isinstance(value, str):
            raise TypeError(f"expected text (a str, a path, or a list of names), got {type(value).__name__}")
    return value
