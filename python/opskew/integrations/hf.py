"""Hugging Face transformers: `Trainer(..., callbacks=[OpskewProfilerCallback()])`
(docs/huggingface.md).

The callback profiles the training steps with opskew.profile: it starts the
profiler when training begins, steps it at the end of each optimizer step
and stops it when training ends. Traces go in TensorBoard's layout, raw in
the log folder and corrected in its `corrected/`."""

from __future__ import annotations

import os

try:
    from transformers import TrainerCallback
    from transformers.utils import logging
except ImportError:
    raise ImportError("opskew.integrations.hf needs Hugging Face transformers: pip install 'opskew[hf]'") from None

import torch

from opskew.integrations.tables import DEFAULT_SCHEDULE, corrected_table
from opskew.profiler import profile, schedule_call
from opskew.render.frameworks import schedule_note

logger = logging.get_logger(__name__)


def log_dir_of(args) -> str:
    """Where TensorBoard's files of this training go: the arguments'
    logging_dir (transformers 4), else TENSORBOARD_LOGGING_DIR, else
    OUTPUT_DIR/runs/opskew."""
    return (getattr(args, "logging_dir", None) or os.environ.get("TENSORBOARD_LOGGING_DIR")
            or os.path.join(args.output_dir, "runs", "opskew"))


class OpskewProfilerCallback(TrainerCallback):
    """Profiles a Trainer's steps with opskew.profile.

    `log_dir`: where the traces go (default: log_dir_of(args) at the
    start of training), raw through torch.profiler.tensorboard_trace_handler
    and corrected in `corrected/` there. Every other keyword is
    opskew.profile's (torch.profiler.profile's and opskew's own). Without
    a `schedule`, opskew's: schedule(skip_first=10, wait=21, warmup=1,
    active=7, repeat=3), whose wait steps give opskew its own W in the run
    (97 steps; the first trace after 39). Without `activities`, torch's
    default. With an `on_trace_ready` of yours, it exports instead.

    After training, `prof` is the opskew.profile (its `reports`, `final`,
    `corrected_averages()`), and `summary()` the corrected table, which is
    also logged (at info level).
    """

    def __init__(self, log_dir=None, **profile_kwargs):
        self.log_dir = log_dir
        self.default_schedule = "schedule" not in profile_kwargs
        if self.default_schedule:
            profile_kwargs["schedule"] = torch.profiler.schedule(**DEFAULT_SCHEDULE)
        self.profile_kwargs = profile_kwargs
        self.prof = None

    def on_train_begin(self, args, state, control, **kwargs):
        kw = dict(self.profile_kwargs)
        if "on_trace_ready" not in kw:
            self.log_dir = self.log_dir or log_dir_of(args)
            kw["on_trace_ready"] = torch.profiler.tensorboard_trace_handler(self.log_dir)
        if self.default_schedule:
            logger.info(self._schedule_note())
        self.prof = profile(**kw)
        self.prof.__enter__()

    def on_step_end(self, args, state, control, **kwargs):
        if self.prof is not None:
            self.prof.step()

    def on_train_end(self, args, state, control, **kwargs):
        if self.prof is None:
            return
        self.prof.__exit__(None, None, None)
        logger.info(self.summary())

    def _schedule_note(self) -> str:
        return schedule_note(schedule_call(DEFAULT_SCHEDULE), "torch.profiler", "no schedule: every step active")

    def summary(self, sort_by="self_cpu_time_total", row_limit=20) -> str:
        """The corrected table of the latest trace, with what corrected it (or why there is none)."""
        if self.prof is None:
            return "opskew: nothing profiled yet"
        heading, text, _ = corrected_table(self.prof, sort_by=sort_by, row_limit=row_limit)
        notes = [self._schedule_note()] if self.default_schedule else []
        return "\n".join([f"opskew: the profiled steps, {heading}", text, *notes])
