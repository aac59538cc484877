"""`opskew compare`: traces, summaries and check results side by side, with
the ratio against the first and a significance only where intervals exist."""

import csv
import gzip
import io
import json
import subprocess
import sys

import pytest

from conftest import run_opskew


def hand_trace(path, ops, gz=False):
    """A Chrome trace of top-level complete events, one thread: `ops` maps a
    name to (calls, duration in ns), laid end to end with 100 ns gaps."""
    ev, t = [], 0
    for name, (calls, dur) in ops.items():
        for _ in range(calls):
            ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": t / 1e3, "dur": dur / 1e3})
            t += dur + 100
    data = json.dumps({"traceEvents": ev}).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def compare_json(tmp_path, *argv, rc=0):
    out = tmp_path / f"c{len(list(tmp_path.iterdir()))}.json"
    p = run_opskew("compare", *map(str, argv), "--json", str(out))
    assert p.returncode == rc, (p.stdout, p.stderr)
    return p, json.loads(out.read_text())


def by_name(doc):
    return {r["name"]: r for r in doc["rows"]}


def test_hand_built_traces_give_the_expected_ratios(tmp_path):
    a = hand_trace(tmp_path / "a.json", {"aten::add": (100, 1000), "aten::mul": (50, 2000)})
    b = hand_trace(tmp_path / "b.json.gz", {"aten::add": (100, 3000), "aten::mul": (50, 1000),
                                            "aten::new": (10, 500)}, gz=True)
    p, doc = compare_json(tmp_path, a, b)
    assert doc["schema"] == "opskew.compare/1" and doc["kind"] == "operators" and doc["metric"] == "self"
    rows = by_name(doc)
    assert [r["name"] for r in doc["rows"]] == ["aten::add", "aten::mul", "aten::new"]  # A's self time, then B's
    assert rows["aten::add"]["values"] == [1000, 3000]  # self time per call, ns
    assert rows["aten::add"]["changes"][0]["ratio"] == pytest.approx(3.0)
    assert rows["aten::add"]["changes"][0]["change"] == pytest.approx(2.0)
    assert rows["aten::mul"]["changes"][0]["ratio"] == pytest.approx(0.5)
    assert rows["aten::new"]["values"] == [None, 500] and rows["aten::new"]["changes"][0]["ratio"] is None
    # One run's per-operator figures carry no interval: no claim of significance.
    assert all(c["significant"] is None for r in doc["rows"] for c in r["changes"])
    _, doc = compare_json(tmp_path, a, b, "--metric", "total")
    assert by_name(doc)["aten::mul"]["values"] == [100_000, 50_000]
    _, doc = compare_json(tmp_path, a, b, "--metric", "calls")
    assert by_name(doc)["aten::add"]["changes"][0]["ratio"] == 1.0
    # The printed table: the renderer's columns and the "more" line.
    p = run_opskew("compare", str(a), str(b), "--top", "1")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("name"))
    assert lines[head].split()[:5] == ["name", "A", "B", "B/A", "B"]
    assert lines[head + 2].startswith("aten::add") and "x3.000" in lines[head + 2] and "+200.0%" in lines[head + 2]
    assert "... 2 more (--top 0 shows all)" in lines


def test_a_summary_json_and_a_trace_compare(tmp_path):
    a = hand_trace(tmp_path / "a.json", {"aten::add": (10, 1000)})
    b = hand_trace(tmp_path / "b.json", {"aten::add": (10, 1500)})
    sj = tmp_path / "b-summary.json"
    assert run_opskew("summary", str(b), "--json", str(sj)).returncode == 0
    _, doc = compare_json(tmp_path, a, sj)
    assert [i["schema"] for i in doc["inputs"]] == ["chrome-trace", "opskew.summary/1"]
    assert by_name(doc)["aten::add"]["changes"][0]["ratio"] == pytest.approx(1.5)


RECORD = r"""
import sys, torch
a = torch.ones(4)
n = int(sys.argv[2])
with torch.profiler.profile() as p:
    for _ in range(n):
        torch.add(a, a)
    for _ in range(50):
        torch.mul(a, a)
p.export_chrome_trace(sys.argv[1])
"""


def test_two_recorded_torch_traces_of_different_workloads(tmp_path):
    paths = []
    for n in (200, 600):
        path = tmp_path / f"t{n}.json"
        p = subprocess.run([sys.executable, "-c", RECORD, str(path), str(n)], capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, p.stderr
        paths.append(path)
    _, doc = compare_json(tmp_path, *paths, "--metric", "calls")
    rows = by_name(doc)
    assert rows["aten::add"]["values"] == [200, 600] and rows["aten::add"]["changes"][0]["ratio"] == 3.0
    assert rows["aten::mul"]["changes"][0]["ratio"] == 1.0


def check_doc(w, w_ci, base_trials, prof_trials, ops=None):
    iters = 10
    doc = {"schema": "opskew.check/1", "status": "complete", "conditions": {"iters": iters},
           "pairs": len(base_trials),
           "baseline": {"per_iter_s": sorted(base_trials)[len(base_trials) // 2] / iters, "trials_s": base_trials},
           "profiled": {"per_iter_s": sorted(prof_trials)[len(prof_trials) // 2] / iters, "trials_s": prof_trials},
           "events_per_iter": 1000,
           "added_per_event_ns": {"median": w, "ci95": w_ci, "ci_reaches_95": True},
           "inflation": sorted(p / b for p, b in zip(prof_trials, base_trials))[len(base_trials) // 2]}
    if ops:
        doc["operators"] = {"ops": [{"name": n, "calls": 100, "reported_self_ns": rep, "reported_total_ns": rep,
                                     "corrected_self_ns": {"median": m, "ci95": ci},
                                     "corrected_total_ns": {"median": m, "ci95": ci}} for n, rep, m, ci in ops]}
    return doc


def write(path, doc):
    path.write_text(json.dumps(doc, indent=2))
    return path


def test_check_results_significant_only_when_intervals_do_not_overlap(tmp_path):
    base = [0.010 + 0.0001 * i for i in range(9)]
    a = write(tmp_path / "a.json", check_doc(400.0, [350.0, 450.0], base, [x * 1.5 for x in base],
                                             ops=[("aten::add", 9000, 5000, [4800, 5200])]))
    far = write(tmp_path / "far.json", check_doc(800.0, [700.0, 900.0], base, [x * 2.0 for x in base],
                                                 ops=[("aten::add", 9000, 2000, [1800, 2200])]))
    near = write(tmp_path / "near.json", check_doc(420.0, [380.0, 470.0], base, [x * 1.5 for x in base],
                                                   ops=[("aten::add", 9000, 5100, [4900, 5300])]))
    _, doc = compare_json(tmp_path, a, far, near)
    assert doc["kind"] == "check"
    rows = by_name(doc)
    w = rows["W per event"]
    assert w["values"] == [400.0, 800.0, 420.0] and w["ci95"][1] == [700.0, 900.0]
    assert w["changes"][0] == {"ratio": 2.0, "change": 1.0, "significant": True, "drift_scaled_change": 1.0}
    assert w["changes"][1]["significant"] is False
    cs = rows["corrected self: aten::add"]
    # Shown with W's interval, but one window's operator times have no run-to-run interval: n/a.
    assert cs["ci95"] == [[4800, 5200], [1800, 2200], [4900, 5300]]
    assert [c["significant"] for c in cs["changes"]] == [None, None]
    assert cs["changes"][0]["ratio"] == pytest.approx(0.4)
    # Per-iteration times carry the sign-test interval of their trials' median.
    b = rows["baseline / iteration"]
    assert b["ci95"][0] is not None and b["ci95"][0][0] <= b["values"][0] <= b["ci95"][0][1]
    assert b["drift"] is True and b["changes"][0]["significant"] is None  # the machine's drift, never a finding
    assert rows["profiled / iteration"]["changes"][0]["significant"] is True  # 2x against 1.5x, no overlap
    # A figure without an interval makes no claim.
    assert rows["events / iteration"]["changes"][0]["significant"] is None
    p = run_opskew("compare", str(a), str(far))
    assert p.returncode == 0, p.stderr
    w_line = next(ln for ln in p.stdout.splitlines() if ln.startswith("W per event"))
    assert w_line.rstrip().endswith("yes") and "x2.000" in w_line


def test_a_change_of_the_uninstrumented_baseline_is_the_machine_s_drift_and_scales_the_rest(tmp_path):
    """Issue 45: compare of two checks called the baseline (no profiler at
    all) significantly changed, +9.3%: the machine drifting. It is marked
    drift, never significant, and each other time shows its change over it
    too; inflation (already over the baseline) and counts are left as
    they are."""
    import io

    from opskew import api
    from opskew.render.compare import print_human

    base = [0.010 + 0.0001 * i for i in range(9)]
    slow = [x * 1.093 for x in base]
    a = write(tmp_path / "a.json", check_doc(400.0, [350.0, 450.0], base, [x * 1.5 for x in base],
                                             ops=[("aten::add", 9000, 5000, [4800, 5200])]))
    b = write(tmp_path / "b.json", check_doc(437.2, [380.0, 490.0], slow, [x * 1.5 for x in slow],
                                             ops=[("aten::add", 9000, 5465, [5200, 5700])]))
    doc = api.compare(a, b).to_dict()
    rows = by_name(doc)
    drift = rows["baseline / iteration"]
    assert drift["drift"] is True and drift["changes"][0]["significant"] is None
    assert drift["changes"][0]["drift"] == pytest.approx(1.093)
    prof = rows["profiled / iteration"]["changes"][0]
    assert prof["change"] == pytest.approx(0.093) and prof["drift_scaled_change"] == pytest.approx(0.0, abs=1e-9)
    assert rows["corrected self: aten::add"]["changes"][0]["drift_scaled_change"] == pytest.approx(0.0, abs=1e-3)
    assert "drift_scaled_change" not in rows["inflation"]["changes"][0]
    assert "drift_scaled_change" not in rows["events / iteration"]["changes"][0]
    assert "baseline / iteration: the machine's drift" in doc["significance"]
    out = io.StringIO()
    print_human(doc, out)
    line = next(ln for ln in out.getvalue().splitlines() if ln.startswith("baseline / iteration"))
    assert line.rstrip().endswith("drift") and "+9.3%" in line and "yes" not in line
    line = next(ln for ln in out.getvalue().splitlines() if ln.startswith("profiled / iteration"))
    assert "+9.3% (+0.0% over drift)" in line


def test_mixed_kinds_and_bad_inputs_are_refused(tmp_path):
    trace = hand_trace(tmp_path / "t.json", {"aten::add": (10, 1000)})
    base = [0.01] * 6
    chk = write(tmp_path / "check.json", check_doc(400.0, [350.0, 450.0], base, base))
    p = run_opskew("compare", str(trace), str(chk))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "different kinds" in p.stderr and "check" in p.stderr
    p = run_opskew("compare", str(trace))
    assert p.returncode == 2 and "at least two" in p.stderr
    p = run_opskew("compare", str(trace), str(tmp_path / "missing.json"))
    assert p.returncode == 2 and "not found" in p.stderr
    other = write(tmp_path / "cal.json", {"schema": "opskew.calibration/1"})
    p = run_opskew("compare", str(trace), str(other))
    assert p.returncode == 2 and "cannot compare schema opskew.calibration/1" in p.stderr
    # An output that is an input is refused before any work.
    p = run_opskew("compare", str(trace), str(trace), "--csv", str(trace))
    assert p.returncode == 2 and "destroy" in p.stderr
    p = run_opskew("compare", str(trace), str(trace), "--csv", "-", "--json", "-")
    assert p.returncode == 2 and "both go to standard output" in p.stderr and p.stdout == ""


def test_csv_parses_and_matches_the_json(tmp_path):
    a = hand_trace(tmp_path / "a.json", {"aten::add": (100, 1000), "aten::mul": (50, 2000)})
    b = hand_trace(tmp_path / "b.json", {"aten::add": (100, 2500), "aten::div": (5, 700)})
    out = tmp_path / "c.csv"
    _, doc = compare_json(tmp_path, a, b, "--csv", str(out), "--top", "1")
    got = list(csv.DictReader(out.open()))
    assert [r["name"] for r in got] == [r["name"] for r in doc["rows"]]  # every row, not --top's
    for r, j in zip(got, doc["rows"]):
        assert r["unit"] == "ns"
        for k, v in (("A", j["values"][0]), ("B", j["values"][1]), ("B_ratio", j["changes"][0]["ratio"])):
            assert (r[k] == "") if v is None else float(r[k]) == pytest.approx(v)
        assert r["B_significant"] == ""  # n/a
    # check: intervals as _low/_high, significance as true/false
    base = [0.01 + 0.0001 * i for i in range(9)]
    c1 = write(tmp_path / "c1.json", check_doc(400.0, [350.0, 450.0], base, base))
    c2 = write(tmp_path / "c2.json", check_doc(800.0, [700.0, 900.0], base, base))
    p = run_opskew("compare", str(c1), str(c2), "--csv", "-")
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in csv.DictReader(io.StringIO(p.stdout))}  # nothing but CSV on stdout
    w = rows["W per event"]
    assert (float(w["A"]), float(w["A_low"]), float(w["A_high"])) == (400.0, 350.0, 450.0)
    assert w["B_significant"] == "true" and rows["inflation"]["unit"] == "ratio"


def test_truncated_trace_exit_5_and_help(tmp_path):
    a = hand_trace(tmp_path / "a.json", {"aten::add": (100, 1000)})
    data = a.read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) * 6 // 10])
    p = run_opskew("compare", str(a), str(cut))
    assert p.returncode == 5 and "warning" in p.stderr and "aten::add" in p.stdout
    p = run_opskew("compare", "--help")
    assert p.returncode == 0
    for text in ("exit codes", "do not overlap", "n/a", "--csv", "--metric"):
        assert text in p.stdout


def matrix(path, per_event, coverage=0.96875):
    """An opskew.matrix/1 result: `per_event` maps a row to (median, ci95),
    each interval of `coverage` as matrix writes it (0.96875: 6 rounds; 0.5:
    2 rounds, whose sign-test interval still fills "ci95"; None: not said)."""
    cov = {} if coverage is None else {"ci_coverage": coverage, "ci_reaches_95": coverage >= 0.95}
    rows = [{"row": "baseline", "label": "no instrument"}]
    rows += [{"row": k, "label": k, "in_window_per_event_ns": {"median": m, "ci95": ci, **cov}}
             for k, (m, ci) in per_event.items()]
    return write(path, {"schema": "opskew.matrix/1", "status": "complete", "rows": rows})


def test_matrix_and_correct_results_compare_and_the_api_agrees_with_the_cli(tmp_path):
    a = matrix(tmp_path / "ma.json", {"minimal": (400.0, [380.0, 420.0]), "itt": (50.0, [40.0, 60.0])})
    b = matrix(tmp_path / "mb.json", {"minimal": (410.0, [390.0, 430.0]), "itt": (100.0, [90.0, 110.0])})
    _, doc = compare_json(tmp_path, a, b)
    rows = by_name(doc)
    assert doc["kind"] == "matrix" and "in-window per event: baseline" not in rows
    assert rows["in-window per event: itt"]["changes"][0] == {"ratio": 2.0, "change": 1.0, "significant": True}
    assert rows["in-window per event: minimal"]["changes"][0]["significant"] is False

    def corrected(path, ops):
        return write(path, {"schema": "opskew.correct/1", "ops": [
            {"name": n, "calls": c, "reported_total_ns": rt, "reported_self_ns": rt, "corrected_total_ns": ct,
             "corrected_self_ns": ct, "clamped": 0} for n, c, rt, ct in ops]})

    ca = corrected(tmp_path / "ca.json", [("aten::add", 10, 9000, 4000)])
    cb = corrected(tmp_path / "cb.json", [("aten::add", 10, 9000, 6000)])
    _, doc = compare_json(tmp_path, ca, cb)
    assert doc["kind"] == "correct" and by_name(doc)["aten::add"]["values"] == [400, 600]  # corrected, per call
    trace = hand_trace(tmp_path / "t.json", {"aten::add": (10, 1000)})
    p = run_opskew("compare", str(trace), str(ca))
    assert p.returncode == 2 and "different kinds" in p.stderr
    # correct --json says truncation as "truncated" and "warning": compared
    # as far as it goes, with the warning and exit 5, as a truncated trace.
    doc_cb = json.loads(cb.read_text())
    doc_cb.update(truncated=True, warning="the trace ended early (a profiler killed mid-write?)")
    cb.write_text(json.dumps(doc_cb))
    p = run_opskew("compare", str(ca), str(cb))
    assert p.returncode == 5 and "ended early" in p.stderr, (p.returncode, p.stderr)

    import opskew

    r = opskew.compare(a, b)
    assert r.to_dict() == doc_of(tmp_path, a, b)
    row = {x["name"]: x for x in r.rows()}["in-window per event: itt"]
    assert (row["A"], row["A_low"], row["B_ratio"], row["B_significant"]) == (50.0, 40.0, 2.0, True)
    assert "in-window per event: itt" in repr(r)
    # In a notebook: the same table as HTML (it raised KeyError 'op'), and what was compared.
    html = r._repr_html_()
    assert "<th>B/A</th>" in html and "in-window per event: itt" in html and "x2.000" in html
    assert "ma.json" in html and "mb.json" in html and "matrix" in html


def doc_of(tmp_path, *paths):
    return compare_json(tmp_path, *paths)[1]


def test_two_real_checks_compare_with_their_own_intervals(tmp_path):
    paths = []
    for n in (1, 2):
        out = tmp_path / f"check{n}.json"
        p = run_opskew("check", "--trials", "6", "--iters", "2", "--calls", "200", "--warmup", "0.1",
                       "--json", str(out))
        assert p.returncode == 0, p.stderr
        paths.append(out)
    docs = [json.loads(x.read_text()) for x in paths]
    _, doc = compare_json(tmp_path, *paths)
    rows = by_name(doc)
    w = rows["W per event"]
    wa, wb = (d["added_per_event_ns"] for d in docs)
    assert w["values"] == [wa["median"], wb["median"]] and w["ci95"] == [wa["ci95"], wb["ci95"]]
    assert w["changes"][0]["ratio"] == pytest.approx(wb["median"] / wa["median"])
    overlap = not (wa["ci95"][1] < wb["ci95"][0] or wb["ci95"][1] < wa["ci95"][0])
    assert w["changes"][0]["significant"] is (not overlap)
    b = rows["baseline / iteration"]
    assert b["values"][0] == pytest.approx(docs[0]["baseline"]["per_iter_s"] * 1e9)
    assert all(ci is not None and ci[0] <= v <= ci[1] for v, ci in zip(b["values"], b["ci95"]))
    assert any(r["name"].startswith("corrected self: aten::add") for r in doc["rows"])


def test_compare_reads_pipes_and_names_open_errors(tmp_path):
    """Inputs are opened by the C reader: a pipe ("-", /dev/fd) is read like
    the file, and a directory or a missing file is named as summary names it."""
    import subprocess
    import sys

    a = tmp_path / "a.json"
    a.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": float(i), "dur": 0.5}
        for i in range(10)]}))
    cmd = [sys.executable, "-m", "opskew", "compare", "-", str(a), "--json", "-"]
    p = subprocess.run(cmd, input=a.read_bytes(), capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["rows"]
    assert [r["name"] for r in rows] == ["aten::add"] and rows[0]["values"] == [500.0, 500.0]
    for bad, words in ((tmp_path, "is a directory"), (tmp_path / "none.json", "not found")):
        q = subprocess.run([sys.executable, "-m", "opskew", "compare", str(bad), str(a)], capture_output=True,
                           text=True, timeout=120)
        assert q.returncode == 2 and words in q.stderr and "Traceback" not in q.stderr, q.stderr


def test_intervals_below_95_percent_are_not_tested(tmp_path):
    """matrix's 2 rounds give a 50% interval in "ci95": far apart or not, no
    claim; the significance line says why. Unknown coverage is n/a too."""
    per_a = {"opskew": (295.0, [291.0, 298.0]), "minimal": (100.0, [90.0, 110.0])}
    per_b = {"opskew": (830.0, [475.0, 1180.0]), "minimal": (105.0, [95.0, 115.0])}
    a95, b95 = matrix(tmp_path / "a95.json", per_a), matrix(tmp_path / "b95.json", per_b)
    a50 = matrix(tmp_path / "a50.json", per_a, coverage=0.5)
    b50 = matrix(tmp_path / "b50.json", per_b, coverage=0.5)
    bnone = matrix(tmp_path / "bnone.json", per_b, coverage=None)
    _, doc = compare_json(tmp_path, a95, b95)
    assert by_name(doc)["in-window per event: opskew"]["changes"][0]["significant"] is True  # the control
    for x, y, why in ((a50, b50, "A's intervals cover 50%"), (a95, b50, "B's intervals cover 50%"),
                      (a50, b95, "A's intervals cover 50%"), (a95, bnone, "no recorded coverage")):
        _, doc = compare_json(tmp_path, x, y)
        assert all(c["significant"] is None for r in doc["rows"] for c in r["changes"]), (x, y)
        assert why in doc["significance"] and "not 95%" in doc["significance"]
        # Not called a 95% interval either.
        row = by_name(doc)["in-window per event: opskew"]
        assert None in row["ci95"] and row["changes"][0]["ratio"] == pytest.approx(830 / 295)
    p = run_opskew("compare", str(a50), str(b50), "--top", "0")
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("in-window per event: opskew"))
    assert line.split()[-1] == "n/a" and "[" not in line
    assert "cover 50%" in p.stdout.splitlines()[-1]


def test_check_intervals_below_95_percent_say_why(tmp_path):
    base = [0.010, 0.011]  # 2 trials: every interval covers 50%
    w = {"median": 400.0, "ci95": [390.0, 410.0], "ci_coverage": 0.5, "ci_reaches_95": False}
    a = check_doc(400.0, None, base, [x * 1.5 for x in base])
    b = check_doc(800.0, None, base, [x * 3.0 for x in base])
    a["added_per_event_ns"] = w
    b["added_per_event_ns"] = dict(w, median=800.0, ci95=[790.0, 810.0])
    _, doc = compare_json(tmp_path, write(tmp_path / "a.json", a), write(tmp_path / "b.json", b))
    rows = by_name(doc)
    for name in ("W per event", "profiled / iteration", "inflation"):
        assert rows[name]["ci95"] == [None, None] and rows[name]["changes"][0]["significant"] is None, name
    assert "A's intervals cover 50%" in doc["significance"] and "B's intervals cover 50%" in doc["significance"]


def test_no_ratio_against_a_value_of_zero_or_below(tmp_path):
    a = matrix(tmp_path / "a.json", {"neg": (-114.0, [-150.0, -80.0]), "zero": (0.0, [-10.0, 10.0]),
                                     "pos": (100.0, [90.0, 110.0])})
    b = matrix(tmp_path / "b.json", {"neg": (800.0, [700.0, 900.0]), "zero": (5.0, [-10.0, 10.0]),
                                     "pos": (200.0, [190.0, 210.0])})
    _, doc = compare_json(tmp_path, a, b)
    rows = by_name(doc)
    for name in ("neg", "zero"):
        c = rows[f"in-window per event: {name}"]["changes"][0]
        assert c["ratio"] is None and c["change"] is None, name
    assert rows["in-window per event: neg"]["changes"][0]["significant"] is True  # the intervals still test
    assert rows["in-window per event: pos"]["changes"][0]["ratio"] == pytest.approx(2.0)
    p = run_opskew("compare", str(a), str(b))
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("in-window per event: neg"))
    assert "x-" not in line and "%" not in line and line.split()[-3:] == ["n/a", "n/a", "yes"]


def test_an_operator_absent_from_an_input_has_zero_calls_and_no_time_per_call(tmp_path):
    a = hand_trace(tmp_path / "a.json", {"aten::add": (10, 1000), "aten::mul": (5, 500)})
    b = hand_trace(tmp_path / "b.json", {"aten::add": (20, 1000), "aten::div": (4, 300)})
    _, doc = compare_json(tmp_path, a, b, "--metric", "calls")
    rows = by_name(doc)
    assert rows["aten::mul"]["values"] == [5, 0]
    assert rows["aten::mul"]["changes"][0]["ratio"] == 0.0 and rows["aten::mul"]["changes"][0]["change"] == -1.0
    assert rows["aten::div"]["values"] == [0, 4] and rows["aten::div"]["changes"][0]["ratio"] is None  # A = 0
    _, doc = compare_json(tmp_path, a, b, "--metric", "total")
    assert by_name(doc)["aten::mul"]["values"] == [2500, 0] and by_name(doc)["aten::div"]["values"] == [0, 1200]
    for metric in ("self", "mean"):  # no calls: no time per call
        _, doc = compare_json(tmp_path, a, b, "--metric", metric)
        assert by_name(doc)["aten::mul"]["values"][1] is None and by_name(doc)["aten::div"]["values"][0] is None
    p = run_opskew("compare", str(a), str(b), "--metric", "calls")
    assert p.returncode == 0, p.stderr
    assert next(ln for ln in p.stdout.splitlines() if ln.startswith("aten::mul")).split()[:3] == ["aten::mul", "5", "0"]


def test_an_input_with_no_events_is_named_in_a_warning(tmp_path):
    a = hand_trace(tmp_path / "a.json", {"aten::add": (10, 1000)})
    empty = write(tmp_path / "empty.json", {"traceEvents": []})
    for argv, label in (((a, empty), "B"), ((empty, a), "A")):
        p = run_opskew("compare", *map(str, argv))
        assert p.returncode == 0, p.stderr  # read without error: compared, as a truncated trace is
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and "warning" in lines[0] and f"{label} ({empty})" in lines[0]
        assert "no events" in lines[0]
    _, doc = compare_json(tmp_path, a, empty)
    assert len(doc["warnings"]) == 1 and "no events" in doc["warnings"][0]
    _, doc = compare_json(tmp_path, a, a)
    assert doc["warnings"] == []
    import opskew

    with pytest.warns(RuntimeWarning, match="no events"):
        opskew.compare(a, empty)
