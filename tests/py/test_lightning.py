"""PyTorch Lightning with opskew (docs/lightning.md): OpskewProfiler in a
real Trainer fit on the CPU, and Lightning's own PyTorchProfiler with its
profiler class swapped for opskew.profile."""

import glob
import os
import subprocess
import sys
import types

import pytest

torch = pytest.importorskip("torch")
pl = pytest.importorskip("pytorch_lightning")

import pytorch_lightning.profilers.pytorch as pl_pytorch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import opskew  # noqa: E402
from opskew.integrations.lightning import OpskewProfiler  # noqa: E402


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))

    def training_step(self, batch, i):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def validation_step(self, batch, i):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Keep(pl.Callback):
    """Keeps the profiler object Lightning built (it drops it at teardown)."""

    def on_train_end(self, trainer, module):
        self.prof = trainer.profiler.profiler


def fit(profiler, steps, validate=False):
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(8 * steps, 16), torch.randn(8 * steps, 1))
    keep = Keep()
    extra = dict(limit_val_batches=2, val_check_interval=20, num_sanity_val_steps=2) if validate else \
        dict(limit_val_batches=0, num_sanity_val_steps=0)
    trainer = pl.Trainer(max_steps=steps, profiler=profiler, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, accelerator="cpu", callbacks=[keep],
                         **extra)
    trainer.fit(Tiny(), DataLoader(data, batch_size=8), DataLoader(data, batch_size=8) if validate else None)
    return keep.prof


def read(path):
    with open(path) as f:
        return f.read()


def test_opskew_profiler_corrects_a_fit_with_its_own_schedule_and_summarizes_both_tables(tmp_path):
    prof = OpskewProfiler(dirpath=str(tmp_path), filename="perf", report_file=None)
    assert prof.default_schedule
    p = fit(prof, 45, validate=True)  # opskew's schedule: the trace after 39 training steps
    assert isinstance(p, opskew.profile) and p is prof.prof
    assert p.step_counts()["active"] == 7  # training steps only: the validation steps are not profiler steps
    rep = p.report
    assert rep["w_source"] == "in-run" and rep["pairs"] == 6, rep
    raw = glob.glob(str(tmp_path / "fit-perf-*.pt.trace.json"))
    corrected = glob.glob(str(tmp_path / "corrected" / "fit-perf-*.corrected.*.pt.trace.json"))
    assert len(raw) == 1 and corrected == [rep["corrected_trace"]], (raw, corrected, os.listdir(tmp_path))
    text = read(tmp_path / "fit-perf.txt")
    first, second = text.index("records, corrected by opskew with W"), text.index("as reported by torch.profiler")
    assert first < second and "Trust" in text[first:second] and "ProfilerStep*" in text[first:second]
    assert "no schedule given: profiling with torch.profiler.schedule(skip_first=10, wait=21" in text
    assert {e.key for e in prof.corrected_averages()} >= {"ProfilerStep*", "aten::addmm"}


def test_lightnings_default_shape_is_corrected_by_the_in_process_model(tmp_path, monkeypatch):
    """Lightning's default schedule (wait=1, warmup=1, active=3) pairs too
    few steps for an in-run W: with nothing stored, the in-process model
    gives W (docs/profile.md), the trace is corrected and the summary's
    corrected table names the model. Where this busy machine made the
    model too noisy to use, the fit is run again (NOISE_ATTEMPTS); with the
    model off, the summary says there is no W."""
    from conftest import NOISE_ATTEMPTS

    monkeypatch.setenv("OPSKEW_CACHE_DIR", str(tmp_path / "empty-cache"))
    for attempt in range(NOISE_ATTEMPTS):
        out = tmp_path / f"a{attempt}"
        prof = OpskewProfiler(dirpath=str(out), filename="perf", report_file=None,
                              schedule=torch.profiler.schedule(wait=1, warmup=1, active=3))
        p = fit(prof, 20)
        if p.report["w_source"] == "in-process model":
            break
    assert p.step_counts()["active"] == 3 and p.report["w_source"] == "in-process model", p.report["fallback"]
    assert os.path.isfile(p.report["corrected_trace"])
    text = read(out / "fit-perf.txt")
    assert "records, corrected by opskew with W" in text and "(in-process model)" in text
    assert "as reported by torch.profiler" in text
    prof = OpskewProfiler(dirpath=str(tmp_path / "off"), filename="perf", report_file=None, cost_model="off",
                          schedule=torch.profiler.schedule(wait=1, warmup=1, active=3))
    p = fit(prof, 20)
    assert p.report["corrected_trace"] is None
    text = read(tmp_path / "off" / "fit-perf.txt")
    assert "opskew: no corrected table (no W for cycle 1)" in text
    assert "as reported by torch.profiler" in text and not os.path.exists(tmp_path / "off" / "corrected")


def test_a_fit_shorter_than_the_schedules_first_cycle_ends_with_a_summary_that_says_so(tmp_path):
    # Lightning's PyTorchProfiler raises at teardown there (torch's events() before any trace).
    prof = OpskewProfiler(dirpath=str(tmp_path), filename="perf", report_file=None)
    p = fit(prof, 10)
    assert p.reports == []
    text = read(tmp_path / "fit-perf.txt")
    assert "opskew: no corrected table: corrected_averages(): no trace yet" in text
    assert "as reported by torch.profiler" not in text


class Swapped(types.ModuleType):
    """A module `mod` with some of its names given other values."""

    def __init__(self, mod, **names):
        super().__init__(mod.__name__)
        self._mod = mod
        self.__dict__.update(names)

    def __getattr__(self, name):
        return getattr(self._mod, name)


def test_lightnings_own_profiler_runs_with_opskew_profile_swapped_in(tmp_path, monkeypatch):
    # The one change: the name Lightning's module builds its profiler from.
    monkeypatch.setattr(pl_pytorch, "torch", Swapped(torch, profiler=Swapped(torch.profiler, profile=opskew.profile)))
    prof = pl_pytorch.PyTorchProfiler(dirpath=str(tmp_path), filename="perf", record_shapes=True,
                                      profile_memory=True, with_flops=True, report_file=None, threshold=0.1,
                                      schedule=torch.profiler.schedule(wait=2, warmup=1, active=2))
    p = fit(prof, 12)
    assert isinstance(p, opskew.profile) and isinstance(p, torch.profiler.profile)
    for name in ("record_shapes", "profile_memory", "with_flops"):
        assert getattr(p, name) is True and getattr(p.prof, name) is True, name
    assert p._analysis.threshold == 0.1 and p._analysis.options["record_shapes"] is True
    assert p.prof.step_num == p.steps[-1]["step"] and p.prof.on_trace_ready == p._on_ready
    assert p.on_trace_ready is not None  # Lightning's handler, which exported the trace
    rep = p.reports[0]
    assert rep["raw_trace"].startswith(str(tmp_path)) and "Input Dims" in read(rep["raw_trace"])
    assert "record_shapes" in str(rep["cost_classes"])
    assert "Profile stats for: records" in read(tmp_path / "fit-perf.txt")


def test_the_integration_without_lightning_says_how_to_get_it_and_opskew_never_imports_it(tmp_path):
    (tmp_path / "pytorch_lightning.py").write_text("raise ImportError('not installed in this test')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", "import opskew.integrations.lightning"], capture_output=True,
                         text=True, timeout=120, env=env)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == ("ImportError: opskew.integrations.lightning needs PyTorch "
                                                   "Lightning: pip install 'opskew[lightning]'")
    code = ("import sys, opskew, opskew.integrations, opskew.profiler; "
            "assert not {'pytorch_lightning', 'lightning', 'transformers'} & set(sys.modules), 'imported'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
