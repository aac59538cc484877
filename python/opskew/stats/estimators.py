"""Analyses shared by the commands: per-event costs with confidence intervals.

The statistics themselves run in the C engine (`opskew._engine.paired`); this
module only arranges per-trial numbers (one per trial, never one per event).
"""

from __future__ import annotations

from opskew import _engine


def p_text(p: float) -> str:
    """A p-value as every opskew sentence spells it: two significant digits,
    or "<1e-4"."""
    return f"{p:.2g}" if p >= 1e-4 else "<1e-4"


def estimate(samples: list[float]) -> dict:
    """Median and sign-test CI of one-sample values (CI of the median)."""
    if not samples:
        return {"median": None, "ci95": None}
    if len(samples) == 1:
        return {"median": samples[0], "ci95": None}
    r = _engine.paired([0.0] * len(samples), samples)
    return {"median": r["median"], "ci95": list(r["ci"]) if r["ci_reaches_level"] else None,
            "ci_coverage": r["ci_coverage"]}


def per_event_diff(base_s: list, treated_s: list, events: list) -> dict:
    """W: the median over rounds of (treated - base) / events, in ns, with the
    sign-test CI for the median and the exact tests (see docs/check.md).
    Normalized round by round, since the event count may vary a little."""
    b = [x * 1e9 / e for x, e in zip(base_s, events)]
    t = [x * 1e9 / e for x, e in zip(treated_s, events)]
    r = _engine.paired(b, t)
    return {"median": r["median"], "ci95": list(r["ci"]), "ci_coverage": r["ci_coverage"],
            "ci_reaches_95": r["ci_reaches_level"], "mean": r["mean"], "stdev": r["stdev"],
            "n": r["n"], "n_positive": r["n_positive"], "sign_p": r["sign_p"],
            "wilcoxon_p": r["wilcoxon_p"]}


def _steady(windows: list) -> list:
    """Each window's time with its outlying iterations (longer than 3 times
    its median) counted as the median (measure.rounds.Window.steady_s): on
    a machine shared with other processes, a time slice lands in one
    iteration and moves the window's wall by its length, at random in
    either arm. The whole walls where any window has no such figure (CUDA's
    synchronized windows)."""
    if all(getattr(w, "steady_s", None) is not None for w in windows):
        return [w.steady_s for w in windows]
    return [w.wall_s for w in windows]


def python_event_cost(rounds, name: str) -> dict:
    """W_py: the median added time per Python-function event of arm `name`
    against the bare arm "baseline" (rounds of `python_call_rounds`)."""
    tr = rounds.trials[name][:rounds.n]
    base = rounds.windows("baseline")[:rounds.n]
    walls = _steady(base + [t.window for t in tr])
    return per_event_diff(walls[:len(base)], walls[len(base):], [max(t.python_events, 1) for t in tr])


def operator_event_cost(base_windows: list, treated: list, w_py_ns: float = 0.0) -> dict:
    """W per operator event: the added time per round (each window without
    its outlying iterations, _steady), less W_py per Python event of that
    round, over its operator events."""
    n = min(len(base_windows), len(treated))
    walls = _steady(list(base_windows[:n]) + [t.window for t in treated[:n]])
    return per_event_diff(walls[:n], [w - w_py_ns * 1e-9 * t.python_events for w, t in zip(walls[n:], treated[:n])],
                          [max(t.op_events or 0, 1) for t in treated[:n]])


def gpu_side(base_windows: list, treated: list, iters: int) -> dict:
    """CUDA: GPU time per iteration from CUDA events, CPU time to issue the
    work, and what the instrument adds to each. The kernels are the same in
    both arms, so extra GPU time between the window's events is GPU idle time
    the instrument caused (a slower CPU leaves the GPU waiting for launches)."""
    n = len(treated)
    events = [t.op_events or 1 for t in treated]
    ones = [iters] * n
    g_b = [w.gpu_s for w in base_windows]
    g_p = [t.window.gpu_s for t in treated]
    i_b = [w.issue_s for w in base_windows]
    i_p = [t.window.issue_s for t in treated]
    out = {
        "baseline_gpu_per_iter_s": _engine.quantile(g_b, 0.5) / iters,
        "profiled_gpu_per_iter_s": _engine.quantile(g_p, 0.5) / iters,
        "baseline_issue_per_iter_s": _engine.quantile(i_b, 0.5) / iters,
        "profiled_issue_per_iter_s": _engine.quantile(i_p, 0.5) / iters,
        # ns per iteration, CI of the paired difference
        "gpu_idle_added_per_iter_ns": per_event_diff(g_b, g_p, ones),
        "launch_added_per_event_ns": per_event_diff(i_b, i_p, events),
        "launch_per_event_baseline_ns": _engine.quantile([b * 1e9 / e for b, e in zip(i_b, events)], 0.5),
    }
    cupti = [t.extra["cupti_overhead_events"] / iters for t in treated if "cupti_overhead_events" in t.extra]
    if cupti:
        out["cupti_overhead_events_per_iter"] = _engine.quantile(cupti, 0.5)
        out["cupti_overhead_per_iter_s"] = _engine.quantile(
            [t.extra["cupti_overhead_ns"] * 1e-9 / iters for t in treated if "cupti_overhead_ns" in t.extra], 0.5)
    dev = [t.reported_device_s for t in treated if t.reported_device_s is not None]
    if dev:
        rep = _engine.quantile(dev, 0.5) / iters
        out["trace_kernel_per_iter_s"] = rep
        out["trace_kernel_over_cuda_events"] = rep / out["baseline_gpu_per_iter_s"]
    return out


def busy_wait_spun(trials: list) -> float | None:
    """The busy-wait instrument's spin per event (median over trials, by the
    engine's clock), or None for trials of another instrument."""
    spun = [t.extra["spun_ns"] / t.op_events for t in trials if "spun_ns" in t.extra and t.op_events]
    return _engine.quantile(spun, 0.5) if spun else None


def analyze_check(base_windows: list, treated: list, *, iters: int, threshold: float) -> dict:
    """Turns per-trial numbers into the check result (schema opskew.check/1):
    `base_windows[i]` and `treated[i]` (a Trial) are round i's two arms."""
    n = min(len(base_windows), len(treated))
    res: dict = {"pairs": n}
    if n == 0:
        return res
    base = [w.wall_s for w in base_windows[:n]]
    prof = [t.window.wall_s for t in treated[:n]]
    ev_trial = [t.op_events for t in treated[:n]]
    res["baseline"] = {"per_iter_s": _engine.quantile(base, 0.5) / iters,
                       "trials_s": base}
    res["profiled"] = {"per_iter_s": _engine.quantile(prof, 0.5) / iters,
                       "trials_s": prof,
                       "enter_s": estimate([t.enter_s for t in treated])}
    if base_windows[0].gpu_s is not None:
        res["gpu"] = gpu_side(base_windows[:n], treated[:n], iters)
        res["baseline"]["gpu_per_iter_s"] = res["gpu"]["baseline_gpu_per_iter_s"]
        res["profiled"]["gpu_per_iter_s"] = res["gpu"]["profiled_gpu_per_iter_s"]
    if any(e is None or e <= 0 for e in ev_trial):
        res["events_per_iter"] = 0
        res["note"] = "the instrument recorded no operator events; per-event figures are undefined"
        return res
    res["events_per_iter"] = _engine.quantile(ev_trial, 0.5) / iters
    res["events_per_trial_range"] = [min(ev_trial), max(ev_trial)]
    res["python_events_per_iter"] = _engine.quantile([t.python_events for t in treated], 0.5) / iters
    w = per_event_diff(base, prof, ev_trial)
    res["added_per_event_ns"] = {k: w[k] for k in ("median", "ci95", "ci_coverage", "ci_reaches_95",
                                                   "mean", "stdev")}
    per_ev = lambda xs: [x * 1e9 / e for x, e in zip(xs, ev_trial)]  # noqa: E731
    stop = estimate(per_ev([t.stop_s for t in treated]))
    res["stop_per_event_ns"] = stop["median"]
    res["stop_per_event_ns_ci95"] = stop.get("ci95")
    posts = [t.post_s for t in treated]
    if any(posts):
        post = estimate(per_ev(posts))
        res["postprocess_per_event_ns"] = post["median"]
        res["postprocess_per_event_ns_ci95"] = post.get("ci95")
    exports = [t.export_s for t in treated if t.export_s is not None]
    if exports:
        exp = estimate(per_ev(exports))
        res["export_per_event_ns"] = exp["median"]
        res["export_per_event_ns_ci95"] = exp.get("ci95")
        res["export_bytes_per_event"] = _engine.quantile(
            [t.export_bytes / e for t, e in zip(treated, ev_trial)], 0.5)
    ratio = [p / b for p, b in zip(prof, base)]
    res["inflation"] = _engine.quantile(ratio, 0.5)
    spun = busy_wait_spun(treated[:n])
    if spun is not None:
        # The busy-wait instrument's known cost, as its own clock measured it.
        res["busy_wait_spun_per_event_ns"] = spun
    reported = [t.reported_op_self_s for t in treated if t.reported_op_self_s is not None]
    if reported:
        rep_iter = _engine.quantile(reported, 0.5) / iters
        res["reported_ops"] = {
            "self_per_iter_s": rep_iter,
            "self_per_event_s": rep_iter / res["events_per_iter"],
            "true_per_event_upper_s": res["baseline"]["per_iter_s"] / res["events_per_iter"],
            "share_of_baseline_iter": rep_iter / res["baseline"]["per_iter_s"],
        }
    significant = bool(w["ci_reaches_95"] and w["ci95"][0] > 0)
    skewed = significant and (res["inflation"] - 1.0) >= threshold
    cov = 100 * w["ci_coverage"]
    if w["ci_reaches_95"]:
        about_ci = f"the {cov:.1f}% CI of W {'excludes' if significant else 'does not exclude'} 0"
    else:
        # Its interval may well exclude 0; at this coverage that is no verdict.
        about_ci = f"W's interval has {cov:.1f}% coverage"
    test = (f"sign test over {n} paired trials (exact, two-sided): {w['n_positive']} of {n} "
            f"profiled trials slower, p = {p_text(w['sign_p'])}; {about_ci}; Wilcoxon signed-rank "
            f"p = {p_text(w['wilcoxon_p'])}; in-window slowdown {100 * (res['inflation'] - 1):+.1f}% "
            f"vs threshold {100 * threshold:.0f}%")
    if not w["ci_reaches_95"]:
        test += f"; {n} pairs cannot give a 95% CI (need 6), so no verdict of skew"
    res["verdict"] = {"skewed": skewed, "significant": significant, "enough_trials": bool(w["ci_reaches_95"]),
                      "test": test,
                      "sign_p": w["sign_p"], "wilcoxon_p": w["wilcoxon_p"], "threshold": threshold}
    return res


def marginal_state(d: dict | None) -> str | None:
    """"above" or "below" when the marginal's 95% CI excludes 0, "not
    distinguishable" when it includes 0 (or there is none), "too few rounds"
    when the rounds cannot give a 95% interval (fewer than 6): a sign the
    data do not support is not printed."""
    if not d or d.get("median") is None:
        return None
    ci = d.get("ci95")
    if ci and d.get("ci_reaches_95", True) is False:
        return "too few rounds"
    if not ci or ci[0] <= 0 <= ci[1]:
        return "not distinguishable"
    return "above" if ci[0] > 0 else "below"
