"""Progress of a long command on stderr (docs/commands.md, "Progress"): what
runs, how far it is, how long is left. Never on stdout, so `--json -`
stays clean.

OPSKEW_PROGRESS picks the form: `live` (one line rewritten in place, the
default when stderr is a terminal), `lines` (a line when a phase starts,
one with the first estimate and then one every LINES_EVERY_S, the default
elsewhere), `0` (none)."""

from __future__ import annotations

import os
import shutil
import sys
import time

from opskew.render.units import fmt_time

ENV = "OPSKEW_PROGRESS"
LINES_EVERY_S = 30.0


def mode(stream) -> str:
    """"live", "lines" or "off": OPSKEW_PROGRESS, else by whether `stream` is a terminal."""
    v = os.environ.get(ENV, "").strip().lower()
    if v in ("0", "off", "no", "none"):
        return "off"
    if v in ("live", "tty"):
        return "live"
    if v in ("lines", "1", "on", "yes"):
        return "lines"
    try:
        return "live" if stream.isatty() else "lines"
    except (AttributeError, ValueError):
        return "lines"


def fmt_s(seconds: float) -> str:
    """A duration a person waits: "8 s", "3 min 34 s"."""
    s = int(round(seconds))
    return f"{s // 60} min {s % 60} s" if s >= 60 else f"{s} s"


class Progress:
    """The progress of one command, labelled `label` ("opskew matrix"):
    phases (start), each with its count done (update); `end` closes a live
    line. sys.stderr is looked up at each write (a test's capture)."""

    def __init__(self, label: str, stream=None):
        self.label = label
        self._stream = stream
        self.mode = mode(self.stream)
        self.t0 = time.perf_counter()
        self._phase = ""
        self._phase_t0 = self.t0
        self._said = None  # when the last line of the lines form was written, within this phase
        self._open = False  # a live line waits for its end

    @property
    def stream(self):
        return self._stream if self._stream is not None else sys.stderr

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr: the command goes on
            self.mode = "off"

    def start(self, phase: str, detail: str = "") -> None:
        """A new phase ("warm-up", "measuring"), `detail` said once beside it."""
        self._phase, self._phase_t0, self._said = phase, time.perf_counter(), None
        text = f"{phase} ({detail})" if detail else phase
        if self.mode == "lines":
            self._write(f"{self.label}: {text}\n")
        elif self.mode == "live":
            self.end()  # the last phase's line stays, as it ended
            self._live(text)

    def update(self, done: int, total: int, detail: str = "", unit: str = "",
               per_call_s: float | None = None) -> None:
        """`done` of the phase's `total` units (`unit`: "run", "size"); `detail`: what runs now,
        and `per_call_s` the time a call of it took (said after it, "/call")."""
        if self.mode == "off":
            return
        now = time.perf_counter()
        if self.mode == "lines" and not (0 < done < total and (self._said is None or now - self._said >= LINES_EVERY_S)):
            return  # nothing to write: no text made (opskew profile calls this at every step)
        if per_call_s is not None:
            detail = f"{detail}: {fmt_time(per_call_s)}/call"
        el = now - self._phase_t0
        left = f", ~{fmt_s(el / done * (total - done))} left" if 0 < done < total else ""
        text = (f"{self._phase}: {unit + ' ' if unit else ''}{done}/{total}" + (f" ({detail})" if detail else "")
                + f", {fmt_s(el)}{left}")
        if self.mode == "live":
            self._live(text)
        else:
            self._said = now
            self._write(f"{self.label}: {text}\n")

    def __call__(self, done: int, total: int) -> None:
        self.update(done, total)

    def _live(self, text: str) -> None:
        # One terminal line, or the next rewrite cannot take it back.
        width = shutil.get_terminal_size((100, 24)).columns - 1
        self._write(f"\r\033[K{self.label}: {text}"[: width + 4])
        self._open = True

    def end(self) -> None:
        """Ends the live line (the command's own output follows on a line of its own)."""
        if self._open:
            self._write("\n")
            self._open = False


def say_warnings(label: str, warned: list, stream=None) -> None:
    """The warnings a workload raised while it was measured
    (measure.rounds.warned), each on one line, said as whose they are."""
    out = stream if stream is not None else sys.stderr
    for w in warned:
        out.write(f"{label}: {w['by']} warned: {w['category']}: {w['message']} "
                  f"({w['where']})\n")


def reading(label: str, what: str, stream=None, after_s: float = 1.0):
    """A `progress` for opskew.analyze.tracefile's C reads: from `after_s`
    on (a small trace says nothing), how far the read of `what` is, in MiB
    of its file, each pass apart. Its `end()` closes a live line."""
    p = Progress(label, stream)
    seen = {"pass": 0}

    def told(done: int, total: int, pass_: int) -> None:
        if time.perf_counter() - p.t0 < after_s or p.mode == "off":
            return
        if pass_ != seen["pass"]:
            seen["pass"] = pass_
            p.start("reading" if pass_ <= 1 else f"reading again (pass {pass_}: threads out of time order)", what)
        if total:
            p.update(done >> 20, max(total >> 20, 1), unit="MiB")

    told.end = p.end
    return told
