"""A multi-rank job's summary (opskew.analyze.job's document, schema
opskew.job_summary/1) as text: `opskew summary DIR`'s output."""

from __future__ import annotations


from opskew.render.notes import words
from opskew.render.tables import SUMMARY_COLUMNS, op_table, summary_rows
from opskew.render.units import columns, fmt_ns
from opskew.vocab import STEP_NAME

# A profiler step's row (ProfilerStep#N): the steps have their own table.
STEP = STEP_NAME


def render(doc: dict, out, top: int = 20, per_rank: bool = False) -> None:
    """The job summary as text."""
    ranks = doc["ranks"]
    out.write(f"job: {doc['world_size']} ranks, {len(doc['traces'])} traces"
              f"{', hosts ' + ', '.join(doc['hosts']) if doc['hosts'] else ''}; collectives: {doc['family']}, "
              f"{doc['matched']} matched on every rank\n\n")
    hdr = ["rank", "traces", "events", "steps", "step p50", "collectives", "waited", "last at", "lateness caused",
           "clock offset"]
    rows = []
    for r in ranks:
        off = ("reference" if r is ranks[0] else
               f"{fmt_ns(r['offset_ns'])} ± {fmt_ns(r['residual_ns'])}" if r["clock_points"] else "n/a")
        rows.append([str(r["rank"]), str(len(r["files"])), str(r["stats"].get("complete_events", 0)),
                     str(r["steps"]), fmt_ns(r["step_median_ns"]), str(r["collectives"]), fmt_ns(r["wait_ns"]),
                     str(r["last_arrivals"]), fmt_ns(r["lateness_ns"]), off])
    out.write("\n".join(columns(hdr, rows, right={2, 3, 4, 5, 6, 7, 8})) + "\n")
    if doc["family"] != "none":
        out.write(f"clock offsets {'applied' if doc['aligned'] else 'estimated, not applied (one host: one clock)'}"
                  "; ± is the residual of the fit over the collectives' exits\n")
    if doc["corrected"]:
        out.write("\ncross-rank correction (TAU's parallel model; docs/multirank.md)\n")
        hdr = ["rank", "W", "own cost", "absorbed", "waited", "waited, corrected", "step p50", "corrected p50"]
        rows = [[str(r["rank"]), fmt_ns(r["w_ns"]), fmt_ns(r["own_ns"]), fmt_ns(r["absorbed_ns"]),
                 fmt_ns(r["wait_ns"]), fmt_ns(r["corrected_wait_ns"]), fmt_ns(r["step_median_ns"]),
                 fmt_ns(r.get("corrected_step_median_ns"))] for r in ranks]
        out.write("\n".join(columns(hdr, rows, right=set(range(1, 8)))) + "\n")
        out.write("own cost: W x the rank's operator events; absorbed: what the correction took out of its waits "
                  "because others were late by their cost (negative: its own cost hid in time it would have "
                  "waited anyway)\n")
    if doc["steps"]:
        out.write("\nsteps (ProfilerStep#N), per rank\n")
        hdr = ["step"] + [f"rank {r['rank']}" for r in ranks] + ["slowest"]
        rows = []
        for s in doc["steps"][:top or None]:
            d = s["dur_ns"]
            known = [v for v in d if v is not None]
            # The slowest rank (the first of equals); none when all took the same.
            slow = d.index(max(known)) if known and max(known) > min(known) else None
            rows.append([f"{s['step']}" + (f" (trace {s['segment'] + 1})" if s["segment"] else "")]
                        + [fmt_ns(v) for v in d] + [f"rank {ranks[slow]['rank']}" if slow is not None else ""])
        out.write("\n".join(columns(hdr, rows, right=set(range(1, len(ranks) + 1)))) + "\n")
        if top and len(doc["steps"]) > top:
            out.write(f"({len(doc['steps']) - top} more steps in --json)\n")
    if doc["collectives"]:
        worst = sorted(doc["collectives"], key=lambda c: -c["lateness_ns"])[:5]
        out.write("\nlatest arrivals at collectives (the 5 largest)\n")
        hdr = ["collective", "step", "last", "by"]
        rows = [[c["name"], str(c["step"]) if c["step"] >= 0 else "-", f"rank {ranks[c['last']]['rank']}",
                 fmt_ns(c["lateness_ns"])] for c in worst]
        out.write("\n".join(columns(hdr, rows, right={1, 3})) + "\n")
    for s in doc["stragglers"]:
        if s["straggler"]:
            out.write(f"straggler: rank {s['rank']}, last at {s['last_arrivals']} of {doc['matched']} "
                      f"collectives, {100 * s['share']:.0f}% of the lateness ({fmt_ns(s['lateness_ns'])})\n")
    def table(ops, title):
        # The steps have their table above: their rows (one per N) are left
        # out here, and their self time with them (--json has every row).
        ops = [o for o in ops if not STEP.match(o["name"])]
        out.write(f"\n{title}\n")
        op_table(summary_rows(sorted(ops, key=lambda o: -o["total_ns"]), SUMMARY_COLUMNS,
                              sum(o["self_ns"] for o in ops)), SUMMARY_COLUMNS, top=top, out=out)

    table(doc["merged"]["ops"], "all ranks merged (ProfilerStep#N rows: see the steps above)")
    if per_rank:
        for r in ranks:
            table(r["ops"], f"rank {r['rank']}")
    for n in doc["notes"]:
        out.write(f"note: {words(n)}\n")
