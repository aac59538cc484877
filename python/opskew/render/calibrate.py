"""The text of `opskew calibrate` for people: a run's calibrations, the stored
ones (--show) and what --clear removed."""

from __future__ import annotations

import sys

from opskew.render import answers
from opskew.render.notes import words
from opskew.render.units import count_of, fmt_ns


def _constants(cal: dict) -> str:
    w, d = cal["w_ns"], cal["delta_ns"]
    text = (f"W {fmt_ns(w['median'])} [{fmt_ns(w['ci95'][0])}, {fmt_ns(w['ci95'][1])}]  "
            f"delta {fmt_ns(d['median'])}")
    rng = d.get("range")
    if isinstance(rng, list) and len(rng) == 2:
        text += f" [{fmt_ns(rng[0])}, {fmt_ns(rng[1])} by operator]"
    wp = cal.get("w_py_ns")
    if wp:
        text += (f"  W_py {fmt_ns(wp['median'])} [{fmt_ns(wp['ci95'][0])}, {fmt_ns(wp['ci95'][1])}]  "
                 f"delta_py {fmt_ns(cal['delta_py_ns']['median'])}")
    steps = cal.get("w_by_step")
    if isinstance(steps, dict) and all(isinstance(steps.get(k), dict) for k in ("inference", "micro")):
        text += (f"  (training step; inference step {fmt_ns(steps['inference']['median'])} "
                 f"[{fmt_ns(steps['inference']['ci95'][0])}, {fmt_ns(steps['inference']['ci95'][1])}], "
                 f"torch.add {fmt_ns(steps['micro']['median'])})")
    elif "workload" in cal.get("key", {}) and cal["key"]["workload"] != "builtin:add":
        text += f"  (on {cal['key']['workload']})"
    return text


def print_stored(directory: str, cals: list, out=None) -> None:
    """--show: the stored calibrations in `directory` (calibration.store.stored)."""
    out = out or sys.stdout  # looked up per call: a redirected or captured stdout is honoured
    out.write(f"calibrations in {directory}: {len(cals)}\n")
    for cal in cals:
        k = cal["key"]
        v = cal.get("validation") or {}
        out.write(f"  {k['instrument']:15s} {k['config']:28s} {_constants(cal)}  "
                  f"torch {k['torch']}, {k['device']}, {count_of(k['threads'], 'thread')}, {cal['date']}"
                  + ("" if not v else f", validation {'ok' if v.get('ok') else 'FAILED'}") + "\n")
        out.write(f"      {cal['_path']}\n")


def print_cleared(directory: str, removed: list, left: list, out=None) -> None:
    """--clear: what was removed from `directory`, and what was left."""
    out = out or sys.stdout
    out.write(f"calibrations in {directory}: removed {len(removed)}\n")
    for path in removed:
        out.write(f"  removed {path}\n")
    for path in left:
        out.write(f"  left {path} (not a file calibrate wrote)\n")


def print_human(run: dict, out=None) -> None:
    """A calibration run (experiments.calibrate.compute): its conditions, the
    injected cost's validation, and each calibration, stored or not."""
    out = out or sys.stdout
    validation = run["validation"]
    out.write(answers.lead(answers.calibrate(run)))
    out.write(f"opskew calibrate: {run['workload']}; torch {run['torch']}, {run['device']}, "
              f"{count_of(run['threads'], 'thread')}; {run['rounds']} rounds x {run['iters']} iterations\n"
              "  W: in-window on this workload, stored for this machine, torch and instrument (the W opskew correct "
              "and opskew.profile's fallback take: docs/which-w.md)\n")
    steps = next((c["w_by_step"] for c in run["calibrations"] if c.get("w_by_step")), None)
    if steps:
        out.write("  torch.profiler's W: on opskew's built-in steps instead, "
                  + "; ".join(f"{k} {steps[k]['workload'].split(': ', 1)[-1]}, {steps[k]['rounds']} rounds x "
                              f"{steps[k]['iters']} steps" for k in ("training", "inference"))
                  + " (opskew correct prices a trace with backward nodes on the training step, others on the "
                  "inference step; torch.add's W is kept beside them)\n")
    if validation:
        out.write(f"  validation: injected {run['inject']} ns, recovered {fmt_ns(validation['recovered_ns'])} "
                  f"[{fmt_ns(validation['ci95'][0])}, {fmt_ns(validation['ci95'][1])}]: "
                  + ("ok (within 20%)" if validation["ok"] else "NOT within 20%: the machine is too noisy "
                     "for a trustworthy calibration; rerun with more --trials") + "\n")
    print_calibrations(run["calibrations"], out)


def print_calibrations(cals: list, out=None) -> None:
    """Each calibration of a run (`opskew calibrate --json`'s), stored or not."""
    out = out or sys.stdout
    for cal in cals:
        k = cal["key"]
        out.write(f"  {k['instrument']:15s} {k['config']:28s} "
                  + (_constants(cal) if cal.get("op_events_per_iter", 1) else "no operator events: W undefined") + "\n")
        if cal.get("noisy"):
            out.write(f"      WARNING: {words(cal['noisy'])}\n")
        if cal.get("_path"):
            out.write(f"      stored: {cal['_path']}\n")
        else:
            out.write(f"      NOT stored: {cal.get('rejected')}"
                      + (" (rerun on a quieter machine, with more --trials)" if cal.get("rerun_helps", True) else "")
                      + "\n")
