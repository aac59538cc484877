"""PyTorch Lightning: `Trainer(profiler=OpskewProfiler(...))` (docs/lightning.md).

OpskewProfiler is Lightning's PyTorchProfiler with opskew.profile built
where Lightning builds torch.profiler.profile (opskew.profile passes
Lightning's checks: it is a torch.profiler.profile, with torch's signature,
and takes the attributes Lightning assigns). Its summary holds the corrected
table before Lightning's own."""

from __future__ import annotations

import inspect

try:
    from pytorch_lightning.profilers import PyTorchProfiler
    from pytorch_lightning.utilities.rank_zero import rank_zero_info
except ImportError:
    raise ImportError("opskew.integrations.lightning needs PyTorch Lightning: pip install 'opskew[lightning]'") \
        from None

import torch

from opskew.integrations.tables import DEFAULT_SCHEDULE, corrected_table
from opskew.profiler import profile, schedule_call
from opskew.render.frameworks import one_cycle_note, schedule_note

LIGHTNING_DEFAULT = "schedule(wait=1, warmup=1, active=3)"
# The step function whose ends are profiler steps, by Lightning's stage
# (Profiler.setup's `stage`, TrainerFn's value).
STAGE_STEPS = {"fit": "training_step", "validate": "validation_step", "test": "test_step",
               "predict": "predict_step"}


class OpskewProfiler(PyTorchProfiler):
    """Lightning's PyTorchProfiler, profiling with opskew.profile.

    Takes every argument PyTorchProfiler takes (dirpath, filename,
    group_by_input_shapes, emit_nvtx, export_to_chrome, row_limit,
    sort_by_key, record_module_names, table_kwargs, and torch.profiler's
    keywords) and opskew.profile's own (report_file, corrected_dir,
    threshold, measure_w_py, leaf_reference, cost_model).

    Without a `schedule`, it profiles with opskew's:
    schedule(skip_first=10, wait=21, warmup=1, active=7, repeat=3), whose
    wait steps give opskew its own W in the run; Lightning's default
    (wait=1, warmup=1, active=3) gives none. Lightning records the first
    cycle of each stage (fit, validate, ...), so a fit needs 39 training
    steps for its trace. The profiler steps on the steps of one loop: the
    training steps in a fit, that stage's steps otherwise.

    Traces go where Lightning puts them (`dirpath`, else the trainer's log
    folder), corrected ones into `corrected/` there. `summary()` (printed at
    the end of fit) holds the corrected table, then Lightning's own;
    `corrected_averages()` gives the corrected rows; `prof` is the stage's
    opskew.profile.
    """

    def __init__(self, *args, **kwargs):
        self.default_schedule = "schedule" not in kwargs and not kwargs.get("emit_nvtx")
        if self.default_schedule:
            kwargs["schedule"] = torch.profiler.schedule(**DEFAULT_SCHEDULE)
        super().__init__(*args, **kwargs)
        self.prof = None  # the stage's opskew.profile, kept after Lightning lets it go
        self._stepped_by = None  # the step function whose ends are profiler steps

    def _create_profilers(self) -> None:
        if self.profiler is not None or self._emit_nvtx:
            super()._create_profilers()
            return
        self._parent_profiler = None
        self.profiler = self.prof = self._create_profiler(profile)
        self._stepped_by = None
        if self.default_schedule:
            rank_zero_info(self._schedule_note())

    def _schedule_note(self) -> str:
        return schedule_note(schedule_call(DEFAULT_SCHEDULE), "Lightning", LIGHTNING_DEFAULT)

    def stop(self, action_name: str) -> None:
        func = next((f for f in self.STEP_FUNCTIONS if action_name.endswith(f)), None)
        if func is not None and self.profiler is not None and not self._emit_nvtx:
            if self._stepped_by is None:
                stage = getattr(self, "_stage", None)
                self._stepped_by = STAGE_STEPS.get(getattr(stage, "value", stage), func)
            if func != self._stepped_by:
                # Another loop's step (a fit's validation): its time stays in
                # the training step it ran in; only its range is closed.
                rec = self._recording_map.pop(action_name, None)
                if rec is not None:
                    rec.__exit__(None, None, None)
                return
        super().stop(action_name)

    def _cache_functions_events(self) -> None:
        if not self._emit_nvtx and self.profiler is not None and getattr(self.profiler, "profiler", None) is None:
            # No cycle was recorded (a fit shorter than the schedule's first
            # cycle): torch's events() would raise, and Lightning's teardown
            # with it.
            self.function_events = None
            return
        super()._cache_functions_events()

    def summary(self) -> str:
        text = super().summary()
        if text or self.prof is None or self._emit_nvtx:
            return text
        return self._stats_to_str({})  # no trace: the corrected part says why

    def _stats_to_str(self, stats: dict) -> str:
        if self.prof is None:
            return super()._stats_to_str(stats)
        heading, text, rows = corrected_table(self.prof, sort_by=self._sort_by_key, row_limit=self._row_limit,
                                              **self._table_kwargs)
        notes = [self._schedule_note()] if self.default_schedule else []
        if not rows and not self.default_schedule:
            notes.append(one_cycle_note("Lightning"))
        if self._group_by_input_shapes:
            notes.append("opskew: the corrected table is by name (group_by_input_shapes is for the raw one below)")
        ours = "\n".join([text, *notes])
        return super()._stats_to_str({f"records, {heading}": ours,
                                      **{f"{k}, as reported by torch.profiler": v for k, v in stats.items()}})

    def corrected_averages(self, **kwargs):
        """The stage's corrected key_averages() (opskew.profile.corrected_averages)."""
        if self.prof is None:
            raise ValueError("corrected_averages(): nothing profiled yet")
        return self.prof.corrected_averages(**kwargs)


# Its arguments are PyTorchProfiler's (inspect.signature shows them).
OpskewProfiler.__init__.__signature__ = inspect.signature(PyTorchProfiler.__init__)
