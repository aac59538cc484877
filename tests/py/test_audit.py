"""The clean-window audit (opskew.analyze.audit, docs/cuda.md) on synthetic
traces shaped like Kineto's CUDA export: its cats, names, rows and args as
libkineto's output_json.cpp writes them (CUPTI overhead records on pid -1,
tid 0, with no args; kernels on pid = device, tid = stream, with
args.correlation and "External id"; cudaLaunchKernel on the CPU thread; the
ac2g flow pair). No GPU needed."""

import json

import pytest

from opskew.analyze.audit import audit, summary
from opskew.analyze.tracefile import correct, summarize
from opskew.stats.costmodel import CostModel
from opskew.render.audit import lines

PID, TID = 4242, 4242
OPS = ("cpu_op", "user_annotation")


def kineto(steps=4, step_us=100.0, first_step_us=None, overhead=(), drop=(), orphan=False, early=(),
           mismatch=(), zero=()):
    """A trace of `steps` ProfilerStep#N, each one aten::add launching one
    kernel (correlation 100 + step). `overhead`: steps whose launch a
    "Activity Buffer Request" record overlaps; `drop`: steps whose kernel is
    missing; `orphan`: one kernel no launch made; `early`: steps whose kernel
    starts before its launch; `mismatch`: steps whose kernel's External id is
    not its launch's; `zero`: steps whose kernel has dur 0."""
    ev = [{"ph": "M", "name": "process_name", "ts": 0.0, "pid": -1, "tid": 0, "args": {"name": "CUPTI Overhead"}},
          {"ph": "M", "name": "thread_name", "ts": 0.0, "pid": 0, "tid": 7, "args": {"name": "stream 7 "}}]
    t = 1000.0
    for n in range(steps):
        dur = first_step_us if (n == 0 and first_step_us) else step_us
        ext, corr = 10 * n + 1, 100 + n
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": PID, "tid": TID,
                   "ts": t, "dur": dur, "args": {"External id": ext - 1, "Record function id": 0}})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": PID, "tid": TID,
                   "ts": t + 10.0, "dur": 25.0, "args": {"External id": ext, "Record function id": 0}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": TID,
                   "ts": t + 18.0, "dur": 15.0, "args": {"External id": ext, "cbid": 211, "correlation": corr}})
        ev.append({"ph": "s", "id": corr, "pid": PID, "tid": TID, "ts": t + 18.0, "cat": "ac2g", "name": "ac2g"})
        if n in overhead:
            ev.append({"ph": "X", "cat": "overhead", "name": "Activity Buffer Request", "pid": -1, "tid": 0,
                       "ts": t + 20.0, "dur": 11.2})
        if n not in drop:
            k_ts = t + (5.0 if n in early else 36.8)
            ev.append({"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel", "pid": 0, "tid": 7,
                       "ts": k_ts, "dur": 0.0 if n in zero else 2.208,
                       "args": {"External id": ext + 1000 if n in mismatch else ext, "device": 0, "stream": 7,
                                "correlation": corr, "grid": [1, 1, 1], "block": [128, 1, 1]}})
            ev.append({"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": k_ts, "cat": "ac2g", "name": "ac2g",
                       "bp": "e"})
        t += dur + 20.0
    if orphan:
        ev.append({"ph": "X", "cat": "kernel", "name": "stray_kernel", "pid": 0, "tid": 7, "ts": t, "dur": 1.0,
                   "args": {"device": 0, "stream": 7, "correlation": 999}})
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
            "traceEvents": ev, "traceName": "synthetic"}


def write(tmp_path, doc, name="t.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def test_a_clean_trace_has_no_finding(tmp_path):
    doc = audit(write(tmp_path, kineto()))
    st = doc["stats"]
    assert doc["cuda"] and doc["clean"] and lines(doc) == []
    assert (st["launches"], st["device_events"], st["overhead_events"]) == (4, 4, 0)
    assert all(st[k] == 0 for k in ("missing", "orphans", "bad_time", "external_id_mismatch"))
    assert [s["step"] for s in doc["steps"]] == [0, 1, 2, 3] and not doc["warmup_short"]


def test_a_buffer_request_is_named_with_its_time_and_the_operator_it_landed_in(tmp_path):
    path = write(tmp_path, kineto(overhead=(1, 2)))
    doc = audit(path)
    assert doc["stats"]["overhead_events"] == 2 and doc["stats"]["overhead_ns"] == 2 * 11200
    assert doc["overhead_by_name"] == [{"name": "Activity Buffer Request", "count": 2, "total_ns": 22400}]
    first = doc["overhead"][0]
    assert first["name"] == "Activity Buffer Request" and first["dur_ns"] == 11200
    assert first["op"] == "aten::add" and first["launch"] == "cudaLaunchKernel"
    said = lines(doc)
    assert len(said) == 1 and "2 records, 22.4 us (Activity Buffer Request x2" in said[0] and "in aten::add" in said[0]
    # ... and no operator's time holds it: not in opskew's operator table,
    # nor in the corrected trace's, and aten::add's time is the same as without it.
    ops = {o["name"]: o for o in summarize(path, categories=list(OPS))["ops"]}
    plain = {o["name"]: o for o in summarize(write(tmp_path, kineto(), "plain.json"), categories=list(OPS))["ops"]}
    assert "Activity Buffer Request" not in ops and ops["aten::add"]["self_ns"] == plain["aten::add"]["self_ns"]
    fixed = correct(path, CostModel.default(100.0, 0.0))
    assert "Activity Buffer Request" not in {o["name"] for o in fixed["ops"]}


@pytest.mark.parametrize("kw, key, words", [
    ({"drop": (2,)}, "missing", "1 launch with no device record of the same correlation"),
    ({"orphan": True}, "orphans", "1 device record that no launch in the trace made"),
    ({"early": (1,)}, "bad_time", "1 device record of zero length or starting before the launch"),
    ({"zero": (3,)}, "bad_time", "1 device record of zero length or starting before the launch"),
    ({"mismatch": (0,)}, "external_id_mismatch", "1 device record with an External id other than the launch's"),
])
def test_missing_or_malformed_device_records_are_found(tmp_path, kw, key, words):
    doc = audit(write(tmp_path, kineto(**kw)))
    assert doc["stats"][key] == 1 and not doc["clean"]
    assert sum(doc["stats"][k] for k in ("missing", "orphans", "bad_time", "external_id_mismatch")) == 1
    said = lines(doc)
    assert len(said) == 1 and words in said[0], said


def test_kernels_missing_at_the_start_of_a_session_are_said_so(tmp_path):
    doc = audit(write(tmp_path, kineto(drop=(0, 1))))
    assert doc["stats"]["missing"] == 2 and doc["stats"]["missing_head"] == 2
    assert "2 launches with no device record of the same correlation, 2 of them before the first launch that " \
           "has its kernel (of 4 launches" in lines(doc)[0]


def test_a_first_step_that_ran_long_says_the_warm_up_was_too_short(tmp_path):
    doc = audit(write(tmp_path, kineto(steps=5, first_step_us=260.0)))
    assert doc["warmup_short"] and abs(doc["first_step_ratio"] - 2.6) < 1e-9
    assert any(x.startswith("warm-up too short: the first ProfilerStep#N ran 2.60x") for x in lines(doc))
    assert not audit(write(tmp_path, kineto(steps=5, first_step_us=120.0), "ok.json"))["warmup_short"]


def test_a_cpu_trace_is_not_a_cuda_one(tmp_path):
    doc = kineto()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") in OPS]
    found = audit(write(tmp_path, doc))
    assert not found["cuda"] and lines(found) == [] and found["stats"]["launches"] == 0


def test_the_summary_keeps_the_counts_and_the_first_records(tmp_path):
    doc = audit(write(tmp_path, kineto(steps=30, overhead=tuple(range(30)))))
    kept = summary(doc, keep=5)
    assert kept["stats"]["overhead_events"] == 30 and len(kept["overhead"]) == 5
    assert json.loads(json.dumps(kept)) == kept  # goes into report.json and the trace's metadata as it is


def test_a_trace_cut_short_is_audited_up_to_there(tmp_path):
    text = json.dumps(kineto(overhead=(0,)))
    p = tmp_path / "cut.json"
    p.write_text(text[: len(text) // 2])
    doc = audit(str(p))
    assert doc["status"] == "truncated" and doc["stats"]["truncated"]


def test_a_cuda_cycles_report_carries_the_audit_and_its_notes(tmp_path):
    """opskew.profile's cycle analysis on CUDA (profiler.cycle): the audit
    goes into the report (and so the corrected trace's metadata), and the
    printed report says each finding as a note; an unreadable trace is
    named, not raised."""
    from opskew.profiler.cycle import CycleAnalysis
    from opskew.render.profile import notes_of

    rep = {"notes": ["an earlier note"]}
    CycleAnalysis._audit(None, rep, write(tmp_path, kineto(overhead=(0,), drop=(3,))))
    assert rep["audit"]["stats"]["overhead_events"] == 1 and rep["audit"]["stats"]["missing"] == 1
    said = notes_of(rep)
    assert len(said) == 3 and "an earlier note" in said and any(n.startswith("CUPTI overhead") for n in said)
    bad = {"notes": []}
    CycleAnalysis._audit(None, bad, str(tmp_path / "gone.json"))
    assert "error" in bad["audit"] and bad["notes"] == []
