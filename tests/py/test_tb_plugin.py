"""TensorBoard's PyTorch profiler plugin (torch-tb-profiler, pinned in
requirements-dev.txt) reads opskew.profile's corrected runs as it reads the
raw ones: zero "ranges on the same thread should not intersect" errors, the
same profiles, steps and operators (docs/outputs.md, "Read as
float64"). The plugin parses ts and dur as float64 microseconds, so an
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


def _holders(doc):
    """Each flow end and instant of `doc` (by identity, in time order) with
    the identity of the innermost complete event of its thread holding its
    ts (a begin holds, an end does not; of equal intervals the later in the
    file): test_twin.py's rule, in one sweep per thread."""
    from test_twin import _identity

    threads = {}
    for k, e in enumerate(doc["traceEvents"]):
        key = (str(e.get("pid")), str(e.get("tid")))
        if e.get("ph") == "X":
            threads.setdefault(key, []).append((e["ts"], 0, -(e["ts"] + e["dur"]), k, e))
        elif e.get("ph") in ("s", "f", "i", "I"):
            threads.setdefault(key, []).append((e["ts"], 1, 0, k, e))
    out = []
    for items in threads.values():
        stack = []
        for ts, is_point, neg_end, _k, e in sorted(items, key=lambda r: r[:4]):
            while stack and (-stack[-1][0] < ts or (-stack[-1][0] == ts and stack[-1][1] != ts)):
                stack.pop()
            if is_point:
                out.append((_identity(e), ts, stack[-1][2] if stack else None))
            else:
                stack.append((neg_end, ts, _identity(e)))
    return [(i, h) for i, _ts, h in sorted(out, key=lambda r: (r[0], r[1]))]


def test_every_corrected_cycle_is_its_raw_traces_twin(trained):
    """The twin on the four models (docs/correct.md, "The twin"): every raw
    record of every cycle is in its corrected trace once, in the same form
    apart from its times and opskew's args, and the flows and instants of
    the minimal traces stay in the operators that held them (with_stack's
    Python frames overlap improperly; test_twin.py checks those)."""
    import collections

    from test_twin import _identity, _load

    raw_dir = trained / "out" / "raw"
    pairs = flows = 0
    for name in sorted(os.listdir(raw_dir)):
        if not name.endswith(".pt.trace.json"):
            continue
        worker, rest = name.split(".", 1)
        raw, twin = _load(raw_dir / name), _load(raw_dir / "corrected" / f"{worker}.corrected.{rest}")
        assert collections.Counter(map(_identity, raw["traceEvents"])) == \
            collections.Counter(map(_identity, twin["traceEvents"])), name
        assert {k: v for k, v in twin.items() if k not in ("traceEvents", "opskew")} == \
            {k: v for k, v in raw.items() if k != "traceEvents"}
        if "minimal" in name:
            held = _holders(raw)
            assert held == _holders(twin), name
            flows += sum(1 for _i, h in held if h is not None)
        pairs += 1
    assert pairs == 2 * len(MODELS) * len(CONFIGS) and flows > 0
