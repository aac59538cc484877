"""The corrected table an integration shows beside the framework's own:
the latest cycle's corrected key_averages() (after stop(), corrected with the
run's final W), in torch's layout, or one line saying why there is none."""

from __future__ import annotations

from opskew.profiler import ADVISED_SCHEDULE
from opskew.render.frameworks import corrected_heading, no_corrected_table

# The schedule an integration profiles with when it is given none: the one
# `opskew profile` uses (its wait blocks give an in-run W and the leaf
# reference), each framework taking its first cycle or more.
DEFAULT_SCHEDULE = dict(ADVISED_SCHEDULE)


def corrected_table(prof, sort_by=None, row_limit=20, **table_kwargs) -> tuple[str, str, bool]:
    """(heading, text, whether it has rows) of `prof`'s corrected table:
    its rows, or why it has none."""
    rep = prof.report
    try:
        avg = prof.corrected_averages()
    except (ValueError, NotImplementedError) as exc:
        return "corrected by opskew", no_corrected_table(rep, str(exc)), False
    if not avg:
        return "corrected by opskew", no_corrected_table(rep, "the latest report has no corrected rows"), False
    try:
        text = avg.table(sort_by=sort_by, row_limit=row_limit, **table_kwargs)
    except NotImplementedError as exc:  # a table option the corrected rows cannot follow
        text = avg.table(sort_by=sort_by, row_limit=row_limit) + f"\n(opskew: {exc})"
    return corrected_heading(avg.w_ns, (rep or {}).get("w_source")), text, True
