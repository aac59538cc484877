"""The text of `opskew check --nproc N` (experiments.jobcheck's document)."""

from __future__ import annotations

from opskew.render.units import columns, fmt_ci, fmt_ns


def render(doc: dict, out) -> None:
    c = doc["conditions"]
    j = doc["job"]
    out.write(f"opskew check --nproc {doc['nproc']}: {doc['workload']}\n")
    out.write(f"  conditions  torch {c['torch']}, {c['device']}, {c['threads']} thread(s) per rank, "
              f"{doc['backend']}, {c['instrument']}, {c['trials']} interleaved trials x {c['iters']} iterations\n")
    out.write(f"  job         baseline {fmt_ns(j['base_per_iter_ns'])} per iteration, profiled "
              f"{fmt_ns(j['prof_per_iter_ns'])} (the slowest rank's window): +{fmt_ns(j['added_per_iter_ns'])} "
              f"{fmt_ci(*j['ci95'])} ({100 * j['ci_coverage']:.1f}% CI), sign test p = {j['sign_p']:.3g}\n\n")
    hdr = ["rank", "events/iter", "W (clock)", "95% CI", "W_own (CPU)", "95% CI", "own cost/iter",
           "waited for others/iter"]
    rows = []
    for r in doc["ranks"]:
        w, o = r["w_ns"], r["w_own_ns"]
        rows.append([str(r["rank"]), f"{r['events_per_iter']:.0f}", fmt_ns(w["median"]),
                     fmt_ci(*w["ci95"]) if w["ci_reaches_95"] else "too few trials",
                     fmt_ns(o["median"]) if o else "n/a",
                     (fmt_ci(*o["ci95"]) if o["ci_reaches_95"] else "too few trials") if o else "",
                     fmt_ns(r["own_per_iter_ns"]), fmt_ns(r["waited_per_iter_ns"])])
    out.write("\n".join(columns(hdr, rows, right={1, 2, 4, 6, 7})) + "\n")
    if j["costliest_rank"] is not None:
        out.write(f"\nThe job waits at its collectives for the costliest rank: rank {j['costliest_rank']}, "
                  f"{fmt_ns(j['costliest_own_per_iter_ns'])} of its own cost per iteration, against "
                  f"+{fmt_ns(j['added_per_iter_ns'])} for the job.\n"
                  "W (clock) of a rank that waited holds the others' cost too; W_own (its CPU time) is its "
                  "own: the difference is what it waited for (docs/multirank.md).\n")
