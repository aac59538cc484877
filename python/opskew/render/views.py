"""Every view opskew.results.views names, registered once: the text, HTML,
tables and plots of each result, and the words computation hands on (the
report a profiled loop prints at a cycle's end, the sentence a corrected
trace carries, a command's warnings and progress). `import opskew` imports
this module, so render stays a consumer of results and computation
(docs/design.md, "The Python shell"): nothing below it imports render."""

from __future__ import annotations

from opskew.render import (advise, averages, calibrate, check, compare, correct, html, job, matrix, notes, plots,
                           profile, profile_plot, progress, summary, sweep, tables, trace_notes, verdict)
from opskew.results.views import register

register({
    # a result's text, HTML and plots (opskew.results)
    "html.html": html.html,
    "advise.print_human": advise.print_human,
    "averages.fmt_us": averages.fmt_us,
    "averages.table": averages.table,
    "calibrate.print_calibrations": calibrate.print_calibrations,
    "check.print_human": check.print_human,
    "compare.csv_rows": compare.csv_rows,
    "compare.print_human": compare.print_human,
    "correct.print_human": correct.print_human,
    "job.render": job.render,
    "matrix.print_human": matrix.print_human,
    "notes.all_words": notes.all_words,
    "profile.render": profile.render,
    "profile.render_recorrected": profile.render_recorrected,
    "profile_plot.plot": profile_plot.plot,
    "summary.print_profile_run": summary.print_profile_run,
    "summary.print_run_figures": summary.print_run_figures,
    "summary.print_table": summary.print_table,
    "sweep.plot": sweep.plot,
    "sweep.print_human": sweep.print_human,
    "verdict.plot": verdict.plot,
    "verdict.sentence": verdict.sentence,
    # words and pictures computation hands on
    "plots.plot_unavailable": plots.plot_unavailable,
    "progress.Progress": progress.Progress,
    "progress.say_warnings": progress.say_warnings,
    "tables.trace_summary": tables.trace_summary,
    "trace_notes.corrected_note": trace_notes.corrected_note,
    "trace_notes.warnings_of": trace_notes.warnings_of,
})
