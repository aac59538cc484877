"""The files of opskew.profile: each cycle's raw trace (the user's
export, or opskew's own in corrected_dir or a temporary folder) and its
corrected trace next to it, written through the C correction's pass
(opskew.analyze.verdict.per_operator); and what the report takes from that
pass (the per-operator part, the ProfilerStep#N ranges' stretch)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import weakref

from opskew.analyze.tracefile import corrected_path  # noqa: F401 - re-exported: the raw trace's corrected name
from opskew.analyze.verdict import mark_counts, per_operator
from opskew.output import write_file
from opskew.results.views import lazy
from opskew.stats.pricing import median
from opskew.stats.rows import moved_most
from opskew.vocab import STEP_NAME

corrected_note = lazy("trace_notes.corrected_note")


STRETCH_NOTE = 0.02  # the share of a step past which the report says its range is written stretched

# The traces a profile writes to corrected_dir: STEM-cycleN.pt.trace.json,
# a name TensorBoard's plugin lists (tracefile.TB_WORKER_PATTERN), and its
# corrected_path, corrected/STEM-cycleN.corrected.pt.trace.json; STEM being
# opskew-profile, -rankR under torchrun, then -K for the K-th profiler of a
# process with that folder (profile.__init__). The names of earlier versions
# (STEM-cycleN.json and STEM-cycleN.corrected.json beside it) still match.
TRACE_NAME = re.compile(r"opskew-profile(-rank\d+)?(-\d+)?-cycle\d+(\.corrected)?(\.pt\.trace)?\.json(\.gz)?$")


_DIR_USERS: dict = {}  # corrected_dir (real path) -> profilers of this process that used it


class TraceFiles:
    """Where one profiler's traces go. `stem`: the files' name in
    corrected_dir (a second profiler of this process with the same folder,
    train then eval, gets "-2", so that neither overwrites the other's
    traces). While on_trace_ready runs (`in_ready`) the paths the user's
    handler exports to are remembered (`exported`); where it made none,
    opskew's own export (`kept`, in a temporary folder) takes Kineto's one
    save of the trace, so that a later export_chrome_trace copies it."""

    def __init__(self, name: str, corrected_dir=None):
        self.corrected_dir = corrected_dir
        self.stem = name
        if corrected_dir is not None:
            key = os.path.realpath(os.fspath(corrected_dir))
            _DIR_USERS[key] = _DIR_USERS.get(key, 0) + 1
            if _DIR_USERS[key] > 1:
                self.stem = f"{name}-{_DIR_USERS[key]}"
        self.tmpdir = None  # opskew's own exports, when the user's handler made none
        self.kept = None
        self.exported: list[str] = []
        self.in_ready = False

    def raw(self) -> str | None:
        """The first trace the user's handler exported that is there."""
        return next((p for p in self.exported if os.path.exists(p)), None)

    def drop_kept(self):
        """Removes opskew's own copy of the previous cycle, in its own folder."""
        if self.kept is not None and os.path.isfile(self.kept):
            os.unlink(self.kept)
        self.kept = None

    def keep(self, prof, cycle: int, owner):
        """Kineto saves a trace once: opskew's export into its own
        temporary folder takes that save, so a later export_chrome_trace(path)
        copies it from there. The folder goes with `owner` (or at exit)."""
        if self.tmpdir is None:
            # Not a TemporaryDirectory, whose implicit cleanup warns
            # (ResourceWarning, an error under python -W error).
            self.tmpdir = tempfile.mkdtemp(prefix="opskew-profile-")
            weakref.finalize(owner, shutil.rmtree, self.tmpdir, ignore_errors=True)
        self.kept = os.path.join(self.tmpdir, f"cycle{cycle}.json")
        prof.export_chrome_trace(self.kept)
        return self.kept

    def copy_kept(self, path: str):
        """Writes the kept trace to `path` (through the one writer: a .gz
        name is written gzipped)."""
        with open(self.kept, "rb") as f:
            data = f.read()
        write_file(path, data)

    def save_raw(self, trace: str, cycle: int) -> str:
        """A copy of `trace` in corrected_dir as STEM-cycleN.pt.trace.json:
        the raw trace is kept whether or not W is known."""
        os.makedirs(self.corrected_dir, exist_ok=True)
        keep = os.path.join(self.corrected_dir, f"{self.stem}-cycle{cycle}.pt.trace.json")
        with open(trace, "rb") as f:
            write_file(keep, f.read())
        return keep


def per_operator_to(trace, model, threshold, out, metadata, waits=-1, spans=None, bytecode=None,
                    delta_range=None, op_deltas=None):
    """opskew.verdict.per_operator under the cost model `model` writing the
    corrected trace to `out` (a `.gz` name is written gzipped by the C
    writer); `spans`: the steps' bodies by range name (the report's
    step_spans_ns); `bytecode`: the interpreter's slowdown under with_stack
    (opskew.bytecode.measure); `delta_range`: delta's spread over operators
    (calibration.delta_range); `op_deltas`: the leaves' own deltas
    (LeafReference.op_deltas)."""
    if out is not None:
        # corrected_path's folder (corrected/ beside a trace the viewers list).
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        metadata = {"about": about(metadata or {}, model), **(metadata or {})}
    return per_operator(trace, model, out=out, threshold=threshold, metadata=metadata, waits=waits, spans=spans,
                        bytecode=bytecode, delta_range=delta_range, op_deltas=op_deltas)


def about(rep: dict, model) -> str:
    """The corrected trace's sentence about itself (render.trace_notes.corrected_note)."""
    cycle = f"cycle {rep['cycle']}'s own" if rep.get("cycle") is not None else "its cycle's"
    rank = f" of rank {rep['rank']}" if rep.get("rank") is not None else ""
    by = (f"opskew.profile's in-run W{rank}: {rep.get('corrected_with') or cycle}, from the run's own wait and "
          "active steps")
    return corrected_note(model, by=by, source=rep.get("raw_trace"))


# Figures the pass that writes the trace finds (trace_steps): the report
# has them, the trace itself holds them (its ProfilerStep#N ranges), and
# its metadata would carry an earlier pass's.
FROM_THE_TRACE = ("operators", "moved_most", "corrected_step_ns", "corrected_step_w_ci_ns", "trace_step_stretch",
                  # what the report printed before a revision: not the trace's
                  "as_printed", "revised_by")


def metadata(rep: dict) -> dict:
    """What goes into the corrected trace's "opskew" metadata: the report
    without what the trace itself carries (the per-operator table, its
    corrected step), but with the pairs' own corrected step, which the
    trace does not."""
    out = {k: v for k, v in rep.items() if k not in FROM_THE_TRACE}
    out.setdefault("corrected_step_pairs_ns", rep.get("corrected_step_ns"))
    out.setdefault("corrected_step_pairs_w_ci_ns", rep.get("corrected_step_w_ci_ns"))
    return out


def entry(rep: dict) -> dict:
    """A cycle's entry in `opskew profile`'s report.json: the report with
    its corrected step, interval and W's source (`corrected_with` says which
    W wrote the trace on disk; `as_printed` what the cycle printed where that
    differs), without the table of every operator, which its corrected
    trace holds (the file keeps KEEP_CYCLES cycles and is rewritten each
    cycle: it stays small)."""
    out = dict(rep)
    ops = rep.get("operators")
    if ops:
        out["operators"] = {k: v for k, v in ops.items() if k != "ops"}
    out["marks"] = dict(ops["marks"]) if ops else None  # as earlier versions wrote it
    if out.get("corrected_step_ns") is not None and not out.get("corrected_with"):
        out["corrected_with"] = f"its own cycle's W ({rep.get('w_source')})"
    return out


def trace_steps(rep: dict, v: dict):
    """The corrected step as the corrected trace writes it (the report's
    corrected_step_ns: one number for both), and how much longer the
    corrected trace writes the ProfilerStep#N ranges than the model's
    figure (their events stretched: W - delta did not fit between a step's
    events; docs/correct.md), as the median over the trace's steps, into
    rep["trace_step_stretch"] (`said`: past STRETCH_NOTE of a step, which
    the printed report says). Found in the pass that writes the trace, so
    that trace's own metadata lacks it; the report has it."""
    rows = [o for o in v["ops"] if STEP_NAME.match(o["name"]) and o["calls"] == 1]
    if not rows:
        rep["trace_step_stretch"] = None
        return
    # The report's corrected step is its corrected trace's: the median of
    # the ProfilerStep#N ranges as written, and its band at W's CI ends from
    # the passes there; the pairs' own figure (active bodies less W x events,
    # the cold first step left out) stays as corrected_step_pairs_ns.
    rep.setdefault("corrected_step_pairs_ns", rep.get("corrected_step_ns"))
    rep.setdefault("corrected_step_pairs_w_ci_ns", rep.get("corrected_step_w_ci_ns"))
    rep["corrected_step_ns"] = median([o["corrected_total_ns"]["median"] for o in rows])
    rep["corrected_step_w_ci_ns"] = [median([o["corrected_total_ns"]["ci95"][0] for o in rows]),
                                     median([o["corrected_total_ns"]["ci95"][1] for o in rows])]
    ns = median([o["stretched_ns"] for o in rows])
    share = median([o["stretched_ns"] / o["corrected_total_ns"]["median"]
                    for o in rows if o["corrected_total_ns"]["median"] > 0])
    rep["trace_step_stretch"] = {"median_ns": ns, "share": share, "steps": len(rows),
                                 "said": bool(share is not None and share > STRETCH_NOTE)}


def operators(v: dict) -> dict:
    """The report's per-operator part, from opskew.analyze.verdict.per_operator."""
    return {"ops": v["ops"], "summary": v["summary"], "bytecode_rows": v.get("bytecode_rows", 0),
            "marks": v.get("marks") or mark_counts(v["ops"])}


def take(rep: dict, v: dict):
    """What `rep` takes from the pass `v` that wrote its corrected trace:
    its per-operator part, the operators whose self time the correction
    moved most (as the printed report names them), and its corrected step
    (trace_steps)."""
    rep["operators"] = operators(v)
    rep["moved_most"] = moved_most([(o["name"], o["reported_self_ns"], o["corrected_self_ns"]["median"])
                                    for o in v["ops"] if o.get("corrected_self_ns")])
    trace_steps(rep, v)
