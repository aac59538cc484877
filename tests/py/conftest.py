import json
import os
import signal
import subprocess
import sys
import zlib

import pytest

# Progress lines (render.progress) go to stderr by default, which many tests
# read line by line: off here; the tests of progress turn it on themselves.
os.environ.setdefault("OPSKEW_PROGRESS", "0")


def run_opskew(*args, timeout=300, env=None, cwd=None):
    """Runs the installed command line in a subprocess, as a user would."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "opskew", *args], capture_output=True, text=True,
                          timeout=timeout, env=e, cwd=cwd)


def python_c(code: str, timeout=120) -> str:
    """`python -c code` in a process of its own, which must exit 0: its standard output."""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr
    return p.stdout


def one_line_error(p, fragment):
    """Asserts that a finished command was a usage error (exit 2) told in
    one line of stderr that holds `fragment`, no traceback; returns the line."""
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in p.stderr
    return lines[0]


def threaded_adds(threads, adds):
    """A script for `opskew record`: `threads` threads, each calling
    torch.add(a, a) `adds` times on a 1-element `a`, joined."""
    return f"""
import threading, torch
a = torch.ones(1)
def work():
    for _ in range({adds}):
        torch.add(a, a)
ts = [threading.Thread(target=work) for _ in range({threads})]
[t.start() for t in ts]; [t.join() for t in ts]
"""


def proc_stat(pid):
    """The fields of /proc/PID/stat after the command's name (state first,
    then the parent's pid), or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def exited(pid):
    """True once pid has exited: gone, or a zombie nobody reaps (in a container)."""
    st = proc_stat(pid)
    return st is None or st[0] in ("Z", "X")


def _tree(pid):
    """pid and every process below it, parents first (from /proc)."""
    kids = {}
    for d in os.listdir("/proc"):
        st = proc_stat(d) if d.isdigit() else None
        if st and len(st) > 1 and st[1].isdigit():
            kids.setdefault(int(st[1]), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def _describe(pid):
    def read(name):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return "?"
    state = (proc_stat(pid) or ["?"])[0]
    return f"pid {pid} state {state} wchan {read('wchan')} cmd {read('cmdline').replace(chr(0), ' ')[:200]}"


def _kill(pids, sig):
    for p in reversed(pids):  # children first
        try:
            os.kill(p, sig)
        except OSError:  # gone already, or (pid reused) not ours
            pass


def kill_tree(proc, sig=signal.SIGKILL):
    """Sends sig to proc and every process under it: a test that fails
    leaves nothing of its own running. Nothing once proc has been reaped
    (its pid may be another process's by now)."""
    if proc.poll() is None:
        _kill(_tree(proc.pid), sig)


def communicate_or_diagnose(proc, timeout=120):
    """proc.communicate(timeout=...); when it times out, fails with what each
    process under proc was doing: its state, and its Python stacks, dumped by
    faulthandler on SIGABRT (start the command with PYTHONFAULTHANDLER=1)."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        tree = _tree(proc.pid)  # once: after the SIGABRT, orphans move to init
        states = "\n".join(_describe(p) for p in tree)
        _kill(tree, signal.SIGABRT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            _kill(tree, signal.SIGKILL)
            try:
                _, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                err = "(none: the pipes stayed open)"
        pytest.fail(f"no exit after {timeout} s; the processes:\n{states}\nstderr (after SIGABRT):\n{err[-8000:]}")


# A statistical claim measured on a shared 2-core machine (W above zero, an
# injected cost recovered within 20%) is retried when a burst of load spoils
# a run, up to this many runs in all: a broken method fails every one of
# them, a sound one on a busy machine passes within two or three. One number
# for every such test.
NOISE_ATTEMPTS = 4


def help_entries(command: str) -> tuple:
    """(`opskew COMMAND --help` as printed, {--flag: its entry}): each
    option's line and the indented ones below it joined, as a newcomer reads
    them (a word argparse wrapped at its hyphen is joined whole)."""
    import re

    from opskew.cli.main import _subparser, build_parser

    text = _subparser(build_parser(), command).format_help()
    entries, flag = {}, None
    for line in text.splitlines():
        m = re.match(r"  (--[\w-]+)", line)
        if m:
            flag = m.group(1)
            entries[flag] = line
        elif flag and line.startswith("        "):
            entries[flag] += ("" if entries[flag].endswith("-") else " ") + line.strip()
        else:
            flag = None
    return text, entries


def help_defaults(command: str) -> dict:
    """{--flag: its default as `opskew COMMAND --help` prints it}: the text
    after "default" up to ")", ";" or "," (and before a ":" that explains it)."""
    import re

    found = {f: re.search(r"\(default:? ([^),;]+)", e) for f, e in help_entries(command)[1].items()}
    return {f: m.group(1).split(" = ")[0].split(":")[0].strip() for f, m in found.items() if m}


def until(run, ok, attempts=NOISE_ATTEMPTS):
    """Calls run(attempt) for attempt = 0, 1, ... until ok(result) holds or
    the attempts are spent; returns the last result, for the test to assert
    on (so a run that never passes fails with its own figures)."""
    for attempt in range(attempts):
        result = run(attempt)
        if ok(result):
            break
    return result


def seed_native_cache(cache_dir):
    """Copies the native shim, built once per test run in the run's cache
    (_cache_in_a_temp_dir), into a test's own OPSKEW_CACHE_DIR, so the run
    compiles it only once."""
    import shutil

    import torch

    from opskew.tracer import native

    # Loaded once per process, perhaps from another test's own cache: copied
    # where the run's cache holds it, else the test builds its own.
    if native.shim(torch)[0] is not None and os.path.isdir(native.cache_root()):
        shutil.copytree(native.cache_root(), os.path.join(str(cache_dir), "native"), dirs_exist_ok=True)


@pytest.fixture(scope="session", autouse=True)
def _cache_in_a_temp_dir(tmp_path_factory):
    """Every cache opskew keeps (calibrations, the native shim built at first
    use) goes to a temporary folder for the whole run, never to the user's
    ~/.cache: subprocesses inherit OPSKEW_CACHE_DIR, and the shim is built once
    per run there. Tests that need an empty cache set their own."""
    old = os.environ.get("OPSKEW_CACHE_DIR")
    os.environ["OPSKEW_CACHE_DIR"] = str(tmp_path_factory.mktemp("opskew-cache"))
    # matplotlib's font cache (sweep's plots) stays out of the home folder too.
    os.environ.setdefault("MPLCONFIGDIR", str(tmp_path_factory.mktemp("mplconfig")))
    yield
    if old is None:
        os.environ.pop("OPSKEW_CACHE_DIR", None)
    else:
        os.environ["OPSKEW_CACHE_DIR"] = old


def _opskew_wrote(path):
    """Whether the Chrome trace at `path` carries opskew's header (the
    "opskew" member its writers put before "traceEvents": corrected traces,
    the tracer's), read from its first 8 KiB."""
    import gzip

    try:
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
            f.seek(0)
            head = gzip.GzipFile(fileobj=f).read(8192) if gz else f.read(8192)
    except (OSError, EOFError, zlib.error):
        return False
    return b'"opskew"' in head


@pytest.fixture(scope="session", autouse=True)
def _every_trace_opskew_wrote_nests_in_float64(tmp_path_factory):
    """After the run: every trace under the run's temporary folders that
    opskew wrote (its header says so) nests read as float64 (ts and
    ts + dur as viewers read them) as its exact text nests (floatnest.py;
    docs/outputs.md, "Read as float64"). A trace that does not parse (a test's
    broken input) is left out; the check stops at 64 MiB a file."""
    yield
    from floatnest import float_nesting_errors

    bad, checked = [], 0
    for root, _dirs, files in os.walk(tmp_path_factory.getbasetemp()):
        for name in files:
            path = os.path.join(root, name)
            if not name.endswith((".json", ".json.gz")) or os.path.islink(path) or not os.path.isfile(path) \
                    or os.path.getsize(path) > 64 << 20 or not _opskew_wrote(path):
                continue
            try:
                errors = float_nesting_errors(path)
            except (ValueError, KeyError, TypeError, OSError, EOFError, RecursionError, zlib.error):
                continue
            checked += 1
            if errors:
                bad.append(f"{path}: {len(errors)} pair(s), first {errors[0]}")
    assert not bad, f"{len(bad)} of {checked} traces opskew wrote read otherwise in float64:\n" + "\n".join(bad[:10])


@pytest.fixture
def opskew():
    return run_opskew


@pytest.fixture
def check_json(tmp_path):
    """Runs `opskew check ... --json FILE` and returns (process, parsed JSON or None)."""

    def go(*args, expect_rc=0):
        """expect_rc None: any exit status (the caller looks)."""
        out = tmp_path / f"check-{len(list(tmp_path.iterdir()))}.json"
        p = run_opskew("check", *args, "--json", str(out))
        assert expect_rc is None or p.returncode == expect_rc, \
            f"rc={p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
        return p, (json.loads(out.read_text()) if out.exists() else None)

    return go


@pytest.fixture(scope="session")
def has_cuda():
    import torch

    return torch.cuda.is_available()
