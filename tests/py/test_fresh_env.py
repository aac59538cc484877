"""opskew installed into a user's own environment that already holds torch
(README, "Into your own environment"): pip keeps that torch, and `opskew check`
runs there.

The environment is a fresh `python -m venv` (no system site packages) that holds
torch before opskew comes. Installing torch into it for real takes about 50 s on
this machine (torch 2.13.0 from the local CPU wheel, its dependencies from the
registry: 48.3 s measured, 967 MB), more than this suite spends on one test; so by
default the venv gets the test environment's own torch (and numpy, and what torch
needs) through a .pth file naming a folder of links to them. pip sees that torch
as installed in the venv's path, which is what a satisfied requirement is to it.
OPSKEW_FRESH_TORCH=install installs torch==2.13.0 into the venv instead (the real
thing, about a minute more). The wheel is built once from the checkout, as a user
builds it (pip wheel --no-deps)."""

import hashlib
import importlib.metadata as md
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = ("import hashlib, os, torch, importlib.metadata as md\n"
         "d = os.path.dirname(torch.__file__)\n"
         "h = hashlib.sha256()\n"
         "for f in ('__init__.py', 'version.py', os.path.join('lib', 'libtorch_python.so')):\n"
         "    h.update(open(os.path.join(d, f), 'rb').read())\n"
         "print(torch.__version__, os.path.realpath(d), h.hexdigest(), md.version('torch'))\n")


def _requirements(name, seen):
    """`name` and every distribution it requires (without extras), recursively."""
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:
        return
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        return
    seen[key] = dist
    for req in dist.requires or []:
        if "extra ==" in req:
            continue
        _requirements(re.match(r"[A-Za-z0-9_.\-]+", req).group(0), seen)


def _link_torch(folder):
    """A folder of links to this environment's torch, numpy and their
    requirements (their top-level files and their .dist-info), for a .pth."""
    seen = {}
    for name in ("torch", "numpy"):
        _requirements(name, seen)
    os.makedirs(folder)
    for dist in seen.values():
        base = os.path.realpath(str(dist.locate_file("")))
        tops = {str(f).split("/")[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            src, dst = os.path.join(base, top), os.path.join(folder, top)
            if os.path.exists(src) and not os.path.lexists(dst) and top != "__pycache__":
                os.symlink(src, dst)
    return sorted(seen)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    d = tmp_path_factory.mktemp("wheel")
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "-w", str(d), ROOT], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    (whl,) = d.glob("opskew-*.whl")
    return str(whl)


def test_install_into_an_environment_with_its_own_torch(tmp_path, wheel):
    venv = tmp_path / "venv"
    p = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    py = str(venv / "bin" / "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    env = dict(os.environ, OPSKEW_CACHE_DIR=str(tmp_path / "cache"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    if os.environ.get("OPSKEW_FRESH_TORCH") == "install":
        p = subprocess.run([py, "-m", "pip", "install", "-q", "torch==2.13.0", "numpy"], capture_output=True,
                           text=True, timeout=900, env=env)
        assert p.returncode == 0, p.stderr
    else:
        linked = _link_torch(str(tmp_path / "torch-links"))
        assert "torch" in linked and "numpy" in linked
        with open(os.path.join(site, "user-torch.pth"), "w") as f:
            f.write(str(tmp_path / "torch-links") + "\n")
    before = subprocess.run([py, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert before.returncode == 0, before.stderr
    # As the README says: the wheel, with its dependencies resolved by pip
    # (no --no-deps): torch>=2.1 is satisfied, so pip keeps it.
    p = subprocess.run([py, "-m", "pip", "install", wheel], capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr
    assert re.search(r"Requirement already satisfied: torch>=2\.1", p.stdout), p.stdout
    assert not re.search(r"^(Collecting|Downloading|Installing collected packages:.*)torch", p.stdout, re.M)
    after = subprocess.run([py, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert after.returncode == 0 and after.stdout == before.stdout, (before.stdout, after.stdout)
    assert after.stdout.startswith("2.13.0")
    # matplotlib is an extra: not pulled in.
    p = subprocess.run([py, "-c", "import importlib.util as u; print(u.find_spec('matplotlib') is None)"],
                       capture_output=True, text=True, env=env)
    assert p.stdout.strip() == "True", "matplotlib came with opskew: it is the [plot] extra only"
    # opskew runs there, from the venv (not from this checkout or the test env).
    where = subprocess.run([py, "-c", "import opskew, os; print(os.path.realpath(opskew.__file__))"],
                           capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert where.stdout.startswith(os.path.realpath(site)), where.stdout
    p = subprocess.run([str(venv / "bin" / "opskew"), "check", "--trials", "2", "--iters", "2", "--calls", "100",
                        "--warmup", "0.1"], capture_output=True, text=True, env=env, timeout=300, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "opskew check: torch.add" in p.stdout and "torch 2.13.0" in p.stdout
