"""The analysis of each traced cycle of opskew.profile: the events
counted in its trace, W estimated from the run's pairs (opskew.stats.
pricing.estimate_w), the cycle's report with its verdict and corrected
trace, and at stop() every trace of the run corrected again with the run's
final W. Loops here are over steps and cycles, never over events."""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable

from opskew.analyze.audit import audit, summary as audit_summary
from opskew.analyze.tracefile import correct
from opskew.errors import OpskewError
from opskew.profiler.evidence import choose_w
from opskew.profiler.leafref import REF_MIN_CALLS
from opskew.profiler.pricing import step_spans
from opskew.profiler.traces import corrected_path, metadata, per_operator_to, take
from opskew.stats.costmodel import CostModel, separability
from opskew.stats.notes import merged, note
from opskew.stats.pricing import ADVICE, MIN_PAIRS, POST_TRACE, estimate_w, median
from opskew.vocab import OP_CATEGORIES, STEP_NAME

# Traces corrected again with the run's final W at stop(), the latest first.
MAX_RECORRECT = 50

# Traced cycles whose steps W is estimated from, the latest: with repeat=0 a
# run goes on for thousands of cycles, and estimating from every step made
# each trace's analysis grow with the run (70 ms of opskew's time a cycle
# after 400 cycles, 8 ms at the start). Older steps are counted
# (StepClock.counts), not kept. 50 cycles give 300 pairs with the advised
# schedule, and they are the cycles whose traces stop() corrects again.
KEEP_CYCLES = MAX_RECORRECT


def count(trace: str, waits: int) -> dict:
    """Operator and Python events inside each ProfilerStep#N of the trace,
    from the C correction's pass at W = 0 (its per-name descendants), with
    those of other threads it waited for (a CUDA backward runs on the
    autograd engine's device thread: the C correction's cross-thread rule,
    on where the trace holds GPU activity)."""
    res = correct(trace, CostModel.default(0.0), waits=waits)
    per_step = {}
    for o in res["ops"]:
        m = STEP_NAME.match(o["name"])
        if m and o["calls"] == 1:
            per_step[int(m.group(1))] = (o["descendants"] + o.get("waited_descendants", 0),
                                         o["py_descendants"] + o.get("waited_py_descendants", 0))
    st = res["stats"]
    # The leaves, for their own delta (LeafReference.op_deltas): operators and
    # record_function ranges with no operator inside (under with_stack
    # a range may hold Python events, priced at W_py there).
    leaves = {o["name"]: (o["calls"], o["reported_total_ns"], o["py_descendants"]) for o in res["ops"]
              if o["descendants"] == 0 and not o["python"] and o["calls"] >= REF_MIN_CALLS
              and o.get("category") in OP_CATEGORIES and not STEP_NAME.match(o["name"])}
    # A training capture (the autograd engine's events): the in-process
    # model times its training step, else its inference one (profiler.model).
    backward = any(o["name"].startswith("autograd::engine::evaluate_function") for o in res["ops"])
    return {"per_step": per_step, "op_events": st["corrected_events"] - st["py_events"],
            "py_events": st["py_events"], "leaves": leaves, "backward": backward}


_ABSENT = object()


def _fresh(rep: dict) -> dict:
    """A copy of `rep` to compute a revision in (step_spans writes into its
    cold_step and position_steps), without its table of every operator:
    the report as printed keeps its own values."""
    return copy.deepcopy({k: v for k, v in rep.items() if k != "operators"})


def claim(reports: list, rep: dict):
    """`rep`'s raw trace is now at its path: an earlier cycle's report
    naming the same file (a handler that exports to one name every
    cycle) no longer describes it, and stop() must not correct that file
    again as the earlier cycle's. That report is replaced by one that says
    so (CycleReport.revised)."""
    raw = rep.get("raw_trace")
    if not raw:
        return
    # The reports stop() may correct again, at most: O(1) a cycle.
    for i in range(max(len(reports) - MAX_RECORRECT - 1, 0), len(reports)):
        r = reports[i]
        if r is not rep and r.get("raw_trace") == raw:
            reports[i] = r.revised({"raw_trace": None, "corrected_trace": None, "overwritten_by_cycle": rep["cycle"]},
                                   "overwritten")


def shed_old_operators(reports: list, shed_upto: int) -> int:
    """A report older than the last KEEP_CYCLES keeps its per-operator
    summary and marks, not its table of every operator (its corrected
    trace carries that): memory stays bounded however long the run.
    `shed_upto`: the reports before it hold no table already; returns the
    new such index."""
    upto = len(reports) - KEEP_CYCLES
    for r in reports[shed_upto:max(upto, 0)]:
        ops = r.get("operators")
        if isinstance(ops, dict) and "ops" in ops:
            ops.pop("ops")
            ops["ops_dropped"] = "older than the last %d cycles: see the cycle's corrected trace" % KEEP_CYCLES
    return max(shed_upto, upto)


def error_report(cycle: int, rank, world_size: int, error: str, steps: dict, step_ranges,
                 raw: str | None = None) -> dict:
    """The report of a cycle that has no analysis: why, and what is known."""
    return {"cycle": cycle, "rank": rank, "world_size": world_size, "raw_trace": raw,
            "corrected_trace": None, "error": error, "steps": steps,
            "step_ranges": dict(step_ranges or {}) or None}


@dataclasses.dataclass(eq=False)
class CycleAnalysis:
    """What one profiler knows of its traced cycles, and how it analyses
    each: its step clock, leaf reference, figures and trace files (the
    profiler's), its settings, and what it found: `wv` the latest W a trace
    was corrected with (None where there is none), `final` the run's W from
    all its steps (set at stop()), `pair_steps` the last estimate's pairs as
    (active step, wait step)."""

    clock: object
    ref: object
    figures: object
    files: object
    _: dataclasses.KW_ONLY
    options: dict
    threshold: float
    scheduled: Callable[[], bool]  # whether the profiler follows a schedule now (schedule.scheduled)
    waits: int
    rank: int | None
    world_size: int
    traffic: object = None  # the optimizer's steps between and inside captures (profiler.traffic), or None
    wv: dict | None = dataclasses.field(default=None, init=False)
    final: dict | None = dataclasses.field(default=None, init=False)
    pair_steps: list = dataclasses.field(default_factory=list, init=False)
    # Each recent cycle's notes before delta's (stop() says delta's again
    # with the leaves it then has), its last MAX_RECORRECT.
    base_notes: dict = dataclasses.field(default_factory=dict, init=False)

    def estimate(self):
        """W from the kept steps' pairs (estimate_w): (W or None, notes, detail)."""
        w_py = self.figures.w_py()
        wp = max(w_py["median"], 0.0) if w_py else 0.0
        c = self.clock
        w, notes, detail, self.pair_steps = estimate_w(c.steps, c.events, c.forgot, wp, self.figures.cuda)
        return w, notes, detail

    def analyse(self, trace: str, raw: str | None, stop_ns: int, user_ns: int, this_cycle: list, cycle: int,
                step_ranges) -> dict:
        """The report of `cycle`, whose trace is `trace` (`raw` the user's
        export, or None) and whose active steps are `this_cycle`."""
        counts = count(trace, self.waits)
        events = self.clock.events
        counted_per_step = True
        found = [s for s in this_cycle if s["step"] in counts["per_step"]]
        # Every range's events, the step an exception cut short included (its
        # operators are in the trace's total too).
        held = sum(v[0] for v in counts["per_step"].values())
        straddle = bool(found) and held < 0.5 * counts["op_events"]
        if straddle:
            # Ranges that hold less than half of the trace's operators: step()
            # was called inside another range (a record_function around each
            # iteration), so each ProfilerStep#N opens in one iteration and
            # closes in the next, and nesting puts the operators elsewhere
            # (the ranges keep only what runs after step() in its range).
            found = []
        if found:
            # Steps of an earlier cycle whose analysis failed are not in this trace.
            this_cycle = found
            for s in this_cycle:
                events[s["step"]] = counts["per_step"][s["step"]]
        elif this_cycle:
            # No ProfilerStep#N annotations for these steps: totals over steps.
            counted_per_step = False
            n = len(this_cycle)
            for s in this_cycle:
                events[s["step"]] = (counts["op_events"] / n, counts["py_events"] / n)
        self.clock.forget_old(cycle - KEEP_CYCLES + 1)
        w, notes, detail = self.estimate()
        if straddle:
            notes.append(note("straddle", held=held, op_events=counts["op_events"]))
        rep = self._skeleton(counts, this_cycle, counted_per_step, cycle, raw, step_ranges, detail)
        wv = self._w(rep, w, detail, stop_ns + user_ns, counts["backward"])
        self._notes(rep, w, notes, step_ranges)
        self._figures(rep, this_cycle, stop_ns, user_ns, wv, w, detail)
        if self.figures.cuda:
            self._audit(rep, trace)
        self.wv = None
        if raw is None and self.files.corrected_dir is not None:
            rep["raw_trace"] = raw = self.files.save_raw(trace, cycle)
        self.ref.raw[cycle] = counts.get("leaves") or {}
        self.ref.raw.pop(cycle - MAX_RECORRECT, None)
        if wv is not None:
            self._correct(rep, trace, raw, counts, wv)
        return rep

    def _advice(self, pairs: int, has_wait: bool, single: int = 0) -> str:
        # Each line says what is missing, then the one advised schedule and why (ADVICE).
        if not self.scheduled():
            return f"no schedule: every step is active, so there is no uninstrumented step to pair with; {ADVICE}"
        if not has_wait:
            return ("the schedule has no wait steps (wait=0 and no steps outside the cycles), so no active step "
                    f"has an uninstrumented step to pair with; {ADVICE}")
        if single and not pairs:
            return ("each cycle so far has a single active step, the cold first one, which is never paired; "
                    f"{ADVICE}")
        return (f"{pairs} active step(s) paired so far; a 95% CI needs {MIN_PAIRS} (each wait step serves one "
                f"pair, the first {POST_TRACE} after a trace are cold, and the first active step of a cycle is "
                f"not paired); {ADVICE}")

    def _cold_step(self, this_cycle: list) -> dict | None:
        """The cycle's first active step (cold: estimate_w never pairs it),
        whose events the correction prices higher (step_spans): its range's
        name and its events."""
        first = min(this_cycle, key=lambda s: s["step"], default=None)
        if first is None or first["step"] not in self.clock.events:
            return None
        ev, py = self.clock.events[first["step"]]
        return {"name": f"ProfilerStep#{first['step']}", "op_events": ev, "py_events": py,
                "cycle_first_step": first["step"]}

    def _position_steps(self, this_cycle: list) -> list:
        """The cycle's other active steps, each with its position in the
        cycle (1 on), which step_spans prices by (w_by_position)."""
        out = []
        steps = sorted(this_cycle, key=lambda s: s["step"])
        for k, s in enumerate(steps[1:], 1):
            if s["step"] in self.clock.events:
                ev, py = self.clock.events[s["step"]]
                out.append({"name": f"ProfilerStep#{s['step']}", "position": k, "op_events": ev, "py_events": py,
                            "cycle_first_step": steps[0]["step"]})
        return out

    # ------------------------------------------------------ the cycle's report
    def _skeleton(self, counts, this_cycle, counted_per_step, cycle, raw, step_ranges, detail) -> dict:
        rep = {"cycle": cycle, "rank": self.rank, "world_size": self.world_size,
               "raw_trace": raw, "corrected_trace": None,
               "steps": self.clock.counts(),
               "events": {"op_events": counts["op_events"], "py_events": counts["py_events"],
                          "per_step": counted_per_step,
                          "how": ("operators inside each ProfilerStep#N annotation" if counted_per_step else
                                  "the trace's totals divided by its active steps (no ProfilerStep#N "
                                  "annotations for them)")},
               "step_ranges": dict(step_ranges or {}) or None,
               "trace_step_stretch": None,  # set with the corrected trace: trace_steps
               # Each ProfilerStep#N's body as opskew timed it (from the end of one
               # step() to the start of the next): the C correction takes the
               # range's time beyond it (the parts of step() inside the range) out
               # as the range's own instrument time (docs/profile.md).
               "step_spans_ns": ({f"ProfilerStep#{s['step']}": s["ns"] for s in this_cycle}
                                 if counted_per_step else None),
               "cold_step": self._cold_step(this_cycle) if counted_per_step else None,
               "position_steps": self._position_steps(this_cycle) if counted_per_step else None,
               **detail}
        # This cycle's own level only (the run's are in prof.final).
        first = min((s["step"] for s in this_cycle), default=None)
        rep["w_by_cycle"] = [c for c in detail.get("w_by_cycle") or [] if c["first_step"] == first]
        return rep

    def _w(self, rep: dict, w, detail: dict, stop_ns: int, training: bool = True):
        """The W the cycle's trace is corrected with, by the evidence rule
        (profiler.evidence.choose_w; docs/profile.md, "Which W a trace
        gets"), and where the run's pairs give none, the advice: what to
        change for them."""
        if w is None or not w["ci_reaches_95"]:
            has_wait = any(s["phase"] == "wait" for s in self.clock.steps)
            rep["advice"] = self._advice(detail["pairs"], has_wait, detail.get("single_active_cycles", 0))
        return choose_w(rep, w, detail, self.figures, self.traffic, stop_ns, training)

    def _audit(self, rep: dict, trace: str):
        """The clean-window audit of a CUDA cycle's trace (docs/cuda.md): in
        the report, its notes, and so in the corrected trace's metadata."""
        try:
            found = audit(trace)
        except OpskewError as exc:
            rep["audit"] = {"error": str(exc)}
            return
        rep["audit"] = audit_summary(found)  # the printed report says its findings (render.audit.lines)

    def _notes(self, rep: dict, w, notes: list, step_ranges):
        if w is not None and w["ci_reaches_95"] and w["ci95"][1] < 0:
            # No instrument makes a step faster: the machine's speed changed
            # between the paired steps (a burst of slow wait steps, say).
            notes.append(note("w_below_zero"))
        if (step_ranges or {}).get("route") == "record_function":
            notes.append(note("record_function_ranges", why=step_ranges["why"]))
        rep["notes"] = merged(notes)

    def _figures(self, rep: dict, this_cycle: list, stop_ns: int, user_ns: int, wv, w, detail: dict):
        """W, W_py and the bytecode slowdown as the report gives them, the
        shares of the active steps' time, and the verdict."""
        rep["w_ns"] = wv if wv is not None else (
            {"median": w["median"], "ci95": None, "ci_coverage": None} if w is not None else None)
        fig = self.figures
        w_py = fig.w_py()
        rep["w_py_ns"] = w_py
        rep["cost_classes"] = separability(self.options, w_py)
        rep["bytecode"] = fig.bytecode()
        if self.options["with_stack"] and fig.measure_py and rep["bytecode"] is None:
            rep["notes"] = merged(rep["notes"], [note("bytecode_unmeasured")])
        if self.options["with_stack"]:
            rep["w_py_note"] = (
                f"W_py {w_py['source']}; taken out of each active step before W and used in the correction"
                if w_py else "W_py could not be measured here ({}) and none is stored: W per operator event "
                "carries the Python events' cost too".format(fig.w_py_error or "measure_w_py=False"))
        # Share of the active steps' time: instrument (W x events), and the
        # profiler's stop and export (the step() call that produced this trace).
        events = self.clock.events
        act = [s for s in this_cycle]
        act_ns = sum(s["ns"] for s in act)
        rep["stop_ns"] = stop_ns  # profiler stop and post-processing, inside step()/stop()
        rep["on_trace_ready_ns"] = user_ns  # the user's handler (its export), inside step()/stop()
        if wv is not None and act_ns > 0:
            model = self.model(wv)
            inst = sum(model.step_cost(*events[s["step"]]) for s in act)  # operator events at W, Python's at W_py
            rep["share_of_active_time"] = {"instrument": inst / act_ns, "stop": stop_ns / act_ns,
                                           "on_trace_ready": user_ns / act_ns}
            if inst > act_ns:
                rep["notes"] = merged(rep["notes"], [note("instrument_above_active")])
        if wv is not None and rep.get("w_source") != "in-run" and act and rep.get("corrected_step_ns") is None \
                and all(s["step"] in events for s in act):
            # No pairs: the true step is each active body less its events'
            # cost at W (and at W's interval ends); where the trace marks its
            # steps, the corrected trace's figure replaces it (trace_steps).
            def true_step(m):
                return median([s["ns"] - m.step_cost(*events[s["step"]]) for s in act])

            ends = [self.model({"median": x, "ci95": [x, x]}) for x in reversed(wv["ci95"])]
            rep["corrected_step_ns"] = true_step(self.model(wv))
            rep["corrected_step_w_ci_ns"] = [true_step(m) for m in ends]
            rep["active_step_ns"] = median([s["ns"] for s in act])
        significant = bool(wv is not None and w is not None and w["ci_reaches_95"] and w["ci95"][0] > 0)
        infl = detail.get("inflation")
        rep["verdict"] = {
            "skewed": bool(significant and infl is not None and infl - 1 >= self.threshold),
            "significant": significant, "enough_pairs": bool(w is not None and w["ci_reaches_95"]),
            "threshold": self.threshold,
            "test": (w.get("test") or f"sign test over {w['n']} active steps against their neighbouring wait "
                     f"steps: {w['n_positive']} slower, p = {w['sign_p']:.3g}" if w is not None else
                     "no active step could be paired with a wait step")}

    def _correct(self, rep: dict, trace: str, raw: str | None, counts: dict, wv: dict):
        """The cycle's corrected trace (next to `raw`, where there is one)
        with W `wv`, and the report's per-operator part from that pass."""
        fig = self.figures
        rep["op_deltas_ns"], rep["leaf_delta"] = self.ref.op_deltas(counts.get("leaves"), self.model(wv))
        self.base_notes[rep["cycle"]] = list(rep["notes"])
        self.base_notes.pop(rep["cycle"] - MAX_RECORRECT, None)
        delta = fig.delta(wv["median"], rep["notes"], leaves_own=bool(rep["op_deltas_ns"]))
        rep["notes"] = merged(rep["notes"])
        out = corrected_path(raw) if raw is not None else None
        rep["corrected_trace"] = out
        rep["delta_ns"] = delta
        self.wv = wv
        take(rep, self._pass(rep, trace, out, wv, rep))

    def _pass(self, rep: dict, trace: str, out: str | None, wv: dict, levels: dict) -> dict:
        """The C correction's pass over `trace` with W `wv` and `rep`'s delta
        and leaves' own deltas (`levels`: where the steps' prices by position
        come from, step_spans), writing the corrected trace to `out`."""
        model = self.model(wv, rep.get("delta_ns", 0.0))
        spans = step_spans(rep, model, levels)
        return per_operator_to(trace, model, self.threshold, out, metadata(rep), self.waits, spans,
                               rep.get("bytecode"), self.figures.delta_range(), rep.get("op_deltas_ns"))

    def model(self, wv: dict, delta: float = 0.0) -> CostModel:
        """The cost model of this profiler's traces at W `wv` and delta:
        the Python class at the W_py its figures measured (or stored)."""
        w_py = self.figures.w_py()
        return CostModel.default(wv, delta, w_py, (w_py or {}).get("delta_py_ns", 0.0))

    def correct_copy(self, reports: list, kept: str, path: str):
        """export_chrome_trace(path) after the cycle: the latest report's
        trace, kept by opskew and copied to `path`, corrected next to it
        with the cycle's W (where it has one). The report is replaced by
        one that names these files (its `as_printed` keeps the paths it
        printed)."""
        rep = reports[-1] if reports else None
        if rep is None or self.wv is None:
            return
        out = corrected_path(path)
        reports[-1] = rep = rep.revised({"raw_trace": path, "corrected_trace": out}, "exported")
        claim(reports, rep)
        self._pass(_fresh(rep), kept, out, self.wv, rep)

    # ----------------------------------------------------------------- stop()
    def recorrect(self, reports: list, cycles: int):
        """At stop(): W estimated once more from every step kept (the last
        KEEP_CYCLES cycles'; the wait steps after the last cycle have run by
        now), and every trace of the run corrected with it, so that they
        agree (a cycle whose own W had too few pairs gets its corrected trace
        then). Each report keeps the W of its own cycle (`w_ns`) and says
        what its trace carries (`corrected_with`, `corrected_w_ns`);
        `self.final` holds the run's."""
        if not reports:
            return
        if self.ref.pending:
            self.ref.collect()
        w, notes, detail = self.estimate()
        if w is None or not w["ci_reaches_95"]:
            return
        wv = {"median": w["median"], "ci95": w["ci95"], "ci_coverage": w["ci_coverage"],
              "ci_method": w["ci_method"]}
        fig = self.figures
        delta = fig.delta(wv["median"], [])  # its note once the leaves are known, below
        self.final = {"w_ns": wv, "w_own_ns": detail.get("w_own_ns"), "delta_ns": delta, "pairs": detail["pairs"],
                      # The cycles its pairs come from: the last KEEP_CYCLES of the run's.
                      "cycles": min(cycles, KEEP_CYCLES), "run_cycles": cycles,
                      "inflation": detail.get("inflation"), "notes": merged(notes),
                      "corrected_step_ns": detail.get("corrected_step_ns"),
                      "corrected_step_w_ci_ns": detail.get("corrected_step_w_ci_ns"),
                      "cold_first_active_extra_ns": detail.get("cold_first_active_extra_ns"),
                      "w_by_position": detail.get("w_by_position"), "w_by_cycle": detail.get("w_by_cycle"),
                      "cold_first_active_cycles": detail.get("cold_first_active_cycles"),
                      "baseline_step_ns": detail.get("baseline_step_ns"), "active_step_ns": detail.get("active_step_ns"),
                      "sign_test": w.get("test") or (f"{w['n_positive']} of {w['n']} active steps slower than "
                                                     f"their wait step, p = {w['sign_p']:.3g}")}
        self.wv = wv
        # The latest MAX_RECORRECT cycles' traces (those whose steps W comes
        # from); the older ones keep their own cycle's W.
        older = sum(1 for r in reports[:-MAX_RECORRECT] if r.get("raw_trace"))
        if older:
            self.final["not_recorrected"] = (f"the {older} oldest traces keep their own cycle's W (those of the "
                                             f"latest {MAX_RECORRECT} cycles are corrected again at stop)")
        steps, leaves_own = [], False
        for i in range(max(len(reports) - MAX_RECORRECT, 0), len(reports)):
            rep = reports[i]
            if not rep.get("raw_trace") or not os.path.isfile(rep["raw_trace"]):
                continue
            new = dict(_fresh(rep), corrected_trace=corrected_path(rep["raw_trace"]),
                       corrected_with="the run's final W", corrected_w_ns=wv, delta_ns=delta)
            # Each leaf's own delta from every tracer step of the run.
            new["op_deltas_ns"], new["leaf_delta"] = self.ref.op_deltas(self.ref.raw.get(rep["cycle"]), self.model(wv))
            leaves_own = leaves_own or bool(new["op_deltas_ns"])
            base = self.base_notes.get(rep["cycle"])
            if base is not None:
                new["notes"] = list(base)
                fig.delta(wv["median"], new["notes"], leaves_own=bool(new["op_deltas_ns"]))
                new["notes"] = merged(new["notes"])
            v = self._pass(new, rep["raw_trace"], new["corrected_trace"], wv, self.final)
            take(new, v)
            reports[i] = rep.revised({k: x for k, x in new.items() if rep.get(k, _ABSENT) != x}, "final_w")
            steps += [o["corrected_total_ns"] for o in v["ops"] if STEP_NAME.match(o["name"]) and o["calls"] == 1]
        fig.delta(wv["median"], notes, leaves_own=leaves_own)
        self.final["notes"] = merged(notes)
        if steps:
            # The run's corrected step is its corrected traces' (trace_steps).
            self.final["corrected_step_pairs_ns"] = self.final["corrected_step_ns"]
            self.final["corrected_step_pairs_w_ci_ns"] = self.final["corrected_step_w_ci_ns"]
            self.final["corrected_step_ns"] = median([c["median"] for c in steps])
            self.final["corrected_step_w_ci_ns"] = [median([c["ci95"][0] for c in steps]),
                                                    median([c["ci95"][1] for c in steps])]
