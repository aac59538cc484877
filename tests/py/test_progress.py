"""render.progress: what a long command says on stderr while it runs; torch-free."""

import io

from opskew.render.progress import Progress, fmt_s, mode, say_warnings


def test_the_form_follows_the_terminal_unless_opskew_progress_says(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("OPSKEW_PROGRESS", raising=False)
    assert (mode(Tty()), mode(io.StringIO())) == ("live", "lines")
    for value, want in (("0", "off"), ("lines", "lines"), ("live", "live")):
        monkeypatch.setenv("OPSKEW_PROGRESS", value)
        assert mode(Tty()) == want and mode(io.StringIO()) == want


def test_lines_say_each_phase_and_the_first_estimate(monkeypatch):
    monkeypatch.setenv("OPSKEW_PROGRESS", "lines")
    out = io.StringIO()
    p = Progress("opskew matrix", out)
    p.start("measuring", "15 rounds")
    for k in range(1, 31):
        p.update(k, 30, f"round {k}", unit="run")
    p.end()
    lines = out.getvalue().splitlines()
    assert lines[0] == "opskew matrix: measuring (15 rounds)"
    assert len(lines) == 2 and lines[1].startswith("opskew matrix: measuring: run 1/30 (round 1), ")
    assert lines[1].endswith(" left")


def test_live_rewrites_one_line_and_ends_it(monkeypatch):
    monkeypatch.setenv("OPSKEW_PROGRESS", "live")
    out = io.StringIO()
    p = Progress("opskew check", out)
    p.start("warm-up")
    p.update(1, 2, unit="instrument")
    p.start("measuring")  # the warm-up's line stays as it ended
    p.end()
    text = out.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n") and text.count("\n") == 2
    assert "opskew check: warm-up: instrument 1/2, " in text.split("\n")[0]


def test_durations_and_warnings_in_words():
    assert (fmt_s(8.4), fmt_s(214)) == ("8 s", "3 min 34 s")
    out = io.StringIO()
    say_warnings("opskew matrix", [{"by": "torch", "category": "UserWarning", "message": "m", "where": "f.py:3"}],
                 out)
    assert out.getvalue() == "opskew matrix: torch warned: UserWarning: m (f.py:3)\n"


def _trace(path, events, gz=False):
    """A trace of `events` complete operators on one thread, each 2 us apart."""
    import gzip

    body = ",\n".join('{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":%d,"dur":1}' % (2 * i)
                      for i in range(events))
    text = '{"traceEvents":[\n' + body + "\n]}\n"
    with (gzip.open if gz else open)(path, "wt") as f:
        f.write(text)
    return path


def test_the_c_read_says_how_far_it_is_in_the_file_s_bytes_each_pass(tmp_path):
    """osk_progress_t through the bindings (a bytearray(24): done, total,
    pass): a whole read ends at the file's size, gzip's compressed one; a
    trace whose thread is out of time order is read twice by the summary,
    its second pass counted apart."""
    import os
    import struct

    from opskew import _correct, _reader

    def read(call, path):
        buf = bytearray(24)
        r = call(str(path), buf)
        assert r["status"] == "ok"
        return struct.unpack("=QQQ", buf)

    plain = _trace(tmp_path / "t.json", 2000)
    gz = _trace(tmp_path / "t.json.gz", 2000, gz=True)
    size, zsize = os.path.getsize(plain), os.path.getsize(gz)
    assert zsize < size
    summarize = lambda p, b: _reader.summarize(p, progress=b)  # noqa: E731
    correct = lambda p, b: _correct.correct(p, 300.0, 0.0, None, progress=b)  # noqa: E731
    assert read(summarize, plain) == (size, size, 1)
    assert read(summarize, gz) == (zsize, zsize, 1)
    assert read(correct, plain) == (size, size, 1)
    unsorted = tmp_path / "u.json"
    unsorted.write_text('{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"b","pid":1,"tid":1,"ts":5,"dur":1},'
                        '{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":9}]}')
    n = os.path.getsize(unsorted)
    assert read(summarize, unsorted) == (n, n, 2)
    for bad in (bytearray(8), b"x" * 24, 5):
        try:
            _reader.summarize(str(plain), progress=bad)
        except (ValueError, TypeError, BufferError):
            continue
        raise AssertionError(f"progress={bad!r} was taken")


def test_a_long_read_is_watched_from_the_caller_s_thread(tmp_path):
    """tracefile.watched runs the C read on a thread of its own and tells
    the caller where it stands while it runs; the result (and a failure) is
    the caller's."""
    import os

    import pytest

    from opskew import _reader
    from opskew.analyze.tracefile import watched

    path = str(_trace(tmp_path / "big.json", 300_000))
    told = []
    r = watched(lambda buf: _reader.summarize(path, progress=buf), lambda *a: told.append(a), every_s=0.0005)
    assert r["status"] == "ok" and r["ops"][0]["calls"] == 300_000
    size = os.path.getsize(path)
    assert told and all(0 <= d <= t == size and p == 1 for d, t, p in told if p)
    assert watched(lambda buf: buf, None) is None  # no progress: called here, without a buffer
    with pytest.raises(ZeroDivisionError):
        watched(lambda buf: 1 / 0, lambda *a: None)


def test_reading_says_nothing_for_a_short_read_then_each_pass(monkeypatch):
    from opskew.render.progress import reading

    monkeypatch.setenv("OPSKEW_PROGRESS", "lines")
    out = io.StringIO()
    quick = reading("opskew summary", "t.json", out)
    quick(10 << 20, 20 << 20, 1)
    assert out.getvalue() == ""
    told = reading("opskew correct", "t.json", out, after_s=0.0)
    told(10 << 20, 40 << 20, 1)
    told(5 << 20, 40 << 20, 2)
    told.end()
    lines = out.getvalue().splitlines()
    assert lines[0] == "opskew correct: reading (t.json)"
    assert lines[1].startswith("opskew correct: reading: MiB 10/40, ") and lines[1].endswith(" left")
    assert lines[2] == "opskew correct: reading again (pass 2: threads out of time order) (t.json)"
