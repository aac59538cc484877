"""Notes in words: each note record (opskew.stats.notes: a code, its
figures, a severity) as the sentence a report prints. The one place those
sentences are written; an older report's notes, sentences already, are
said as they are."""

from __future__ import annotations

from opskew.render.units import fmt_ns
from opskew.stats.pricing import ADVICE, MIN_PAIRS, POST_TRACE, SETTLE


def _drift(n: dict) -> str:
    lo, hi = n["ci95"]
    return (f"wait steps are not bare: the settled wait steps after a trace ran "
            f"{100 * (n['ratio'] - 1):+.1f}% [{100 * (lo - 1):+.1f}%, {100 * (hi - 1):+.1f}%] against "
            f"this process's wait steps before its first trace ({n['after_steps']} and "
            f"{n['before_steps']} steps); W is measured against them, so the corrected step keeps that "
            "part of the profiler's after-effect (docs/method.md, \"Wait steps under a live profiler\")")


def _no_calibration(n: dict) -> str:
    which = (" for every operator but the leaves (they took their own from opskew's tracer: leaf_delta), so "
             "the others' corrected times still hold it" if n.get("leaves_own") else
             ", so every operator's corrected time still holds it")
    return ("no stored calibration of this configuration: delta, the instrument's time inside each "
            f"operator's own event, is taken as 0{which} "
            "(tens to hundreds of ns a call; docs/correct.md); `opskew calibrate --config "
            f"{n['config']}` once on this machine measures it")


def _calibration_noisy(n: dict) -> str:
    said = []
    for c in n["constants"]:
        lo, hi = c["ci95"]
        if c.get("coverage") is not None and c["coverage"] < 0.95:
            said.append(f"{c['constant']}'s interval [{fmt_ns(lo)}, {fmt_ns(hi)}] has only {c['coverage']:.0%} "
                        f"coverage (6 rounds give 95%: use --trials 6 or more)")
        else:
            said.append(f"{c['constant']}'s 95% CI [{fmt_ns(lo)}, {fmt_ns(hi)}] is wider than "
                        f"+-{n['half_width']:.0%} of {fmt_ns(c['median'])}")
    if not n["busy"]:
        return "; ".join(said) + ": corrections with it carry no stated 95% uncertainty"
    return ("; ".join(said) + ": the machine was busy while it was measured; corrections with it are "
            "uncertain by as much (rerun, with more --trials, on a quieter machine)")


TEXT = {
    "text": lambda n: n["text"],
    "unpaired": lambda n: (f"{n['steps']} active step(s) had no warm wait step left to pair with (each wait step "
                           f"serves one pair; the first {POST_TRACE} after a trace are cold): {ADVICE}"),
    "near_trace": lambda n: (f"{n['pairs']} of {n['of']} pairs took a wait step within {SETTLE} steps of a trace, "
                             "whose after-effect makes those steps run slower (docs/method.md, \"Wait steps under a "
                             f"live profiler\"): W may be low by that; {ADVICE}"),
    "single_active": lambda n: (f"{n['cycles']} cycle(s) had a single active step: the first active step of a "
                                "cycle runs cold (it paid 3x the warm steps' W per event on a small step, "
                                "docs/profile.md) and is not paired; use active >= 2 for an in-run W"),
    "wait_drift": _drift,
    "two_sample": lambda n: (f"{n['pairs']} active step(s) paired with a wait step of their own, fewer than "
                             f"{MIN_PAIRS}: W comes from all {n['active_steps']} warm active steps against the run's "
                             f"{n['bare_steps']} settled bare steps outside the cycles (Hodges-Lehmann shift, "
                             f"{100 * n['coverage']:.1f}% Mann-Whitney interval; docs/profile.md, \"Schedules with "
                             f"few wait steps\"); {ADVICE}"),
    "straddle": lambda n: (f"the ProfilerStep#N ranges hold {n['held']} of the trace's {n['op_events']} operator "
                           "events: step() was called inside another range (a record_function around each "
                           "iteration?), so the ranges straddle the iterations; events per step are the trace's "
                           "totals divided by its active steps"),
    "w_below_zero": lambda n: ("W's 95% interval lies below 0: the active steps ran faster than the wait steps "
                               "paired with them, which no instrument does; the machine's speed changed during "
                               "the run. The trace is corrected with W = 0; rerun for a W that measures the "
                               "profiler"),
    "record_function_ranges": lambda n: (f"ProfilerStep#N ranges opened with torch's record_function: {n['why']}, "
                                         "tens of us a step that no W takes out of the corrected trace "
                                         "(corrected_step_ns carries none of it)"),
    "bytecode_unmeasured": lambda n: ("the interpreter's slowdown under with_stack's profile function was not "
                                      "measured (another profile function was set at the first trace: cProfile, "
                                      "a debugger): the intervals of names whose self time runs Python code are "
                                      "not widened for it (docs/profile.md)"),
    "instrument_above_active": lambda n: ("W x events is more than the active steps took: the wait steps paired "
                                          "with them ran faster than the machine did during the active steps (its "
                                          "speed changed); rerun"),
    "no_calibration": _no_calibration,
    "calibration_noisy": _calibration_noisy,
    # a trace corrected with a calibration or a run's W (opskew correct, summary --corrected)
    "calibration_measured_now": lambda n: (
        f"none was stored for this configuration: measured now, in {n['seconds']:.0f} s on opskew's built-in steps, and "
        f"stored ({n['path']}), so the next trace of it takes it at once"
        + (f"; {words(n['noisy'])}" if n.get("noisy") else "")),
    "stored_calibration_noisy": lambda n: (f"the calibration ({n['path']}) was flagged when it was measured: "
                                           f"{words(n['noisy'])}"),
    "calibration_without_python_cost": lambda n: (
        "the trace has Python-function events (with_stack) but the calibration has no W_py: their cost is not "
        "removed (recalibrate with this opskew, --config ...,with_stack)"),
    "micro_workload_w": lambda n: (
        "W comes from the torch.add micro-workload; in the validation (docs/correct-validation.md) real workloads "
        "paid 0.9 to 3.0 times that W per event with the minimal profiler and 1.0 to 2.7 times with "
        "record_shapes+with_stack" + (" (record_shapes' cost grows with each operator's inputs)" if n["shapes"] else "")
        + ", so their corrected times stay too high. For an in-run W with its interval, profile with opskew.profile "
        "or `opskew profile -- python SCRIPT` (docs/profile.md), or calibrate on your workload (opskew calibrate "
        "FILE.py:FUNCTION) and pass --calibration"),
    "step_workload_w": lambda n: (
        f"W ({n['w_ns']:.0f} ns per event) comes from opskew's built-in {n['step']} step "
        + ("(the trace ran backward nodes)" if n["step"] == "training" else "(the trace ran no backward node)")
        + ", not from this workload; a workload's own steps paid "
        + ("0.6 to 1.5" if n["step"] == "training" else "0.9 to 2.6")
        + " times such a W per event (docs/profile.md, \"How far the model misses\"). For an in-run W with its "
        "interval, profile with opskew.profile or `opskew profile -- python SCRIPT` (docs/profile.md)"),
    "cross_thread_waits": lambda n: (f"{n['waited_ns'] / 1e3:.1f} us of other threads' instrument time came off the "
                                     f"threads that waited for them ({n['threads']} threads overlap in time; the "
                                     "cross-thread rule, docs/correct.md; --waits off to leave each thread to its "
                                     "own events)"),
    "own_deltas_not_taken": lambda n: (f"the run measured {n['leaves']} leaves' own delta (opskew's tracer on its "
                                       "wait steps); this correction takes one delta for every operator: its "
                                       "corrected trace on disk has them"),
    "w_below_zero_taken_at_0": lambda n: (f"the run measured W = {n['w_ns']:.1f} ns for this trace (its paired wait "
                                          "steps ran slower than the profiled ones: the machine's speed changed); "
                                          "taken at 0, as the run's own correction took it, so nothing is taken "
                                          "out between events"),
    # a job's traces (opskew summary/correct over ranks)
    "w_for_absent_ranks": lambda n: f"--w for rank(s) {n['ranks']}, which have no traces here, was not used",
    "trace_counts_differ": lambda n: ("the ranks have different numbers of traces: segment i of each rank is matched "
                                      "with segment i of the others"),
    "hosts_unaligned": lambda n: f"{n['hosts']} hosts but --align off: times across ranks are on different clocks",
    "no_cross_rank_correction": lambda n: (f"no cross-rank correction: W is known for ranks {n['ranks']} only "
                                           "(give --w for the others)"),
    "w_by_clock_upper_bound": lambda n: ("for some ranks only W by the clock is known (no W_own in their report): a "
                                         "rank that waited in collectives for slower ranks measured their cost as "
                                         "part of its own, so its own cost here is an upper bound "
                                         "(docs/multirank.md)"),
    "no_collective_family": lambda n: ("no collective family is present on every rank (gloo:*, nccl*, "
                                       "record_param_comms, c10d::*): no waits or clock offsets, and the correction "
                                       "is each rank's own cost only"),
    "collectives_unmatched": lambda n: (f"{n['collectives']} collective(s) seen on some ranks only (or named "
                                        "differently) were left out"),
}


def words(n) -> str:
    """One note in words (a sentence stays as it is)."""
    if isinstance(n, str):
        return n
    say = TEXT.get(n.get("code"))
    return say(n) if say is not None else f"{n.get('code')}: {n}"


def all_words(notes) -> list:
    """A report's notes in words, each once, in the order of their words."""
    return sorted({words(n) for n in notes or ()})


# --------------------------------------------- how a ProfilerStep#N is priced

def _at_w(r: dict) -> str:
    if r["code"] == "few_pairs":
        return f"{r['pairs']} pair(s) at this position (it takes {r['needs']})"
    return "its position's pairs gave a W of 0 or less"


REASON = {
    "few_pairs": lambda r: f"priced at W: {_at_w(r)}",
    "w_nonpositive": lambda r: f"priced at W: {_at_w(r)}",
    "w_ci_reaches_0": lambda r: "priced at W: W's 95% CI reaches 0",
    "w_zero": lambda r: "priced at W: W is 0",
    "past": lambda r: f"priced at W: its pairs gave {r['scale']:.2f} x W, past {r['max']:.0f}x either way",
    "few_cycles": lambda r: f"priced at W: {r['cycles']} cycle(s) measured it (it takes {r['needs']})",
    "no_slower": lambda r: "priced at W: it ran no slower than the others",
    "cold_ci_reaches_0": lambda r: (f"priced at W: it ran {fmt_ns(r['extra_ns'])} over the others, but W's 95% CI "
                                    "reaches 0, so W x its events is no base to spread that over"),
    "lump": lambda r: (f"priced at W: it ran {fmt_ns(r['extra_ns'])} over the others, {r['times']:.1f} times the "
                       f"instrument time W gives its events (past {r['max'] - 1:.0f}: a lump, not a cost per event); "
                       "it stays in the step"),
    "level_past": lambda r: (f"priced at W: with its cycle's own level it came to {r['scale']:.2f} x W, past "
                             f"{r['max']:.0f}x"),
}


def _level(level) -> str:
    if not level:
        return ""
    f = level["factor"]
    return (f", and x {f:.2f} for its cycle's own level (all {level['pairs']} of the cycle's pairs "
            f"{'above' if f > 1 else 'below'} their position's W)")


def priced(why) -> str:
    """How a ProfilerStep#N was priced (its report's cold_step or
    position_steps entry's `why`, profiler.pricing's record) in words; a
    sentence (an older report's) as it is."""
    if not isinstance(why, dict):
        return why or ""
    if why.get("reason") is not None:
        return REASON[why["reason"]["code"]](why["reason"])
    scale = why["scale"]
    if why["code"] == "cold":
        if why.get("extra_reason") is None:
            return (f"its events priced at {scale:.2f} x W: the first active step of a cycle ran "
                    f"{fmt_ns(why['extra_ns'])} over the cycle's others (median over {why['cycles']} cycles)"
                    + _level(why.get("level")))
        return (f"its events priced at {scale:.2f} x W{_level(why.get('level'))}; its extra "
                f"{REASON[why['extra_reason']['code']](why['extra_reason'])}")
    where = (f"at W ({_at_w(why['at_w'])})" if why.get("at_w") else
             f"at the median of {why['pairs']} pairs at its position") + _level(why.get("level"))
    return f"its events priced at {scale:.2f} x W (and W_py): its operator events {where}"
