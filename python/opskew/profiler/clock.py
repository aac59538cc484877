"""The step clock of opskew.profile: one record per step body ({"step",
"phase", "ns"}, from the end of one `step()` call to the start of the
next), one per `step()` call, and the operator events counted in each
active step. A long wait block keeps only the steps pairing can use, and a
long run only its last cycles' steps (forget_old): memory and report.json
stay bounded however long the run. Loops here are over steps, never over
events."""

from __future__ import annotations

from opskew.stats.pricing import NEAR, POST_TRACE


class StepClock:
    """The steps' records and the running body's clock readings.

    `steps`: one record per step body; `calls`: one per step() call
    ({"after_step", "ns", "on_trace_ready_ns"}); `events`: step number ->
    (operator events, Python events) of each counted active step. The
    running body: its `step` number and `phase`, `t_end` (and `c_end`, the
    thread's CPU time where `cpu` reads it) when it began, `ended` once it
    was closed; `wait_pos`, the wait steps begun in the current wait block,
    `last_wait_len` those of the last one that ended."""

    def __init__(self, cpu=None):
        self.steps: list[dict] = []
        self.calls: list[dict] = []
        self.events: dict[int, tuple[int, int]] = {}
        self.block_start = 0  # index in self.steps where the current block of one phase starts
        self.dropped_wait = 0  # wait steps counted, not kept (trim_wait)
        self.dropped_old = {"wait": 0, "warmup": 0, "active": 0}  # steps of cycles past KEEP_CYCLES
        self.forgot = False  # steps were dropped: self.steps starts right after a trace
        self.cpu = cpu  # the thread's CPU clock, where W_own is measured; else None
        self.t_end = None
        self.c_end = None
        self.phase = None
        self.step = None
        self.call_t0 = None
        self.ended = True  # no body running before start()
        self.ready_ns = 0  # on_trace_ready's time inside the running step() call
        self.wait_pos = 0  # wait steps begun in the current wait block
        self.last_wait_len = 0  # steps of the last wait block that ended

    def close_body(self, now, partial=False, cpu_now=None, ref=False):
        if self.t_end is not None:
            s = {"step": self.step, "phase": self.phase, "ns": now - self.t_end}
            if cpu_now is not None and self.c_end is not None:
                # The calling thread's CPU time in the body: the work the
                # step did, without the time it slept waiting (for other
                # ranks in a collective, say): W_own's measure.
                s["cpu_ns"] = cpu_now - self.c_end
            if partial:
                # From the last step() to stop(): the loop's end, or a step
                # cut short by an exception; not a whole step, never used.
                s["partial"] = True
            if ref:
                s["ref"] = True  # under opskew's tracer: never a baseline
            if not self.steps or self.steps[-1]["phase"] != s["phase"] or self.steps[-1].get("partial"):
                self.block_start = len(self.steps)
            self.steps.append(s)
            self.t_end = None
            if s["phase"] == "wait" and not partial:
                self.trim_wait()

    def trim_wait(self):
        """Bounds a long wait block (the steps after the last cycle run to the
        end of training; a wait of thousands) to what the estimate can use:
        its first POST_TRACE + NEAR steps (cold ones and the baseline of the
        cycle before it) and its last NEAR (the baseline of a cycle after
        it). The steps between are counted (counts) and dropped with their
        step() call records, so memory and report.json stay bounded however
        long the run."""
        head = POST_TRACE + NEAR
        if len(self.steps) - self.block_start <= head + NEAR:
            return
        gone = self.steps.pop(self.block_start + head)
        self.dropped_wait += 1
        for k in range(len(self.calls) - 1, max(len(self.calls) - 4 * NEAR, 0) - 1, -1):
            if self.calls[k]["after_step"] == gone["step"]:
                del self.calls[k]
                break

    def counts(self) -> dict:
        """Whole steps per phase so far, the dropped wait steps included."""
        n = dict(self.dropped_old)
        n["wait"] += self.dropped_wait
        for s in self.steps:
            if not s.get("partial"):
                n[s["phase"]] = n.get(s["phase"], 0) + 1
        return {ph: n.get(ph, 0) for ph in ("wait", "warmup", "active")}

    def take_active(self, cycle: int) -> list:
        """The active steps since the last trace, tagged as `cycle`'s: they
        belong to it even if its export or analysis fails or its session was
        lost, and must not leak into the next cycle."""
        this_cycle = [s for s in self.steps if s["phase"] == "active" and s["step"] not in self.events
                      and s.get("cycle") is None and not s.get("partial")]
        for s in this_cycle:
            s["cycle"] = cycle
        return this_cycle

    def forget_old(self, oldest: int):
        """Keeps the steps of the traced cycles from `oldest` on (the last
        KEEP_CYCLES) and the wait and warmup steps before the oldest of them
        (its baseline); the steps before are counted, not kept, with their
        event counts and step() records. The first kept block then follows a
        trace, and its first POST_TRACE steps stay cold (estimate_w)."""
        cut = next((i for i, s in enumerate(self.steps)
                    if s["phase"] == "active" and (s.get("cycle") or 0) >= oldest), None)
        if oldest <= 1 or cut is None:
            return
        while cut > 0 and self.steps[cut - 1]["phase"] != "active":
            cut -= 1
        if cut == 0:
            return
        for s in self.steps[:cut]:
            if not s.get("partial"):
                self.dropped_old[s["phase"]] += 1
            self.events.pop(s["step"], None)
        del self.steps[:cut]
        self.block_start = max(self.block_start - cut, 0)
        first = self.steps[0]["step"]
        self.calls = [c for c in self.calls if c["after_step"] >= first]
        self.forgot = True
