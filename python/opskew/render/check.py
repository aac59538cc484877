"""The text of `opskew check` for people."""

from __future__ import annotations

import sys

from opskew.render import answers
from opskew.render.verdict import reconcile, render, skew_words
from opskew.render.units import count_of, fmt_ci, fmt_ns, fmt_time, table


def _count(x: float) -> str:
    """A count of events per iteration: whole when it is one, else "about N"
    (a median over trials of events per window, over the window's iterations,
    need not be whole: the profiler's own Python frames vary)."""
    n = round(x)
    return f"{n:d}" if abs(x - n) < 1e-9 else f"about {n:d}"


def print_human(result: dict, out=None) -> None:
    out = out or sys.stdout  # looked up per call: a redirected or captured stdout is honoured
    out.write(answers.lead(answers.check(result)))
    c = result["conditions"]
    title = f"opskew check: {c['workload']['description']}"
    rows = [
        ("conditions", f"torch {c['torch']}, {c['device']}"
         + (f" ({c['gpu']})" if c.get("gpu") else f" ({c['cpu']})")
         + f", {count_of(c['threads'], 'thread')}, Python {c['python']}"),
        ("instrument", c["instrument_label"] + ("" if c["baseline_instrument"] == "none"
                                                else f", over {c['baseline_instrument']}")),
        ("method", f"{result.get('pairs', 0)} interleaved pairs x {c['iters']} iterations, "
         f"warm-up {c.get('warmup_s', 0):g}s (--warmup)" + (
             f", then one instrument session of {c['first_session_s']:.1f}s (the profiler's first start, "
             "not measured)" if c.get("first_session_s") is not None else ", then one instrument session")),
    ]
    if result.get("status") != "complete":
        rows.append(("status", f"PARTIAL ({result.get('status')}): figures use the trials completed"))
    if "baseline" not in result:
        rows.append(("result", "no complete pair of trials: nothing to report"))
        table(rows, title, out)
        return
    b, p = result["baseline"], result["profiled"]
    rows += [
        ("", ""),
        ("baseline / iteration", fmt_time(b["per_iter_s"])),
        ("profiled / iteration", f"{fmt_time(p['per_iter_s'])}  (in-window: timed inside the profiler's with-block)"),
    ]
    if "gpu" in result:
        g = result["gpu"]
        rows.append(("GPU time / iteration", f"baseline {fmt_time(g['baseline_gpu_per_iter_s'])}, "
                     f"profiled {fmt_time(g['profiled_gpu_per_iter_s'])} (CUDA events)"))
        idle = g["gpu_idle_added_per_iter_ns"]
        rows.append(("GPU idle added", f"{fmt_ns(idle['median'])} / iteration  CI {fmt_ci(*idle['ci95'])}"))
        la = g["launch_added_per_event_ns"]
        rows.append(("launch (CPU issue)", f"{fmt_ns(g['launch_per_event_baseline_ns'])} / op baseline; "
                     f"+{fmt_ns(la['median'])} / op profiled  CI {fmt_ci(*la['ci95'])}"))
        if "trace_kernel_per_iter_s" in g:
            rows.append(("kernels in trace", f"{fmt_time(g['trace_kernel_per_iter_s'])} / iteration = "
                         f"{100 * g['trace_kernel_over_cuda_events']:.0f}% of the CUDA-event GPU time"))
        if "cupti_overhead_events_per_iter" in g:
            rows.append(("CUPTI overhead", f"{g['cupti_overhead_events_per_iter']:.3g} overhead events / iteration, "
                         f"{fmt_time(g['cupti_overhead_per_iter_s'])} / iteration, as Kineto reports them"))
        rows.append(("sync cost", f"{fmt_time(c['sync_s'])} per synchronize, paid once per window in both arms"))
    if result.get("events_per_iter"):
        lo, hi = result["events_per_trial_range"]
        ev = f"{_count(result['events_per_iter'])} operator events"
        if result.get("python_events_per_iter"):
            ev += f" + {_count(result['python_events_per_iter'])} Python-function events"
        if lo != hi:
            ev += f" (trials recorded {lo}..{hi} operator events in {c['iters']} iterations; the median)"
        rows.append(("events / iteration", ev))
        w = result["added_per_event_ns"]
        rows.append(("added per event (W)", f"{fmt_ns(w['median'])}  "
                     f"{100 * w['ci_coverage']:.1f}% CI {fmt_ci(*w['ci95'])}  (in-window W on this workload: "
                     "docs/which-w.md)"))
        rows.append(("inflation", f"x{result['inflation']:.2f} in-window time per iteration"))
        if "reported_ops" in result:
            r = result["reported_ops"]
            rows.append(("trace op time", f"{fmt_time(r['self_per_event_s'])} per op (self, key_averages()); "
                         f"the uninstrumented loop takes {fmt_time(r['true_per_event_upper_s'])} per op, "
                         "Python and dispatch included"))
            rows.append(("W vs trace op time", f"the instrument adds {100 * w['median'] * 1e-9 / r['self_per_event_s']:.0f}% "
                         "of what the trace reports per op"))
        rows.append(("", ""))
        rows.append(("enter (start)", fmt_time(p["enter_s"]["median"])))
        rows.append(("stop / event", f"{fmt_ns(result['stop_per_event_ns'])}  (outside the window)"))
        if "postprocess_per_event_ns" in result:
            rows.append(("post-process / event", f"{fmt_ns(result['postprocess_per_event_ns'])}  (key_averages())"))
        if "export_per_event_ns" in result:
            rows.append(("export / event", f"{fmt_ns(result['export_per_event_ns'])}, "
                         f"{result['export_bytes_per_event']:.0f} bytes/event"))
        if result.get("correction_error"):
            rows.append(("per-operator verdict", f"not made: {result['correction_error']}"))
        if "correction" in result:
            cr = result["correction"]
            rows.append(("", ""))
            text = (f"W {fmt_ns(cr['w_ns']['median'])} {fmt_ci(*cr['w_ns']['ci95'])} per operator event (the "
                    "same trials', Python events apart)")
            if cr["w_py_ns"]["median"]:
                text += (f", W_py {fmt_ns(cr['w_py_ns']['median'])} {fmt_ci(*cr['w_py_ns']['ci95'])} "
                         "per Python event")
            rows.append(("in-run calibration", text + f", delta {fmt_ns(cr['delta_ns'])}"))
            rows.append(("verdict window", f"{cr['events']} events in one more profiled window (the "
                         "per-operator verdict below reads it)"
                         + (f"; corrected trace {cr['corrected_trace']}" if cr["corrected_trace"] else "")
                         + (f"; raw trace {cr['trace']}" if cr["trace"] else "")))
        v = result["verdict"]
        rows.append(("", ""))
        if v["skewed"]:
            text = "SKEWED: the instrument inflates this trace (where, per operator: below)"
        elif not v["significant"] and not v.get("enough_trials", True):
            text = (f"NOT ENOUGH TRIALS to decide: {result.get('pairs', 0)} pair(s); the sign test needs "
                    "at least 6 for a 95% CI (run more --trials)")
        else:
            text = skew_words(v)
        rows.append(("verdict", text))
        rows.append(("test", v["test"]))
        said = reconcile(v["skewed"], result.get("inflation"), (result.get("operators") or {}).get("marks"),
                         "iteration")
        if said:
            rows.append(("what to read", said))
    elif result.get("note"):
        rows.append(("note", result["note"]))
    if result.get("error"):
        rows.append(("error", result["error"]))
    table(rows, title, out)
    if "operators" in result:
        out.write("\nper-operator verdict (one profiled window, corrected with the in-run W):\n")
        render(result["operators"], out, top=result["operators"]["top"])
