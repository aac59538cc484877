"""Corrected traces where viewers look: the names TensorBoard's profiler plugin
lists, the folders HolisticTraceAnalysis reads as one trace per rank, and the
sentence a corrected trace carries about itself (docs/profile-reference.md, "Where the
corrected traces go")."""

import json
import os
import re
import sys

import pytest

from conftest import run_opskew
from test_profile_cli import SMALL, script

from opskew.analyze.tracefile import TB_WORKER_PATTERN, corrected_candidates, corrected_path
from opskew.render.trace_notes import corrected_note

# Copied as data from TensorBoard's profiler plugin (torch-tb-profiler):
# pytorch/kineto, tb_plugin/torch_tb_profiler/consts.py at
# 041e7ce99f1562dd81232ee58b7c454ef16bfae2, the last commit before kineto
# removed tb_plugin (949796072a88). profiler/loader.py lists a run folder's
# files through it: group 1 is the worker, group 2 the span (a timestamp);
# plugin.py's _get_run_dirs makes every folder under the logdir that holds
# one matching file a run. NODE_PROCESS_PATTERN splits a worker into node
# and process for the GPU view (run_generator.py).
PLUGIN_WORKER_PATTERN = re.compile(r"""^(.*?) # worker name
        (\.\d+)? # optional timestamp like 1619499959628 used as span name
        \.pt\.trace\.json # the ending suffix
        (?:\.gz)?$""", re.X)
PLUGIN_NODE_PROCESS_PATTERN = re.compile(r"""^(.*)_(\d+)""")


def plugin_parse(name):
    """(worker, span) as the plugin's RunLoader.load reads a file name, or None
    when the plugin does not list it."""
    m = PLUGIN_WORKER_PATTERN.match(name)
    return None if m is None else (m.group(1), m.group(2)[1:] if m.group(2) else None)


def test_opskew_uses_the_plugins_own_pattern():
    assert TB_WORKER_PATTERN.pattern == PLUGIN_WORKER_PATTERN.pattern
    assert TB_WORKER_PATTERN.flags == PLUGIN_WORKER_PATTERN.flags


@pytest.mark.parametrize("gz", ["", ".gz"])
def test_tensorboard_handlers_corrected_trace_is_a_worker_of_its_own(tmp_path, gz):
    """tensorboard_trace_handler writes WORKER.TS.pt.trace.json[.gz] (WORKER
    being host_pid); its corrected trace is listed by the plugin as the
    worker WORKER.corrected, same span, on the same node and process."""
    raw = str(tmp_path / "log" / f"myhost_4242.1700000000123456789.pt.trace.json{gz}")
    cor = corrected_path(raw)
    assert cor == str(tmp_path / "log" / "corrected" / f"myhost_4242.corrected.1700000000123456789.pt.trace.json{gz}")
    assert plugin_parse(os.path.basename(raw)) == ("myhost_4242", "1700000000123456789")
    assert plugin_parse(os.path.basename(cor)) == ("myhost_4242.corrected", "1700000000123456789")
    node = [PLUGIN_NODE_PROCESS_PATTERN.match(plugin_parse(os.path.basename(p))[0]).groups() for p in (raw, cor)]
    assert node[0] == node[1] == ("myhost", "4242")
    # A worker name without a span (handler given worker_name, no timestamp
    # kept), and opskew profile's own names: each cycle a worker.
    assert plugin_parse(os.path.basename(corrected_path("/x/w.pt.trace.json"))) == ("w.corrected", None)
    for rank in ("", "-rank1"):
        raw = f"/o/traces/opskew-profile{rank}-cycle3.pt.trace.json"
        cor = corrected_path(raw)
        assert cor == f"/o/traces/corrected/opskew-profile{rank}-cycle3.corrected.pt.trace.json"
        assert plugin_parse(os.path.basename(raw)) == (f"opskew-profile{rank}-cycle3", None)
        assert plugin_parse(os.path.basename(cor)) == (f"opskew-profile{rank}-cycle3.corrected", None)


def test_other_names_keep_their_corrected_name_beside_them():
    assert corrected_path("/a/t.json") == "/a/t.corrected.json"
    assert corrected_path("/a/t.json.gz") == "/a/t.corrected.json.gz"
    assert plugin_parse("t.corrected.json") is None  # not a name the plugin lists: as before
    # Readers look in both places: the new folder, then the name earlier
    # versions gave a TensorBoard-named trace (NAME.pt.trace.corrected.json).
    assert corrected_candidates("/a/w.1.pt.trace.json") == ["/a/corrected/w.corrected.1.pt.trace.json",
                                                            "/a/w.1.pt.trace.corrected.json"]
    assert corrected_candidates("/a/t.json") == ["/a/t.corrected.json"]


def test_the_corrected_note_says_what_and_with_which_w():
    from opskew.stats.costmodel import CostModel

    note = corrected_note(CostModel.default({"median": 296.0, "ci95": [232.0, 352.0]}, 20.0, 900.0),
                          by="opskew check's in-run W", source="/tmp/raw.json")
    assert note.startswith("Corrected by opskew: not the profiler's raw record.")
    assert "W = 296 ns (95% CI [232 ns, 352 ns]) per operator event (opskew check's in-run W)" in note
    assert "delta = 20 ns" in note and "W_py = 900 ns" in note and "The raw trace: /tmp/raw.json." in note
    assert "W_py" not in corrected_note(CostModel.default(296.0), by="x").split("corrected =")[0]
    assert "95% CI" not in corrected_note(CostModel.default(296.0), by="x")  # a W given without one


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """The folder `opskew profile` wrote for a small training loop."""
    d = tmp_path_factory.mktemp("viewers")
    out = d / "prof"
    p = run_opskew("profile", "-o", str(out), *SMALL, "--", sys.executable, script(d), "40")
    assert p.returncode == 0, p.stderr
    (out / "stderr.txt").write_text(p.stderr)
    return out


def test_profile_keeps_each_set_in_a_folder_of_traces_alone(profiled):
    """Reports stay in OUT; OUT/traces holds the raw traces only and
    OUT/traces/corrected the corrected ones: folders a viewer reads whole."""
    raw, cor = profiled / "traces", profiled / "traces" / "corrected"
    assert sorted(os.listdir(raw)) == ["corrected", "opskew-profile-cycle1.pt.trace.json",
                                       "opskew-profile-cycle2.pt.trace.json"]
    assert sorted(os.listdir(cor)) == ["opskew-profile-cycle1.corrected.pt.trace.json",
                                       "opskew-profile-cycle2.corrected.pt.trace.json"]
    # Every file of both folders is one the plugin lists, each its own worker.
    workers = [plugin_parse(n)[0] for d in (raw, cor) for n in os.listdir(d) if os.path.isfile(d / n)]
    assert len(workers) == len(set(workers)) == 4
    (last,) = [ln for ln in (profiled / "stderr.txt").read_text().splitlines() if " trace(s), " in ln]
    assert f"in {raw} (the corrected ones in {cor});" in last, last
    rep = json.loads((profiled / "report.json").read_text())["reports"][-1]
    assert rep["raw_trace"] == str(raw / "opskew-profile-cycle2.pt.trace.json")
    assert rep["corrected_trace"] == str(cor / "opskew-profile-cycle2.corrected.pt.trace.json")


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # HTA 0.5.0 under pandas 3
def test_hta_reads_either_set(profiled):
    """The real HolisticTraceAnalysis (an optional test dependency) pointed at
    either folder: it reads every *.json/*.gz there as one trace per rank
    (hta/common/trace_file.py), so each folder gives rank 0 a trace of its
    own set. Its breakdowns (temporal, idle time, kernels, critical path)
    need GPU kernels; on a CPU trace, get_profiler_steps and the parsed
    events are what it analyses: the corrected set's ProfilerStep ranges
    are shorter than the raw set's."""
    hta = pytest.importorskip("hta.trace_analysis")
    steps = {}
    for name, folder in (("raw", profiled / "traces"), ("corrected", profiled / "traces" / "corrected")):
        ta = hta.TraceAnalysis(trace_dir=str(folder))
        files = ta.t.trace_files
        assert list(files) == [0] and os.path.dirname(files[0]) == str(folder), files
        assert (".corrected." in files[0]) == (name == "corrected")
        cycle = re.search(r"cycle(\d)", files[0]).group(1)
        assert len(ta.get_profiler_steps()) >= 3
        df = ta.t.get_trace(0)
        names = ta.t.symbol_table.get_sym_table()
        step_rows = df[df["name"].map(lambda i: names[i].startswith("ProfilerStep#"))]
        steps[name] = (cycle, step_rows["dur"].sum())
    # Each set from the same run (HTA keeps one of a rank's cycles: compare
    # like with like through trace_files when the cycles differ).
    if steps["raw"][0] != steps["corrected"][0]:
        c = steps["raw"][0]
        ta = hta.TraceAnalysis(trace_files={0: f"opskew-profile-cycle{c}.corrected.pt.trace.json"},
                               trace_dir=str(profiled / "traces" / "corrected"))
        df, names = ta.t.get_trace(0), ta.t.symbol_table.get_sym_table()
        steps["corrected"] = (c, df[df["name"].map(lambda i: names[i].startswith("ProfilerStep#"))]["dur"].sum())
    assert 0 < steps["corrected"][1] < steps["raw"][1]


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # HTA 0.5.0 under pandas 3
def test_hta_reads_every_cycle_given_as_trace_files(profiled):
    """HTA keeps one trace per rank from a folder; given each cycle's file
    through trace_files, it reads every raw and corrected cycle, each with
    its ProfilerStep ranges, the corrected ones shorter in all."""
    hta = pytest.importorskip("hta.trace_analysis")
    folders = {"raw": profiled / "traces", "corrected": profiled / "traces" / "corrected"}
    totals = {}
    for name, folder in folders.items():
        files = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
        assert len(files) == 2, files
        for f in files:
            ta = hta.TraceAnalysis(trace_files={0: f}, trace_dir=str(folder))
            assert ta.t.trace_files[0] == str(folder / f)
            df, names = ta.t.get_trace(0), ta.t.symbol_table.get_sym_table()
            steps = df[df["name"].map(lambda i: names[i].startswith("ProfilerStep#"))]
            assert len(steps) >= 3 and len(ta.get_profiler_steps()) == len(steps), f
            totals[(name, re.search(r"cycle(\d)", f).group(1))] = steps["dur"].sum()
    for cycle in ("1", "2"):
        assert 0 < totals[("corrected", cycle)] < totals[("raw", cycle)]


def test_tb_plugin_reads_both_sets_of_a_profile_run(profiled, tmp_path):
    """TensorBoard's profiler plugin (its RunLoader) on OUT/traces and
    OUT/traces/corrected: no nesting errors in either, and each corrected
    cycle with its raw cycle's steps and operators (test_tb_plugin.py does
    the same for opskew.profile on four models)."""
    pytest.importorskip("torch_tb_profiler")
    from test_tb_plugin import assert_twins_load_alike, plugin_load

    raw, cor = profiled / "traces", profiled / "traces" / "corrected"
    loaded = plugin_load([raw, cor], tmp_path)
    assert loaded[str(raw)][1] == 0 and loaded[str(cor)][1] == 0
    assert_twins_load_alike(loaded[str(raw)][0], loaded[str(cor)][0])


def test_profile_says_what_its_first_cycle_cost(profiled):
    """After the first cycle, one line: its trace on disk, the time outside the
    steps, the run's disk use at that rate (docs/commands.md, "A budget
    before capture"); report.json keeps it (capture_budget)."""
    b = json.loads((profiled / "report.json").read_text())["capture_budget"]
    raw = profiled / "traces" / "opskew-profile-cycle1.pt.trace.json"
    assert b["cycle"] == 1 and b["raw_trace_bytes"] == raw.stat().st_size and b["cycles"] == 2
    assert b["stop_ns"] > 0 and b["export_ns"] > 0
    per_cycle = b["raw_trace_bytes"] + (b["corrected_trace_bytes"] or b["raw_trace_bytes"])
    assert b["run_bytes"] == 2 * per_cycle
    lines = [ln for ln in (profiled / "stderr.txt").read_text().splitlines() if "capture budget" in ln]
    assert len(lines) == 1 and lines[0].startswith("opskew profile: capture budget, from cycle 1 as it ran: ")
    assert "the run's 2 cycles: about " in lines[0] and "opskew advise" in lines[0]


def test_report_json_cycles_match_what_each_cycle_printed(profiled):
    """report.json lists every cycle with its corrected step, interval and
    W's source (issue 44, item 7): each as its corrected trace on disk gives
    it (the median ProfilerStep#N as written, to the ns), what the cycle
    printed kept as as_printed where it differs, and stop()'s lines
    reconciling the two where the run's final W corrected the trace again."""
    from statistics import median

    from opskew.render.profile import step_line
    from opskew.render.units import fmt_ns
    from opskew.results.profile import as_printed

    doc = json.loads((profiled / "report.json").read_text())
    err = (profiled / "stderr.txt").read_text()
    blocks = {int(m.group(1)): m.group(0) for m in re.finditer(r"opskew\.profile cycle (\d+):.*?(?=\nopskew|\Z)",
                                                                err, re.S)}
    stop_lines = err[err.index("opskew.profile: at stop(), "):]
    assert [r["cycle"] for r in doc["reports"]] == [1, 2] == sorted(blocks)
    for r in doc["reports"]:
        assert r["corrected_trace"] and r["w_source"] and r["corrected_with"], r
        lo, hi = r["corrected_step_w_ci_ns"]
        assert lo <= r["corrected_step_ns"] <= hi
        events = json.loads(open(r["corrected_trace"]).read())["traceEvents"]
        steps = [round(e["dur"] * 1000) for e in events if e.get("ph") == "X" and
                 re.fullmatch(r"ProfilerStep#\d+", e.get("name", ""))]
        assert steps and median(steps) == r["corrected_step_ns"]
        assert r["marks"] and sum(r["marks"].values()) > 0
        was = as_printed(r)
        if was["corrected_step_ns"] is not None:
            assert step_line(r, was["corrected_step_ns"], was["corrected_step_w_ci_ns"]) in blocks[r["cycle"]]
            assert f"W {fmt_ns(was['w_ns']['median'])} " in blocks[r["cycle"]]
            assert "operators: {believable} believable, {inflated} inflated, {unresolved} unresolved, {unknowable} " \
                "unknowable".format(**was["operators"]["marks"]) in blocks[r["cycle"]]
        if r["corrected_with"] == "the run's final W":
            now = fmt_ns(r["corrected_step_ns"])
            was_text = fmt_ns(was["corrected_step_ns"]) if was["corrected_step_ns"] is not None else "not corrected"
            assert was_text == now or f"cycle {r['cycle']}: true step {was_text} -> {now}" in stop_lines
    # The last cycle's full report agrees with its entry.
    assert doc["report"]["corrected_step_ns"] == doc["reports"][-1]["corrected_step_ns"]


def test_profile_ends_with_the_true_step_and_says_each_note_once(profiled):
    """Answer first (issue 45): the run's last line is its true step with
    its interval, from report.json's final figures, against the profiled and
    unprofiled steps; each cycle's block starts with its own true step or
    why there is none; a note printed by an earlier cycle is not printed
    again (report.json keeps them all)."""
    from opskew.render.units import fmt_ns

    doc = json.loads((profiled / "report.json").read_text())
    err = (profiled / "stderr.txt").read_text()
    f = doc["final"]
    lo, hi = f["corrected_step_w_ci_ns"]
    assert err.splitlines()[-1] == (
        f"opskew profile: true step {fmt_ns(f['corrected_step_ns'])} [{fmt_ns(lo)}, {fmt_ns(hi)}] (profiled "
        f"{fmt_ns(f['active_step_ns'])}, unprofiled wait steps {fmt_ns(f['baseline_step_ns'])}); report: "
        f"{profiled / 'report.json'}")
    heads = [ln for ln in err.splitlines() if ln.startswith("opskew.profile cycle ")]
    assert len(heads) == 2 and all(": true step " in h or ": no true step yet (" in h for h in heads), heads
    notes = [ln for ln in err.splitlines() if ln.startswith("  note: ")]
    assert notes and len(notes) == len(set(notes)), notes
    assert sum("priced at W with the operators" in ln for ln in err.splitlines()) <= 1
