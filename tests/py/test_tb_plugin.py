"""TensorBoard's PyTorch profiler plugin (torch-tb-profiler, pinned in
requirements-dev.txt) reads opskew.profile's corrected runs as it reads the
raw ones: zero "ranges on the same thread should not intersect" errors, the
same profiles, steps and operators (docs/outputs.md, "Times that survive
float parsing"). The plugin parses ts and dur as float64 microseconds, so an
exact tie in the corrected time line (a child ending where its parent ends)
read as an overlap there before the writer kept ties apart."""

import json
import os
import subprocess
import sys

import pytest

from conftest import seed_native_cache

pytest.importorskip("torch_tb_profiler")

RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "viewer_runs.py")
MODELS = ("tfm_encoder", "lstm_lm", "mha_block", "seq2seq")
CONFIGS = ("minimal", "record_shapes+with_stack")
NESTING_ERROR = "ranges on the same thread should not intersect"


def _env(tmp):
    env = dict(os.environ, TMPDIR=str(tmp / "tmp"))
    os.makedirs(env["TMPDIR"], exist_ok=True)
    return env


def plugin_load(dirs, tmp):
    """Each folder of `dirs` loaded by the plugin's RunLoader as one run:
    {folder: ({"WORKER|SPAN": {"steps", "operators"}}, nesting errors)}."""
    p = subprocess.run([sys.executable, RUNS, "load", *map(str, dirs)], capture_output=True, text=True,
                       timeout=300, env=_env(tmp))
    assert p.returncode == 0, p.stderr[-3000:]
    profiles = {d["dir"]: d["profiles"] for d in map(json.loads, p.stdout.splitlines())}
    out, errors = {}, 0
    for line in p.stderr.splitlines():
        if NESTING_ERROR in line:
            errors += 1
        elif line.startswith("viewer_runs: loaded "):
            d = line[len("viewer_runs: loaded "):]
            out[d] = (profiles[d], errors)
            errors = 0
    assert set(out) == {str(d) for d in dirs}, p.stderr[-3000:]
    return out


def assert_twins_load_alike(raw, corrected):
    """The corrected run lists one profile per raw one (WORKER.corrected for
    WORKER, the same span), each with the raw one's steps and operators."""
    assert raw and len(corrected) == len(raw), (sorted(raw), sorted(corrected))
    for key, prof in raw.items():
        worker, span = key.split("|")
        twin = corrected[f"{worker}.corrected|{span}"]
        assert prof["steps"] >= 1 and twin["steps"] == prof["steps"], (key, prof["steps"], twin["steps"])
        assert prof["operators"] and twin["operators"] == prof["operators"], key


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Four torch.nn models (nobody here wrote them) under minimal and
    record_shapes+with_stack, two cycles each, with an empty calibration cache."""
    d = tmp_path_factory.mktemp("tbplugin")
    env = _env(d)
    env["OPSKEW_CACHE_DIR"] = str(d / "cache")
    seed_native_cache(env["OPSKEW_CACHE_DIR"])
    p = subprocess.run([sys.executable, RUNS, "train", str(d / "out"), ",".join(MODELS), ",".join(CONFIGS)],
                       capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    runs = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
    assert len(runs) == len(MODELS) * len(CONFIGS)
    # Every cycle of every run has its corrected twin.
    for r in runs:
        assert len(r["corrected"]) == 2 and all(c and os.path.isfile(c) for c in r["corrected"]), r
    return d


def test_plugin_reads_corrected_runs_of_four_models_without_nesting_errors(trained, tmp_path):
    raw, cor = trained / "out" / "raw", trained / "out" / "raw" / "corrected"
    loaded = plugin_load([raw, cor], tmp_path)
    (raw_profiles, raw_errors), (cor_profiles, cor_errors) = loaded[str(raw)], loaded[str(cor)]
    assert raw_errors == 0  # as torch wrote them
    assert cor_errors == 0
    assert len(raw_profiles) == 2 * len(MODELS) * len(CONFIGS)
    assert_twins_load_alike(raw_profiles, cor_profiles)
