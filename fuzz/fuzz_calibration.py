"""Fuzz target for the calibration loader (opskew.calibration.loads).

    .venv/bin/pip install atheris
    .venv/bin/python fuzz/fuzz_calibration.py -atheris_runs=1000000 [-max_len=4096]

atheris is not a dependency: CI runs the short deterministic mutation pass in
tests/py/test_calibration.py instead. The property: any bytes give either a
calibration that validates (constants finite, W in [0, 1 ms], delta in
[0, W]) or CalibrationError with one line; nothing else escapes.
"""

import json
import sys

import atheris

with atheris.instrument_imports():
    from opskew.calibration import store as calibration
    from opskew.calibration.store import CalibrationError, loads

SEED = json.dumps({
    "schema": calibration.SCHEMA, "date": "2026-12-03T06:00:00+0000",
    "key": {"machine": "m", "torch": "2.13.0", "instrument": "torch.profiler", "config": "minimal",
            "device": "cpu", "threads": 1, "workload": "builtin:add"},
    "w_ns": {"median": 300.0, "ci95": [280.0, 320.0], "ci_coverage": 0.965},
    "delta_ns": {"median": 20.0}, "w_py_ns": {"median": 900.0, "ci95": [800, 1000]},
    "delta_py_ns": {"median": 10.0}}).encode()


def one(data: bytes) -> None:
    try:
        cal = loads(data, "fuzz.json")
    except CalibrationError as exc:
        assert "\n" not in str(exc)
        return
    w = cal["w_ns"]["median"]
    assert 0 <= w <= calibration.MAX_NS and 0 <= cal["delta_ns"]["median"] <= w


def main() -> None:
    import os
    import tempfile

    one(SEED)  # the seed itself must load
    argv = list(sys.argv)
    with tempfile.TemporaryDirectory(prefix="opskew-fuzz-cal-") as corpus:
        if not any(not a.startswith("-") for a in argv[1:]):
            # No corpus given: start from a valid calibration, in a temp dir.
            with open(os.path.join(corpus, "seed.json"), "wb") as f:
                f.write(SEED)
            argv.append(corpus)
        atheris.Setup(argv, one)
        atheris.Fuzz()


if __name__ == "__main__":
    main()
