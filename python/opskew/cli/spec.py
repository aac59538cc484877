"""A command's declared options (opskew.options.Spec) replayed onto an
argparse parser: the one place the command line meets the declarations."""

from __future__ import annotations

import argparse
import functools

from opskew.options import OptionValueError, Spec


def _argparse_type(fn):
    """`fn` with its refusals (OptionValueError) as argparse's
    ArgumentTypeError, so that the error line is the refusal's own text."""
    @functools.wraps(fn)
    def typed(text):
        try:
            return fn(text)
        except OptionValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return typed


def add_spec(parser: argparse.ArgumentParser, spec: Spec) -> None:
    """Adds every option of `spec` to `parser`, in declaration order, each in
    its argument group."""
    groups = {}
    for o in spec.options:
        target = parser
        if o.group is not None:
            if o.group not in groups:
                groups[o.group] = parser.add_argument_group(o.group, spec.groups.get(o.group))
            target = groups[o.group]
        kwargs = dict(o.kwargs)
        if kwargs.get("type") is not None:
            kwargs["type"] = _argparse_type(kwargs["type"])
        target.add_argument(*o.flags, **kwargs)
