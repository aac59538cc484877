"""Which operator times of a profiler trace can you believe? A notebook-style
example of opskew's Python API (docs/api.md): run it with

    python docs/examples/verdict.py

It measures, on a small MLP training step of its own, what torch.profiler adds
per recorded event (W, with its 95% confidence interval), then reads one
profiled step corrected with that W and prints, per operator, the reported and
the corrected time and a trust mark. It writes no file.
"""

import opskew  # does not import torch; the first measurement does

# %% A small workload: one training step of a two-layer MLP, many small ops.
import torch

torch.manual_seed(0)


def make_state():
    """Runs once; its result is passed to `step`."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return model, torch.randn(4, 8), torch.randn(4, 4)


def step(state):
    """One iteration: forward, loss, backward, a plain SGD update. The tensors
    are tiny, so each operator takes a few microseconds: the case where the
    profiler's cost per event matters."""
    model, x, y = state
    for p in model.parameters():
        p.grad = None
    torch.nn.functional.mse_loss(model(x), y).backward()
    with torch.no_grad():
        for p in model.parameters():
            p.sub_(p.grad, alpha=0.01)


# %% Measure: interleaved trials with and without the profiler (few, to stay quick).
r = opskew.check(step, setup=make_state, trials=10, iters=10, warmup=0.2)

# %% The headline: what one recorded event costs, and whether the trace is skewed.
w = r.added_per_event_ns
print(f"workload: {r.conditions['workload']['description']}")
print(f"W = {w['median']:.0f} ns per event, 95% CI [{w['ci95'][0]:.0f}, {w['ci95'][1]:.0f}] ns, "
      f"{r.events_per_iter:.0f} events per step")
print(f"step: {1e6 * r.baseline['per_iter_s']:.1f} us bare, {1e6 * r.profiled['per_iter_s']:.1f} us profiled; "
      f"skewed: {r.verdict['skewed']}")

# %% The per-operator verdict: believable, inflated (use the corrected value), unresolved (W too wide to tell) or unknowable.
if "operators" not in r:
    raise SystemExit(f"no per-operator verdict: {r.to_dict().get('correction_error')}")
print("\nper-operator verdict (us per call):")
print(f"{'operator':34s} {'calls':>6s} {'reported':>9s} {'corrected':>9s}  mark")
for op in r.operators["ops"][:12]:
    calls = op["calls"]
    print(f"{op['name'][:34]:34s} {calls:6d} {op['reported_total_ns'] / calls / 1e3:9.2f} "
          f"{op['corrected_total_ns']['median'] / calls / 1e3:9.2f}  {op['mark']}")

# %% Where the instrument's time lands: inside the leaves, or between events.
print(f"\nwhere the skew lands: {r.where_skew_lands()}")

# %% In a notebook, `r` alone renders the same as an HTML table (r._repr_html_()),
# r.to_pandas() gives one row per operator when pandas is installed, and
# r.plot("verdict.png") draws the verdict.
