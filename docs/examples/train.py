"""A training loop that knows nothing of profilers: the script of
docs/walkthrough.md. `opskew profile -- python docs/examples/train.py` finds
its steps (one optimizer.step() each) and profiles them.

    python docs/examples/train.py [--steps N] [--width N]
"""

import argparse

import torch

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--steps", type=int, default=150, help="training steps (default %(default)s)")
ap.add_argument("--width", type=int, default=32, help="the hidden layers' width (default %(default)s)")
args = ap.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(16, args.width), torch.nn.ReLU(), torch.nn.Linear(args.width, args.width),
                            torch.nn.ReLU(), torch.nn.Linear(args.width, 4))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(8, 16), torch.randn(8, 4)
for _ in range(args.steps):
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
print(f"final loss {loss.item():.4f}")
