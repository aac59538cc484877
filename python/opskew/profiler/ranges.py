"""The ProfilerStep#N ranges opskew.profile opens itself. torch opens
record_function("ProfilerStep#N") at the end of start() and step(), and
closes it at the start of the next step() or stop(). opskew takes both
over: it closes the range as soon as a step ends and opens the next one as
the last thing before the next step's body, so that its own bookkeeping and
torch's transitions lie in no step's range (they added 4 us to an empty
step's range, 15 us under with_stack: docs/profile.md). A torch without
these attributes keeps its own. torch is imported where a range falls back
to record_function, never at import."""

from __future__ import annotations

from opskew.tracer import native


class NativeRange:
    """A ProfilerStep#N range opened through opskew's native shim; ends with
    __exit__, as the record_function it stands in for (torch's stop() and
    step() call prof.step_rec_fn.__exit__ when they close a range)."""

    __slots__ = ("_end", "_h", "_mon")

    def __init__(self, lib, name: str, monitor=None):
        self._end = lib.osk_shim_range_end
        self._h = lib.osk_shim_range_begin(name.encode())
        # torch's experimental CUPTI monitor (torch.profiler._cupti_monitor,
        # where it exists): record_function pushes its name there too, and
        # pops it before the range ends; so does this.
        self._mon = monitor if monitor is not None and monitor.push_user_annotation(name) is not None else None

    def opened(self) -> bool:
        return bool(self._h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        mon, self._mon = self._mon, None
        if mon is not None:
            mon.pop_user_annotation()
        h, self._h = self._h, None
        if h:
            self._end(h)
        return False

    def __del__(self):
        # Never exited (a profiler dropped without stop()): ended and freed
        # when collected, as torch's record_function handle is.
        if getattr(self, "_h", None):
            self.__exit__(None, None, None)


def choose(prof, own: bool, torch) -> tuple:
    """How the ProfilerStep#N ranges are opened, chosen once: through
    opskew's native shim (a C++ RecordFunction of user scope, which is
    what record_function opens, without torch.ops' Python dispatch
    around it), else torch's record_function. On the 2-core VM the
    record_function route left 18 to 73 us a step in each range besides
    the body, the shim 3 to 8 us (docs/profile.md). Built at first use
    like the native collector (native.py); never required. Returns
    (step_ranges: {"route", "why"}, the shim or None, torch's CUPTI
    monitor or None); `own`: opskew opens the ranges (schedule.owns_ranges)."""
    if not own:
        has = hasattr(prof, "record_steps") and hasattr(prof, "step_rec_fn")
        return ({"route": "none", "why": "no schedule: torch.profiler opens no ProfilerStep#N ranges without one"}
                if has else
                {"route": "torch", "why": "this torch's profile has no record_steps/step_rec_fn: torch opens its "
                                          "own ranges"}), None, None
    try:
        lib, why = native.shim(torch)
    except Exception as exc:  # noqa: BLE001 - never stops the user's loop: record_function still works
        lib, why = None, f"loading it failed ({type(exc).__name__}: {exc})"
    try:
        from torch.autograd import profiler as autograd_profiler

        find = getattr(autograd_profiler, "_maybe_cupti_monitor", None)
        monitor = find() if find is not None else None
    except Exception:  # noqa: BLE001 - an optional torch module: without it, no monitor
        monitor = None
    return ({"route": "native", "why": None} if lib is not None else
            {"route": "record_function",
             "why": f"opskew's native shim is unavailable ({why}): each range also holds "
                    "torch.ops' dispatch of its enter and exit"}), lib, monitor


def open_range(prof, name: str, lib, monitor, step_ranges: dict):
    """Opens the active step's range `name` as prof.step_rec_fn: through the
    shim `lib` where it is loaded, else (or where the shim could not open
    it, counted in `step_ranges`) torch's record_function."""
    rf = NativeRange(lib, name, monitor) if lib is not None else None
    if rf is not None and rf.opened():
        prof.step_rec_fn = rf
    else:
        if rf is not None:  # the shim could not open it: this step's range is record_function's
            step_ranges["record_function_steps"] = step_ranges.get("record_function_steps", 0) + 1
        from torch.autograd import profiler as autograd_profiler

        prof.step_rec_fn = autograd_profiler.record_function(name)
        prof.step_rec_fn.__enter__()
