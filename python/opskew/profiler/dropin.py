"""What makes opskew.profile a torch.profiler.profile to code that inspects
it (docs/profile.md, "To code that inspects it"): each instance is of a
subclass of the opskew class and torch's, made once per class at the first
instance (so that importing opskew imports no torch); its __init__'s
signature names the installed torch's parameters and opskew's own; and the
attributes of torch's object, assigned on opskew's, reach the wrapped
profiler (`prof.prof`) as they would reach torch's. torch's methods that
opskew does not define run on the wrapped profiler."""

from __future__ import annotations

import functools
import inspect
import threading
import types

from opskew.profiler.schedule import owns_ranges, plain_wait_steps
from opskew.vocab import PROFILER_OPTIONS

# The profiler options opskew's analysis follows (the report's `options`).
OPTIONS = PROFILER_OPTIONS
# Attributes of torch's object whose value opskew keeps a reading of, read
# again when one is assigned (follow).
_FOLLOWED = frozenset(OPTIONS + ("record_steps", "action_map"))

_REAL: dict = {}  # opskew's class -> its subclass of torch.profiler.profile
_LOCK = threading.Lock()


def options_of(prof) -> dict:
    """The profiler options of torch's object `prof`, as booleans."""
    return {k: bool(getattr(prof, k, False)) for k in OPTIONS}


def torch_signature(init):
    """Marks opskew.profile's __init__: its signature is torch's (computed,
    importing torch, at the first look) with opskew's keywords after it."""
    return _TorchInit(init)


def _signature(init) -> inspect.Signature:
    import torch

    torch_sig = inspect.signature(torch.profiler.profile.__init__)
    own = [p for p in inspect.signature(init).parameters.values() if p.kind is p.KEYWORD_ONLY]
    names = {p.name for p in own}
    params = [p for p in torch_sig.parameters.values() if p.name not in names]
    var_kw = [p for p in params if p.kind is p.VAR_KEYWORD]
    rest = [p for p in params if p.kind is not p.VAR_KEYWORD]
    return torch_sig.replace(parameters=rest + own + var_kw)


class _TorchInit:
    """A descriptor for __init__ that sets the function's __signature__
    (_signature) before handing it out, from the class or an instance."""

    def __init__(self, func):
        self.func = func

    def __get__(self, obj, cls=None):
        f = self.func
        if "__signature__" not in f.__dict__:
            f.__signature__ = _signature(f)
        return f if obj is None else types.MethodType(f, obj)


def _method(name: str, fn):
    """torch's method `name`, run on the wrapped profiler."""

    @functools.wraps(fn)
    def forward(self, *args, **kwargs):
        return getattr(self.prof, name)(*args, **kwargs)

    return forward


def _attribute(name: str):
    """A class-level attribute of torch's, read and set on the wrapped profiler."""
    return property(lambda self: getattr(self.prof, name), lambda self, v: setattr(self.prof, name, v))


def real_class(cls):
    """The subclass of `cls` and torch.profiler.profile whose instances
    opskew.profile(...) makes: torch's methods and class attributes that
    `cls` lacks forward to the wrapped profiler."""
    import torch

    base = torch.profiler.profile
    if issubclass(cls, base):
        return cls
    with _LOCK:
        real = _REAL.get(cls)
        if real is None:
            ns = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__}
            for klass in reversed(base.__mro__[:-1]):
                for name, value in vars(klass).items():
                    if name.startswith("__") or hasattr(cls, name) or isinstance(value, (staticmethod, classmethod)):
                        continue
                    ns[name] = _method(name, value) if inspect.isfunction(value) else _attribute(name)
            sig = inspect.signature(cls.__init__)
            ns["__signature__"] = sig.replace(parameters=list(sig.parameters.values())[1:])
            real = _REAL[cls] = type(cls.__name__, (cls, base), ns)
    return real


class DropIn:
    """The part of opskew.profile that makes it stand in for torch's object:
    the instance's class (__new__), attributes read from and assigned to the
    wrapped profiler, on_trace_ready and schedule."""

    def __new__(cls, *args, **kwargs):
        return object.__new__(real_class(cls))

    def __getattr__(self, name):
        d = self.__dict__
        if "prof" in d:
            return getattr(d["prof"], name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name, value):
        # Until __init__ ends (`_forwarding`), every attribute is opskew's own;
        # then one of torch's object that opskew does not hold goes there.
        d = self.__dict__
        if not d.get("_forwarding") or name in d or name not in vars(d["prof"]) \
                or isinstance(getattr(type(self), name, None), property):
            object.__setattr__(self, name, value)
            return
        setattr(d["prof"], name, value)
        if name in _FOLLOWED:
            self._follow()

    def _follow(self):
        """Reads again what opskew keeps of torch's object: the options its
        analysis reports and prices by, and whether it opens the
        ProfilerStep#N ranges and takes the short way through wait steps."""
        prof = self.prof
        self._analysis.options.update(options_of(prof))
        self._own_ranges = owns_ranges(prof)
        self._quiet_waits = self._own_ranges and plain_wait_steps(self._torch, prof)

    @property
    def on_trace_ready(self):
        """The user's handler: run first when a trace is ready, then opskew's correction."""
        return self.__dict__.get("_user_ready")

    @on_trace_ready.setter
    def on_trace_ready(self, handler):
        self.__dict__["_user_ready"] = handler

    @property
    def schedule(self):
        """The wrapped profiler's schedule, which opskew follows step by step."""
        return self.prof.schedule

    @schedule.setter
    def schedule(self, schedule):
        self.prof.schedule = schedule
        self._follow()
