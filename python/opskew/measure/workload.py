"""Workloads: the built-in ones (torch.add on small tensors in a loop; a
small model step, training or inference), and TARGETs given by the user.

A TARGET names a callable that runs ONE iteration of the user's workload:

* ``path/to/file.py:function``
* ``package.module:function``

An optional setup callable (``--setup NAME``, looked up in the same module)
runs once before measuring; when given, its return value is passed to the
iteration callable by SETUP_RULE: a tuple as positional arguments, a dict as
keyword arguments, where the callable takes them so, else whole.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from opskew.errors import UsageError, WorkloadError
from opskew.measure.rounds import user_traceback

BUILTIN = "builtin:add"


@dataclass
class Workload:
    name: str
    iteration: Callable[[], Any]
    description: str
    params: dict = field(default_factory=dict)
    # Names a --scope path may start from: the TARGET module's globals, and
    # the setup result's attributes (or keys, for a dict) under their names.
    namespace: dict = field(default_factory=dict)


def _builtin_add(device: str, calls: int, numel: int) -> Workload:
    import torch

    a = torch.ones(numel, device=device)
    b = torch.ones(numel, device=device)
    add = torch.add

    def iteration():
        for _ in range(calls):
            add(a, b)

    return Workload(
        name=BUILTIN,
        iteration=iteration,
        description=f"torch.add(a, b) x {calls} per iteration, a and b of {numel} "
        f"float32 element(s) on {device}",
        params={"op": "add", "calls_per_iter": calls, "numel": numel},
    )


# The built-in steps (opskew calibrate's default W workload; a calibration
# made on them has key.workload "builtin:step", calibration.store.DEFAULTS).
STEPS = {"training": "builtin:step", "inference": "builtin:step-inference"}


class ModelStep:
    """A small step of a model on CPU or CUDA tensors, the one opskew's cost
    model prices the profiler on (opskew calibrate's default W workload and
    opskew.profile's in-process model, docs/profile.md): F.linear (8 -> 8)
    on 4 rows, relu, sum; `training`: with grad, backward, and the
    parameters updated in place (operator, autograd and backward events),
    else under no_grad (an inference step: its operators record no
    autograd node and pay less per event)."""

    def __init__(self, torch, training: bool, device: str = "cpu"):
        g = torch.Generator().manual_seed(0)
        self.torch = torch
        self.training = training
        self.x = torch.randn(4, 8, generator=g).to(device)
        self.w = torch.randn(8, 8, generator=g).to(device).requires_grad_(training)
        self.b = torch.zeros(8, device=device).requires_grad_(training)
        self.linear = torch.nn.functional.linear

    def __call__(self):
        w, b = self.w, self.b
        if not self.training:
            with self.torch.no_grad():
                self.linear(self.x, w, b).relu().sum()
            return
        w.grad = b.grad = None
        self.linear(self.x, w, b).relu().sum().backward()
        with self.torch.no_grad():
            w.add_(w.grad, alpha=-1e-3)
            b.add_(b.grad, alpha=-1e-3)


def builtin_step(device: str, kind: str) -> Workload:
    """ModelStep as a workload: `kind` "training" or "inference"."""
    import torch

    step = ModelStep(torch, kind == "training", device)
    what = ("F.linear (8 -> 8) on 4 rows, relu, sum, backward and an in-place update" if kind == "training"
            else "F.linear (8 -> 8) on 4 rows, relu, sum under no_grad")
    return Workload(name=STEPS[kind], iteration=step, description=f"a {kind} step: {what}, on {device}",
                    params={"step": kind})


PANEL = "builtin:leaf-panel"


def leaf_panel(device: str, calls: int) -> Workload:
    """opskew calibrate's panel for `delta` (docs/correct.md): 8 leaf
    operators whose inputs differ (one tensor; two; three and a scalar; a
    list of 8; sizes; a scalar bound; an in-place copy; a factory with no
    tensor input), in turn, about `calls` operator calls per iteration. What
    an instrument adds inside an operator's own interval depends on the
    operator's inputs under record_shapes (bench/bench_in_event_cost.py:
    +6 to +356 ns over opskew's tracer); the panel's mean stands for a mix
    of operators where torch.add alone is one end of that range."""
    import torch

    x, y, z = (torch.randn(16, device=device) for _ in range(3))
    parts = [torch.randn(4, device=device) for _ in range(8)]
    out = torch.empty(16, device=device)
    neg, add, addcmul, cat, empty = torch.neg, torch.add, torch.addcmul, torch.cat, torch.empty
    rounds = max(1, calls // 8)

    def iteration():
        for _ in range(rounds):
            neg(x)
            add(x, y)
            addcmul(x, y, z, value=0.5)
            cat(parts)
            x.view(4, 4)
            x.clamp_min(0.0)
            out.copy_(y)
            empty(16, device=device)

    return Workload(
        name=PANEL,
        iteration=iteration,
        description=(f"8 leaf operators x {rounds} per iteration (neg, add, addcmul, cat of 8, view, clamp_min, "
                     f"copy_, empty) on {device}"),
        params={"ops": 8, "calls_per_iter": 8 * rounds},
    )


def _is_file(modspec: str) -> bool:
    """A TARGET's module part names a file (else a module to import)."""
    return modspec.endswith(".py") or os.sep in modspec or "/" in modspec


def source_file(target: str | None) -> str | None:
    """The source file a TARGET (or an `--op` spec) comes from, without
    running it: file.py as given, a module's origin when it can be found
    (a package's parents are imported to find it), else None (the built-in
    workloads, a missing module: loading it reports that)."""
    if not target or ":" not in target:
        return None
    modspec = target.rpartition(":")[0]
    if not modspec:
        return None
    if _is_file(modspec):
        return modspec
    # Found on sys.path with the current folder first, as load_module
    # imports it, without importing anything: a package's __init__ may import
    # torch, which must wait until the command has arranged its instrument.
    rel = os.path.join(*modspec.split("."))
    for d in [os.getcwd()] + [p for p in sys.path if p and os.path.isdir(p)]:
        for cand in (os.path.join(d, rel + ".py"), os.path.join(d, rel, "__init__.py")):
            if os.path.isfile(cand):
                return cand
    return None


def load_module(modspec: str):
    if _is_file(modspec):
        path = os.path.abspath(modspec)
        if not os.path.isfile(path):
            raise UsageError(f"TARGET file not found: {modspec}")
        name = "_opskew_target_" + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise UsageError(f"cannot load {modspec} as Python source")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        # The target's own directory is importable, as when running the file.
        sys.path.insert(0, os.path.dirname(path))
        spec.loader.exec_module(module)
        return module
    # As `python -m` does: the current directory is importable, so that
    # `check train:step` works from the script's own folder.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(modspec)
    except ModuleNotFoundError as exc:
        if exc.name and modspec.startswith(exc.name):
            raise UsageError(f"TARGET module not found: {modspec}") from None
        raise


def _nop():
    pass


def python_calls(calls: int) -> Workload:
    """Calls of an empty Python function, no operator: the micro-workload that
    prices the Python tracer's events (with_stack) apart from the operators'."""
    nop = _nop

    def iteration():
        for _ in range(calls):
            nop()

    return Workload(name="builtin:pycall", iteration=iteration,
                    description=f"an empty Python function called {calls} times per iteration",
                    params={"calls_per_iter": calls})


def _check_signature(target: str, fn, setup: str | None) -> None:
    """Refuses, before anything runs, a TARGET that cannot be called the way
    opskew calls it without --setup: with no argument. With --setup the
    arguments are its result's (setup_call), checked once it has run."""
    if setup:
        return
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin or C callable: it will say for itself
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    required_kw = [p for p in params if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    if required_kw:
        raise UsageError(f"{target} needs keyword argument(s) {', '.join(p.name for p in required_kw)}: "
                         "opskew calls it with none: pass --setup NAME, a callable in the same module that returns "
                         "a dict of them")
    if required:
        names = ", ".join(p.name for p in required)
        raise UsageError(f"{target} takes {len(required)} argument(s) ({names}) but is called with none: pass "
                         "--setup NAME, a callable in the same module whose result is passed to it (a tuple as "
                         "positional arguments, a dict as keyword arguments)")


# How a setup's result is passed (the rule --help and docs/commands.md state):
# a tuple as positional arguments and a dict (of str keys) as keyword
# arguments where TARGET's signature takes them so, else whole, as one
# argument, where it takes one (a TARGET of one parameter gets a tuple of
# two or more, or a dict whose keys are not its parameters, whole); any other
# value as one argument.
SETUP_RULE = ("a tuple is passed as positional arguments and a dict as keyword arguments where TARGET takes "
              "them so, else whole, as its one argument; any other result as one argument")


def setup_call(target: str, fn, state) -> tuple:
    """(args, kwargs, how) to call `fn` with a setup's result `state` by
    SETUP_RULE; `how` is "positional", "keywords" or "whole". UsageError
    where `fn` takes it no way."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None  # a builtin or C callable: the rule's first form, and it will say for itself

    def takes(*a, **k) -> bool:
        if sig is None:
            return True
        try:
            sig.bind(*a, **k)
        except TypeError:
            return False
        return True

    if isinstance(state, tuple) and takes(*state):
        return tuple(state), {}, "positional"
    if isinstance(state, dict) and all(isinstance(k, str) for k in state) and takes(**state):
        return (), dict(state), "keywords"
    if takes(state):
        return (state,), {}, "whole"
    what = (f"a tuple of {len(state)}" if isinstance(state, tuple) else
            f"a dict of keys {', '.join(map(repr, list(state)[:6]))}" if isinstance(state, dict) else
            f"a {type(state).__name__}")
    raise UsageError(f"{target}{sig or ''} cannot take what --setup returned, {what}: {SETUP_RULE}")


def load_target(target: str | None, *, device: str, setup: str | None = None,
                calls: int = 1000, numel: int = 4) -> Workload:
    """Returns the workload TARGET names. Raises UsageError on a bad TARGET.

    Errors raised while importing the user's module propagate as they are:
    the caller reports them as a workload failure."""
    if target in (None, "", BUILTIN):
        if setup:
            raise UsageError("--setup applies to a user TARGET, not the built-in workload")
        return _builtin_add(device, calls, numel)
    if ":" not in target:
        raise UsageError(
            f"bad TARGET {target!r}: expected file.py:function or package.module:function"
        )
    modspec, _, funcname = target.rpartition(":")
    if not modspec or not funcname.isidentifier():
        raise UsageError(
            f"bad TARGET {target!r}: expected file.py:function or package.module:function"
        )
    module = load_module(modspec)
    missing = object()
    fn = getattr(module, funcname, missing)
    if fn is missing:
        raise UsageError(f"{modspec} has no callable named {funcname!r}")
    if not callable(fn):
        raise UsageError(f"{modspec}'s {funcname!r} is not a function (it is a {type(fn).__name__} object): "
                         "TARGET names the function to time")
    _check_signature(target, fn, setup)
    it = fn
    namespace = dict(vars(module))
    params = {"setup": setup}
    if setup:
        setup_fn = getattr(module, setup, None)
        if setup_fn is None or not callable(setup_fn):
            raise UsageError(f"{modspec} has no setup callable named {setup!r}")
        try:
            state = setup_fn()
        except Exception as exc:
            # The user's code failed, not the command line: exit 4 with its
            # traceback, as when TARGET itself raises.
            err = WorkloadError(f"--setup {setup} raised {type(exc).__name__}: {exc} (nothing was measured)",
                                cause=exc)
            err.user_traceback = user_traceback(exc)
            raise err from exc
        it, how = _with_state(fn, state, namespace, target)
        params["setup_passes"] = how

    return Workload(name=target, iteration=it, description=f"{target} (one call per iteration)",
                    params=params, namespace=namespace)


def _with_state(fn, state, namespace: dict, target: str = "TARGET"):
    """The iteration: `fn` called with the setup's result `state` by
    SETUP_RULE (setup_call), and how; the result goes into `namespace` (for
    --scope paths) as `state` and, for a dict or an object, its keys or
    attributes under their names."""
    a, k, how = setup_call(target, fn, state)
    namespace["state"] = state
    if isinstance(state, dict):
        namespace.update({k: v for k, v in state.items() if isinstance(k, str)})
    elif hasattr(state, "__dict__"):
        namespace.update(vars(state))

    if how == "whole":
        def it():
            return fn(state)
    elif how == "positional":
        def it():
            return fn(*a)
    else:
        def it():
            return fn(**k)

    return it, how


NO_SETUP = object()  # from_callable's "no setup" (None is a value a setup may give)


def callable_target(fn) -> str | None:
    """`module:function` for a module-level function of an importable module
    (not __main__), which another process can load by that name; else None."""
    mod, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not mod or mod == "__main__" or not name.isidentifier():
        return None
    module = sys.modules.get(mod)
    return f"{mod}:{name}" if module is not None and getattr(module, name, None) is fn else None


def from_callable(fn, *, device: str, setup=NO_SETUP) -> Workload:
    """The workload of a Python callable (the Python API, opskew.api): `fn()`
    runs one iteration; with `setup`, a callable run once here (its result
    is passed to `fn`) or a value passed as it is. Raises UsageError when
    `fn` cannot be called so."""
    if not callable(fn):
        raise UsageError(f"fn must be a callable running one iteration, not {type(fn).__name__}")
    label = callable_target(fn) or getattr(fn, "__qualname__", None) or repr(fn)
    _check_signature(label, fn, None if setup is NO_SETUP else "setup")
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    namespace = dict(getattr(fn, "__globals__", None) or (vars(module) if module else {}))
    it = fn
    params = {"setup": None}
    if setup is not NO_SETUP:
        params["setup"] = getattr(setup, "__qualname__", None) if callable(setup) else None
        it, params["setup_passes"] = _with_state(fn, setup() if callable(setup) else setup, namespace, label)

    return Workload(name=label, iteration=it, description=f"{label} (one call per iteration)",
                    params=params, namespace=namespace)
