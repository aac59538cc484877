"""`opskew summary`'s text for people: the per-operator table through the one
renderer (opskew.render.tables), then the totals."""

from __future__ import annotations

from opskew.render.tables import SUMMARY_COLUMNS, op_table, summary_rows
from opskew.render.trace_notes import losses_line
from opskew.render.units import count_of, fmt_ns


def print_table(result, ops, top, out, losses=None):
    """The table through the one renderer (opskew.tables), then the totals."""
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
