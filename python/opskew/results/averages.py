"""A corrected `key_averages()` (docs/profile.md, "A corrected
key_averages()"): the rows of torch's averaged event list, with the same
attribute names (`key`, `count`, `self_cpu_time_total`, `cpu_time_total`,
`cpu_time`, their `_str` forms, `device_type`, ...) and the same
`.table(sort_by=..., row_limit=...)`, whose times are the per-operator
verdict's corrected ones, each with its trust mark and interval.

The classes are opskew's own and only mimic torch's (EventList,
FunctionEventAvg): nothing here imports torch, so they do not break when
torch's change. Times are in microseconds, as torch's; each `*_ns`
attribute is the report's figure itself, in ns. The document they read
(`to_dict()`, schema opskew.averages/1) is made by opskew.analyze.averages."""

from __future__ import annotations

import json

from opskew.results.views import lazy
from opskew.results.base import Result, flat

fmt_us = lazy("averages.fmt_us")
table = lazy("averages.table")

SCHEMA = "opskew.averages/1"


class CorrectedAverage:
    """One row: torch's FunctionEventAvg attributes (times in us, corrected),
    plus the trust mark (`mark`, the total's; `self_mark`), the intervals
    (`cpu_time_total_ci`, `self_cpu_time_total_ci`: [low, high] in us),
    what the trace reported (`reported_cpu_time_total`,
    `reported_self_cpu_time_total`) and the same in ns (`*_ns`, exactly the
    report's figures). `row` is the document's row (`to_dict()`)."""

    # What torch's FunctionEventAvg holds that a trace's verdict does not:
    # as key_averages() leaves them when it does not group by them.
    node_id = -1
    is_async = False
    is_remote = False
    is_legacy = False
    overload_name = ""
    input_shapes = ""
    scope = None
    cpu_parent = None
    cpu_children = None
    flops = 0
    cpu_memory_usage = device_memory_usage = self_cpu_memory_usage = self_device_memory_usage = 0

    def __init__(self, row: dict, device_type="CPU", use_device=None):
        self._row = row
        self.key = row["key"]
        self.count = row["count"]
        self.device_type = device_type
        self.use_device = use_device
        self.is_user_annotation = row.get("category") == "user_annotation"
        self.stack = []
        self.mark = row["mark"]
        self.self_mark = row["self_mark"]
        self.above_reported = list(row.get("above_reported") or ())  # figures above their reported time
        on_device = bool(row.get("device"))
        self.self_cpu_time_total_ns = 0.0 if on_device else row["self_ns"]["median"]
        self.cpu_time_total_ns = 0.0 if on_device else row["total_ns"]["median"]
        self.self_device_time_total_ns = row["self_ns"]["median"] if on_device else 0.0
        self.device_time_total_ns = row["total_ns"]["median"] if on_device else 0.0
        self.self_ci_ns = list(row["self_ns"]["ci95"])
        self.total_ci_ns = list(row["total_ns"]["ci95"])
        self.reported_self_ns = row["reported_self_ns"]
        self.reported_total_ns = row["reported_total_ns"]

    # torch's attributes, in us
    self_cpu_time_total = property(lambda self: self.self_cpu_time_total_ns / 1e3)
    cpu_time_total = property(lambda self: self.cpu_time_total_ns / 1e3)
    self_device_time_total = property(lambda self: self.self_device_time_total_ns / 1e3)
    device_time_total = property(lambda self: self.device_time_total_ns / 1e3)
    self_cuda_time_total = self_device_time_total
    cuda_time_total = device_time_total
    self_cpu_time_total_ci = property(lambda self: [x / 1e3 for x in self.self_ci_ns],
                                      doc="The corrected self time's interval [low, high] in us.")
    cpu_time_total_ci = property(lambda self: [x / 1e3 for x in self.total_ci_ns],
                                 doc="The corrected total's interval [low, high] in us (its mark's).")
    reported_self_cpu_time_total = property(lambda self: self.reported_self_ns / 1e3)
    reported_cpu_time_total = property(lambda self: self.reported_total_ns / 1e3)

    @property
    def cpu_time(self):
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def device_time(self):
        return 0.0 if self.count == 0 else self.device_time_total / self.count

    cuda_time = device_time
    cpu_time_str = property(lambda self: fmt_us(self.cpu_time))
    device_time_str = property(lambda self: fmt_us(self.device_time))
    cpu_time_total_str = property(lambda self: fmt_us(self.cpu_time_total))
    device_time_total_str = property(lambda self: fmt_us(self.device_time_total))
    self_cpu_time_total_str = property(lambda self: fmt_us(self.self_cpu_time_total))
    self_device_time_total_str = property(lambda self: fmt_us(self.self_device_time_total))

    def to_dict(self) -> dict:
        return json.loads(json.dumps(self._row))

    def __repr__(self):
        lo, hi = self.self_cpu_time_total_ci
        return (f"<CorrectedAverage key={self.key} self_cpu_time={self.self_cpu_time_total_str} "
                f"[{fmt_us(lo)}, {fmt_us(hi)}] cpu_time={self.cpu_time_str} count={self.count} mark={self.mark}>")


class CorrectedAverages(list):
    """`prof.corrected_averages()`, `opskew.corrected_averages(TRACE)`: a
    list of CorrectedAverage rows, as torch's EventList of averages is, with
    its `table()` (torch's layout, plus the intervals and trust marks),
    `self_cpu_time_total`, and the document it was made from (`to_dict()`,
    `rows()`, `to_pandas()`). `device_types`: the values for `device_type`
    (torch's DeviceType.CPU and .CUDA where the caller has torch)."""

    def __init__(self, doc: dict, device_types=("CPU", "CUDA")):
        use = "cuda" if any(r.get("device") for r in doc["rows"]) else None
        super().__init__(CorrectedAverage(r, device_types[1] if r.get("device") else device_types[0], use)
                         for r in doc["rows"])
        self._doc = doc

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    @property
    def w_ns(self) -> dict:
        """The W the rows were corrected with: {"median", "ci95", ...}."""
        return self._doc["w_ns"]

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False, time_unit=None) -> str:
        """torch's EventList.table(): the same columns and format, the
        corrected times, then each row's intervals and trust mark, and a line
        saying what corrected them. The stack and shape widths are taken and
        unused (the rows are by name)."""
        if top_level_events_only:
            raise NotImplementedError("corrected_averages().table(top_level_events_only=True) is not supported: "
                                      "the corrected rows do not keep their events' parents")
        return table(self, self._doc, sort_by=sort_by, row_limit=row_limit,
                     max_name_column_width=max_name_column_width, header=header, time_unit=time_unit)

    def __str__(self):
        return self.table()

    def to_dict(self) -> dict:
        """The document (schema opskew.averages/1): the W, the source, the rows in ns."""
        return json.loads(json.dumps(self._doc, default=str))

    def rows(self) -> list:
        """One flat dict per row (times in ns), as to_pandas() tabulates them."""
        return [flat(r) for r in self._doc["rows"]]

    to_pandas = Result.to_pandas  # a DataFrame of rows(); without pandas, ImportError in one line
