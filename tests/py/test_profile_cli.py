"""`opskew profile -- python SCRIPT`: an unmodified training script under
opskew.profile (docs/profile.md), end to end against real torch."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import communicate_or_diagnose, kill_tree, run_opskew
from opskew.render.notes import all_words
from opskew.stats.pricing import ADVICE

pytest.importorskip("torch")

# A script that knows nothing of opskew: a small MLP trained with SGD.
TRAIN = """\
import sys
import torch
torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 16), torch.randn(8, 4)
steps = int(sys.argv[1])
for i in range(steps):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    {hook}
    opt.step()
print("trained", steps)
"""

SMALL = ("--skip-first", "0", "--wait", "8", "--warmup", "1", "--active", "4", "--repeat", "2")  # 13 steps a cycle
# Cycle 1 pairs 3 active steps (its first is cold), too few for a 95% CI:
# with no stored calibration its raw trace is kept and not corrected then;
# cycle 2 pools 6, and at the end cycle 1's trace is corrected with the
# run's final W.
EXPECTED = ["opskew-profile-cycle1.corrected.pt.trace.json", "opskew-profile-cycle1.pt.trace.json",
            "opskew-profile-cycle2.corrected.pt.trace.json", "opskew-profile-cycle2.pt.trace.json"]


def script(tmp_path, hook="pass", name="train.py"):
    path = tmp_path / name
    path.write_text(TRAIN.format(hook=hook))
    return str(path)


def report(out):
    return json.loads((out / "report.json").read_text())


def traces(out):
    """The traces of OUT: raw in OUT/traces, corrected in OUT/traces/corrected."""
    return sorted(p.name for d in (out / "traces", out / "traces" / "corrected") if d.is_dir()
                  for p in d.iterdir() if p.name.startswith("opskew-profile-cycle"))


def raw_trace(out, name):
    return out / "traces" / f"{name}.pt.trace.json"


def corrected_trace(out, name):
    return out / "traces" / "corrected" / f"{name}.corrected.pt.trace.json"


def test_unmodified_script_gets_raw_and_corrected_traces_and_a_report(tmp_path):
    out = tmp_path / "prof"
    p = run_opskew("profile", "-o", str(out), *SMALL, "--", sys.executable, script(tmp_path), "40",
                   env={"OPSKEW_PROGRESS": "lines"})
    assert p.returncode == 0, p.stderr
    assert "trained 40" in p.stdout  # the script's own output passes through
    # Progress (docs/commands.md, "Progress"): a line as each cycle's steps
    # begin, what it waits for, before that cycle's report; never on stdout.
    err = p.stderr.splitlines()
    first = err.index("opskew profile: cycle 1 (its trace ends after 13 steps: skip_first=0, wait=8, warmup=1, "
                      "active=4; steps from the first optimizer that stepped (SGD))")
    second = err.index("opskew profile: cycle 2 (its trace ends after 13 steps: wait=8, warmup=1, active=4)")
    report1 = next(i for i, x in enumerate(err) if x.startswith("opskew.profile cycle 1:"))
    assert first < report1 and first < second
    assert not any(x.startswith("opskew profile: cycle 3") for x in err)  # --repeat 2
    assert "opskew profile: cycle" not in p.stdout
    assert traces(out) == EXPECTED
    doc = report(out)
    assert doc["schema"] == "opskew.profile/1"
    assert doc["step_source"] == "the first optimizer that stepped (SGD)"
    # 40 optimizer steps: the profiler starts at the first, so 39 whole
    # bodies between them and a partial one from the last to the end.
    assert doc["step_boundaries"] == 40 and len(doc["step_times_ns"]) == 40
    # Steps 0-7 wait, 8 warmup, 9-12 active, 13-20 wait, 21 warmup, 22-25
    # active, then 26-38 outside the cycles (wait); 39 ended at stop(): partial.
    assert doc["steps"] == {"wait": 8 + 8 + 13, "warmup": 2, "active": 8}
    assert doc["step_times_ns"][-1]["partial"] is True
    assert doc["ended_by"] == "the script returned"
    assert len(doc["reports"]) == 2 and doc["conditions"]["options"]["with_stack"] is False
    last = doc["reports"][-1]
    # Every active step but the cold first of each cycle is paired, each with
    # a wait step of its own.
    assert last["pairs"] == 6 and last["unpaired_active_steps"] == 0 and last["w_ns"]["median"] is not None
    assert last["events"]["per_step"] is True
    # A step's events are all the operators and annotations inside its
    # ProfilerStep#N by time, the optimizer's own included (its step boundary
    # comes after Optimizer.step's range has closed).
    raw = json.loads(raw_trace(out, "opskew-profile-cycle2").read_text())
    ev = raw["traceEvents"]
    steps = [e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")]
    per_step = [sum(1 for e in ev if e.get("cat") in ("cpu_op", "user_annotation") and e not in steps
                    and ps["ts"] <= e["ts"] and e["ts"] + e["dur"] <= ps["ts"] + ps["dur"]) for ps in steps]
    assert sorted(per_step)[len(per_step) // 2] == last["events_per_active_step"] > 50
    assert any(e.get("name", "").startswith("Optimizer.step#SGD") for e in ev)
    # The raw trace is torch's, the corrected one carries the run's report.
    assert sum(1 for e in raw["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")) == 4
    corrected = json.loads(corrected_trace(out, "opskew-profile-cycle2").read_text())
    run = corrected["opskew"]["run"]
    assert run["cycle"] == 2
    # It says in words what it is, for whoever opens it (Perfetto, an editor).
    assert run["about"].startswith("Corrected by opskew: not the profiler's raw record.")
    assert "the run's final W" in run["about"] and str(raw_trace(out, "opskew-profile-cycle2")) in run["about"]
    # Both traces carry the run's final W, from all its steps (the wait steps
    # after cycle 2 pair too): cycle 1's was corrected at the end.
    final = doc["final"]
    assert final["pairs"] >= 6 and final["w_ns"]["ci95"] is not None
    first = doc["reports"][0]
    # Its own cycle had too few pairs (3): its W came from its active steps
    # against the bare steps before it, as two samples (docs/profile.md,
    # "Schedules with few wait steps").
    assert first["pairs"] < 6 and first["two_sample"]["bare_steps"] >= 6
    assert first["w_ns"]["ci95"] is not None and "two samples" in first["w_ns"]["ci_method"]
    for r, n in ((first, 1), (last, 2)):
        assert r["corrected_with"] == "the run's final W" and r["corrected_w_ns"] == final["w_ns"]
        c = json.loads(corrected_trace(out, f"opskew-profile-cycle{n}").read_text())["opskew"]
        # (a negative W, noise on a busy machine, corrects as 0)
        assert c["corrected"]["w_ns"] == pytest.approx(max(final["w_ns"]["median"], 0.0)) and c["run"]["cycle"] == n
    assert "opskew profile: 2 trace(s), 2 corrected (each with the run's final W)" in p.stderr and "W " in p.stderr
    assert "profiler_start" not in p.stderr  # Kineto's own log lines are quiet
    assert "Profiler clears events" not in p.stderr  # torch's warning about a profiler the script never sees


def test_script_raising_in_an_active_step_keeps_what_was_collected(tmp_path):
    """Iteration 25 is step 24, the 3rd active step of cycle 2 (22-25): the
    cycle in progress is finished and written, the cut step is marked
    partial and not used, and the exit status is the script's."""
    out = tmp_path / "prof"
    hook = "if i == 25: raise RuntimeError('loss is nan')"
    p = run_opskew("profile", "-o", str(out), *SMALL, "--", sys.executable, script(tmp_path, hook), "40")
    assert p.returncode == 1, p.stderr
    assert "RuntimeError: loss is nan" in p.stderr  # the script's own traceback
    assert "the traces and report hold what ran until then" in p.stderr
    # 4 pairs in all: too few for the paired 95% CI; the 4 warm active steps
    # against the 7 bare steps before the first cycle give one (two samples,
    # docs/profile.md "Schedules with few wait steps"), so both traces are
    # corrected, and a note says what to change for pairs.
    assert traces(out) == EXPECTED
    doc = report(out)
    assert doc["ended_by"] == "the script raised RuntimeError: loss is nan"
    last = doc["step_times_ns"][-1]
    assert last["partial"] is True and last["phase"] == "active"
    assert last["step"] == 24
    # Cycle 1: 3 pairs (its first active step is cold); cycle 2: step 23
    # (22 is cold, 24 was cut short).
    assert doc["reports"][-1]["cycle"] == 2 and doc["reports"][-1]["pairs"] == 3 + 1
    assert doc["reports"][-1]["two_sample"] == {"active_steps": 4, "bare_steps": 7,
                                                "p": doc["reports"][-1]["two_sample"]["p"]}
    assert any(n.endswith(ADVICE) for n in all_words(doc["reports"][-1]["notes"]))


def test_exit_status_and_sigterm(tmp_path):
    out = tmp_path / "prof"
    p = run_opskew("profile", "-o", str(out), *SMALL, "--", sys.executable,
                   script(tmp_path, "if i == 30: sys.exit(3)"), "40")
    assert p.returncode == 3 and "exited with status 3" in p.stderr
    assert report(out)["ended_by"] == "sys.exit(3)" and len(report(out)["reports"]) == 2
    # SIGTERM to opskew is forwarded; the run's traces so far are kept.
    out2 = tmp_path / "prof2"
    slow = script(tmp_path, "import time; time.sleep(0.02)", "slow.py")
    proc = subprocess.Popen([sys.executable, "-m", "opskew", "profile", "-o", str(out2), *SMALL,
                             "--repeat", "0", "--", sys.executable, slow, "100000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONFAULTHANDLER="1"))
    deadline = time.monotonic() + 120
    try:
        while not raw_trace(out2, "opskew-profile-cycle1").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
    except BaseException:
        kill_tree(proc)
        raise
    time.sleep(0.5)  # into the next cycle
    proc.send_signal(signal.SIGTERM)
    _, err = communicate_or_diagnose(proc)
    assert proc.returncode == 130, err
    doc = report(out2)
    assert doc["ended_by"] == "SIGTERM" and len(doc["reports"]) >= 1
    assert "the command was interrupted" in err


def test_stands_aside_for_the_scripts_own_profiler(tmp_path):
    """The script starts torch.profiler itself at step 20 (cycle 2's wait
    steps): opskew stops there, says so, keeps cycle 1's trace, and the
    script's profiler sees only its own steps (before this, both ran at
    once and mixed their events: opskew's ProfilerStep ranges in the
    script's table, W at -2 us)."""
    hook = ("if i == 20: prof = torch.profiler.profile(); prof.start()\n"
            "    if i == 25:\n"
            "        prof.stop(); ka = prof.key_averages()\n"
            "        print('own', sum(e.count for e in ka if e.key == 'aten::linear'),"
            " sum(e.count for e in ka if e.key.startswith('ProfilerStep')))")
    out = tmp_path / "prof"
    p = run_opskew("profile", "-o", str(out), *SMALL, "--", sys.executable, script(tmp_path, hook), "40")
    assert p.returncode == 0, p.stderr
    assert "trained 40" in p.stdout and "own 10 0" in p.stdout  # 5 steps x 2 Linear, no ProfilerStep
    assert "opskew stood aside at step boundary 20: the script starts its own torch.profiler" in p.stderr
    doc = report(out)
    assert doc["stood_aside"] == "at step boundary 20, for the script's own torch.profiler"
    assert len(doc["reports"]) == 1 and traces(out)[-1] == "opskew-profile-cycle1.pt.trace.json"
    assert "opskew profile: opskew stood aside at step boundary 20" in p.stderr
    # From the start: no trace at all, and the line says why.
    out2 = tmp_path / "prof2"
    # (stopped: torch 2.13 itself crashes at exit with a profiler never stopped)
    early = "if i == 0: prof = torch.profiler.profile(); prof.start()\n    if i == 5: prof.stop()"
    p = run_opskew("profile", "-o", str(out2), *SMALL, "--", sys.executable, script(tmp_path, early, "e.py"), "20")
    assert p.returncode == 0, p.stderr
    assert "it stopped before a cycle completed: no trace" in p.stderr and report(out2)["reports"] == []


def test_step_marker_and_manual_steps(tmp_path):
    body = textwrap.dedent("""\
        import sys, torch
        torch.set_num_threads(1)
        a = torch.ones(4)
        for i in range(30):
            with torch.profiler.record_function("train_step"):
                for _ in range(50):
                    a = a + 1
            MANUAL
        """)
    marker = tmp_path / "marker.py"
    marker.write_text(body.replace("MANUAL", "pass"))
    out = tmp_path / "m"
    p = run_opskew("profile", "-o", str(out), *SMALL, "--step-marker", "train_step", "--",
                   sys.executable, str(marker))
    assert p.returncode == 0, p.stderr
    doc = report(out)
    assert doc["step_source"] == "ends of record_function('train_step')" and doc["step_boundaries"] == 30
    assert len(doc["reports"]) == 2 and doc["reports"][-1]["events_per_active_step"] >= 50
    # opskew.step() by hand; without opskew profile the call does nothing.
    manual = tmp_path / "manual.py"
    manual.write_text("import opskew\n" + body.replace("MANUAL", "opskew.step()"))
    out = tmp_path / "h"
    p = run_opskew("profile", "-o", str(out), *SMALL, "--", sys.executable, str(manual))
    assert p.returncode == 0, p.stderr
    doc = report(out)
    assert doc["step_source"] == "opskew.step() calls" and doc["step_boundaries"] == 30
    alone = subprocess.run([sys.executable, str(manual)], capture_output=True, text=True, timeout=120)
    assert alone.returncode == 0, alone.stderr


def test_no_step_seen_and_refusals(tmp_path):
    code = "import torch; [torch.ones(2) + 1 for _ in range(100)]"
    out = tmp_path / "n"
    p = run_opskew("profile", "-o", str(out), "--", sys.executable, "-c", code)
    assert p.returncode == 0, p.stderr
    assert "no cycle completed (0 step boundaries from an optimizer (none stepped)" in p.stderr
    assert "the first cycle needs 39: --skip-first 10" in p.stderr  # 10 + 21 + 1 + 7
    assert "--step-marker NAME" in p.stderr and "opskew.step()" in p.stderr
    assert report(out)["reports"] == []
    # An optimizer stepping in a helper thread does not take the steps over.
    thr = ("import threading, torch\n"
           "def work():\n"
           "    m = torch.nn.Linear(4, 4); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
           "    for _ in range(40): o.zero_grad(); m(torch.ones(2, 4)).sum().backward(); o.step()\n"
           "t = threading.Thread(target=work); t.start(); t.join()\n")
    p = run_opskew("profile", "-o", str(tmp_path / "t"), "--", sys.executable, "-c", thr)
    assert p.returncode == 0 and "no cycle completed (0 step boundaries" in p.stderr, p.stderr
    assert "40 optimizer step() calls on threads other than the main one" in " ".join(report(tmp_path / "t")["notes"])
    notdir = tmp_path / "file"
    notdir.write_text("keep")
    p = run_opskew("profile", "-o", str(notdir), "--", sys.executable, "-c", code)
    assert p.returncode == 2 and "not a folder" in p.stderr and notdir.read_text() == "keep"
    # A report.json that is not opskew's is never replaced.
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "report.json").write_text('{"accuracy": 0.9}')
    p = run_opskew("profile", "-o", str(theirs), "--", sys.executable, "-c", code)
    assert p.returncode == 2 and "report.json there is not opskew's" in p.stderr
    assert (theirs / "report.json").read_text() == '{"accuracy": 0.9}'
    # Nor a job-summary.json that is not opskew's (a torchrun job writes one).
    (theirs / "report.json").unlink()
    (theirs / "job-summary.json").write_text('{"mine": 1}')
    p = run_opskew("profile", "-o", str(theirs), "--", sys.executable, "-c", code)
    assert p.returncode == 2 and "job-summary.json there is not opskew's" in p.stderr
    assert (theirs / "job-summary.json").read_text() == '{"mine": 1}'
    p = run_opskew("profile", "--wait", "0", "--", sys.executable, "-c", code, cwd=str(tmp_path))
    assert p.returncode == 2 and "--wait must be 1 or more" in p.stderr
    p = run_opskew("profile", "--", "ls", cwd=str(tmp_path))
    assert p.returncode == 2 and "Python interpreter" in p.stderr
    assert not os.path.exists(tmp_path / "opskew-profile")  # nothing created by a refusal


def test_steps_skipped_by_gradscaler_still_end_their_iteration(tmp_path):
    """AMP's GradScaler skips optimizer.step() when the gradients overflow:
    the iteration ends at scaler.step() all the same (no two iterations in
    one step)."""
    import torch

    if not hasattr(torch, "amp") or not hasattr(torch.amp, "GradScaler"):
        pytest.skip("this torch has no torch.amp.GradScaler for the CPU")
    script = tmp_path / "amp_train.py"
    script.write_text(textwrap.dedent("""\
        import torch
        torch.set_num_threads(1)
        m = torch.nn.Linear(8, 4)
        opt = torch.optim.SGD(m.parameters(), lr=0.01)
        scaler = torch.amp.GradScaler("cpu")
        x = torch.randn(4, 8)
        for i in range(30):
            opt.zero_grad()
            loss = m(x).sum()
            if i % 4 == 1:
                loss = loss * float("inf")  # an overflow: the scaler skips this step
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        """))
    out = tmp_path / "o"
    p = run_opskew("profile", "-o", str(out), *SMALL, "--", sys.executable, str(script), cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    r = report(out)
    assert r["step_boundaries"] == 30 and r["scaler_skipped_steps"] == 8  # i = 1, 5, ..., 29
    assert any("GradScaler" in n for n in r["notes"])
    assert len(r["reports"]) == 2  # 26 steps make the 2 cycles of 13


def test_spawned_workers_are_named_when_no_step_was_seen(tmp_path):
    """Training in processes the script starts (torch.multiprocessing.spawn)
    is not followed: the run sees no step, and says why and what to do."""
    script = tmp_path / "spawn_train.py"
    script.write_text(textwrap.dedent("""\
        import torch, torch.multiprocessing as mp

        def worker(i):
            torch.set_num_threads(1)
            m = torch.nn.Linear(4, 4)
            opt = torch.optim.SGD(m.parameters(), lr=0.01)
            for _ in range(30):
                opt.zero_grad()
                m(torch.ones(2, 4)).sum().backward()
                opt.step()

        if __name__ == "__main__":
            mp.spawn(worker, nprocs=2)
        """))
    out = tmp_path / "o"
    p = run_opskew("profile", "-o", str(out), *SMALL, "--", sys.executable, str(script), cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "no cycle completed (0 step boundaries" in p.stderr
    assert "started 2 process(es) through multiprocessing" in p.stderr and "torchrun" in p.stderr
    assert report(out)["child_processes"] == 2 and report(out)["reports"] == []
    # A run that trains in its own process says nothing of the kind.
    p = run_opskew("profile", "-o", str(tmp_path / "n"), "--", sys.executable, "-c", "import torch", cwd=str(tmp_path))
    assert p.returncode == 0 and "through multiprocessing" not in p.stderr
    assert report(tmp_path / "n")["child_processes"] == 0


@pytest.mark.gpu
def test_cuda(tmp_path):
    """--device cuda: CUDA activity recorded, steps timed to the device's
    completion. Without a device: refused in one line, exit 2."""
    import torch

    path = tmp_path / "cuda_train.py"
    path.write_text(TRAIN.format(hook="pass").replace("x, y = torch.randn(8, 16), torch.randn(8, 4)",
                                               "model = model.cuda(); opt = torch.optim.SGD(model.parameters(), "
                                               "lr=0.01)\nx, y = torch.randn(8, 16).cuda(), "
                                               "torch.randn(8, 4).cuda()"))
    out = tmp_path / "c"
    p = run_opskew("profile", "-o", str(out), *SMALL, "--device", "cuda", "--", sys.executable, str(path), "40")
    if not torch.cuda.is_available():
        assert p.returncode == 2 and "sees no CUDA device" in p.stderr, p.stderr
        assert not (out / "report.json").exists()
        pytest.skip("no CUDA device: the refusal is checked, the CUDA run is not")
    assert p.returncode == 0, p.stderr
    doc = report(out)
    assert doc["conditions"]["device"] == "cuda" and len(doc["reports"]) == 2
    raw = json.loads(raw_trace(out, "opskew-profile-cycle2").read_text())
    assert any(e.get("cat") == "kernel" for e in raw["traceEvents"])


DDP = """\
import os, sys
import torch, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo")
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
model = torch.nn.parallel.DistributedDataParallel(net)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 16), torch.randn(8, 4)
for i in range(int(sys.argv[1])):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
dist.destroy_process_group()
sys.stdout.write("rank %s done\\n" % os.environ["RANK"])  # one write: the ranks share stdout
"""


def test_torchrun_job_two_ranks_on_gloo(tmp_path):
    """`opskew profile -- torchrun ... SCRIPT`: each rank (a worker torchrun
    starts) measures its own W and writes its traces and report under its
    rank; the job report gathers them."""
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    if not os.path.exists(torchrun):
        pytest.skip("no torchrun beside this Python")
    (tmp_path / "ddp.py").write_text(DDP)
    out = tmp_path / "job"
    p = run_opskew("profile", "-o", str(out), *SMALL, "--", torchrun, "--nproc-per-node", "2", "--standalone",
                   str(tmp_path / "ddp.py"), "30", cwd=str(tmp_path), timeout=240,
                   env={"TMPDIR": str(tmp_path)})  # torchrun's own log folder lands here
    assert p.returncode == 0, p.stderr
    assert "rank 0 done" in p.stdout and "rank 1 done" in p.stdout
    names = set(os.listdir(out)) | set(os.listdir(out / "traces")) | set(os.listdir(out / "traces" / "corrected"))
    for r in (0, 1):
        assert {f"opskew-profile-rank{r}-cycle1.pt.trace.json", f"opskew-profile-rank{r}-cycle2.pt.trace.json",
                f"opskew-profile-rank{r}-cycle2.corrected.pt.trace.json", f"report.rank{r}.json"} <= names
        doc = json.loads((out / f"report.rank{r}.json").read_text())
        assert doc["rank"] == r and doc["world_size"] == 2 and len(doc["reports"]) == 2
        assert doc["reports"][-1]["pairs"] == 6
    job = report(out)
    assert job["schema"] == "opskew.profile.job/1" and [r["rank"] for r in job["ranks"]] == [0, 1]
    assert all(r["w_ns"] is not None and r["traces"] == 2 for r in job["ranks"])
    assert "opskew profile: 2 rank(s)" in p.stderr and "  rank 1: W " in p.stderr
    # `opskew summary --corrected-dir` corrects each rank's traces with its own
    # W and what opskew.profile's own correction got from the cycle's report:
    # its delta, and the ProfilerStep#N ranges held to the bodies it timed.
    from opskew.analyze.tracefile import correct, summarize
    from opskew.stats.costmodel import CostModel

    cor = tmp_path / "cor"
    p = run_opskew("summary", str(out), "--corrected-dir", str(cor))
    assert p.returncode == 0, p.stderr
    for r in (0, 1):
        doc = json.loads((out / f"report.rank{r}.json").read_text())
        rep = doc["reports"][-1]
        name = f"opskew-profile-rank{r}-cycle2"
        t = json.loads((cor / f"{name}.corrected.pt.trace.json").read_text())
        job = t["opskew"]["run"]["job"]
        assert job["rank"] == r and job["cycle_report"] == f"cycle {rep['cycle']} of opskew profile's report"
        assert set(rep["step_spans_ns"]) <= set(job["spans"]) and job["delta_ns"] == rep["delta_ns"]

        def steps(path):
            return {o["name"]: o["total_ns"] for o in summarize(str(path), categories=["user_annotation"])["ops"]
                    if o["name"] in rep["step_spans_ns"]}

        held = steps(cor / f"{name}.corrected.pt.trace.json")
        # The same correction without the spans: every range longer by the
        # part of step() inside it (a few us each).
        correct(str(raw_trace(out, name)), CostModel.default(job["w_ns"], job["delta_ns"], job["w_py_ns"]), str(tmp_path / f"{name}.nospans.json"))
        loose = steps(tmp_path / f"{name}.nospans.json")
        assert held.keys() == loose.keys() == rep["step_spans_ns"].keys()
        assert all(held[k] <= loose[k] for k in held) and sum(held.values()) < sum(loose.values())
    # Without the reports, a trace's cycle report comes from the corrected
    # trace opskew profile wrote for it (its "opskew" metadata): in the
    # folder corrected/ beside it, or beside it under the name earlier
    # versions gave it (NAME.corrected.json).
    import shutil

    alone, legacy = tmp_path / "alone", tmp_path / "legacy"
    (alone / "corrected").mkdir(parents=True)
    legacy.mkdir()
    for r in (0, 1):
        name = f"opskew-profile-rank{r}-cycle2"
        shutil.copy(raw_trace(out, name), alone)
        shutil.copy(corrected_trace(out, name), alone / "corrected")
        shutil.copy(raw_trace(out, name), legacy / f"{name}.json")
        shutil.copy(corrected_trace(out, name), legacy / f"{name}.corrected.json")
    for folder, ext, made in ((alone, ".pt.trace.json", ".corrected.pt.trace.json"),
                              (legacy, ".json", ".corrected.json")):
        p = run_opskew("summary", str(folder / f"opskew-profile-rank0-cycle2{ext}"),
                       str(folder / f"opskew-profile-rank1-cycle2{ext}"), "--w", "500", "--corrected-dir",
                       str(tmp_path / f"cor-{folder.name}"))
        assert p.returncode == 0, p.stderr
        for r in (0, 1):
            rep = json.loads((out / f"report.rank{r}.json").read_text())["reports"][-1]
            t = json.loads((tmp_path / f"cor-{folder.name}" / f"opskew-profile-rank{r}-cycle2{made}").read_text())
            job = t["opskew"]["run"]["job"]
            assert job["w_ns"] == 500 and set(rep["step_spans_ns"]) <= set(job["spans"])
            assert job["cycle_report"] == f"cycle {rep['cycle']} of opskew profile's report"
            assert t["opskew"]["run"]["about"].startswith("Corrected by opskew") and "W = 500 ns" in t["opskew"]["run"]["about"]
    # torchrun's own options are checked before anything runs.
    p = run_opskew("profile", "-o", str(out), "--", torchrun, "--no-python", "true", cwd=str(tmp_path))
    assert p.returncode == 2 and "--no-python" in p.stderr


def test_the_script_runs_as_its_own_python_would(tmp_path):
    """The script sees its interpreter's packages only (opskew's site-packages
    was put first on sys.path: a python without torch imported opskew's), an
    absolute __file__, no folder of its own on sys.path under -P, and torch's
    LR schedulers do not warn that optimizer.step was overridden."""
    out = tmp_path / "prof"
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    user = tmp_path / "user.py"
    user.write_text(textwrap.dedent("""\
        import os, sys, warnings
        warnings.simplefilter("error")  # any warning fails the script
        print("file", os.path.isabs(__file__), "argv0", sys.argv[0], __name__)
        try:
            import pkg
            print("sibling importable")
        except ImportError:
            print("sibling not importable")
        import torch
        m = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3)
        for _ in range(20):
            m(torch.randn(2, 4)).sum().backward()
            opt.step(); sched.step(); opt.zero_grad()
        print("lr", opt.param_groups[0]["lr"])
    """))
    p = run_opskew("profile", "-o", str(out), *SMALL, "--", sys.executable, str(user.relative_to(tmp_path)),
                   cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    plain = subprocess.run([sys.executable, "user.py"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.stdout == plain.stdout and "file True argv0 user.py __main__" in p.stdout, (p.stdout, plain.stdout)
    assert "sibling importable" in p.stdout
    p = run_opskew("profile", "-o", str(out), *SMALL, "--", sys.executable, "-P", str(user), cwd=str(tmp_path))
    assert "sibling not importable" in p.stdout, p.stdout + p.stderr
    # python -S has no site-packages: torch is not there, and opskew says so.
    p = run_opskew("profile", "-o", str(tmp_path / "s"), "--", sys.executable, "-S", str(user))
    assert p.returncode == 2 and "cannot import torch in the profiled interpreter" in p.stderr, p.stderr


def test_an_earlier_runs_traces_and_a_script_that_fails_first(tmp_path):
    out = tmp_path / "prof"
    assert run_opskew("profile", "-o", str(out), *SMALL, "--", sys.executable, script(tmp_path), "40").returncode == 0
    p = run_opskew("profile", "-o", str(out), *SMALL, "--repeat", "1", "--", sys.executable, script(tmp_path), "20")
    assert p.returncode == 0 and "holds 4 trace file(s) of an earlier run" in p.stderr, p.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("raise SystemExit('usage: bad.py N')\n")
    p = run_opskew("profile", "-o", str(tmp_path / "b"), "--", sys.executable, str(bad))
    assert p.returncode == 1, p.stderr
    assert "the script ended (sys.exit('usage: bad.py N')) before its first step boundary" in p.stderr
    assert "no trace was written" in p.stderr and "hold what ran until then" not in p.stderr


def test_the_last_line_counts_the_traces_report_json_no_longer_lists(tmp_path):
    """report.json keeps the latest 50 cycles' reports (earlier_reports counts
    the others): the last line counted 50 traces of an 88-cycle run and said
    all carried the final W."""
    from opskew.cli.commands.profile import _outcome

    final = {"w_ns": {"median": 500.0, "ci95": [400.0, 600.0]}, "pairs": 300, "cycles": 50, "run_cycles": 88}
    reps = [{"cycle": c, "corrected_trace": f"c{c}.corrected.json", "corrected_with": "the run's final W"}
            for c in range(39, 89)]
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"reports": reps, "earlier_reports": 38, "final": final,
                                "step_source": "the first optimizer that stepped (SGD)"}))
    line = _outcome(str(path))
    assert "88 trace(s), 50 of the latest 50 corrected (the latest 50 with the run's final W, the others with " \
           "their own cycle's)" in line, line
