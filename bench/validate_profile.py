"""Validation of `opskew.profile` (docs/profile.md) on workloads that differ in
what drives W, the profiler's cost per operator event.

For each workload and torch.profiler configuration (minimal: activities=[CPU]
only; record_shapes+with_stack: the same with record_shapes=True and
with_stack=True), in child processes of their own (each measurement starts
clean, and a crash is contained to its row):

  bare     the unprofiled step: the workload warmed up, then each step timed
           with time.perf_counter_ns; the median step. How it is paired with
           the profiled process (--pairing):
           lockstep (default): each profiled process is started with a bare
             one, both pinned to the same CPU(s) (the last ones available,
             as many as the workload's threads), and they take turns through
             a pair of pipes: --chunk bare steps (default: one cycle's worth)
             before each of the profile's cycles, while the other waits. The
             first bare step of a turn (cold after the other's turn) is not
             counted; the profile's turn ends in the first wait step after a
             trace, which opskew never pairs. Both processes see the machine
             in the same seconds: the 2-core VM slows down in spells of tens
             of milliseconds, and in an A/A test (bench/bench_pairing.py) two
             bare processes one after another differed by a median 19.5%, in
             lockstep by 0.9% (docs/profile-validation.md, run L).
           sequential: bare, profile A, bare, profile B, bare, profile A,
             ... (--bare-s seconds of steps each; the configurations' order
             alternates between workloads), each profiled run compared with
             the steps of the two bare runs around it.
           A row gives the median over its --rounds rounds.
  profile  the same loop (warmed up the same way) under opskew.profile with
           schedule(wait=--wait, warmup=1, active=--active, repeat=--repeat)
           and corrected_dir in a temporary folder, report_file=None. The
           corrected step is the median duration of the ProfilerStep#N events
           of every corrected trace opskew wrote (read by opskew's C reader,
           opskew.tracefile.summarize); the raw step likewise from the raw
           traces. W in-run [CI] is the last report's (it pools every cycle).
           Right before and right after the profiled loop, in the same
           process, opskew's own tracer (opskew.trace, ITT instrument) over
           --tracer-steps steps of the same loop, each trace corrected with
           its own self-calibrated delta: the leaf operators' reference
           durations (the mean of the two runs, which bracket the loop in
           time), compared (median over rounds, per name) with the
           corrected traces' leaves.

Before the workloads, `opskew calibrate` (micro-workloads: torch.add, and an
empty Python function for W_py) runs once into the temporary
OPSKEW_CACHE_DIR that every child uses; so opskew.profile finds a stored
delta (and, under with_stack, W_py and delta_py) of the same configuration,
and the table shows the micro W beside the in-run W. --no-calibrate skips it:
then delta = 0 and, under with_stack, the in-run W carries the Python events'
cost too (docs/profile.md, "Not yet").

Why this schedule (the defaults: wait=21, warmup=1, active=7, repeat=5, the
one opskew advises; runs up to Z used wait=14, which is enough for W, and
21 leaves room for opskew's tracer on wait steps 3 to 7 after each trace,
the leaf reference, and 8 steps for its after-effect to fade): the first step of each cycle is cold and left out of W,
so active=7 gives 6 warm active steps per cycle; opskew.profile pairs each
with a wait step of its own, the last ones before the cycle first, and never
uses the first 2 wait steps after a trace (the profiler's stop,
post-processing and export leave them slow: the first 10x, the second up to
5x a warm step); the next 6 still run slow (+7 to +38% on mlp_train, where
later ones run +5 to +8%: docs/method.md, "Wait steps under a live
profiler"), so wait=14 pairs all 6 with settled steps (runs up to Y used
wait=8, whose pairs lie in positions 2 to 7); that is enough for W's 95% CI
from the first cycle on, so every cycle gets a corrected trace. With wait=2 the active steps came 3 steps after the export:
their excess and W were erratic (W negative in 2 of 6 rows). 5 cycles pool
30 pairs, which the 2-core VM's step-to-step noise (10 to 20% of a step)
needs for W's median to settle.

Diagnostics beside the target: "step() inside ProfilerStep" is the raw
ProfilerStep#N duration minus opskew's own timing of that step's body (the
part of torch's and opskew's step() inside the annotation, which no W per
operator event removes, and which opskew takes out of the corrected ranges
since run P: the report's step_spans_ns); "corrected, warm steps" is the
corrected step without each trace's first active step (cold, priced at a
scaled W since run P: the report's cold_step); and the
report's corrected_step is opskew's own figure (prof.final: its timing of the
paired active bodies less W x events), the one docs/profile.md says to read
where the corrected trace is written stretched (trace_step_stretch); beside
it, in how many rounds the bare step lies inside that figure's band at the
ends of W's 95% CI (corrected_step_w_ci_ns: the uncertainty W carries).

Per row it prints: W in-run [CI] and the micro W, the bare step, the raw
step (and its excess), the corrected step (and its error against the bare
step), pass/fail for the 10% target, and the leaf operators within 15% or
100 ns of opskew's tracer (of those seen as leaves, with 5 calls or more, by
both; "+N in interval": of the others, those whose figure in the tracer lies
inside opskew's 95% interval for them, each end within the same tolerance:
the interval W's CI, delta's spread over the calibration's panel of
operators (docs/correct.md) and, for Python code under with_stack, the
interpreter's slowdown (opskew.bytecode) give it). --json writes every row
with its details.

    .venv/bin/python bench/validate_profile.py [--configs minimal,record_shapes+with_stack]
        [--workloads tiny_loop,mlp_train,...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

CONFIGS = {"minimal": {}, "record_shapes+with_stack": {"record_shapes": True, "with_stack": True},
           "record_shapes+profile_memory": {"record_shapes": True, "profile_memory": True}}
# The models nobody in this project wrote (torch's own nn modules).
THIRD_PARTY = ("tfm_encoder", "lstm_lm", "mha_block", "seq2seq", "tfm_infer", "mha_infer")


# ----------------------------------------------------------------- workloads
# Each maker runs once in the child (torch imported there) and returns the
# step: a callable with no argument. torch is imported inside: this module is
# imported by the parent, which never loads torch.

def _inference(torch, model, x):
    """The step of an inference workload: model(x) under torch.no_grad()."""
    def step():
        with torch.no_grad():
            model(x)
    return step


def _training(opt, model, x, y, loss, sync=None):
    """The step of a training workload: loss(model(x), y) backward, then
    opt.step() (and sync(), where given, for a device's completion)."""
    def step():
        opt.zero_grad()
        loss(model(x), y).backward()
        opt.step()
        if sync is not None:
            sync()
    return step


def tiny_loop():
    """200 torch.add of 1-element tensors: W per event on the cheapest op."""
    import torch
    a, b = torch.ones(1), torch.ones(1)

    def step():
        for _ in range(200):
            torch.add(a, b)
    return step


def mlp_train():
    """A small MLP's training step (forward, backward, SGD)."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 8)
    return _training(opt, model, x, y, torch.nn.functional.mse_loss)


def dispatch_heavy():
    """Inference of 12 x (Linear + LayerNorm + GELU) on a 1x4 input: nested
    operators, many inputs per operator (record_shapes' cost)."""
    import torch
    torch.manual_seed(0)
    layers = []
    for _ in range(12):
        layers += [torch.nn.Linear(4, 4), torch.nn.LayerNorm(4), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).eval()
    x = torch.randn(1, 4)
    return _inference(torch, model, x)


def conv_train():
    """A small convolution net's training step: conv kernels with real work
    (a few hundred us each), autograd's convolution backward, SGD."""
    import torch
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(16, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
    return _training(opt, model, x, y, torch.nn.functional.cross_entropy)


def optim_heavy():
    """Many small parameters (64 tensors of 4 elements) under Adam without
    foreach: the optimizer's per-parameter operators dominate the step."""
    import torch
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(4)) for _ in range(64)]
    opt = torch.optim.Adam(params, lr=1e-3, foreach=False)

    def step():
        opt.zero_grad()
        sum((p * p).sum() for p in params).backward()
        opt.step()
    return step


def data_prep():
    """A loop of tiny data-preparation operators on 32 samples: convert,
    scale, normalize, flip, crop-pad, then stack into a batch."""
    import torch
    torch.manual_seed(0)
    raw = torch.randint(0, 256, (32, 3, 8, 8), dtype=torch.uint8)
    mean = torch.tensor([0.5, 0.5, 0.5]).view(3, 1, 1)
    std = torch.tensor([0.25, 0.25, 0.25]).view(3, 1, 1)

    def step():
        out = []
        for i in range(32):
            x = raw[i].float().div_(255).sub_(mean).div_(std)
            if i % 2:
                x = torch.flip(x, dims=(2,))
            x = torch.nn.functional.pad(x[:, 1:7, 1:7], (1, 1, 1, 1))
            out.append(x)
        return torch.stack(out)
    return step


def deep_nested():
    """A deep stack of nested modules: 40 modules, each calling the next
    inside its forward, then one tiny operator (deep Python stacks under
    with_stack, deep operator nesting in module scopes)."""
    import torch

    class Nest(torch.nn.Module):
        def __init__(self, depth):
            super().__init__()
            self.inner = Nest(depth - 1) if depth > 1 else None
            self.scale = torch.nn.Parameter(torch.ones(4))

        def forward(self, x):
            if self.inner is not None:
                x = self.inner(x)
            return x * self.scale

    torch.manual_seed(0)
    model = Nest(40).eval()
    x = torch.randn(2, 4)
    return _inference(torch, model, x)


def bf16_autocast():
    """A training step of a small MLP under torch.autocast("cpu", bfloat16):
    casts (aten::to, _to_copy) around each matmul, bf16 kernels."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                                torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 64), torch.randn(16, 8)

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
        torch.nn.functional.mse_loss(out.float(), y).backward()
        opt.step()
    return step


def two_threads():
    """An MLP training step large enough for intra-op parallelism (256 wide,
    batch 64), run with torch.set_num_threads(2)."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    return _training(opt, model, x, y, torch.nn.functional.cross_entropy)


# Models nobody in this project wrote: torch's own nn modules, small sizes,
# trained with AdamW (issue 35's third-party validation; docs/profile-validation.md).

def tfm_encoder():
    """torch.nn.TransformerEncoder (2 layers, d_model 32, 4 heads) trained on
    8 sequences of 16: attention, layer norms, dropout, AdamW."""
    import torch
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, batch_first=True),
                                  num_layers=2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(8, 16, 32), torch.randn(8, 16, 32)
    return _training(opt, model, x, y, torch.nn.functional.mse_loss)


def lstm_lm():
    """A language model of torch.nn.Embedding, a 2-layer torch.nn.LSTM (64
    wide) and a Linear head over 100 tokens, trained on 8 x 16 tokens."""
    import torch
    torch.manual_seed(0)
    nn = torch.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.rnn, self.head = nn.Embedding(100, 32), nn.LSTM(32, 64, 2, batch_first=True), nn.Linear(64, 100)

        def forward(self, t):
            return self.head(self.rnn(self.emb(t))[0]).flatten(0, 1)

    model = LM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randint(0, 100, (8, 16)), torch.randint(0, 100, (8 * 16,))
    return _training(opt, model, x, y, torch.nn.functional.cross_entropy)


def mha_block():
    """A pre-norm attention block of torch.nn.MultiheadAttention (32 wide, 4
    heads), torch.nn.LayerNorm and a GELU MLP, trained on 8 x 16."""
    import torch
    torch.manual_seed(0)
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(32), nn.LayerNorm(32)
            self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))

        def forward(self, x):
            h = self.n1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.n2(x))

    model = Block()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(8, 16, 32), torch.randn(8, 16, 32)
    return _training(opt, model, x, y, torch.nn.functional.mse_loss)


def seq2seq():
    """torch.nn.Transformer (1 encoder and 1 decoder layer, d_model 32, 4
    heads) trained on 8 pairs of 12-token sequences with a causal mask."""
    import torch
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Transformer(32, 4, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=64,
                           batch_first=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    src, tgt, y = torch.randn(8, 12, 32), torch.randn(8, 12, 32), torch.randn(8, 12, 32)
    mask = nn.Transformer.generate_square_subsequent_mask(12)

    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(src, tgt, tgt_mask=mask), y).backward()
        opt.step()
    return step


# name -> (maker, intra-op threads, what drives W)
def tfm_infer():
    """torch.nn.TransformerEncoder (2 layers, d_model 32, 4 heads) forward
    only, under no_grad, on 8 sequences of 16: inference."""
    import torch
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, batch_first=True),
                                  num_layers=2).eval()
    return _inference(torch, model, torch.randn(8, 16, 32))


def mha_infer():
    """torch.nn.MultiheadAttention (32 wide, 4 heads) forward only, under
    no_grad, on 8 x 16: inference."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    x = torch.randn(8, 16, 32)

    def step():
        with torch.no_grad():
            model(x, x, x, need_weights=False)
    return step


def cuda_train():
    """An MLP training step on CUDA (3 x Linear 256 wide, batch 64, Adam),
    synchronized at its end: a step's time is the device's completion, as
    opskew.profile times it with CUDA activity. Launch-bound on a modern GPU:
    the CPU side issues the kernels no faster than they run."""
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("cuda_train: this torch sees no CUDA device")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 16)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256, device="cuda"), torch.randn(64, 16, device="cuda")
    return _training(opt, model, x, y, torch.nn.functional.mse_loss, sync=torch.cuda.synchronize)


def cuda_launch():
    """200 x add of 4-element CUDA tensors, synchronized at its end: nothing
    but launches, each kernel far shorter than its launch."""
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("cuda_launch: this torch sees no CUDA device")
    a = torch.ones(4, device="cuda")

    def step():
        x = a
        for _ in range(200):
            x = torch.add(x, a)
        torch.cuda.synchronize()
    return step


WORKLOADS = {
    "tiny_loop": (tiny_loop, 1, "200 x add of 1 element: the cheapest operator"),
    "mlp_train": (mlp_train, 1, "MLP fwd+bwd+SGD: autograd nodes, few inputs"),
    "dispatch_heavy": (dispatch_heavy, 1, "12 x (Linear+LayerNorm+GELU) 1x4: nesting, many inputs"),
    "conv_train": (conv_train, 1, "conv net fwd+bwd+SGD(momentum): real kernels"),
    "optim_heavy": (optim_heavy, 1, "Adam (foreach=False) over 64 params of 4: per-param optimizer ops"),
    "data_prep": (data_prep, 1, "32 samples x (float, div, sub, div, flip, slice, pad) + stack: views, tiny ops"),
    "deep_nested": (deep_nested, 1, "40 nested modules: deep Python and module nesting"),
    "bf16_autocast": (bf16_autocast, 1, "MLP step under bfloat16 autocast: casts around matmuls"),
    "two_threads": (two_threads, 2, "256-wide MLP step, torch.set_num_threads(2)"),
    "tfm_encoder": (tfm_encoder, 1, "torch.nn.TransformerEncoder, 2 layers, AdamW: third-party model"),
    "lstm_lm": (lstm_lm, 1, "torch.nn Embedding + 2-layer LSTM + head, AdamW: third-party model"),
    "mha_block": (mha_block, 1, "torch.nn.MultiheadAttention block with LayerNorm, AdamW: third-party model"),
    "seq2seq": (seq2seq, 1, "torch.nn.Transformer encoder-decoder, AdamW: third-party model"),
    "tfm_infer": (tfm_infer, 1, "torch.nn.TransformerEncoder forward under no_grad: third-party model, inference"),
    "mha_infer": (mha_infer, 1, "torch.nn.MultiheadAttention forward under no_grad: third-party model, inference"),
    "cuda_train": (cuda_train, 1, "MLP fwd+bwd+Adam on CUDA, synchronized per step: launch-bound"),
    "cuda_launch": (cuda_launch, 1, "200 x add of 4 elements on CUDA, synchronized per step: launches only"),
}
# Run only when named in --workloads (they need a GPU); activities=[CPU, CUDA].
CUDA_WORKLOADS = {"cuda_train", "cuda_launch"}


def check_cpu_workload(ap, name):
    """For the diagnostic benches: a usage error through `ap` (exit 2) unless
    `name` is one of the workloads that run without a GPU."""
    if name not in WORKLOADS or name in CUDA_WORKLOADS:
        ap.error(f"--workload: one of {', '.join(w for w in WORKLOADS if w not in CUDA_WORKLOADS)}")


# ------------------------------------------------------------------ children
def _setup(name):
    import torch
    maker, threads, _ = WORKLOADS[name]
    torch.set_num_threads(threads)
    return torch, maker()


def _warm(step, seconds, min_steps=20):
    t_end = time.perf_counter() + seconds
    n = 0
    while n < min_steps or time.perf_counter() < t_end:
        step()
        n += 1
    return n


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    if not n:
        return None
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


class _Turns:
    """Lockstep with the partner process (--pairing lockstep): each holds one
    end of two pipes, and only the one holding the token runs. A partner
    that is gone (crashed, killed) reads as the end: the other goes on alone."""

    def __init__(self, a):
        self.rfd, self.wfd = a.token_in, a.token_out
        if a.cpus and hasattr(os, "sched_setaffinity"):
            # Both on the same core(s): the core's speed is the same for both.
            os.sched_setaffinity(0, {int(c) for c in a.cpus.split(",")})

    def give(self, more: bool = True):
        if self.wfd is None:
            return
        try:
            os.write(self.wfd, b"x" if more else b"q")
        except OSError:  # the partner is gone
            self.wfd = None

    def take(self) -> bool:
        """Waits for the token: False when the partner ended (or is gone)."""
        return os.read(self.rfd, 1) == b"x"


def _steps(step, before, after):
    """The timed steps of every child: while before(i), step() timed, then
    after(i, ns). Called by _drive from main() in both kinds of child, so
    that step() runs at the same depth of Python's frame stack in the bare
    and in the profiled process. It matters: with the loops in the children's
    own functions, 32 bytes more of child_profile's frame (two locals and a
    larger return dict) made deep_nested's profiled process 12 to 14% slower
    than its bare partner in every round, profiled or not, and 4 dummy
    locals did the same (docs/profile-validation.md, "Stack alignment")."""
    clock = time.perf_counter_ns
    i = 0
    while before(i):
        t0 = clock()
        step()
        after(i, clock() - t0)
        i += 1


def _drive(child):
    """Runs a child: a generator that sets up, yields (step, before, after)
    for each of its loops (the profiled one; opskew's tracer's before and
    after it) and returns its result (a generator's frame is not on the frame
    stack while it is suspended). An exception in the steps is thrown into it
    at the yield, so its `with` blocks end as they would."""
    try:
        loop = next(child)
        while True:
            try:
                _steps(*loop)
            except BaseException as exc:
                loop = child.throw(exc)
                continue
            loop = child.send(None)
    except StopIteration as done:
        return done.value


def child_bare(a):
    """The unprofiled loop: each step timed alone. In lockstep, in turns of
    --chunk steps while the profiled process waits (the first step of each
    turn, cold after the other process's turn, is not counted)."""
    turns = _Turns(a) if a.token_in is not None else None
    torch, step = _setup(a.workload)
    warm = _warm(step, a.warmup_s)
    times = []
    if turns is not None:
        per_turn = []

        def before(i):
            if i % a.chunk == 0:
                if i:  # a turn ends
                    per_turn.append(_median(times[-(a.chunk - 1):]))
                    turns.give()
                if a.turns and len(per_turn) >= a.turns:
                    return False
                return turns.take()
            return True

        def after(i, ns):
            if i % a.chunk:
                times.append(ns)

        yield step, before, after
        return {"warmup_steps": warm, "steps_ns": times, "median_ns": _median(times), "turn_medians_ns": per_turn}
    t_end = time.perf_counter() + a.bare_s
    yield (step, lambda i: len(times) < a.min_bare_steps or time.perf_counter() < t_end,
           lambda i, ns: times.append(ns))
    return {"warmup_steps": warm, "steps_ns": times, "median_ns": _median(times)}


def _steps_of(path):
    """ProfilerStep#N -> duration (ns) in the trace at `path`, by opskew's C reader."""
    from opskew.analyze.tracefile import summarize

    s = summarize(path, categories=["user_annotation"])
    return {int(o["name"].split("#")[1]): o["total_ns"] for o in s["ops"]
            if o["name"].startswith("ProfilerStep#") and o["calls"] == 1}


def child_profile(a):
    """The loop under opskew.profile; step times from its traces. Then, in
    the same process, opskew's tracer over the same loop before and after it:
    the leaf operators' reference (a tracer run in another process, minutes
    apart, differed by up to 2x on the 2-core VM; one right after the loop,
    by up to 30%)."""
    turns = _Turns(a) if a.token_in is not None else None
    if a.tracer_steps:
        from opskew.tracer.session import arrange

        arrange("itt")  # the ITT collector must be configured before torch loads
    import opskew

    torch, step = _setup(a.workload)
    warm = _warm(step, a.warmup_s)
    # The tracer runs right before and right after the profiled loop, and
    # its leaves are the mean of the two: the machine's speed moves within
    # seconds, and the profiled loop lies between them.
    if turns is not None:
        # In lockstep the tracers run with the token held: the bare partner
        # is past its warm-up then, and waits.
        turns.give()
        turns.take()
    tracer_before = (yield from _tracer_leaves(step, a)) if a.tracer_steps else None
    out_dir = tempfile.mkdtemp(prefix="vp-traces-", dir=a.tmp)
    sched = torch.profiler.schedule(wait=a.wait, warmup=1, active=a.active, repeat=a.repeat)
    cycle = a.wait + 1 + a.active
    n_steps = a.repeat * cycle
    t0 = time.perf_counter()
    acts = [torch.profiler.ProfilerActivity.CPU]
    if a.workload in CUDA_WORKLOADS:
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with opskew.profile(activities=acts, schedule=sched,
                        corrected_dir=out_dir, report_file=None, leaf_reference=not a.no_leaf_reference,
                        cost_model=a.cost_model,
                        **CONFIGS[a.config]) as prof:
        def before(i):
            if i >= n_steps:
                return False
            if turns is not None and i % cycle == 0:
                # The bare process's turn, before each cycle: in the body of
                # the first wait step after a trace (cold anyway: opskew
                # never pairs it).
                turns.give()
                turns.take()
            return True

        yield step, before, lambda i, ns: prof.step()
    loop_s = time.perf_counter() - t0
    cycles, raw_all, cor_all, cor_warm, leaf_runs, leaf_lo_runs, leaf_hi_runs = [], [], [], [], [], [], []
    for rep in prof.reports:
        c = {k: rep.get(k) for k in ("cycle", "w_ns", "corrected_w_ns", "w_source", "pairs", "inflation",
                                     "baseline_step_ns",
                                     "active_step_ns", "events_per_active_step", "cold_first_active_extra_ns",
                                     "warmup_extra_per_step_ns", "delta_ns", "w_py_ns", "stop_ns",
                                     "leaf_delta", "w_by_cycle")}
        c["skewed"] = rep["verdict"]["skewed"]
        c["marks"] = (rep.get("operators") or {}).get("marks")
        raw = _steps_of(rep["raw_trace"]) if rep.get("raw_trace") else {}
        c["raw_steps_ns"] = raw
        if rep.get("corrected_trace"):
            cor = _steps_of(rep["corrected_trace"])
            c["corrected_steps_ns"] = cor
            first = min(cor) if cor else None
            raw_all += list(raw.values())
            cor_all += list(cor.values())
            cor_warm += [v for k, v in cor.items() if k != first]
            leaves = [o for o in rep["operators"]["ops"]
                      if not o["python"] and o["descendants_per_call"] == 0 and o["calls"] >= 5]
            leaf_runs.append({o["name"]: o["corrected_total_ns"]["median"] / o["calls"] for o in leaves})
            # Their 95% intervals: W's CI, delta's spread over operators and,
            # for record_function ranges under with_stack, the interpreter's
            # slowdown (opskew.bytecode) widen them.
            leaf_lo_runs.append({o["name"]: o["corrected_total_ns"]["ci95"][0] / o["calls"] for o in leaves})
            leaf_hi_runs.append({o["name"]: o["corrected_total_ns"]["ci95"][1] / o["calls"] for o in leaves})
        cycles.append(c)
    # The ProfilerStep#N annotation spans the body plus the parts of
    # step() inside it (record_function exit/enter, opskew's own timing):
    # per active step, the raw annotation minus opskew's timing of the body.
    body = {s["step"]: s["ns"] for s in prof.steps if s["phase"] == "active"}
    overhang = [v - body[k] for c in cycles for k, v in c["raw_steps_ns"].items() if k in body]
    last = dict(prof.report or {})
    # An opskew.profile that estimates W once more at stop() from every step
    # and corrects every trace again with it keeps that as `prof.final`: the
    # traces read above carry it, so it is the row's W.
    final = getattr(prof, "final", None)
    if isinstance(final, dict) and final.get("w_ns"):
        last.update({"w_ns": final["w_ns"], "pairs": final.get("pairs"), "delta_ns": final.get("delta_ns"),
                     "w_source": "in-run, the run's final W (prof.final)"})
    # The last 6 wait steps of each block, the ones opskew pairs with (never
    # the first 2: in lockstep the first holds the bare partner's turn too).
    first_paired = max(2, a.wait - 6)
    in_loop = {ph: _median([s["ns"] for s in prof.steps if s["phase"] == ph and s["step"] % cycle >= first_paired])
               for ph in ("wait", "active")}
    tracer = None
    if a.tracer_steps:
        after = yield from _tracer_leaves(step, a)
    if turns is not None:
        turns.give(more=False)
    if a.tracer_steps:
        both = [tracer_before["leaf_ns"], after["leaf_ns"]]
        tracer = {**after, "delta_ns": (tracer_before["delta_ns"] + after["delta_ns"]) / 2,
                  "leaf_ns": {n: sum(r[n] for r in both) / 2 for n in set(both[0]) & set(both[1])},
                  "leaf_before_ns": both[0], "leaf_after_ns": both[1]}
    return {"warmup_steps": warm, "loop_s": loop_s, "steps": n_steps, "cycles": cycles, "tracer": tracer,
            "corrected_cycles": sum(1 for c in cycles if "corrected_steps_ns" in c),
            "w_ns": last.get("w_ns"), "w_source": last.get("w_source"), "pairs": last.get("pairs"),
            # The in-process model beside the in-run W (--cost-model always):
            # its median at each capture, the miss docs/profile.md states.
            "w_model_ns": [(r.get("w_model_ns") or {}).get("median") for r in prof.reports
                           if r.get("w_model_ns")],
            "model_ns": [r.get("model_ns") for r in prof.reports],
            "w_py_ns": last.get("w_py_ns"), "delta_ns": last.get("delta_ns"),
            "events_per_active_step": last.get("events_per_active_step"),
            "notes": last.get("notes"), "fallback": last.get("fallback"),
            "audit": last.get("audit"), "marks": _marks(last),
            "raw_step_ns": _median(raw_all), "corrected_step_ns": _median(cor_all),
            # opskew's own figure: its timing of the paired active bodies less
            # W x events (the report's, from every step: prof.final); the one
            # to read where the corrected trace is written stretched.
            "report_corrected_step_ns": (final or {}).get("corrected_step_ns") if isinstance(final, dict) else None,
            # The pairs' own figure (active bodies less W x events, the cold
            # first step never paired): the report's before it took its traces'.
            "pairs_corrected_step_ns": (final or {}).get("corrected_step_pairs_ns") if isinstance(final, dict) else None,
            # ... and at the ends of W's 95% CI: the band W's uncertainty gives it.
            "report_corrected_step_w_ci_ns": (final or {}).get("corrected_step_w_ci_ns")
            if isinstance(final, dict) else None,
            "corrected_step_warm_ns": _median(cor_warm),
            "in_loop_wait_step_ns": in_loop["wait"], "in_loop_active_step_ns": in_loop["active"],
            "annotation_overhang_ns": _median(overhang),
            "leaf_ns": _median_by_name(leaf_runs), "leaf_low_ns": _median_by_name(leaf_lo_runs),
            "leaf_high_ns": _median_by_name(leaf_hi_runs),
            "bytecode": (last.get("bytecode") or {}).get("factor")}


def _median_by_name(runs):
    names = set().union(*runs) if runs else set()
    return {n: _median([r[n] for r in runs if n in r]) for n in names}


def _tracer_leaves(step, a):
    """Leaf operators' durations in opskew's own tracer (ITT), corrected
    with its own self-calibrated delta. A generator (yield from it in a
    child): its steps run under _steps, at the profiled loop's depth."""
    from opskew.analyze.tracefile import correct
    from opskew.stats.costmodel import CostModel
    from opskew.tracer.session import trace

    _warm(step, 0.1, min_steps=5)
    path = os.path.join(tempfile.mkdtemp(prefix="vp-tracer-", dir=a.tmp), "opskew.json")
    with trace(instrument="itt") as t:
        yield step, (lambda i: i < a.tracer_steps), (lambda i, ns: None)
    t.write(path)
    cal = t.calibration or {"w_ns": 0.0, "delta_ns": 0.0}
    w = max(cal["w_ns"], 0.0)
    d = min(max(cal["delta_ns"], 0.0), w)
    res = correct(path, CostModel.default(w, d))
    leaves = {o["name"]: o["corrected_total_ns"] / o["calls"] for o in res["ops"]
              if o["descendants"] == 0 and o["calls"] >= 5 and not o.get("python")}
    return {"instrument": t.instrument, "w_ns": w, "delta_ns": d, "steps": a.tracer_steps, "leaf_ns": leaves}


def _marks(rep: dict) -> dict | None:
    """The last report's per-operator trust marks, counted: {mark: operators}."""
    ops = (rep.get("operators") or {}).get("ops")
    if not ops:
        return None
    out: dict = {}
    for o in ops:
        out[o.get("mark")] = out.get(o.get("mark"), 0) + 1
    return out


CHILDREN = {"bare": child_bare, "profile": child_profile}


# -------------------------------------------------------------------- parent
def log(msg):
    print(msg, file=sys.stderr, flush=True)


def _child_cmd(kind, workload, args, tmp, config=None, extra=()):
    out = os.path.join(tmp, f"child-{kind}-{workload}-{config or ''}-{time.monotonic_ns()}.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, "--workload", workload,
           "--child-out", out, "--tmp", tmp, "--warmup-s", str(args.warmup_s), "--bare-s", str(args.bare_s),
           "--min-bare-steps", str(args.min_bare_steps), "--wait", str(args.wait), "--active", str(args.active),
           "--repeat", str(args.repeat), "--tracer-steps", str(args.tracer_steps),
           *(["--no-leaf-reference"] if args.no_leaf_reference else []), "--cost-model", args.cost_model, *extra]
    if config:
        cmd += ["--config", config]
    return cmd, out


def _child_result(kind, workload, config, rc, stderr, out, took):
    if rc != 0 or not os.path.exists(out):
        tail = (stderr or "").strip().splitlines()[-5:]
        log(f"    {kind} {workload} {config or ''}: FAILED (exit {rc}): " + " | ".join(tail))
        return {"error": f"exit {rc}: " + " | ".join(tail)}
    with open(out) as f:
        res = json.load(f)
    res["child_s"] = took
    return res


def run_child(kind, workload, args, tmp, config=None):
    cmd, out = _child_cmd(kind, workload, args, tmp, config)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.child_timeout)
    return _child_result(kind, workload, config, p.returncode, p.stderr, out, time.monotonic() - t0)


def lockstep_cpus(workload):
    """The CPUs both processes of a lockstep pair are pinned to: the last
    ones this process may use, as many as the workload's threads; None
    where affinity cannot be set."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[-WORKLOADS[workload][1]:]


def run_pair(workload, args, tmp, config):
    """A profiled process and a bare one in lockstep (--pairing lockstep):
    started together, pinned to the same CPUs, passing a token through two
    pipes so that one runs while the other waits: a turn of --chunk bare
    steps before each of the profile's cycles. Both see the machine in the
    same seconds. Returns (profile result, bare result)."""
    to_bare, to_prof = os.pipe(), os.pipe()  # (read, write) each
    cpus = lockstep_cpus(workload)
    pin = ["--cpus", ",".join(map(str, cpus))] if cpus else []
    chunk = args.chunk or (args.wait + 1 + args.active)
    specs = [("profile", config, to_prof[0], to_bare[1]), ("bare", None, to_bare[0], to_prof[1])]
    procs = []
    t0 = time.monotonic()
    try:
        for kind, cfg, rfd, wfd in specs:
            cmd, out = _child_cmd(kind, workload, args, tmp, cfg,
                                  ["--token-in", str(rfd), "--token-out", str(wfd), "--chunk", str(chunk), *pin])
            procs.append((kind, cfg, out, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                                           text=True, pass_fds=(rfd, wfd))))
    finally:
        # Only the children hold the pipes now: one that ends closes its
        # ends, and the other reads the end instead of waiting forever.
        for fd in (*to_bare, *to_prof):
            os.close(fd)
    res = {}
    deadline = time.monotonic() + args.child_timeout
    for kind, cfg, out, p in procs:
        try:
            _, err = p.communicate(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            for *_, q in procs:
                q.kill()
            _, err = p.communicate()
        res[kind] = _child_result(kind, workload, cfg, p.returncode, err, out, time.monotonic() - t0)
    return res["profile"], res["bare"]


def calibrate(args, tmp):
    cfgs = []
    for c in args.configs:
        cfgs += ["--config", "minimal" if c == "minimal" else c.replace("+", ",")]
    out = os.path.join(tmp, "calibration.json")
    # OPSKEW_NATIVE=0: opskew's tracer calibrates (for delta) with ITT, and
    # nothing is compiled.
    cmd = [sys.executable, "-m", "opskew", "calibrate", "--trials", str(args.cal_trials),
           *cfgs, "--json", out]
    log("$ " + " ".join(["opskew"] + cmd[3:]))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "OPSKEW_NATIVE": "0"})
    if p.returncode != 0:
        log(f"  calibrate failed (exit {p.returncode}): {p.stderr.strip()[-400:]}")
        return {}
    for line in p.stdout.splitlines():
        if "W " in line and "torch.profiler" in line:
            log("  " + line.strip())
    with open(out) as f:
        return {c["key"]["config"]: c for c in json.load(f)["calibrations"]}


def leaf_compare(prof_leaf, ref_leaf, prof_low=None, prof_high=None):
    """`prof_low`, `prof_high`: the ends of opskew's 95% interval for each
    leaf: a disagreeing leaf whose reference lies between them (each end
    within the tolerance) is counted in `within_interval`."""
    prof_low, prof_high = prof_low or {}, prof_high or {}
    common = sorted(set(prof_leaf) & set(ref_leaf))

    def tol(n):
        return max(0.15 * ref_leaf[n], 100.0)

    agree = [n for n in common if abs(prof_leaf[n] - ref_leaf[n]) <= tol(n)]
    within = [n for n in common if n not in agree and n in prof_low
              and prof_low[n] - tol(n) <= ref_leaf[n] <= prof_high.get(n, prof_leaf[n]) + tol(n)]
    worst = max(common, key=lambda n: abs(prof_leaf[n] - ref_leaf[n]) / max(0.15 * ref_leaf[n], 100.0),
                default=None)
    return {"compared": len(common), "agree": len(agree), "within_interval": within,
            "worst": worst and {"name": worst, "profile_ns": prof_leaf[worst], "opskew_ns": ref_leaf[worst]},
            "disagree": [{"name": n, "profile_ns": prof_leaf[n], "opskew_ns": ref_leaf[n]}
                         for n in common if n not in agree],
            # Every leaf compared, for a look at the excess by operator (the
            # table prints the counts and the worst only).
            "all": [{"name": n, "profile_ns": prof_leaf[n], "opskew_ns": ref_leaf[n],
                     "interval_ns": [prof_low.get(n), prof_high.get(n)]} for n in common]}


def make_row(wname, cname, rounds, cals, tolerance):
    """One table row from `rounds`: [(profile result, [the bare results just
    before and after it])]. Each round's steps are compared with the bare
    steps of the processes around it; the row gives the median over rounds
    of each ratio, and the pooled figures."""
    row = {"workload": wname, "config": cname, "threads": WORKLOADS[wname][1], "what": WORKLOADS[wname][2]}
    cal = cals.get(cname) or {}
    row["w_micro_ns"] = (cal.get("w_ns") or {}).get("median")
    row["w_py_micro_ns"] = (cal.get("w_py_ns") or {}).get("median")
    row["delta_micro_ns"] = (cal.get("delta_ns") or {}).get("median")
    row["rounds"] = []
    ratios = {k: [] for k in ("raw_step", "corrected_step", "corrected_step_warm", "in_loop_wait_step",
                              "report_corrected_step", "pairs_corrected_step")}
    trace_vs_report = []
    bare_all, errors = [], []
    for prof, bares in rounds:
        steps = [t for b in bares if "steps_ns" in b for t in b["steps_ns"]]
        bare = _median(steps)
        bare_all += steps
        rd = {"bare_step_ns": bare, "bare_runs_ns": [b.get("median_ns") for b in bares]}
        turns = [b["turn_medians_ns"] for b in bares if "turn_medians_ns" in b]
        if turns:  # lockstep: the partner's step, turn by turn
            rd["bare_turn_medians_ns"] = turns[0]
        if "error" in prof:
            rd["error"] = prof["error"]
            errors.append(prof["error"])
        else:
            rd.update({k: v for k, v in prof.items() if k not in ("leaf_ns", "tracer")})
            for k in ratios:
                v = prof.get(k + "_ns")
                if v is not None and bare:
                    ratios[k].append(v / bare - 1)
                    rd[k + "_err"] = v / bare - 1
            # The corrected trace's median step against the report's, in the
            # same process (issue 35's acceptance: within 2%).
            if prof.get("corrected_step_ns") and prof.get("report_corrected_step_ns"):
                rd["trace_vs_report"] = prof["corrected_step_ns"] / prof["report_corrected_step_ns"] - 1
                trace_vs_report.append(rd["trace_vs_report"])
            band = prof.get("report_corrected_step_w_ci_ns")
            if band and bare:
                rd["bare_in_w_band"] = band[0] <= bare <= band[1]
        row["rounds"].append(rd)
    row["bare_step_ns"] = _median(bare_all)
    ok = [rd for rd in row["rounds"] if "error" not in rd]
    if not ok:
        row["error"] = errors[0] if errors else "no round"
        row["pass"] = False
        return row
    last = ok[-1]
    for k in ("w_ns", "w_source", "pairs", "w_py_ns", "delta_ns", "events_per_active_step", "notes", "fallback",
              "corrected_cycles", "steps"):
        row[k] = last.get(k)
    row["w_ns_rounds"] = [(rd.get("w_ns") or {}).get("median") for rd in ok]
    row["w_model_ns_rounds"] = [_median(rd["w_model_ns"]) for rd in ok if rd.get("w_model_ns")]
    for k in ("raw_step", "corrected_step", "corrected_step_warm", "in_loop_wait_step", "in_loop_active_step",
              "annotation_overhang", "report_corrected_step", "pairs_corrected_step"):
        row[k + "_ns"] = _median([rd[k + "_ns"] for rd in ok if rd.get(k + "_ns") is not None])
    row["trace_vs_report"] = _median(trace_vs_report)
    row["trace_vs_report_rounds"] = trace_vs_report
    for k, v in ratios.items():
        row[k + "_err"] = _median(v)
        row[k + "_err_rounds"] = v
    err = row.get("corrected_step_err")
    row["pass"] = bool(err is not None and abs(err) <= tolerance)
    inside = [rd["bare_in_w_band"] for rd in ok if "bare_in_w_band" in rd]
    row["bare_in_w_band_rounds"] = [sum(inside), len(inside)] if inside else None
    ref = [p["tracer"]["leaf_ns"] for p, _ in rounds if p.get("tracer")]
    if ref:
        row["leaf"] = leaf_compare(_median_by_name([p["leaf_ns"] for p, _ in rounds if "leaf_ns" in p]),
                                   _median_by_name(ref),
                                   _median_by_name([p["leaf_low_ns"] for p, _ in rounds if p.get("leaf_low_ns")]),
                                   _median_by_name([p["leaf_high_ns"] for p, _ in rounds if p.get("leaf_high_ns")]))
        row["tracer_delta_ns"] = _median([p["tracer"]["delta_ns"] for p, _ in rounds if p.get("tracer")])
    return row


def fmt_rounds(xs):
    return "[" + ", ".join("-" if x is None else f"{100 * x:+.1f}%" for x in (xs or [])) + "]"


def fmt_us(ns):
    return "-" if ns is None else f"{ns / 1000:.1f}"


def fmt_err(e):
    return "" if e is None else f" ({100 * e:+.1f}%)"


def table(rows, tolerance):
    lines = ["| workload | config | W in-run ns [95% CI] (pairs) | W micro ns | bare step us | raw step us (excess) "
             f"| corrected step us (error) | within {100 * tolerance:.0f}% | leaf ops within 15% or 100 ns "
             "of opskew | worst leaf (profile vs opskew ns) | step() inside ProfilerStep us | corrected, warm steps us (error) "
             "| report's corrected_step us (error) | trace vs report, same run | pairs' corrected step us (error) "
             "| bare inside its band at W's CI (rounds) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        w = r.get("w_ns")
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['config']} | failed: {r['error'][:80]} | | | | | FAIL | | | | | | | | |")
            continue
        ws = "-" if not w else (f"{w['median']:.0f}" + (f" [{w['ci95'][0]:.0f}, {w['ci95'][1]:.0f}]"
                                                        if w.get("ci95") else " [no CI]")
                                + f" ({r.get('pairs')})")
        if r.get("w_source") and not r["w_source"].startswith("in-run"):
            ws += " (" + r["w_source"].split(" /")[0] + ")"
        wm = "-" if r.get("w_micro_ns") is None else f"{r['w_micro_ns']:.0f}"
        if r.get("w_py_micro_ns"):
            wm += f" / W_py {r['w_py_micro_ns']:.0f}"
        lf = r.get("leaf") or {}
        worst = lf.get("worst")
        lines.append(
            f"| {r['workload']} | {r['config']} | {ws} | {wm} | {fmt_us(r['bare_step_ns'])} | "
            f"{fmt_us(r.get('raw_step_ns'))}{fmt_err(r.get('raw_step_err'))} | "
            f"{fmt_us(r.get('corrected_step_ns'))}{fmt_err(r.get('corrected_step_err'))} | "
            f"{'pass' if r['pass'] else 'FAIL'} | "
            + (f"{lf['agree']}/{lf['compared']}" if lf else "-")
            + (f" (+{len(lf['within_interval'])} in interval)" if lf.get("within_interval") else "") + " | "
            + (f"{worst['name']}: {worst['profile_ns']:.0f} vs {worst['opskew_ns']:.0f}" if worst else "-")
            + f" | {fmt_us(r.get('annotation_overhang_ns'))} | "
            f"{fmt_us(r.get('corrected_step_warm_ns'))}{fmt_err(r.get('corrected_step_warm_err'))} | "
            f"{fmt_us(r.get('report_corrected_step_ns'))}{fmt_err(r.get('report_corrected_step_err'))} | "
            f"{'-' if r.get('trace_vs_report') is None else '%+.1f%%' % (100 * r['trace_vs_report'])} | "
            f"{fmt_us(r.get('pairs_corrected_step_ns'))}{fmt_err(r.get('pairs_corrected_step_err'))} | "
            + ("-" if not r.get("bare_in_w_band_rounds") else "%d/%d" % tuple(r["bare_in_w_band_rounds"])) + " |")
    return "\n".join(lines)


def conditions(args):
    import importlib.metadata as md

    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    except OSError:
        pass
    tv = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                        capture_output=True, text=True).stdout.strip()
    return {"torch": tv, "opskew": md.version("opskew"), "python": platform.python_version(),
            "machine": f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}",
            "threads": {w: WORKLOADS[w][1] for w in args.workloads},
            "load_avg_start": os.getloadavg(),
            "schedule": f"wait={args.wait}, warmup=1, active={args.active}, repeat={args.repeat}",
            "pairing": args.pairing, "chunk": args.chunk or (args.wait + 1 + args.active),
            "lockstep_cpus": {w: lockstep_cpus(w) for w in args.workloads} if args.pairing == "lockstep" else None,
            "bare_s": args.bare_s, "warmup_s": args.warmup_s, "tracer_steps": args.tracer_steps,
            "calibrated": not args.no_calibrate, "cal_trials": args.cal_trials}


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="minimal,record_shapes+with_stack",
                    help="comma-separated, of: " + ", ".join(CONFIGS) + " (default: both)")
    ap.add_argument("--workloads", default=",".join(w for w in WORKLOADS if w not in CUDA_WORKLOADS),
                    help="comma-separated, of: " + ", ".join(WORKLOADS) + " (default: all but "
                    + ", ".join(sorted(CUDA_WORKLOADS)) + ", which need a GPU)")
    ap.add_argument("--json", help="write the conditions and every row (with details) here")
    ap.add_argument("--rounds", type=int, default=3,
                    help="profiled runs per workload and config, each between two bare runs (default 3)")
    ap.add_argument("--wait", type=int, default=21, help="the schedule's wait steps per cycle (default 21)")
    ap.add_argument("--active", type=int, default=7, help="the schedule's active steps per cycle (default 7)")
    ap.add_argument("--repeat", type=int, default=5, help="the schedule's cycles (default 5)")
    ap.add_argument("--bare-s", type=float, default=0.8, help="seconds of timed steps per bare run (default 0.8)")
    ap.add_argument("--min-bare-steps", type=int, default=30, help="at least this many timed bare steps (30)")
    ap.add_argument("--warmup-s", type=float, default=0.4,
                    help="seconds of warm-up steps before timing, in every child (default 0.4)")
    ap.add_argument("--tracer-steps", type=int, default=20, help="steps under opskew's tracer (default 20)")
    ap.add_argument("--cost-model", choices=("auto", "always", "off"), default="auto",
                    help="opskew.profile's cost_model: always measures the in-process model at every capture, "
                         "beside the in-run W (the model's miss; default auto)")
    ap.add_argument("--no-leaf-reference", action="store_true",
                    help="opskew.profile(leaf_reference=False): one delta for every operator (an A/B of the leaf "
                         "reference)")
    ap.add_argument("--tolerance", type=float, default=0.10, help="the corrected step's target (default 0.10)")
    ap.add_argument("--no-calibrate", action="store_true",
                    help="do not run `opskew calibrate` first (no stored delta / W_py; no micro W column)")
    ap.add_argument("--cal-trials", type=int, default=15, help="rounds of the `opskew calibrate` run (15)")
    ap.add_argument("--pairing", choices=("lockstep", "sequential"), default="lockstep",
                    help="lockstep (default): each profiled process runs with a bare one, pinned to the same "
                         "CPU(s), in turns (a turn of --chunk bare steps before each cycle): both see the "
                         "machine in the same seconds. sequential: bare, profiled, bare, ... processes one "
                         "after another, each profiled one compared with the two around it")
    ap.add_argument("--chunk", type=int, default=0,
                    help="bare steps per turn in lockstep (default: the schedule's cycle, wait+1+active)")
    ap.add_argument("--child-timeout", type=float, default=300)
    # The children's own arguments.
    ap.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    ap.add_argument("--workload", help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    ap.add_argument("--token-in", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--token-out", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--cpus", help=argparse.SUPPRESS)
    ap.add_argument("--turns", type=int, default=0, help=argparse.SUPPRESS)  # a bare child's turns (0: until told)
    args = ap.parse_args(argv)
    if not args.child:
        args.configs = [c for c in args.configs.split(",") if c]
        args.workloads = [w for w in args.workloads.split(",") if w]
        for c in args.configs:
            if c not in CONFIGS:
                ap.error(f"unknown config {c!r} (choose from {', '.join(CONFIGS)})")
        for w in args.workloads:
            if w not in WORKLOADS:
                ap.error(f"unknown workload {w!r} (choose from {', '.join(WORKLOADS)})")
        if args.chunk < 0 or args.chunk == 1:
            ap.error("--chunk: at least 2 bare steps a turn (the first of each turn is not counted), or 0")
    return args


def main(argv=None):
    args = parse(argv)
    if args.child:
        os.environ.setdefault("KINETO_LOG_LEVEL", "6")
        res = _drive(CHILDREN[args.child](args))
        with open(args.child_out, "w") as f:
            json.dump(res, f)
        return 0
    t_start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="opskew-validate-profile-")
    # Every child shares this cache (and nothing goes to ~/.cache/opskew).
    os.environ["OPSKEW_CACHE_DIR"] = os.path.join(tmp, "cache")
    os.environ["KINETO_LOG_LEVEL"] = "6"
    try:
        cond = conditions(args)
        log(f"opskew.profile validation: {len(args.workloads)} workload(s) x {len(args.configs)} config(s); "
            f"torch {cond['torch']}; {cond['machine']}; temp {tmp}")
        cals = {} if args.no_calibrate else calibrate(args, tmp)
        rows = []
        for i, wname in enumerate(args.workloads):
            log(f"[{i + 1}/{len(args.workloads)}] {wname}: {WORKLOADS[wname][2]}")
            # Alternate the configurations' order between workloads, so that
            # neither is always measured first; a bare run between any two
            # profiled ones.
            order = args.configs if i % 2 == 0 else args.configs[::-1]
            per_cfg = {c: [] for c in order}
            if args.pairing == "lockstep":
                for _ in range(args.rounds):
                    for cname in order:
                        prof, bare = run_pair(wname, args, tmp, cname)
                        per_cfg[cname].append((prof, [bare]))
            else:
                seq = [run_child("bare", wname, args, tmp)]
                for _ in range(args.rounds):
                    for cname in order:
                        prof = run_child("profile", wname, args, tmp, cname)
                        seq.append(run_child("bare", wname, args, tmp))
                        per_cfg[cname].append((prof, seq[-2:]))
            for cname in order:
                r = make_row(wname, cname, per_cfg[cname], cals, args.tolerance)
                rows.append(r)
                lf = r.get("leaf") or {}
                errs = ", ".join(f"{100 * e:+.1f}%" for e in r.get("corrected_step_err_rounds") or [])
                log(f"    {cname}: bare {fmt_us(r['bare_step_ns'])} us, raw {fmt_us(r.get('raw_step_ns'))}"
                    f"{fmt_err(r.get('raw_step_err'))}, corrected {fmt_us(r.get('corrected_step_ns'))}"
                    f"{fmt_err(r.get('corrected_step_err'))} (rounds: {errs}), report's "
                    f"{fmt_us(r.get('report_corrected_step_ns'))}{fmt_err(r.get('report_corrected_step_err'))}, "
                    f"W {((r.get('w_ns') or {}).get('median') or 0):.0f} ns ({r.get('pairs')} pairs), "
                    f"overhang {fmt_us(r.get('annotation_overhang_ns'))} us, leaf {lf.get('agree')}/{lf.get('compared')}, "
                    f"the run's wait steps vs bare {fmt_rounds(r.get('in_loop_wait_step_err_rounds'))}"
                    + ("" if r["pass"] else "  <- outside the target"))
        cond["load_avg_end"] = os.getloadavg()
        cond["wall_s"] = time.monotonic() - t_start
        cmd = "python bench/validate_profile.py " + " ".join(sys.argv[1:] if argv is None else argv)
        print(f"\n{cmd.strip()}\n")
        print(f"torch {cond['torch']}, opskew {cond['opskew']}, Python {cond['python']}; {cond['machine']}; "
              f"intra-op threads 1 (two_threads: 2); schedule({cond['schedule']}); {args.rounds} round(s) per row, "
              + (f"each a profiled process in lockstep with a bare one on the same CPU(s) (a turn of "
                 f"{cond['chunk']} bare steps before each cycle); errors are medians over rounds of (figure / "
                 f"bare step of its partner - 1)" if args.pairing == "lockstep" else
                 f"each a profiled process between two bare ones ({args.bare_s} s of steps each); errors are "
                 f"medians over rounds of (figure / bare step of the processes around it - 1)")
              + f"; load average "
              f"{cond['load_avg_start'][0]:.2f} -> {cond['load_avg_end'][0]:.2f}; "
              f"{'micro calibration stored first' if cond['calibrated'] else 'no stored calibration'}; "
              f"leaf reference {'off' if args.no_leaf_reference else 'on'}; "
              f"{cond['wall_s']:.0f} s in all\n")
        print(table(rows, args.tolerance))
        passed = sum(r["pass"] for r in rows)
        print(f"\n{passed}/{len(rows)} rows within {100 * args.tolerance:.0f}% of the bare step")
        lfs = [r["leaf"] for r in rows if r.get("leaf")]
        if lfs:
            inside = sum(len(lf.get("within_interval") or ()) for lf in lfs)
            print(f"{sum(lf['agree'] for lf in lfs)}/{sum(lf['compared'] for lf in lfs)} leaves within 15% or 100 ns "
                  f"of opskew's tracer; of the others, {inside} lie inside opskew's 95% interval for them "
                  "(W's CI, delta's spread over operators, Python code's slowdown under with_stack)")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"schema": "opskew.validate_profile/1", "command": cmd.strip(), "conditions": cond,
                           "rows": rows}, f, indent=1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
