"""Issue 35: one corrected time line, and every table read from it. The
table of `opskew correct` (and the report's per-operator rows of
opskew.profile, which come from the same pass) and `opskew summary` of the
corrected trace it wrote give the same self and total times per name, to the
nanosecond, on nested real traces: an LSTM, a transformer step with
record_shapes and with_stack (Python frames, record_function ranges,
improper overlaps). docs/correct.md, "One time line"."""

import pytest

from opskew.analyze import tracefile as tf

torch = pytest.importorskip("torch")


def _lstm_step(model, x, opt):
    out, _ = model(x)
    out.sum().backward()
    opt.step()
    opt.zero_grad()


def _transformer_step(model, x, opt):
    with torch.profiler.record_function("forward"):
        y = model(x)
    y.mean().backward()
    opt.step()
    opt.zero_grad()


def _models():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(8, 16, num_layers=2)
    tfm = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32), num_layers=1)
    return {"lstm": (lstm, torch.randn(5, 2, 8), _lstm_step, {}),
            "transformer": (tfm, torch.randn(4, 2, 16), _transformer_step,
                            {"record_shapes": True, "with_stack": True})}


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("one_line")
    paths = {}
    for name, (model, x, step, kw) in _models().items():
        opt = torch.optim.AdamW(model.parameters())
        paths[name] = str(d / f"{name}.json")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                    schedule=torch.profiler.schedule(wait=0, warmup=1, active=3, repeat=1),
                                    on_trace_ready=lambda p, path=paths[name]: p.export_chrome_trace(path),
                                    **kw) as p:
            for _ in range(4):
                step(model, x, opt)
                p.step()
    return paths


def _table_vs_summary(table_ops, corrected_path):
    """Names whose self or total differ between the table and the summary of
    the corrected trace (exact, in ns), and the number of names compared."""
    summary = {o["name"]: o for o in tf.summarize(corrected_path)["ops"]}
    differ = []
    for name, (total, self_) in table_ops.items():
        s = summary.get(name)
        if s is None or s["total_ns"] != total or s["self_ns"] != self_:
            differ.append((name, total, self_, s and (s["total_ns"], s["self_ns"])))
    return differ, len(table_ops)


# W, delta, W_py, delta_py: one that clamps nothing much, one that clamps a lot
# (children written longer than their parents' formula), one at W = 0.
COSTS = [(300.0, 40.0, 500.0, 60.0), (2000.0, 100.0, 3000.0, 100.0), (0.0, 0.0, 0.0, 0.0)]


@pytest.mark.parametrize("name", ["lstm", "transformer"])
@pytest.mark.parametrize("cost", COSTS)
def test_correct_table_is_the_summary_of_its_trace(traces, tmp_path, name, cost):
    w, d, w_py, d_py = cost
    out = str(tmp_path / "c.json")
    r = tf.correct(traces[name], w, d, out=out, w_py_ns=w_py, delta_py_ns=d_py)
    table = {o["name"]: (o["corrected_total_ns"], o["corrected_self_ns"]) for o in r["ops"] if o["calls"]}
    differ, n = _table_vs_summary(table, out)
    assert n > 20 and differ == []
    if name == "transformer":
        assert r["stats"]["py_events"] > 0 and r["stats"]["overlaps"] > 0
    if w == 0:
        # At W = 0 nothing moves: the table is the reported one.
        assert all(o["corrected_total_ns"] == o["reported_total_ns"] for o in r["ops"])
    # Every event is written at its corrected duration, longer where its
    # children's written durations outlast it (clamping), shorter only where
    # it has no time of its own to give (its every interval belongs to an
    # event that outlived it, or its clipped tail begins with its parent).
    st = r["stats"]
    assert st["shortened"] <= max(2, st["corrected_events"] // 1000)


def test_profile_report_rows_are_the_summary_of_its_corrected_trace(tmp_path):
    """opskew.profile under record_shapes + with_stack: each cycle's report
    rows (corrected self and total, the median) against `opskew summary` of
    that cycle's corrected trace."""
    import opskew

    model, x, step, _ = _models()["transformer"]
    opt = torch.optim.AdamW(model.parameters())
    sched = torch.profiler.schedule(wait=3, warmup=1, active=4, repeat=2)
    with opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched, record_shapes=True,
                        with_stack=True, report_file=None, corrected_dir=str(tmp_path)) as p:
        for _ in range(24):
            step(model, x, opt)
            p.step()
    checked = 0
    for rep in p.reports:
        path = rep.get("corrected_trace")
        if not path or not rep.get("operators"):
            continue
        table = {o["name"]: (o["corrected_total_ns"]["median"], o["corrected_self_ns"]["median"])
                 for o in rep["operators"]["ops"]}
        differ, n = _table_vs_summary(table, path)
        assert n > 20 and differ == []
        checked += 1
    assert checked >= 1
