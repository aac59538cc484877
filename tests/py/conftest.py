import json
import os
import subprocess
import sys

import pytest


def run_opskew(*args, timeout=300, env=None, cwd=None):
    """Runs the installed command line in a subprocess, as a user would."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "opskew", *args], capture_output=True, text=True,
                          timeout=timeout, env=e, cwd=cwd)


def seed_native_cache(cache_dir):
    """Copies the native shim, built once per test run in the default cache,
    into a test's own OPSKEW_CACHE_DIR, so the run compiles it only once."""
    import shutil

    import torch

    from opskew import native

    if native.shim(torch)[0] is not None:
        shutil.copytree(native.cache_root(), os.path.join(str(cache_dir), "native"), dirs_exist_ok=True)


@pytest.fixture
def opskew():
    return run_opskew


@pytest.fixture
def check_json(tmp_path):
    """Runs `opskew check ... --json FILE` and returns (process, parsed JSON or None)."""

    def go(*args, expect_rc=0):
        out = tmp_path / f"check-{len(list(tmp_path.iterdir()))}.json"
        p = run_opskew("check", *args, "--json", str(out))
        assert p.returncode == expect_rc, f"rc={p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
        return p, (json.loads(out.read_text()) if out.exists() else None)

    return go


@pytest.fixture(scope="session")
def has_cuda():
    import torch

    return torch.cuda.is_available()
