"""The corrected key_averages() for people: the layout of torch's
EventList.table() (torch.autograd.profiler_util._build_table, as in torch
2.13: its columns, their widths, its time format, its totals line) over
opskew's corrected rows (opskew.results.averages), with three columns of
its own after torch's (each row's intervals and trust mark) and three lines
saying what corrected them."""

from __future__ import annotations

from opskew.render.units import count_of, fmt_ns

COLUMN = 12  # torch's DEFAULT_COLUMN_WIDTH
SPACING = 2  # torch's SPACING_SIZE


def fmt_us(time_us: float) -> str:
    """A time in us as torch's tables print it (profiler_util._format_time)."""
    if time_us >= 1e6:
        return f"{time_us / 1e6:.3f}s"
    if time_us >= 1e3:
        return f"{time_us / 1e3:.3f}ms"
    return f"{time_us:.3f}us"


def _in_unit(time_us: float, unit) -> str:
    """torch's table's time_unit ("s", "ms", "us"; None: by size)."""
    if unit == "s":
        return f"{time_us / 1e6:.3f}s"
    if unit == "ms":
        return f"{time_us / 1e3:.3f}ms"
    if unit == "us":
        return f"{time_us:.3f}us"
    return fmt_us(time_us)


def _share(time_us: float, total_us: float) -> str:
    return "NaN" if total_us == 0 else f"{time_us * 100.0 / total_us:.2f}%"


def trust(row) -> str:
    """A row's trust mark: its total's, and its self time's where that
    differs; "‡" where a corrected time lies above its reported one
    (ABOVE_LINE says why)."""
    return (row.mark + (f" (self: {row.self_mark})" if row.self_mark != row.mark else "")
            + (" ‡" if getattr(row, "above_reported", None) else ""))


# The footer's line for rows marked ‡ (analyze.averages.above_reported).
ABOVE_LINE = ("‡ {n}: corrected time above the reported one ({figs}): no instrument cost makes an event "
              "shorter; the corrected time line wrote them longer, their children's corrected times outlasting "
              "them (docs/correct.md, \"One time line\")")


def table(events, doc: dict, *, sort_by=None, row_limit=100, max_name_column_width=55, header=None,
          time_unit=None) -> str:
    """The table text of `events` (CorrectedAverage rows) from `doc`
    (their opskew.averages/1 document: the W and the source)."""
    if len(events) == 0:
        return ""
    events = list(events)
    device = events[0].use_device
    has_device_time = any(e.self_device_time_total > 0 for e in events)
    if sort_by is not None:
        attr = sort_by.replace("cuda", "device").replace("xpu", "device").replace("privateuse1", "device")
        events.sort(key=lambda e: getattr(e, attr), reverse=True)
    name_width = max(len(e.key) for e in events) + 4
    if max_name_column_width is not None:
        name_width = min(name_width, max_name_column_width)
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    dev = device.upper() if device is not None else "None"
    if has_device_time:
        headers += [f"Self {dev}", f"Self {dev} %", f"{dev} total", f"{dev} time avg"]
    headers.append("# of Calls")
    widths = [name_width] + [COLUMN] * (len(headers) - 1)
    shown = events if row_limit is None or row_limit < 0 else events[:row_limit]

    def ci(lo_hi):
        return f"[{_in_unit(lo_hi[0], time_unit)}, {_in_unit(lo_hi[1], time_unit)}]"

    # Each row's own figure's interval: its CPU time's, or a device row's device time's.
    extra = [("Self CI" if has_device_time else "Self CPU CI", [ci([x / 1e3 for x in e.self_ci_ns]) for e in shown]),
             ("Total CI" if has_device_time else "CPU total CI", [ci([x / 1e3 for x in e.total_ci_ns])
                                                                  for e in shown]),
             ("Trust", [trust(e) for e in shown])]
    for title, cells in extra:
        headers.append(title)
        widths.append(max([COLUMN, len(title)] + [len(c) for c in cells]))
    aligns = [">"] * (len(headers) - 1) + ["<"]
    row_format = "".join("{: " + a + str(w) + "}" + " " * SPACING for a, w in zip(aligns, widths))
    header_sep = "".join("-" * w + " " * SPACING for w in widths)
    line_length = sum(widths) + SPACING * (len(widths) - 1)

    self_total = sum(e.self_cpu_time_total for e in events)
    device_total = sum(e.self_device_time_total for e in events)
    out = []
    if header is not None:
        out += ["=" * line_length, header]
    out += [header_sep, row_format.format(*headers), header_sep]
    for k, e in enumerate(shown):
        name = e.key
        if max_name_column_width is not None and len(name) >= max_name_column_width - 3:
            name = name[: max_name_column_width - 3] + "..."
        values = [name, _share(e.self_cpu_time_total, self_total), _in_unit(e.self_cpu_time_total, time_unit),
                  _share(e.cpu_time_total, self_total), _in_unit(e.cpu_time_total, time_unit),
                  _in_unit(e.cpu_time, time_unit)]
        if has_device_time:
            values += [_in_unit(e.self_device_time_total, time_unit), _share(e.self_device_time_total, device_total),
                       _in_unit(e.device_time_total, time_unit), _in_unit(e.device_time, time_unit)]
        values.append(e.count)
        values += [cells[k] for _, cells in extra]
        out.append(row_format.format(*values))
    out.append(header_sep)
    out.append(f"Self CPU time total: {_in_unit(self_total, time_unit)}")
    if has_device_time:
        out.append(f"Self {dev} time total: {_in_unit(device_total, time_unit)}")
    out += footer(doc, sum(e.reported_self_ns for e in events if not e.self_device_time_total))
    above = [e for e in shown if getattr(e, "above_reported", None)]
    if above:
        figs = sorted({f for e in above for f in e.above_reported})
        out.append(ABOVE_LINE.format(n=count_of(len(above), "row"), figs=" and ".join(figs)))
    return "\n".join(out) + "\n"


def footer(doc: dict, reported_self_ns: float) -> list:
    """What corrected the rows, what the marks say and how calls are counted, in three lines."""
    w = doc["w_ns"]
    lo_hi = w.get("ci95")
    cov = w.get("ci_coverage")
    interval = (f" [{fmt_ns(lo_hi[0])}, {fmt_ns(lo_hi[1])}]" + (f" ({100 * cov:.3g}% CI)" if cov else "")
                if lo_hi and lo_hi[0] != lo_hi[1] else " (given, no interval: the CI columns are the point)")
    own = doc.get("own_deltas") or 0
    delta = f"delta {fmt_ns(doc.get('delta_ns') or 0.0)} inside each operator's own event" + (
        f" ({own} leaves their own)" if own else "")
    wpy = doc.get("w_py_ns") or {}
    py = f", W_py {fmt_ns(wpy['median'])} per Python event" if wpy.get("median") else ""
    return [f"Corrected by opskew ({doc['source']}): W {fmt_ns(w['median'])}{interval} per operator event{py}, "
            f"{delta}; CI: the corrected time at W's interval ends",
            f"Trust: the total's mark (the self time's in parentheses where it differs): {MARK_WORDS}; reported "
            f"self CPU time total {fmt_us(reported_self_ns / 1e3)} (key_averages() gives the reported rows)",
            CALLS_LINE]


# What each mark says, in the order of opskew.render.verdict.MARK_COLOURS.
MARK_WORDS = ("believable (checked: the most added is small), inflated (read the corrected time), unresolved "
              "(W's interval too wide to tell), unknowable (mostly instrument)")
# Why a count can exceed key_averages()'s (docs/profile.md, "A corrected key_averages()").
CALLS_LINE = ("# of Calls: every call in the trace; key_averages() counts fewer for a name nested directly in "
              "itself (aten::mul inside aten::mul), whose inner calls torch's table drops")
