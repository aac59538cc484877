"""The words, HTML and pictures of what opskew computed, reached by name.

opskew.render turns results into text, tables, HTML and plots: it consumes
results and computation, and nothing below it imports it (import-linter's
layers, docs/design.md, "The Python shell"). Where a result or a computation
hands words on (a result's `__str__`, the report a profiled loop prints at a
cycle's end, the sentence a corrected trace carries about itself, a
command's warnings, its progress line), it calls a view by name: `lazy(name)`
here, which opskew.render.views fills when the package is imported
(`import opskew` imports it). A view is looked up when it is called, never
at import."""

from __future__ import annotations

from typing import Callable

_VIEWS: dict[str, Callable] = {}


def register(views: dict[str, Callable]) -> None:
    """Names each of `views` (opskew.render.views, once)."""
    _VIEWS.update(views)


def view(name: str) -> Callable:
    """The view registered as `name`."""
    try:
        return _VIEWS[name]
    except KeyError:
        raise LookupError(f"no view {name!r} is registered: opskew.render.views registers them when opskew "
                          "is imported") from None


def lazy(name: str) -> Callable:
    """A function that calls the view `name` with its arguments, looked up
    at each call (so a module can bind it at import, before render is)."""
    def call(*args, **kwargs):
        return view(name)(*args, **kwargs)
    call.__name__ = call.__qualname__ = name.replace(".", "_")
    call.__doc__ = f"The view {name!r} (opskew.render.views)."
    return call
