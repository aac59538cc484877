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
