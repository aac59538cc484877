"""Hugging Face transformers' Trainer with opskew (docs/huggingface.md):
OpskewProfilerCallback on a tiny GPT-2 built from its config (nothing
downloaded), random tokens, on the CPU."""

import glob
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer's own requirement

import opskew  # noqa: E402
from opskew.integrations.hf import OpskewProfilerCallback  # noqa: E402
from opskew.profiler import ADVISED_SCHEDULE  # noqa: E402


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        ids = torch.randint(0, 512, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


def train(tmp_path, callback, steps):
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=64,
                                     bos_token_id=0, eos_token_id=0)
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=steps,
                                          per_device_train_batch_size=2, report_to=[], use_cpu=True,
                                          logging_strategy="no", save_strategy="no", disable_tqdm=True)
    trainer = transformers.Trainer(model=transformers.GPT2LMHeadModel(config), args=args, train_dataset=Tokens(),
                                   callbacks=[callback])
    trainer.train()
    return trainer


def test_the_callback_profiles_the_steps_and_writes_raw_and_corrected_traces_in_tensorboards_layout(tmp_path):
    logs = tmp_path / "tb"
    cb = OpskewProfilerCallback(log_dir=str(logs), report_file=None, activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=torch.profiler.schedule(skip_first=2, wait=8, warmup=1, active=7, repeat=1))
    train(tmp_path, cb, 20)
    p = cb.prof
    assert isinstance(p, opskew.profile) and p.step_counts()["active"] == 7
    rep = p.report
    assert rep["w_source"] == "in-run" and rep["pairs"] == 6, rep
    raw = glob.glob(str(logs / "*.pt.trace.json"))
    assert raw == [rep["raw_trace"]] and glob.glob(str(logs / "corrected" / "*.corrected.*.pt.trace.json")) == \
        [rep["corrected_trace"]]
    rows = {e.key: e for e in p.corrected_averages()}
    assert "ProfilerStep*" in rows and rows["ProfilerStep*"].count == 7
    text = cb.summary()
    assert text.startswith("opskew: the profiled steps, corrected by opskew with W") and "Trust" in text
    assert "no schedule given" not in text


def test_without_a_schedule_it_takes_opskews_and_the_log_folder_is_tensorboards(tmp_path, monkeypatch):
    cb = OpskewProfilerCallback(report_file=None)
    assert cb.default_schedule
    sched = cb.profile_kwargs["schedule"]
    ours = torch.profiler.schedule(**ADVISED_SCHEDULE)
    assert [sched(i) for i in range(120)] == [ours(i) for i in range(120)]
    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    train(tmp_path, cb, 3)  # no trace in 3 steps: the summary says why
    assert cb.log_dir == os.path.join(str(tmp_path / "out"), "runs", "opskew")
    assert cb.prof.reports == [] and cb.summary().startswith("opskew: the profiled steps, corrected by opskew")
    assert "no schedule given: profiling with torch.profiler.schedule(skip_first=10, wait=21" in cb.summary()


def test_the_integration_without_transformers_says_how_to_get_it(tmp_path):
    (tmp_path / "transformers.py").write_text("raise ImportError('not installed in this test')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", "import opskew.integrations.hf"], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == ("ImportError: opskew.integrations.hf needs Hugging Face "
                                                   "transformers: pip install 'opskew[hf]'")
