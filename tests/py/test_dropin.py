"""opskew.profile to code that inspects what it holds (docs/profile.md, "To
code that inspects it"): a torch.profiler.profile by isinstance, torch's
signature, torch's attributes assigned after construction acting as on
torch's object, torch's other methods run on the wrapped profiler. Real
torch throughout."""

import inspect
import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import opskew  # noqa: E402

CPU = [torch.profiler.ProfilerActivity.CPU]
OWN = ("report_file", "corrected_dir", "threshold", "measure_w_py", "leaf_reference", "verbose", "cost_model")
A, B = torch.ones(8), torch.ones(8)


def body():
    for _ in range(20):
        torch.add(A, B)


def loop(p, steps):
    with p:
        for _ in range(steps):
            body()
            p.step()
    return p


def trace_of(path):
    with open(path) as f:
        return json.load(f)


def step_names(doc):
    return sorted(e["name"] for e in doc["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))


def test_an_instance_is_a_torch_profiler_and_an_opskew_one_and_import_opskew_still_imports_no_torch():
    p = opskew.profile(activities=CPU, report_file=None)
    assert isinstance(p, torch.profiler.profile) and isinstance(p, opskew.profile)
    assert type(p).__name__ == "profile" and type(p).__module__ == opskew.profile.__module__
    assert type(opskew.profile(activities=CPU, report_file=None)) is type(p)  # one class, made once
    code = "import sys, opskew; assert opskew.profile.__mro__[-1] is object; assert 'torch' not in sys.modules"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_the_signature_names_torchs_parameters_and_opskews_own():
    torch_params = [k for k in inspect.signature(torch.profiler.profile.__init__).parameters if k != "self"]
    for sig in (inspect.signature(opskew.profile.__init__),
                inspect.signature(opskew.profile(activities=CPU, report_file=None).__init__),
                inspect.signature(opskew.profile)):
        names = [k for k in sig.parameters if k != "self"]
        assert names == torch_params + list(OWN), names
    # What Lightning does with it: keep the keywords the signature names.
    given = {"activities": CPU, "record_shapes": True, "with_stack": True, "schedule": None, "report_file": None,
             "not_an_option": 1}
    init = inspect.signature(opskew.profile.__init__).parameters
    kept = {k: v for k, v in given.items() if k in init}
    assert set(kept) == set(given) - {"not_an_option"}
    p = opskew.profile(**kept)
    assert p.record_shapes is True and p.prof.record_shapes is True and p.with_stack is True


def test_a_handler_assigned_after_construction_runs_first_then_the_correction(tmp_path):
    sched = torch.profiler.schedule(wait=8, warmup=1, active=7, repeat=1)
    p = opskew.profile(activities=CPU, schedule=sched, report_file=None)
    seen = []

    def handler(prof):
        seen.append(len(prof.reports))  # opskew's report of this cycle comes after the handler
        torch.profiler.tensorboard_trace_handler(str(tmp_path))(prof)

    p.on_trace_ready = handler
    assert p.on_trace_ready is handler and p.prof.on_trace_ready is not handler
    loop(p, 18)
    assert seen == [0], seen
    rep = p.reports[0]
    assert rep["raw_trace"].startswith(str(tmp_path)) and rep["corrected_trace"], rep
    assert rep["corrected_trace"].startswith(str(tmp_path / "corrected"))


def test_a_schedule_assigned_after_construction_is_the_one_followed():
    never = torch.profiler.schedule(wait=1000, warmup=0, active=1)
    p = opskew.profile(activities=CPU, schedule=never, report_file=None)
    p.schedule = torch.profiler.schedule(wait=8, warmup=1, active=7, repeat=1)
    loop(p, 18)
    assert [r["cycle"] for r in p.reports] == [1]
    assert p.step_counts()["active"] == 7 and p.reports[0]["pairs"] == 6, p.reports[0]

    # Lightning's override for short runs: torch's default schedule, every step active.
    q = opskew.profile(activities=CPU, schedule=torch.profiler.schedule(wait=1, warmup=1, active=3), report_file=None)
    q.schedule = torch.profiler.profiler._default_schedule_fn
    assert q.prof.schedule is torch.profiler.profiler._default_schedule_fn
    loop(q, 3)
    assert q.report["advice"].startswith("no schedule"), q.report["advice"]


def test_step_num_and_profiler_options_assigned_after_construction_reach_torchs_object(tmp_path):
    p = opskew.profile(activities=CPU, schedule=torch.profiler.schedule(wait=1, warmup=1, active=2),
                       report_file=None)
    p.step_num = 40
    p.record_shapes = True
    assert p.prof.step_num == 40 and p.prof.record_shapes is True
    assert "step_num" not in vars(p) and "record_shapes" not in vars(p)
    loop(p, 5)
    path = str(tmp_path / "t.json")
    p.export_chrome_trace(path)
    doc = trace_of(path)
    assert step_names(doc) == ["ProfilerStep#42", "ProfilerStep#43"]
    adds = [e for e in doc["traceEvents"] if e.get("name") == "aten::add"]
    assert adds and all("Input Dims" in e["args"] for e in adds)
    assert "record_shapes" in json.dumps(p.report["cost_classes"])

    # record_steps off after construction: torch's object opens no step ranges, and neither does opskew.
    q = opskew.profile(activities=CPU, schedule=torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1),
                       report_file=None)
    q.record_steps = False
    loop(q, 5)
    q.export_chrome_trace(str(tmp_path / "q.json"))
    assert step_names(trace_of(str(tmp_path / "q.json"))) == []
    assert q.step_ranges["route"] == "none"

    # An attribute torch's object does not have stays opskew's.
    q.mine = 1
    assert vars(q)["mine"] == 1 and not hasattr(q.prof, "mine")


def test_torchs_other_methods_run_on_the_wrapped_profiler(tmp_path):
    p = opskew.profile(activities=CPU, report_file=None)
    assert "add_metadata" not in type(p).__mro__[1].__dict__  # not opskew's own: torch's, forwarded
    assert inspect.signature(p.key_averages) == inspect.signature(p.prof.key_averages)
    with p:
        body()
        p.add_metadata("Framework", "opskew-test")  # as Lightning does after each step()
    assert len(p.events()) == len(p.prof.events()) > 0
    path = str(tmp_path / "t.json")
    p.export_chrome_trace(path)
    assert trace_of(path)["Framework"] == "opskew-test"
