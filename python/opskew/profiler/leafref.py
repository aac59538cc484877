"""The leaf reference (docs/method.md, "Each leaf's own delta"): opskew's
own tracer on a few wait steps after each trace, from which each leaf
operator gets its own delta (its mean reported time in the trace less its
time under the tracer)."""

from __future__ import annotations

from opskew import _engine
from opskew.stats.pricing import POST_TRACE, REF_STEPS, REF_WAIT, median
from opskew.tracer.session import trace

# The leaf reference (docs/method.md, "Each leaf's own delta"): opskew's
# own tracer, whose cost is near the hardware floor, records REF_STEPS wait
# steps of each wait block after a trace. One session holds them and the
# step before them, which runs cold under a new session (its operators took
# a median 1.74x: bench/bench_leaf_reference.py) and is not used; each step is
# summarized apart (osk_trace_summarize_window). Stopping a session leaves
# an after-effect on the steps after it, as the profiler's stop does (the
# next MLP step +22%, then +8%, +4%, +3%, and about +1.5% ten steps on:
# bench/bench_wait_positions.py, opskew against opskew-noref), so the
# session runs right after the cold steps of a trace (its first step is
# the 1-based REF_FIRST of the block), and only in a run whose wait blocks
# hold SETTLE more steps before the NEAR that pairing takes: REF_WAIT. Each
# leaf's own delta is its mean reported time in the trace less its time
# under the tracer, from REF_MIN_STEPS tracer steps on (the interval: the
# sign test's over the tracer steps, 87.5% from 4, 99% from 8). The latest
# REF_KEEP tracer steps are kept.
# REF_STEPS and REF_WAIT are stats.pricing's: the advised schedule's wait is REF_WAIT.
REF_FIRST = POST_TRACE + 1
REF_MIN_STEPS = 4
REF_MIN_CALLS = 5
REF_KEEP = 64
# An own delta above this many W is refused as noise: W is the mean cost of
# one event, entry and exit; what one operator's recorded inputs add inside
# it does not reach several times that, while a stall in the traced steps
# (one call descheduled for milliseconds) does. Taken, it raised that
# operator's W to it and every step around it lost it: a step corrected to
# 127 us against 733 us in its unprofiled wait steps (docs/method.md,
# "Each leaf's own delta").
REF_REFUSE_W = 4.0


class LeafReference:
    """The tracer's sessions on wait steps and what they measured: `on`
    (and `why` not), the live session, the tracer steps' leaves (`steps`,
    the latest REF_KEEP) and each traced cycle's leaves (`raw`), which
    stop() uses again."""

    def __init__(self, enabled: bool, cuda: bool):
        self.on = bool(enabled) and not cuda
        self.why = (None if self.on else
                    "leaf_reference=False" if not enabled else
                    "with CUDA activity (opskew's tracer on wait steps has not been validated on a GPU)")
        self.live = None  # (the tracer session, its Trace, [step windows]) while its steps run
        self.open = None  # the running tracer step's begin (the tracer's clock, ns)
        self.clock = None  # that clock: the collector's osk_trace_now_ns
        self.pending: list = []  # (Trace, windows) of tracer sessions, summarized at the next analysis
        self.steps: list[dict] = []  # per tracer step: {leaf name: ns per call}, the latest REF_KEEP
        self.raw: dict = {}  # cycle -> {leaf: (calls, reported total ns, Python events)}, for stop()

    def wants(self, wait_pos: int) -> bool:
        """Whether the wait step at `wait_pos` of its block is one of the tracer's."""
        return self.on and REF_FIRST <= wait_pos <= REF_FIRST + REF_STEPS

    def step_begins(self, wait_pos: int, last_wait_len: int):
        """The wait step about to run is one of the tracer's (REF_*), in a
        run whose last wait block was at least REF_WAIT long: the first
        starts the session (a step that runs cold, not used), the others
        open their window. A tracer that cannot start turns the leaf
        reference off for the run, and the reports say why."""
        if self.live is None:
            if wait_pos != REF_FIRST or last_wait_len < REF_WAIT:
                return
            ctx = trace(instrument="native")
            try:
                self.live = (ctx, ctx.enter_native_only(), [])
                self.clock = ctx.clock()  # the events' own time line (Trace.window)
            except Exception as exc:  # noqa: BLE001 - the user's loop goes on, with the stored delta
                self.on = False
                self.why = f"opskew's tracer could not start ({type(exc).__name__}: {exc})"
            return
        self.open = self.clock()

    def step_ended(self, wait_pos: int):
        """A tracer step's body just ended: its window is kept, and after
        the last one the session stops."""
        if self.open is not None:
            self.live[2].append((self.open, self.clock()))
            self.open = None
        if wait_pos >= REF_FIRST + REF_STEPS:
            self.end()

    def end(self):
        """Stops the tracer; its summaries wait for the next analysis (not
        between two bodies)."""
        ctx, t, windows = self.live
        self.live = None
        self.open = None
        try:
            ctx.__exit__(None, None, None)
            if windows:
                self.pending.append((t, windows))
        except Exception as exc:  # noqa: BLE001 - as in step_begins
            self.on = False
            self.why = f"opskew's tracer could not stop ({type(exc).__name__}: {exc})"

    def collect(self):
        """Each pending tracer step's leaves, ns per call (the tracer's
        corrected totals over calls, in C: its summary of the step's
        window), kept."""
        pending, self.pending = self.pending, []
        for t, windows in pending:
            for a, b in windows:
                try:
                    rows = t.window(a, b).rows
                except Exception as exc:  # noqa: BLE001 - one step lost, said
                    self.why = f"a tracer step's summary failed ({type(exc).__name__}: {exc})"
                    continue
                self.steps.append({r["name"]: r["total_corrected_ns"] / r["calls"] for r in rows
                                   if r["descendants"] == 0 and r["calls"] > 0})
        del self.steps[:-REF_KEEP]

    def op_deltas(self, leaves: dict | None, model) -> tuple[dict | None, dict]:
        """Each leaf's own delta for a trace whose leaves are `leaves`
        ({name: (calls, reported total ns, Python events inside)}) under the
        cost model `model`: its mean reported time, less the Python class's
        W per Python event inside it (under with_stack), less its time per
        call under opskew's tracer; the
        median over the tracer steps with the sign test's interval, at 0 and
        above. Returns (op_deltas for verdict.per_operator or None, what the
        report says)."""
        n = len(self.steps)
        info = {"tracer_steps": n, "leaves": len(leaves or {}), "names": 0}
        if not self.on and self.why:
            info["why"] = f"off: {self.why}"
        elif n < REF_MIN_STEPS:
            info["why"] = (f"{n} tracer step(s) so far, {REF_MIN_STEPS} needed: opskew's tracer runs on "
                           f"{REF_STEPS} wait steps after each trace where the wait is at least {REF_WAIT}, so "
                           "that its after-effect has faded before the wait steps W is paired with")
        if n < REF_MIN_STEPS or not leaves:
            return None, info
        w_median = model.operator.w["median"]
        wp = max(model.python.w["median"], 0.0) if model.python is not None else 0.0
        out = {}
        for name, (calls, total, py) in leaves.items():
            ts = [st[name] for st in self.steps if name in st]
            if len(ts) < REF_MIN_STEPS:
                continue
            r = (total - wp * py) / calls
            p = _engine.paired([0.0] * len(ts), [r - t for t in ts])
            med = max(p["median"], 0.0)
            lo, hi = max(p["ci"][0], 0.0), max(p["ci"][1], 0.0)
            out[name] = {"median": med, "ci95": [min(lo, med), max(hi, med)], "ci_coverage": p["ci_coverage"],
                         "tracer_steps": len(ts), "reported_ns": r,
                         "source": f"in-run: opskew's tracer on {len(ts)} wait steps"}
            if p["ci_reaches_level"] and p["ci"][1] < 0:
                # Faster in the trace than under opskew's tracer, beyond
                # doubt: no instrument cost makes an event shorter, so the
                # profiled steps ran it faster, or the wait steps slower,
                # than it runs (docs/method.md, "Faster in the trace"). Its
                # interval reaches the tracer's time.
                out[name]["below_ns"] = {"median": -p["median"], "ci95": [-p["ci"][1], -p["ci"][0]],
                                         "tracer_ns": median(ts)}
        refused = {k: d["median"] for k, d in out.items() if w_median > 0 and d["median"] > REF_REFUSE_W * w_median}
        for k in refused:
            del out[k]
        if refused:
            info["refused"] = {"names": sorted(refused), "median_ns": median(sorted(refused.values())),
                               "limit_ns": REF_REFUSE_W * w_median,
                               "why": f"an own delta above {REF_REFUSE_W:g} x W is taken as noise (a stall in the "
                                      "traced steps), not instrument: those names keep the class's delta"}
        if not out:
            info["why"] = ("no leaf of this trace was seen in enough tracer steps" if not refused else
                           f"every own delta was above {REF_REFUSE_W:g} x W, refused as noise")
            return None, info
        meds = sorted(d["median"] for d in out.values())
        info.update({"names": len(out), "median_ns": median(meds), "range_ns": [meds[0], meds[-1]],
                     "above_w": sorted(k for k, d in out.items() if d["median"] > max(w_median, 0.0)),
                     "below_tracer": sorted(k for k, d in out.items() if "below_ns" in d),
                     "coverage": min(d["ci_coverage"] for d in out.values())})
        return out, info