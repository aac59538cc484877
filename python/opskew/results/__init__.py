"""Typed results: one class per command, and the profile's cycle and run
reports. No torch, no formatting of their own (their text and HTML come
from opskew.render). `load(path)` reads any of them back from its JSON."""

from opskew.results.base import Result, load
from opskew.results.commands import (AdviseResult, CalibrationsResult, CheckResult, CompareResult,
                                     CorrectResult, MatrixResult, SummaryResult, SweepResult)
from opskew.results.profile import CycleReport, ProfileResult, RunReport

__all__ = ["AdviseResult", "CalibrationsResult", "CheckResult", "CompareResult", "CorrectResult",
           "CycleReport", "MatrixResult", "ProfileResult", "Result", "RunReport", "SummaryResult", "SweepResult",
           "load"]
