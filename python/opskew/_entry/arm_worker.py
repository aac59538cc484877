"""Runs paired rounds of the bare workload and opskew's tracer in a process of
its own, for `opskew matrix`.

The tracer needs its ITT collector configured before torch loads, while the
matrix's ITT-floor row needs a process where no collector is loaded: the two
cannot share a process. The parent passes its workload arguments as JSON on
argv[1]; this prints per-round numbers as JSON on stdout.
"""

from __future__ import annotations

import json
import sys

from opskew.measure.instruments import OpskewTracer
from opskew.measure.rounds import run_rounds
from opskew.measure.workload import load_target
from opskew.tracer.session import arrange


def main() -> int:
    cfg = json.loads(sys.argv[1])
    arrange()  # before torch (none of the modules above imports it)
    import torch

    torch.set_num_threads(cfg["threads"])
    wl = load_target(cfg["target"], device=cfg["device"], setup=cfg["setup"], calls=cfg["calls"],
                     numel=cfg["numel"])
    rounds = run_rounds(wl.iteration, {"baseline": None, "opskew": OpskewTracer(export=cfg["export"])},
                        trials=cfg["trials"], iters=cfg["iters"], device=cfg["device"],
                        warmup_s=cfg["warmup"])
    out = {
        "baseline": [t.window.wall_s for t in rounds.trials["baseline"]],
        "opskew": [{"wall_s": t.window.wall_s, "enter_s": t.enter_s, "stop_s": t.stop_s,
                    "post_s": t.post_s, "export_s": t.export_s, "export_bytes": t.export_bytes,
                    "events": t.op_events, "lost": t.extra.get("lost", 0)}
                   for t in rounds.trials["opskew"]],
        "error": None if rounds.error is None else f"{type(rounds.error).__name__}: {rounds.error}",
        "interrupted": rounds.interrupted,
    }
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
