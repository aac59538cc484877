"""What the diagnostic benches share (bench_after_effect.py,
bench_leaf_reference.py, bench_pairing.py, bench_wait_positions.py): their
argument parser with --workload, one of bench/validate_profile.py's workloads,
and that workload set up and warmed in this process. A bench imports it from
its own folder (Python puts a script's folder first on sys.path)."""

from __future__ import annotations

import argparse

import validate_profile as vp


def parser(doc: str, workload: str, cpu_only: bool = True) -> argparse.ArgumentParser:
    """A bench's argument parser: its docstring as the description, and
    --workload (default `workload`), a workload of bench/validate_profile.py:
    one that runs without a GPU where `cpu_only` (start() checks that)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = "a CPU workload" if cpu_only else "a workload"
    ap.add_argument("--workload", default=workload, help=f"{what} of bench/validate_profile.py ({workload})")
    return ap


def parse(ap: argparse.ArgumentParser, argv, least: dict):
    """The bench's options from argv (None: the command line), with a usage
    error through `ap` (exit 2) unless each option named in `least`
    ({"--steps": 18, ...}) is at least its value; the message names every
    bound: "--rounds must be at least 1 and --steps at least 18"."""
    a = ap.parse_args(argv)
    if any(getattr(a, opt[2:].replace("-", "_")) < n for opt, n in least.items()):
        (first, n), *rest = least.items()
        bounds = [f"{first} must be at least {n}"] + [f"{opt} at least {m}" for opt, m in rest]
        ap.error(" and ".join([", ".join(bounds[:-1]), bounds[-1]]) if rest else bounds[0])
    return a


def start(ap: argparse.ArgumentParser, argv, least: dict):
    """(options, torch, step) for a bench that times a CPU workload in its own
    process: the options as parse() gives them, then the workload they name
    set up here (torch imported, its intra-op threads set) and warmed; a usage
    error through `ap` (exit 2) for a workload that is not a CPU one."""
    a = parse(ap, argv, least)
    vp.check_cpu_workload(ap, a.workload)
    torch, step = vp._setup(a.workload)
    warm(step)
    return a, torch, step


def warm(step) -> None:
    """The benches' warm-up before they time anything: step() for 0.4 s, and
    at least 20 times."""
    vp._warm(step, 0.4)
