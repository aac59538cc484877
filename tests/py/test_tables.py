"""The one table renderer (opskew.tables, issue 13): its layout rules, and
that summary, record --summary, Trace.summary, correct and check's verdict
all print through it (the same column names, units, "more" line)."""

import csv
import io
import json
import re
import subprocess
import sys

from conftest import run_opskew

from opskew.render import tables
from opskew.analyze import verdict
from opskew.render import verdict as render_verdict
from opskew.stats.costmodel import CostModel
from test_correct_stream import calibration
from test_verdict import injected_trace

COLS = ("name", "calls", "total", "self", "self %", "verdict")


def rows_of(n, long_name=None):
    rows = [[f"aten::op{i}", 10 * (i + 1), 1500.0 * (i + 1), 2_000_000.0 / (i + 1), 0.5 / (i + 1),
             "believable"] for i in range(n)]
    if long_name:
        rows[0][0] = long_name
    return rows


def test_every_cell_starts_and_ends_at_the_header_offsets():
    out = io.StringIO()
    rows = rows_of(4, long_name="x" * 100)
    spans = tables.op_table(rows, COLS, out=out)
    lines = out.getvalue().splitlines()
    header, rule, body = lines[0], lines[1], lines[2:]
    assert set(rule) == {"-"} and len(rule) == spans[-1][1]
    assert len(body) == 4  # top=0: every row, no "more" line
    for (start, end), col in zip(spans, (tables.column(c) for c in COLS)):
        assert header[start:end].strip() == col.title
        left = col.kind in ("name", "text")
        # Left columns start at the offset, right ones end at it.
        assert header[start] != " " if left else header[end - 1] != " "
        for ln, r in zip(body, rows):
            text = ln[start:end]
            assert text.strip() == (tables.truncate(tables.cell(r[COLS.index(col.title)], col.kind))), ln
            assert text[0] != " " if left else text[-1] != " "
            assert ln[end:end + 2].strip() == ""  # the separator is blank
    # units: fmt_ns for every time, one rule
    assert body[0][spans[2][0]:spans[2][1]].strip() == "1.5 us"
    assert body[0][spans[3][0]:spans[3][1]].strip() == "2 ms"
    assert body[0][spans[4][0]:spans[4][1]].strip() == "50.00%"


def test_names_are_cut_by_one_rule():
    long = "aten::" + "y" * 80
    assert tables.truncate(long) == long[: tables.NAME_WIDTH - 3] + "..."
    assert len(tables.truncate(long)) == tables.NAME_WIDTH
    assert tables.truncate("aten::add") == "aten::add"
    out = io.StringIO()
    tables.op_table(rows_of(1, long_name=long), COLS, out=out)
    assert long[: tables.NAME_WIDTH - 3] + "..." in out.getvalue() and long not in out.getvalue()
    # Control characters are shown escaped: a newline split the row.
    assert tables.truncate("a\nb\tc\x01") == "a\\nb\\tc\\x01"
    out = io.StringIO()
    tables.op_table(rows_of(1, long_name="two\nlines"), COLS, out=out)
    assert "two\\nlines" in out.getvalue() and "two\nlines" not in out.getvalue()


def test_top_cuts_and_says_how_many_more():
    out = io.StringIO()
    tables.op_table(rows_of(5), COLS, top=2, out=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 + 2 + 1 and lines[-1] == "... 3 more (--top 0 shows all)"
    out = io.StringIO()
    tables.op_table(rows_of(5), COLS, top=0, out=out)
    assert len(out.getvalue().splitlines()) == 2 + 5 and "more" not in out.getvalue()
    out = io.StringIO()
    tables.op_table(rows_of(2), COLS, out=out, omitted=7)  # rows the caller cut already
    assert out.getvalue().splitlines()[-1] == "... 7 more (--top 0 shows all)"


def test_csv_is_plain_numbers_in_ns():
    cols = ("name", "calls", "total", "corrected self [95% CI]")
    text = tables.csv_text([["a,b", 3, 1500.5, (10.0, 5.0, 20.0)], ["c", 1, 2, None]], cols)
    got = list(csv.reader(io.StringIO(text)))
    assert got[0] == ["name", "calls", "total_ns", "corrected_self_ns", "corrected_self_ns_low",
                      "corrected_self_ns_high"]
    assert got[1] == ["a,b", "3", "1500.5", "10", "5", "20"]
    assert got[2] == ["c", "1", "2", "", "", ""]


# -- every table of operators goes through it ---------------------------------

def header_titles(text):
    """The titles of the header above the first rule of dashes (titles hold
    single spaces; columns are two or more apart)."""
    lines = text.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln and set(ln) == {"-"})
    return re.split(r"\s{2,}", lines[i - 1].strip())


def shared(titles):
    return [t for t in titles if t in ("name", "calls", "total", "self", "corrected total", "corrected self",
                                       "mean")]


def test_summary_correct_verdict_and_tracer_share_columns_and_more_line(tmp_path):
    trace = tmp_path / "t.json"
    injected_trace(trace, w_ns=300.0)  # 3 operator names
    cal = calibration(tmp_path / "cal.json", "minimal", 300.0, 0.0)
    more = "... 1 more (--top 0 shows all)"

    p = run_opskew("summary", str(trace), "--top", "2")
    assert p.returncode == 0, p.stderr
    assert more in p.stdout.splitlines()
    summary_t = header_titles(p.stdout)

    p = run_opskew("correct", str(trace), "--calibration", str(cal), "--top", "2")
    assert p.returncode == 0, p.stderr
    assert more in p.stdout.splitlines()
    correct_t = header_titles(p.stdout)

    v = verdict.per_operator(str(trace), CostModel.default({"median": 300.0, "ci95": [290.0, 310.0]}, 0.0))
    out = io.StringIO()
    render_verdict.render(v, out, top=2)
    assert more in out.getvalue().splitlines()
    verdict_t = header_titles(out.getvalue())

    code = ("import opskew\nwith opskew.trace(instrument='pyhook') as t:\n    import torch\n"
            "    a = torch.ones(1)\n    [torch.add(a, a) for _ in range(50)]\n    torch.mul(a, a)\n"
            "print(t.summary)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    tracer_t = header_titles(p.stdout)
    assert "torch.add" in p.stdout and "more" not in p.stdout  # str() shows every row

    p = run_opskew("record", "--instrument", "pyhook", "--summary", "--top", "1", "-o", str(tmp_path / "r.json"),
                   "--", sys.executable, "-c", "import torch; a=torch.ones(1); [torch.add(a, a) for _ in range(50)]; "
                   "torch.mul(a, a)")
    assert p.returncode == 0, p.stderr
    record_t = header_titles(p.stdout)
    assert any(re.fullmatch(r"\.\.\. \d+ more \(--top 0 shows all\)", ln) for ln in p.stdout.splitlines())
    assert record_t == tracer_t

    for t in (summary_t, correct_t, verdict_t, tracer_t):
        assert t[:2] == ["name", "calls"]
        assert [x for x in shared(t) if x in ("name", "calls", "total", "self")] == ["name", "calls", "total", "self"]
    # The corrected figures carry one name wherever they appear.
    assert "corrected total" in correct_t and "corrected self" in correct_t
    assert "corrected total" in verdict_t and "corrected self [95% CI]" in verdict_t
    assert "corrected total" in tracer_t and "corrected self" in tracer_t
    assert "mean" in summary_t and "mean" in correct_t and "mean" in tracer_t


def test_summary_and_correct_csv_match_their_json(tmp_path):
    trace = tmp_path / "t.json"
    injected_trace(trace, w_ns=300.0)
    cal = calibration(tmp_path / "cal.json", "minimal", 300.0, 0.0)
    js, cs = tmp_path / "s.json", tmp_path / "s.csv"
    p = run_opskew("summary", str(trace), "--json", str(js), "--csv", str(cs), "--top", "1")
    assert p.returncode == 0, p.stderr
    doc = json.loads(js.read_text())
    got = list(csv.DictReader(cs.open()))
    assert [r["name"] for r in got] == [o["name"] for o in doc["ops"]]  # every operator, not --top's
    for r, o in zip(got, doc["ops"]):
        assert int(r["calls"]) == o["calls"] and float(r["self_ns"]) == o["self_ns"]
        assert float(r["total_ns"]) == o["total_ns"] and float(r["p99_ns"]) == o["p99_ns"]
    js, cs = tmp_path / "c.json", tmp_path / "c.csv"
    p = run_opskew("correct", str(trace), "--calibration", str(cal), "--json", str(js), "--csv", str(cs))
    assert p.returncode == 0, p.stderr
    doc = json.loads(js.read_text())
    got = {r["name"]: r for r in csv.DictReader(cs.open())}
    assert set(got) == {o["name"] for o in doc["ops"]}
    for o in doc["ops"]:
        r = got[o["name"]]
        assert float(r["corrected_self_ns"]) == o["corrected_self_ns"]
        assert float(r["total_ns"]) == o["reported_total_ns"]
        assert float(r["corrected_mean_ns"]) == o["corrected_total_ns"] / o["calls"]
    # An output that is the input is refused before any work.
    p = run_opskew("summary", str(trace), "--csv", str(trace))
    assert p.returncode == 2 and "destroy" in p.stderr
    for cmd in (("summary", str(trace)), ("correct", str(trace), "--calibration", str(cal))):
        p = run_opskew(*cmd, "--csv", "-", "--json", "-")
        assert p.returncode == 2 and "both go to standard output" in p.stderr and p.stdout == ""


def test_notebook_html_uses_the_same_column_titles(tmp_path):
    import warnings

    import opskew

    trace = tmp_path / "t.json"
    injected_trace(trace, w_ns=300.0)
    warnings.simplefilter("ignore", RuntimeWarning)  # the trace lists parents after children: re-sorted
    html = opskew.summary(trace)._repr_html_()
    heads = re.findall(r"<th>([^<]*)</th>", html)
    assert tuple(heads) == tables.SUMMARY_COLUMNS
    text = repr(opskew.summary(trace))
    assert header_titles(text) == list(tables.SUMMARY_COLUMNS)
