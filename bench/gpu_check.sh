#!/usr/bin/env bash
# bench/gpu_check.sh OUTDIR: every GPU check and benchmark of opskew in one run
# (under 8 minutes on one modern GPU), with results written into OUTDIR:
#   log.txt                    everything printed, with timings per step
#   summary.txt                one line per step: ok / FAILED / skipped, and why
#   check-cuda.json            opskew check --device cuda --json
#   matrix-cuda.json           opskew matrix --device cuda --json
#   sweep/sweep.{png,svg,json} opskew sweep --device cuda --op add (if sweep exists)
#   record-cuda.json           opskew record --device cuda on a small CUDA loop
#   nccl-job/                  opskew profile -- torchrun of a 1-rank NCCL DDP job
#   pytest-gpu.txt             pytest -m gpu
#   validate-cuda.json         bench/validate_profile.py, cuda_train and cuda_launch
#   cuda-wait.json             bench/bench_cuda_wait.py: wait steps against bare, per suspect
#   table.md                   bench/gpu_table.py: those two, the marks and the audit, as one table
# The whole run is held under 8 minutes: every step's time limit is cut to
# what is left of OPSKEW_GPU_BUDGET_S (default 450 s, so 7.5 min plus at most
# 10 s to kill a step), and a step with under 15 s left is skipped and says
# so. Steps run most important first: build, check, validate-cuda, cuda-wait,
# table, record, sweep, nccl-job, pytest, matrix. Their own limits: build 240 s,
# check 90 s, validate-cuda 150 s, cuda-wait 100 s, table 20 s, record 75 + 30 s,
# sweep 90 s, matrix 160 s (over 100 s on an H200 with the native collector's
# build, 2026-12-04), pytest 90 s.
# On a machine without a GPU it runs the CPU-side parts (build, a quick
# `opskew check --device cpu`, the CUDA-absent error path) and ends with
# "no GPU: GPU checks skipped", exit 0.
#
# Environment:
#   PYTHON          interpreter to use (default: python3); torch must already
#                   be installed there (a CUDA build for the GPU part)
#   OPSKEW_WHEELS   a directory of wheels (opskew's, or meson-python and
#                   friends) for `pip install --no-index --find-links`, for
#                   machines that cannot reach a package index
#   OPSKEW_SKIP_INSTALL=1  use the opskew already installed in PYTHON
#   OPSKEW_GPU_BUDGET_S    seconds for the whole run (default 450)
# Exit status: 0 if every step that ran passed, 1 otherwise, 2 on bad usage.
set -u -o pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
OUT=$1
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
# A relative interpreter path must survive the `cd "$OUT"` below (keep the
# venv's own path: do not resolve the symlink).
case $PY in */*) PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY") ;; esac
LOG=$OUT/log.txt
SUMMARY=$OUT/summary.txt
: >"$LOG"
: >"$SUMMARY"
FAILED=0
T_START=$(date +%s)
BUDGET=${OPSKEW_GPU_BUDGET_S:-450}

say() { echo "[gpu_check $(($(date +%s) - T_START))s] $*" | tee -a "$LOG" >&2; }
result() { echo "$1: $2" >>"$SUMMARY"; say "$1: $2"; }

# step NAME TIMEOUT_S CMD...: runs CMD with output in the log, records ok/FAILED.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((BUDGET - ($(date +%s) - T_START)))
  if [ "$left" -lt 15 ]; then
    result "$name" "skipped: the ${BUDGET}s budget is spent"
    FAILED=1
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  say "== $name (limit ${limit}s): $*"
  local t0=$(date +%s)
  timeout --signal=TERM --kill-after=10 "$limit" "$@" >>"$LOG" 2>&1
  local rc=$?
  local dt=$(($(date +%s) - t0))
  if [ $rc -eq 0 ]; then
    result "$name" "ok (${dt}s)"
  else
    [ $rc -eq 124 ] && rc="timeout after ${limit}s"
    result "$name" "FAILED (rc $rc, ${dt}s; see log.txt)"
    FAILED=1
  fi
  return 0
}

# ------------------------------------------------------------------ build
say "python: $("$PY" -c 'import sys; print(sys.executable, sys.version.split()[0])' 2>&1)"
if ! "$PY" -c "import torch" >>"$LOG" 2>&1; then
  result build "FAILED: torch is not importable in $PY (install torch there first)"
  exit 1
fi
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())" 2>&1 | tee -a "$LOG" >&2

if [ "${OPSKEW_SKIP_INSTALL:-0}" = 1 ]; then
  result build "skipped (OPSKEW_SKIP_INSTALL=1; using the installed opskew)"
elif [ -n "${OPSKEW_WHEELS:-}" ]; then
  # Offline. Build from this checkout when the build tools are there or in
  # the folder (meson-python, meson, ninja, pyproject-metadata, packaging);
  # otherwise install an opskew wheel built for this Python from the folder.
  if ! "$PY" -c "import mesonpy" >>"$LOG" 2>&1; then
    "$PY" -m pip install -q --no-index --find-links "$OPSKEW_WHEELS" meson-python meson ninja >>"$LOG" 2>&1
  fi
  if "$PY" -c "import mesonpy" >>"$LOG" 2>&1; then
    step build 240 "$PY" -m pip install -q --no-index --find-links "$OPSKEW_WHEELS" \
      --no-build-isolation --no-deps "$ROOT"
  else
    step build-from-wheel 120 "$PY" -m pip install -q --no-index --find-links "$OPSKEW_WHEELS" \
      --no-deps --force-reinstall opskew
  fi
else
  step build 240 "$PY" -m pip install -q --no-build-isolation --no-deps "$ROOT"
fi
if ! "$PY" -c "import opskew, opskew._engine" >>"$LOG" 2>&1; then
  result opskew "FAILED: opskew is not importable after the build; see log.txt"
  exit 1
fi

OPSKEW=("$PY" -m opskew)
HAS_GPU=$("$PY" -c "import torch; print(int(torch.cuda.is_available()))" 2>/dev/null || echo 0)
cd "$OUT" || exit 1

# --------------------------------------------------------- CPU-side parts
step check-cpu-quick 60 "${OPSKEW[@]}" check --device cpu --trials 3 --iters 5 --calls 200 \
  --warmup 0.1 --json "$OUT/check-cpu.json"

if [ "$HAS_GPU" != 1 ]; then
  # The CUDA-absent path: one line, exit 2.
  say "== record-cuda-absent"
  "${OPSKEW[@]}" record -o "$OUT/record-cuda.json" --device cuda -- "$PY" -c "import torch" \
    >"$OUT/record-cuda-absent.txt" 2>&1
  rc=$?
  cat "$OUT/record-cuda-absent.txt" >>"$LOG"
  lines=$(grep -c . "$OUT/record-cuda-absent.txt")
  if [ $rc -eq 2 ] && [ "$lines" -eq 1 ] && grep -q CUDA "$OUT/record-cuda-absent.txt"; then
    result record-cuda-absent "ok (exit 2, one line: $(cat "$OUT/record-cuda-absent.txt"))"
  else
    result record-cuda-absent "FAILED (rc $rc, $lines lines)"
    FAILED=1
  fi
  step check-cuda-absent-exit2 60 bash -c "'$PY' -m opskew check --device cuda --trials 2 --iters 2 >/dev/null 2>&1; test \$? -eq 2"
  result gpu "no GPU: GPU checks skipped"
  say "no GPU: GPU checks skipped (CPU-side parts: $( [ $FAILED = 0 ] && echo passed || echo FAILED))"
  cat "$SUMMARY" >&2
  exit $FAILED
fi

# ------------------------------------------------------------- GPU parts
"$PY" -c "import torch; p=torch.cuda.get_device_properties(0); print('gpu', p.name, p.total_memory >> 30, 'GiB')" \
  2>&1 | tee -a "$LOG" >&2
nvidia-smi >>"$LOG" 2>&1 || true

step check-cuda 90 "${OPSKEW[@]}" check --device cuda --json "$OUT/check-cuda.json"

# Issue 36: the corrected step against bare processes (a small-kernel training
# step and a launch-bound loop, minimal and shapes+stack), the profiled
# process's wait steps against bare ones per suspect, the per-operator marks
# and the clean-window audit, in one table (table.md).
step validate-cuda 150 "$PY" "$ROOT/bench/validate_profile.py" --workloads cuda_train,cuda_launch \
  --rounds 2 --json "$OUT/validate-cuda.json"
step cuda-wait 100 "$PY" "$ROOT/bench/bench_cuda_wait.py" --device cuda --rounds 2 --steps 40 \
  --json "$OUT/cuda-wait.json"
step table 20 "$PY" "$ROOT/bench/gpu_table.py" --validate "$OUT/validate-cuda.json" \
  --wait "$OUT/cuda-wait.json" -o "$OUT/table.md"

# record on a small CUDA loop: every operator must be in the trace.
cat >"$OUT/cuda_loop.py" <<'EOF'
import torch
a = torch.ones(64, device="cuda")
for _ in range(5000):
    torch.add(a, a)
m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).cuda()
x = torch.randn(32, 64, device="cuda")
for _ in range(10):
    m(x).sum().backward()
torch.cuda.synchronize()
EOF
step record-cuda 75 "${OPSKEW[@]}" record --device cuda --summary -o "$OUT/record-cuda.json" -- "$PY" "$OUT/cuda_loop.py"
step record-cuda-verify 30 "$PY" - "$OUT/record-cuda.json" <<'EOF'
import collections, json, sys
t = json.load(open(sys.argv[1]))
names = collections.Counter(e["name"] for e in t["traceEvents"] if e["ph"] == "X")
o = t["opskew"]
print("instrument", o["instrument"], "events", o["events"], "lost", o["lost"])
print(names.most_common(12))
assert o["instrument"] == "nvtx", o["instrument"]
assert o["lost"]["total"] == 0, o["lost"]
assert names["aten::add"] == 5000, names["aten::add"]
assert names["aten::linear"] == 20 and names["aten::relu"] == 10, names
assert any(n.startswith("autograd::engine::evaluate_function") for n in names)
print("every operator present")
EOF
if "${OPSKEW[@]}" sweep --help >/dev/null 2>&1; then
  mkdir -p "$OUT/sweep"
  step sweep-cuda 90 "${OPSKEW[@]}" sweep --device cuda --op add --out "$OUT/sweep/sweep" \
    --json "$OUT/sweep/sweep.json"
else
  result sweep-cuda "skipped: this opskew has no sweep command yet"
fi

# A 1-rank NCCL job (the machine has one GPU) under opskew profile: the rank's
# traces must hold NCCL events, the family the job summary keys on.
cat >"$OUT/nccl_job.py" <<'EOF'
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
m = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(256, 256).cuda())
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(64, 256, device="cuda")
for _ in range(40):
    opt.zero_grad()
    m(x).sum().backward()
    opt.step()
dist.destroy_process_group()
EOF
step nccl-job 90 "${OPSKEW[@]}" profile --device cuda -o "$OUT/nccl-job" --skip-first 2 --wait 8 --warmup 1 \
  --active 6 --repeat 2 -- "$PY" -m torch.distributed.run --nproc-per-node 1 --standalone "$OUT/nccl_job.py"
step nccl-job-verify 30 "$PY" - "$OUT/nccl-job" <<'EOF'
import glob, json, os, sys
# A job of WORLD_SIZE 1 names its files as one process does (no -rankR:
# opskew.profiling.rank_of); a larger one by rank.
d = sys.argv[1]
raw = sorted(p for p in glob.glob(d + "/traces/opskew-profile-*cycle*.json") if ".corrected." not in p)
assert raw, "no trace in " + d
names = [e.get("name", "") for e in json.load(open(raw[-1]))["traceEvents"]]
kernels = sorted({n for n in names if n.startswith("nccl")})
print("traces", raw, "nccl events", kernels[:6])
assert kernels, "no nccl events in the trace"
rep = d + ("/report.rank0.json" if os.path.exists(d + "/report.rank0.json") else "/report.json")
final = json.load(open(rep))["final"]
print("report", final)
# The corrected step (the corrected trace's ProfilerStep#N, read back) against
# the wait steps: a CUDA backward runs on the autograd engine's device
# thread, which the cross-thread rule must take into account.
cor = json.load(open(rep))["reports"][-1]["corrected_trace"]  # traces/corrected/NAME.corrected.pt.trace.json
steps = sorted(e["dur"] for e in json.load(open(cor))["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))
med = steps[len(steps) // 2] * 1e3
print("corrected trace's median step %.0f ns, wait steps %.0f ns, report's corrected %.0f ns"
      % (med, final["baseline_step_ns"], final["corrected_step_ns"]))
EOF
step pytest-gpu 90 bash -c "cd '$ROOT' && '$PY' -m pytest -q -m gpu -rs tests/py >'$OUT/pytest-gpu.txt' 2>&1; rc=\$?; cat '$OUT/pytest-gpu.txt'; exit \$rc"

step matrix-cuda 160 "${OPSKEW[@]}" matrix --device cuda --trials 5 --json "$OUT/matrix-cuda.json"

say "done in $(($(date +%s) - T_START))s"
cat "$SUMMARY" >&2
exit $FAILED
