"""Workloads used by the tests as user TARGETs."""

import os

import torch

_calls = {"n": 0}


def setup():
    return torch.ones(8), torch.ones(8)


def step(state):
    a, b = state
    for _ in range(200):
        torch.mul(a, b)


def plain():
    a = torch.ones(4)
    for _ in range(100):
        torch.add(a, a)


def _past_fail_after():
    """Counts a call: True past the OPSKEW_TEST_FAIL_AFTER-th (default 40)."""
    _calls["n"] += 1
    return _calls["n"] > int(os.environ.get("OPSKEW_TEST_FAIL_AFTER", "40"))


def _adds():
    a = torch.ones(4)
    for _ in range(50):
        torch.add(a, a)


def fails_later():
    """Succeeds for a while, then raises: check must report what it measured."""
    if _past_fail_after():
        raise ValueError("synthetic failure in the workload")
    _adds()


def interrupted():
    if _past_fail_after():
        raise KeyboardInterrupt
    _adds()


not_callable = 42


def sized_relu(n):
    """A user operator for `opskew sweep --op wl.py:sized_relu`: one call at size n."""
    x = torch.ones(n)
    return lambda: torch.relu(x)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16))
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.encoder(x))


def mlp_setup():
    torch.manual_seed(0)
    model = _Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return {"model": model, "opt": opt, "x": torch.randn(8, 16), "y": torch.randn(8, 4)}


def mlp_step(s):
    """One training step: forward, backward, optimizer step."""
    s["opt"].zero_grad()
    loss = torch.nn.functional.mse_loss(s["model"](s["x"]), s["y"])
    loss.backward()
    s["opt"].step()


def _spin(ns):
    import time

    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def injected_setup():
    torch.manual_seed(0)
    return torch.randn(200_000), torch.randn(200_000)


def injected_children(state):
    """A known instrument cost, injected only while a profiler records and
    only around one operator's children: opskew::parent holds 4 aten::add
    (leaves, tens of microseconds each: 200,000 elements), and a busy-wait of
    OPSKEW_TEST_SPIN_NS (default 20000) runs before each
    child inside the parent, outside the children's own intervals. The
    verdict must mark the parent inflated and the children believable."""
    a, b = state
    spin = int(os.environ.get("OPSKEW_TEST_SPIN_NS", "20000"))
    on = torch.autograd.profiler._is_profiler_enabled
    with torch.profiler.record_function("opskew::parent"):
        for _ in range(4):
            if on:
                _spin(spin)
            torch.add(a, b)
