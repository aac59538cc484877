"""`opskew summary`'s text for people: the per-operator table through the one
renderer (opskew.render.tables), then the totals."""

from __future__ import annotations


from opskew.render import answers
from opskew.render.tables import SUMMARY_COLUMNS, Col, op_table, summary_rows
from opskew.render.trace_notes import losses_line
from opskew.render.units import count_of, fmt_ns
from opskew.vocab import is_step


def print_table(result, ops, top, out, losses=None):
    """The answer, the table through the one renderer (opskew.tables), then the totals."""
    out.write(answers.lead(answers.summary(result)))
    self_sum = sum(o["self_ns"] for o in result["ops"])  # shares are of all self time
    op_table(summary_rows(ops, SUMMARY_COLUMNS, self_sum), SUMMARY_COLUMNS, top=top, out=out)
    st = result["stats"]
    threads = [t for t in result["threads"] if t["complete_events"]]
    out.write(f"self time total: {fmt_ns(self_sum)}")
    if st.get("complete_events"):
        out.write(f"; span {fmt_ns(st['last_end_ns'] - st['first_ts_ns'])}")
    out.write("\n")
    out.write(f"{st.get('complete_events', 0)} complete events of {st.get('events', 0)} read, "
              f"{len(ops)} names, {count_of(len(threads), 'thread')}\n")
    if losses:
        out.write(losses_line(losses)[0].upper() + losses_line(losses)[1:] + "\n")


PROFILE_OP_COLUMNS = ("name", "calls", "total", "self", "corrected total [95% CI]", "corrected self [95% CI]",
                      "verdict")


def w_text(w) -> str:
    """W as a report gives it ({"median", "ci95", ...}, or ns): "599 ns [-196 ns, 702 ns]"."""
    if isinstance(w, dict):
        ci = w.get("ci95")
        return fmt_ns(w.get("median")) + (f" [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]" if ci and None not in ci else
                                           " (no 95% interval: too few pairs)")
    return fmt_ns(w)


def _step(ns, band) -> str:
    return fmt_ns(ns) + (f" [{fmt_ns(band[0])}, {fmt_ns(band[1])}]" if band else "")


def profile_op_rows(ops: list) -> list:
    """Rows of PROFILE_OP_COLUMNS from a cycle report's operators."""
    rows = []
    for o in ops:
        ct, cs = o["corrected_total_ns"], o["corrected_self_ns"]
        rows.append([o["name"], o["calls"], o["reported_total_ns"], o["reported_self_ns"],
                     (ct["median"], *(ct.get("ci95") or [ct["median"]] * 2)),
                     (cs["median"], *(cs.get("ci95") or [cs["median"]] * 2)),
                     o.get("mark", "") + (f" (self: {o['marks']['self']})" if (o.get("marks") or {}).get("self")
                                          not in (None, o.get("mark")) else "")])
    return rows


def print_run_figures(run: dict, out) -> None:
    """A run's W and its step: profiled, corrected, in the wait steps."""
    if run.get("w_ns") is not None:
        out.write(f"  W {w_text(run['w_ns'])} per operator event ({run['from']}, "
                  f"{count_of(run.get('pairs') or 0, 'pair')})\n")
    if run.get("active_step_ns") is not None:
        out.write(f"  step: {fmt_ns(run['active_step_ns'])} profiled, "
                  f"{_step(run.get('corrected_step_ns'), run.get('corrected_step_w_ci_ns'))} corrected "
                  f"(at W's 95% CI), {fmt_ns(run.get('baseline_step_ns'))} in the wait steps (medians)\n")


def print_profile_run(doc: dict, out, top: int = 30) -> None:
    """`opskew summary OUT` (schema opskew.profile_summary/1): the run, each
    cycle with its traces, the latest cycle's operators, what to type next."""
    c = doc.get("conditions") or {}
    opts = [k for k, v in (c.get("options") or {}).items() if v] or ["minimal"]
    rank = f" (rank {doc['rank']})" if doc.get("rank") is not None else ""
    steps = doc.get("steps") or {}
    out.write(answers.lead(answers.profile_run(doc)))
    out.write(f"opskew profile run{rank}: {doc.get('out') or doc.get('report') or ''}\n")
    out.write(f"  torch {c.get('torch')}, {c.get('device')}, {count_of(c.get('threads') or 1, 'thread')}, "
              f"options {'+'.join(opts)}; {count_of(len(doc['cycles']), 'cycle')} kept, "
              f"{steps.get('active', 0)} active and {steps.get('wait', 0)} wait steps; steps from "
              f"{doc.get('step_source') or 'nowhere (no step was seen)'}; ended: {doc.get('ended_by')}\n")
    print_run_figures(doc["run"], out)
    if doc["cycles"]:
        out.write("\n")
        rows = [[str(y["cycle"]), w_text(y["w_ns"]) if y.get("w_ns") else "n/a", str(y.get("pairs") or 0),
                 fmt_ns(y.get("active_step_ns")),
                 _step(y.get("corrected_step_ns"), y.get("corrected_step_w_ci_ns")) if y.get("corrected_step_ns")
                 is not None else "n/a",
                 y.get("raw_trace_rel") or "", y.get("corrected_trace_rel") or (y.get("error") or "none")]
                for y in doc["cycles"]]
        op_table(rows, [Col("cycle", "rtext", "cycle"), Col("W (95% CI)", "text", "w"),
                        Col("pairs", "rtext", "pairs"), Col("step", "rtext", "step"),
                        Col("corrected step", "rtext", "corrected"), Col("raw trace", "text", "raw"),
                        Col("corrected trace", "text", "corrected_trace")], out=out)
    out.write("\n")
    ops = [o for o in doc["ops"] if not is_step(o["name"])]
    if ops:
        by = f", corrected with {doc['latest_corrected_with']}" if doc.get("latest_corrected_with") else ""
        out.write(f"per operator, cycle {doc['latest_cycle']} (the latest{by}; reported, then corrected at W "
                  f"with its interval at W's CI ends; its ProfilerStep#N ranges are its step, above):\n")
        op_table(profile_op_rows(ops), PROFILE_OP_COLUMNS, top=top, out=out)
    else:
        out.write(f"no per-operator table: cycle {doc.get('latest_cycle')}: "
                  f"{doc.get('latest_error') or 'W is unknown'}\n")
    last = doc["cycles"][-1] if doc["cycles"] else {}
    if last.get("raw_trace"):
        out.write(f"a trace's own table: opskew summary {last['raw_trace']} (raw), or the same with --corrected "
                  f"--from {doc.get('out')}; opskew summary {last.get('corrected_trace') or 'CORRECTED'} "
                  "(corrected); two runs side by side: opskew compare OUT1 OUT2\n")
