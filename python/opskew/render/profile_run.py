"""The text `opskew profile` ends with, from the document of its finished
run (opskew.analyze.profile_run.finished): what was written and W, the
run's true step, or a torchrun job's ranks and its job summary; the
pictures drawn. Lines for stderr, each led by "opskew profile: "."""

from __future__ import annotations

from opskew.render.profile import moved_line, run_answer
from opskew.render.units import fmt_ns

WHO = "opskew profile"


def render(doc: dict, out) -> None:
    """Writes the finished run's lines to `out` (stderr)."""
    text = "\n".join(lines(doc))
    if text:
        out.write(text + "\n")


def lines(doc: dict) -> list:
    """The finished run's lines, in the order they are printed."""
    if not doc["written"]:
        return [f"{WHO}: no report was written to {doc['out']}"]
    if doc["run"] is not None:
        run = doc["run"]
        answer = run_answer(run["doc"] or {})
        found = [f"{WHO}: " + outcome(run, with_path=not answer)] + pictures(doc)
        if answer:
            moved = moved_line(run["doc"]["report"], f"{WHO}: moved most in the latest cycle") \
                if run["doc"].get("report") else ""
            if moved:
                found.append(moved)
            found.append(f"{WHO}: {answer}; report: {run['report']}")
        return found
    return job_lines(doc["job"], doc["job_report"]) + summary_lines(doc["job_summary"], doc["out"]) \
        + pictures(doc)


def pictures(doc: dict) -> list:
    """A line per picture: where it is, or why there is none."""
    found = []
    for p in doc["pictures"]:
        if p["missing"] is not None:
            found.append(f"{WHO}: no picture: {p['missing']}")
        elif p["failed"] is not None:
            found.append(f"{WHO}: no picture ({p['failed']})")
        else:
            found.append(f"{WHO}: picture {p['path']}")
    return found


def w_text(w: dict) -> str:
    """"W MEDIAN [LO, HI]" (or "(no 95% CI)")."""
    ci = w.get("ci95")
    return f"W {fmt_ns(w['median'])}" + (f" [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]" if ci else " (no 95% CI)")


def job_lines(job: dict, path: str) -> list:
    """The job report (schema opskew.profile.job/1) at `path`: a line per rank."""
    found = [f"{WHO}: {len(job['ranks'])} rank(s); job report {path}"]
    for r in job["ranks"]:
        w = r["w_ns"] or {}
        infl = f", inflation {100 * (r['inflation'] - 1):+.1f}%" if r["inflation"] is not None else ""
        found.append(f"  rank {r['rank']}: {w_text(w) if w else 'W unknown'}{infl}, {r['pairs'] or 0} pairs, "
                     f"{r['traces']} trace(s); {r['ended_by']}")
    return found


def summary_lines(found: dict, out: str) -> list:
    """The job summary's few lines: each rank's own cost and what it
    absorbed, the stragglers; or why there is none."""
    if found["doc"] is None:
        return [f"{WHO}: no job summary ({found['error']})"]
    doc, earlier = found["doc"], found["earlier"]
    text = [f"{WHO}: job summary {found['path']} (opskew summary {out} prints it): collectives {doc['family']}, "
            f"{doc['matched']} matched" + (f"; from each rank's latest cycles, not its {earlier} earlier ones"
                                           if earlier else "")]
    steps = max(len(doc["steps"]), 1)
    for r in doc["ranks"]:
        if doc["corrected"]:
            text.append(f"  rank {r['rank']}: own cost {fmt_ns(r['own_ns'] / steps)} per step, absorbed "
                        f"{fmt_ns(r['absorbed_ns'] / steps)} per step from the others' (TAU's parallel model)")
    text += [f"  straggler: rank {s['rank']} ({100 * s['share']:.0f}% of the lateness at collectives)"
             for s in doc["stragglers"] if s["straggler"]]
    return text


def _pairs_of(final: dict) -> str:
    """Where the run's final W comes from, in words."""
    n, run = final.get("cycles"), final.get("run_cycles")
    if n is not None and run is not None and n < run:
        return f"the {final['pairs']} pairs of the last {n} of {run} cycles"
    return f"all {final['pairs']} pairs of the run"


def _no_cycle(doc: dict) -> str:
    """Why a run wrote no trace, and what to change."""
    sch = doc["conditions"]["schedule"]
    need = sum(sch.get(k) or 0 for k in ("skip_first", "wait", "warmup", "active"))
    n = doc["step_boundaries"]
    why = (f"no cycle completed ({n} step boundaries from {doc['step_source']}; the first cycle needs "
           f"{need}: --skip-first {sch.get('skip_first') or 0} + --wait + --warmup + --active)")
    ended = doc.get("ended_by")
    if n == 0 and ended not in (None, "the script returned"):
        why = f"the script ended ({ended}) before its first step boundary: nothing was profiled"
    elif n == 0:
        why += (". Steps end at optimizer.step() calls on the main thread; without them, mark steps with "
                "--step-marker NAME (the end of each record_function(NAME)) or opskew.step() in the script")
    else:
        why += ": run more steps, or lower --skip-first or --wait"
    kids = doc.get("child_processes") or 0
    if kids and not doc["step_boundaries"]:
        why += (f". The script started {kids} process(es) through multiprocessing (DataLoader workers count "
                "too); opskew profile follows only the process it started (and torchrun's workers). If the "
                "training ran in them (torch.multiprocessing.spawn, say): start the workers with torchrun "
                "(`opskew profile -- torchrun ...`), or use opskew.profile inside the worker function "
                "(docs/profile.md)")
    return why


def outcome(run: dict, with_path: bool = True) -> str:
    """One line: what was written, and W, from one process's run
    (profile_run.run_part: its report.json and where its traces lie);
    `with_path`: it ends with the report's path (no line with the run's
    true step follows)."""
    report, doc = run["report"], run["doc"]
    if doc is None:
        return f"{report} could not be read back"
    reps = doc.get("reports") or []
    aside = (f"opskew stood aside {doc['stood_aside']} (torch runs one profiler at a time); "
             if doc.get("stood_aside") else "")
    if not reps and aside:
        return f"{aside}it stopped before a cycle completed: no trace; report: {report}"
    if not reps:
        return f"{_no_cycle(doc)}; report: {report}"
    last = reps[-1]
    final = doc.get("final") or {}
    w = final.get("w_ns") or last.get("w_ns") or {}
    wtext = (w_text(w) + (f" per operator event (in-run, {_pairs_of(final)})" if final
                          else f" per operator event ({last.get('w_source')})")) if w else "W unknown"
    # report.json holds the latest cycles' reports only (earlier_reports
    # counts the others): the counts cover the whole run.
    earlier = run["traces"] - len(reps)
    corrected = sum(1 for r in reps if r.get("corrected_trace"))
    refit = sum(1 for r in reps if r.get("corrected_with") == "the run's final W")
    final = ("" if not corrected else " (each with the run's final W)" if refit == corrected and not earlier
             else f" (the latest {refit} with the run's final W, the others with their own cycle's)" if refit
             else "")
    counted = (f"{run['traces']} trace(s), {corrected} of the latest {len(reps)} corrected{final}" if earlier
               else f"{len(reps)} trace(s), {corrected} corrected{final}")
    return (f"{aside}{counted}, in {run['traces_dir']} (the corrected ones in {run['corrected_dir']}); {wtext}; "
            f"steps from {doc['step_source']}" + (f"; report: {report}" if with_path else ""))
