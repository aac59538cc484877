"""The profiler's schedule, as opskew.profile follows it through torch:
each step's phase, the advised schedule, and torch's transitions (start(),
step()) taken with opskew's own ProfilerStep#N ranges (profiler.ranges).
Nothing here imports torch: the torch module or profiler is passed in."""

from __future__ import annotations

import os
import threading

# The advised schedule and its call are stats.pricing's (advice lines there name it).
from opskew.stats.pricing import ADVISED_SCHEDULE, schedule_call  # noqa: F401 - re-exported

# The phases of a step, by the schedule's ProfilerAction name.
PHASE = {"NONE": "wait", "WARMUP": "warmup", "RECORD": "active", "RECORD_AND_SAVE": "active"}

UNSET = object()


def phase_of(prof) -> str:
    """The phase of the step the profiler's current action is for."""
    a = prof.current_action
    return PHASE.get(getattr(a, "name", str(a)), "active")


def plain_wait_steps(torch, prof) -> bool:
    """Whether this torch's profile.step() from a wait step (NONE) to a wait
    step does no more than set step_num, current_action (and
    _prev_schedule_action): no transition actions for (NONE, NONE), and no
    Kineto step counter to move (torch moves it only under KINETO_USE_DAEMON
    or KINETO_FORCE_STEP_HOOK since the guard appeared in step(); before it,
    on every step). Read from the installed torch once; False when unsure."""
    global _PLAIN_STEP
    if os.environ.get("KINETO_USE_DAEMON") or os.environ.get("KINETO_FORCE_STEP_HOOK"):
        return False
    none = torch.profiler.ProfilerAction.NONE
    try:
        if prof.action_map.get((none, none)) or not hasattr(prof, "schedule") or not hasattr(prof, "step_num"):
            return False
    except AttributeError:
        return False
    if _PLAIN_STEP is None:
        import inspect

        try:
            src = inspect.getsource(type(prof).step)
        except (OSError, TypeError):
            src = ""
        # The Kineto step counter moves inside that guard only.
        _PLAIN_STEP = "KINETO_USE_DAEMON" in src and "increment_step" in src
    return _PLAIN_STEP and type(prof).step is torch.profiler.profile.step


_PLAIN_STEP = None


class Answer:
    """A schedule that gives, once, the action already asked of the user's
    schedule for the next step, and otherwise asks it (transit)."""

    __slots__ = ("schedule", "action")

    def __init__(self, schedule, action):
        self.schedule, self.action = schedule, action

    def __call__(self, step):
        action, self.action = self.action, UNSET
        return self.schedule(step) if action is UNSET else action


def owns_ranges(prof) -> bool:
    """Whether opskew opens torch's ProfilerStep#N ranges itself (profiler.ranges)."""
    return bool(getattr(prof, "record_steps", False)) and hasattr(prof, "step_rec_fn")


def transit(prof, call, action=UNSET) -> bool:
    """torch's start() or step() without its range handling. `action`:
    the schedule's answer for the next step, where step() has asked it
    already (the user's schedule is called once per step, as by torch)."""
    own = owns_ranges(prof)
    if own:
        prof.record_steps = False
    if action is not UNSET:
        prof.schedule = Answer(prof.schedule, action)
    try:
        call()
    finally:
        if own:
            prof.record_steps = True
        if action is not UNSET and isinstance(prof.schedule, Answer):
            prof.schedule = prof.schedule.schedule
    return own


def scheduled(prof, torch) -> bool:
    """Whether the profiler follows a schedule of the user's (its live
    value: one assigned after construction counts), not torch's default,
    under which every step is active."""
    sched = prof.schedule
    if isinstance(sched, Answer):
        sched = sched.schedule
    return sched is not getattr(torch.profiler.profiler, "_default_schedule_fn", None)


def session_gone(prof, torch, thread) -> str | None:
    """Why the recording this profiler expects is not there, or None:
    torch runs one profiler at a time, and one started inside this one
    (another opskew.profile, a torch.profiler.profile) ended the session
    when it stopped. torch's stop then finds no session; exporting its
    trace crashed the process (segmentation fault)."""
    act = getattr(prof, "current_action", None)
    enabled = getattr(torch._C._autograd, "_profiler_enabled", None)
    if enabled is None or getattr(act, "name", "") not in ("RECORD", "RECORD_AND_SAVE") or enabled():
        return None
    if thread is not None and threading.get_ident() != thread:
        # The session is the starting thread's: torch sees none here, and
        # its own step() crashed the process (segmentation fault).
        return ("step() ran on another thread than start(): the profiler's session belongs to the thread "
                "that started it; call step() (and stop()) there. This cycle has no trace")
    return ("another profiler started inside this one ended its session (torch runs one profiler at a "
            "time): this cycle has no trace")


def exit_rest(prof):
    """The rest of torch's profile.__exit__, once its stop() ran inside
    opskew's: the step counter's entry, and the execution trace's cleanup,
    which finishes its JSON file (without it the file ended mid-record)."""
    from torch.autograd import profiler as autograd_profiler

    tracker = getattr(autograd_profiler, "KinetoStepTracker", None)
    if tracker is not None:
        tracker.erase_step_count("ProfilerStep")
    eto = getattr(prof, "execution_trace_observer", None)
    if eto is not None:
        eto.cleanup()
