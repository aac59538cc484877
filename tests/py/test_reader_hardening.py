"""Issue 11, the reader's part: pipes and '-', open errors by name, losses,
gzip cut or corrupt at any size, exact numbers, linear work. End to end
through `opskew summary` / `opskew correct` in a subprocess, on traces
written here (hand-made where the point is a byte-level property)."""

import gzip
import json
import os
import random
import socket
import subprocess
import sys
from decimal import ROUND_HALF_UP, Decimal, localcontext

import pytest

from opskew import _reader


def out_of_order_trace(path, threads=3, per_thread=20000, lost=None):
    """Children written before their parents, as opskew's tracer writes them
    (events close in end order), on several threads: every thread needs the
    summary's second pass. About 2.5 MB with the defaults."""
    rng = random.Random(11)
    evs = []
    for t in range(threads):
        ts = 1000.0
        for i in range(per_thread // 2):
            child = rng.randint(1, 900) / 1000
            evs.append({"ph": "X", "cat": "cpu_op", "name": f"child{i % 7}", "pid": 1, "tid": t,
                        "ts": round(ts + 0.5, 3), "dur": child})
            evs.append({"ph": "X", "cat": "cpu_op", "name": f"parent{i % 3}", "pid": 1, "tid": t,
                        "ts": round(ts, 3), "dur": round(child + 1.25, 3)})
            ts += 3
    doc = {"traceEvents": evs}
    if lost is not None:
        doc = {"opskew": {"version": "test", "lost": lost}, **doc}
    path.write_text(json.dumps(doc))
    return path


def summary_doc(p):
    assert p.returncode in (0, 5), (p.returncode, p.stderr)
    doc = json.loads(p.stdout)
    doc.pop("trace")
    doc["stats"].pop("bytes_scanned")  # work, not result: a pipe's reads come in other sizes
    doc["stats"].pop("peak_buffer_bytes")
    return doc


def run_summary(arg, stdin_bytes=None):
    cmd = [sys.executable, "-m", "opskew", "summary", arg, "--json", "-"]
    if stdin_bytes is None:
        return subprocess.run(cmd, capture_output=True, timeout=300)
    return subprocess.run(cmd, input=stdin_bytes, capture_output=True, timeout=300)


@pytest.mark.parametrize("packed", [False, True], ids=["json", "gzip"])
def test_pipe_gives_the_file_summary(tmp_path, packed):
    """Item 3: an out-of-order trace through a real pipe ('-' and
    /dev/stdin) summarizes exactly as the file does (it was reported empty,
    exit 5, because the second pass could not reread the pipe)."""
    path = out_of_order_trace(tmp_path / "t.json")
    if packed:
        gz = tmp_path / "t.json.gz"
        gz.write_bytes(gzip.compress(path.read_bytes()))
        path = gz
    data = path.read_bytes()
    from_file = summary_doc(run_summary(str(path)))
    assert from_file["status"] == "ok" and from_file["stats"]["passes"] == 2
    assert from_file["stats"]["complete_events"] == 60000
    assert all(t["resorted"] for t in from_file["threads"])
    assert from_file["stats"]["gzip"] == packed
    for arg in ("-", "/dev/stdin"):
        p = run_summary(arg, data)
        assert p.returncode == 0, p.stderr
        assert summary_doc(p) == from_file, arg
    # The pipe's copy lives in $TMPDIR only while it is read.
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    p = subprocess.run([sys.executable, "-m", "opskew", "summary", "-", "--json", "-"], input=data,
                       capture_output=True, timeout=300, env={**os.environ, "TMPDIR": str(tmp)})
    assert summary_doc(p) == from_file
    assert os.listdir(tmp) == []


def test_pipe_without_a_temp_dir_is_named(tmp_path):
    """When the pipe's copy cannot be made, the command says so in one line."""
    data = out_of_order_trace(tmp_path / "t.json", per_thread=20).read_bytes()
    p = subprocess.run([sys.executable, "-m", "opskew", "summary", "-"], input=data, capture_output=True,
                       text=False, timeout=300,
                       env={**os.environ, "TMPDIR": str(tmp_path / "no_such_dir")})
    err = p.stderr.decode()
    assert p.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert "temporary copy of the piped trace" in err and "No such file or directory" in err


def test_an_in_order_pipe_needs_no_temp_dir(tmp_path):
    """The copy only serves a second pass: a trace read in one pass (every
    thread in time order) is summarized from a pipe with no usable $TMPDIR."""
    t = tmp_path / "t.json"
    t.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": float(i), "dur": 0.5}
        for i in range(1000)]}))
    p = subprocess.run([sys.executable, "-m", "opskew", "summary", "-", "--json", "-"], input=t.read_bytes(),
                       capture_output=True, timeout=300, env={**os.environ, "TMPDIR": str(tmp_path / "no_such_dir")})
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["ops"][0]["calls"] == 1000


def one_line(p, fragment):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], p.stderr
    return lines[0]


def test_open_errors_are_named(opskew, tmp_path):
    """Item 4: each reason an open fails is named, on one line, exit 2 (a
    directory and a symbolic link loop were 'trace not found')."""
    (tmp_path / "dir").mkdir()
    os.symlink("loop", tmp_path / "loop")
    one_line(opskew("summary", str(tmp_path / "missing.json")), "missing.json: not found")
    one_line(opskew("summary", str(tmp_path / "dir")), "dir: is a directory")
    one_line(opskew("summary", str(tmp_path / "loop")), "loop: too many levels of symbolic links")
    one_line(opskew("summary", str(tmp_path / "missing" / "t.json")), "not found")
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(tmp_path / "sock"))
        one_line(opskew("summary", str(tmp_path / "sock")), "not a regular file or a stream")
    finally:
        s.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_permission_denied_is_named(opskew, tmp_path):
    t = out_of_order_trace(tmp_path / "t.json", per_thread=20)
    t.chmod(0)
    one_line(opskew("summary", str(t)), "t.json: permission denied")


def test_losses_are_reported(opskew, tmp_path):
    """Item 5: the tracer's losses (its "opskew" header, as csrc/trace/writer.c
    writes it) are one line of the text output and "losses" in the JSON."""
    lost = {"total": 7, "nomem_chunk": 0, "nomem_thread": 0, "depth": 5, "name": 2}
    t = out_of_order_trace(tmp_path / "t.json", per_thread=200, lost=lost)
    p = opskew("summary", str(t))
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stdout.splitlines() if "lost" in ln]
    assert lines == ["7 events were lost while recording (by cause: depth 5, name 2); "
                     "the summary cannot include them"]
    p = opskew("summary", str(t), "--json", "-")
    assert json.loads(p.stdout)["losses"] == {"total": 7, "depth": 5, "name": 2}
    # None lost, or no header at all: no line, null.
    for header in ({"total": 0, "depth": 0}, None):
        t = out_of_order_trace(tmp_path / "n.json", per_thread=200, lost=header)
        p = opskew("summary", str(t))
        assert "lost" not in p.stdout, p.stdout
        assert json.loads(opskew("summary", str(t), "--json", "-").stdout)["losses"] is None


def calibration(tmp_path):
    import torch

    from opskew.calibration.store import make_key

    key = make_key("torch.profiler", "default", torch.__version__, "cpu", 1)
    key["workload"] = "builtin:add"
    cal = {"schema": "opskew.calibration/1", "key": key,
           "w_ns": {"median": 100.0}, "delta_ns": {"median": 10.0}}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(cal))
    return path


def damaged(tmp_path):
    """A small gzip trace (well under 8 MiB) cut in half, and one with
    corrupt bytes in the middle of its deflate data."""
    t = out_of_order_trace(tmp_path / "t.json", threads=1, per_thread=4000)
    packed = gzip.compress(t.read_bytes())
    assert len(packed) < 1 << 20
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    bad = bytearray(packed)
    for i in range(len(bad) // 2, len(bad) // 2 + 8):
        bad[i] ^= 0xA5
    corrupt = tmp_path / "corrupt.json.gz"
    corrupt.write_bytes(bytes(bad))
    return cut, corrupt


def test_damaged_gzip_summary_is_partial(opskew, tmp_path):
    """Item 6: a cut or corrupt .json.gz of any size gives what was read,
    exit 5, and one warning that says why (corrupt gave exit 2 and nothing:
    zlib's error discarded the output of the one inflate call a small file
    takes, and the broken JSON was blamed before the gzip)."""
    for path, why in zip(damaged(tmp_path), ("truncated", "gzip data is corrupt")):
        p = opskew("summary", str(path), "--json", "-")
        assert p.returncode == 5, (path, p.stderr)
        doc = json.loads(p.stdout)
        assert doc["status"] == "truncated" and doc["ops"], path
        assert 0 < doc["stats"]["complete_events"] < 4000
        first = [w for w in doc["warnings"] if why in w]
        assert len(first) == 1, doc["warnings"]
        assert "zlib" not in p.stderr and "Traceback" not in p.stderr
        # And through a pipe, the same.
        p2 = run_summary("-", path.read_bytes())
        assert p2.returncode == 5
        d2 = json.loads(p2.stdout)
        assert d2["ops"] == doc["ops"] and d2["warnings"] == doc["warnings"]


def test_damaged_gzip_correct_is_partial(opskew, tmp_path):
    """Item 6 for `opskew correct`: exit 5 with the corrected part."""
    cal = calibration(tmp_path)
    for path in damaged(tmp_path):
        p = opskew("correct", str(path), "--calibration", str(cal), "--force", "--json", "-")
        assert p.returncode == 5, (path, p.stdout, p.stderr)
        assert "Traceback" not in p.stderr and "zlib" not in p.stderr
        doc = json.loads(p.stdout)
        assert doc["ops"] and sum(o["calls"] for o in doc["ops"]) < 4000


@pytest.mark.parametrize("packed", [False, True], ids=["json", "gzip"])
def test_correct_reads_a_pipe_and_dash(tmp_path, packed):
    """Item 4 for `opskew correct`: a trace piped in (through '-' and
    /dev/stdin) is corrected as the file is, out-of-order threads included,
    though correct reads it twice (detection, then correction): the pipe is
    copied once, in C, into an unlinked temporary file."""
    path = tmp_path / ("t.json.gz" if packed else "t.json")
    out_of_order_trace(path, threads=2, per_thread=3000)
    cal = calibration(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))

    def run(arg, stdin=None):
        p = subprocess.run([sys.executable, "-m", "opskew", "correct", arg, "--calibration", str(cal), "--force",
                            "--json", "-"], input=stdin, capture_output=True, timeout=300, env=env)
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        doc.pop("trace")
        return doc

    want = run(str(path))
    data = path.read_bytes()
    assert run("-", data) == want
    assert run("/dev/stdin", data) == want
    assert os.listdir(tmp) == []  # the copy was unlinked at once


def test_gzip_corrupt_from_the_start_is_invalid(opskew, tmp_path):
    """Nothing readable at all stays an invalid trace (exit 2), in one line."""
    path = tmp_path / "junk.json.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(200)))
    one_line(opskew("summary", str(path)), "gzip data is corrupt")


def reference_ns(text):
    """The exact value of `text` microseconds in ns, rounded to nearest,
    ties away from zero (Decimal's ROUND_HALF_UP), or None if not int64."""
    with localcontext() as ctx:
        ctx.prec = 100000
        ctx.Emax, ctx.Emin = 10**17, -10**17
        v = (Decimal(text) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return int(v) if abs(v) <= 2**63 - 1 else None


def random_number(rng):
    sign = rng.choice(["", "-"]) if rng.random() < 0.2 else ""
    ip = "0" if rng.random() < 0.3 else str(rng.randint(1, 10**rng.randint(1, 19)))
    frac = "".join(rng.choice("0123456789") for _ in range(rng.choice([0, 1, 3, 3, 6, 19, 25, 60])))
    if rng.random() < 0.3:  # a tie on a ns, or just either side of it
        frac = frac[:3].ljust(3, "0") + rng.choice(["5", "49999999999999999999999", "50000000000000000001"])
    text = sign + ip + ("." + frac if frac else "")
    if rng.random() < 0.4:
        text += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.randint(0, 25))
    return text


def test_numbers_are_exact(opskew, tmp_path):
    """Item 2: every dur converts to the exactly rounded ns (Decimal as the
    reference), however many digits; those that do not fit are counted as
    out of range, never read as 0."""
    rng = random.Random(7)
    texts = [random_number(rng) for _ in range(3000)]
    texts += ["1.00049999999999999999999", "1.0005", "0." + "0" * 5000 + "1e5004",
              "1" + "0" * 3000 + "e-3000", "9223372036854775.807", "9223372036854775.8075", "1e30"]
    body = ",".join(f'{{"ph":"X","name":"n{i}","ts":0,"dur":{t}}}' for i, t in enumerate(texts))
    path = tmp_path / "numbers.json"
    path.write_text('{"traceEvents":[' + body + "]}")
    p = opskew("summary", str(path), "--json", "-", "--top", "0")
    doc = json.loads(p.stdout)
    got = {o["name"]: o["total_ns"] for o in doc["ops"]}
    bad = 0
    for i, t in enumerate(texts):
        want = reference_ns(t)
        if want is None:
            assert f"n{i}" not in got, t
            bad += 1
        elif want >= 0:
            assert got.get(f"n{i}") == want, (t, got.get(f"n{i}"), want)
        else:  # negative durations are unusable (the summary skips them)
            assert f"n{i}" not in got, t
    assert bad >= 2 and doc["stats"]["out_of_range"] == bad
    assert any("not representable" in w for w in doc["warnings"])
    assert got["n3000"] == 1000 and got["n3001"] == 1001 and got["n3002"] == 1000000
    assert got["n3003"] == 1000


def test_work_is_linear_in_one_huge_event(tmp_path):
    """Item 1: a 24 MB event read in 64 KiB chunks is examined less than 3
    times over (each 1 MiB refill re-parsed it from its start: quadratic)."""
    path = tmp_path / "big.json"
    with open(path, "w") as f:
        f.write('{"traceEvents":[{"ph":"X","name":"big","ts":1,"dur":2,"args":{"s":"')
        f.write("x" * (24 << 20))
        f.write('"}},{"ph":"X","name":"after","ts":5,"dur":1}]}')
    r = _reader.scan(str(path), 65536)
    assert r["status"] == "ok" and r["stats"]["events"] == 2
    size = path.stat().st_size
    assert size <= r["stats"]["bytes_scanned"] < 3 * size


def test_every_open_errno_is_named_with_exit_2():
    """The errno-to-message table, for the reasons a test cannot provoke here
    (permission denied under root): the C's OSK_EIO result for each becomes
    one line naming it, exit 2; an errno outside the table keeps strerror."""
    import errno as E

    from opskew import _engine
    from opskew.errors import EXIT_USAGE, OpskewError
    from opskew.analyze.tracefile import OPEN_ERRORS, raise_unless_read as _raise_unless_read

    def fail(sys_errno, message="cannot open the trace"):
        result = {"status": "error", "error": {"number": _engine.EIO, "message": message, "offset": 0,
                                               "sys_errno": sys_errno}}
        with pytest.raises(OpskewError) as exc:
            _raise_unless_read(result, "t.json", "trace t.json")
        assert exc.value.exit_code == EXIT_USAGE and "\n" not in str(exc.value)
        return str(exc.value)

    assert fail(E.EACCES) == "trace t.json: permission denied"
    assert fail(E.EISDIR) == "trace t.json: is a directory, not a trace file"
    for code, text in OPEN_ERRORS.items():
        assert fail(code) == f"trace t.json: {text}"
    assert fail(E.EMFILE).endswith(": cannot open the trace: " + os.strerror(E.EMFILE))
    # A read error is not an open error, whatever its errno.
    assert "cannot read the trace" in fail(E.ENOENT, "cannot read the trace")
