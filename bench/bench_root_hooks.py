"""What opskew.profile's bare-traffic hooks on the root module cost a loop's
forward (docs/profile.md, "Bare traffic between captures"): a 3-layer
nn.Sequential's forward, bare against with Traffic's root hook pair, in
the same process, alternating rounds; prints medians and the ratio.

    .venv/bin/python bench/bench_root_hooks.py
"""
import time, statistics, torch
from opskew.profiler.traffic import Traffic
torch.set_num_threads(1)
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8)).eval(); x = torch.randn(2, 8)
def med(n=2000):
    out = []
    for _ in range(15):
        t0 = time.perf_counter_ns()
        with torch.no_grad():
            for _ in range(n): m(x)
        out.append((time.perf_counter_ns() - t0) / n)
    return statistics.median(out)
res = {"bare": [], "root hooks": []}
t = None
for r in range(3):
    res["bare"].append(med())
    t = Traffic(); t.install()
    with torch.no_grad(): m(x); m(x)  # found, then timed
    assert t.root is not None
    res["root hooks"].append(med())
    del t
b, h = statistics.median(res["bare"]), statistics.median(res["root hooks"])
print(f"forward {b:.0f} ns bare, {h:.0f} ns with the root's hook pair: +{h-b:.0f} ns ({h/b:.3f}x), torch {torch.__version__}, 1 thread")
