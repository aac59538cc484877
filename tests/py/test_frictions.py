"""Frictions a new user met (issue: tell the user which numbers to believe),
each reproduced as they met it."""

import json
import os
import textwrap

from conftest import run_opskew, until

FAST = ("--trials", "2", "--iters", "1", "--warmup", "0", "--no-verdict")


def write(tmp_path, name, code):
    p = tmp_path / name
    p.write_text(textwrap.dedent(code))
    return p


def test_a_target_that_needs_state_without_setup_says_so_before_running(tmp_path):
    """`check gpt.py:step` without --setup used to report "the workload raised
    TypeError ... at .../opskew/measure.py:97" after the warm-up."""
    f = write(tmp_path, "gpt.py", """
        import torch
        def setup():
            return torch.ones(4)
        def step(state):
            torch.add(state, state)
    """)
    p = run_opskew("check", f"{f}:step", *FAST, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "takes 1 argument(s) (state)" in p.stderr and "--setup NAME" in p.stderr
    assert "Traceback" not in p.stderr and "measure.py" not in p.stderr
    p = run_opskew("check", f"{f}:setup", "--setup", "setup", *FAST, timeout=120)
    assert p.returncode == 2 and "setup() cannot take what --setup returned, a Tensor" in p.stderr


def test_a_module_target_is_found_from_the_current_directory(tmp_path):
    """`check gpt:step` from the script's own folder said "TARGET module not
    found": the current directory was not on the path, as it is for python -m."""
    write(tmp_path, "mywl.py", """
        import torch
        def step():
            torch.add(torch.ones(2), 1)
    """)
    js = tmp_path / "r.json"
    p = run_opskew("check", "mywl:step", *FAST, "--json", str(js), cwd=str(tmp_path), timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(js.read_text())["conditions"]["workload"]["target"] == "mywl:step"


def test_an_error_in_the_users_code_shows_the_users_frames(tmp_path):
    f = write(tmp_path, "boom.py", """
        import torch
        n = [0]
        def inner():
            n[0] += 1
            if n[0] > 3:
                raise ValueError("the user's own bug")
        def step():
            torch.add(torch.ones(2), 1)
            inner()
    """)
    p = run_opskew("check", f"{f}:step", *FAST, timeout=120)
    assert p.returncode == 4, p.stderr
    err = p.stderr
    assert "Traceback (most recent call last):" in err
    tb = err[err.index("Traceback"):]
    # The user's frames, innermost last, and none of opskew's loop around them.
    assert f'File "{f}", line 10, in step' in tb and f'File "{f}", line 7, in inner' in tb
    assert "opskew/measure.py" not in tb and "ValueError: the user's own bug" in tb
    assert "opskew check: the workload raised ValueError" in err


def test_too_few_trials_say_not_enough_to_decide(tmp_path):
    """4 trials, all 4 slower by a known 2 us per call: no sign test can reach
    95% with 4 pairs, so the verdict must say so instead of "no significant
    skew detected"."""
    js = tmp_path / "r.json"
    p = run_opskew("check", "--instrument", "busy-wait:2000", "--trials", "4", "--iters", "2", "--calls", "50",
                   "--warmup", "0", "--json", str(js), timeout=120)
    assert p.returncode == 0, p.stderr
    assert "NOT ENOUGH TRIALS to decide: 4 pair(s)" in p.stdout
    assert "no significant skew detected" not in p.stdout
    v = json.loads(js.read_text())["verdict"]
    assert v["enough_trials"] is False and not v["skewed"]


def _labels(lines):
    """The row labels of check's key/value block: the text before the first
    run of two spaces on each indented line."""
    import re

    out = []
    for ln in lines:
        m = re.match(r"^  (\S.*?)  +\S", ln)
        if m:
            out.append(m.group(1))
    return out


def test_readme_example_is_what_check_prints(opskew):
    """Issue 13: the README's example output had drifted from the tool's
    (a 95% CI where 96.5% is printed, another warm-up figure, missing lines).
    The example's lines, in order, are the lines `opskew check` prints, and
    each CI level the README names is one the tool can print."""
    import re

    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")).read()
    example = readme.split("$ opskew check\n", 1)[1].split("```", 1)[0].splitlines()
    def shape(line):  # figures aside, and the unit a time comes in (a run's W can reach 1 us)
        return re.sub(r"# (?:ns|us|ms|s)\b", "# T", re.sub(r"\d+(?:\.\d+)?", "#", line))

    # The README shows a skewed run; a run on a loaded machine can find no
    # significant skew (another answer line), so it is run again, as a user would.
    p = until(lambda _: opskew("check", "--trials", "15", "--iters", "2", "--calls", "100", "--warmup", "0.1"),
              lambda p: p.returncode == 0 and shape(p.stdout.splitlines()[0]) == shape(example[0]))
    assert p.returncode == 0, p.stderr
    printed = p.stdout.splitlines()
    assert _labels(example) == _labels(printed)
    # The answer line (its figures are the run's) and the header, figures aside.
    assert [shape(ln) for ln in example[:2]] == [shape(ln) for ln in printed[:2]]
    assert example[1] == printed[1].replace("100 per", "1000 per")
    levels = set(re.findall(r"(\d+(?:\.\d+)?)% CI", readme))
    assert levels and levels <= set(re.findall(r"(\d+(?:\.\d+)?)% CI", p.stdout))
    assert "96.5% CI" in p.stdout and "96.5%" in readme
    # --warmup as asked, the profiler's first session apart (issue 45: 1.1s where --help says 0.3).
    assert re.search(r"warm-up 0\.1s \(--warmup\), then one instrument session of \d+\.\ds", p.stdout)
    # W's line names its kind (docs/which-w.md).
    assert "(in-window W on this workload: docs/which-w.md)" in p.stdout


def test_events_per_iteration_are_whole_counts():
    """`check --with-stack` printed "1255.1 Python-function events" per
    iteration: a median over trials of events per window, over iterations."""
    from opskew.render.check import _count

    assert _count(1000.0) == "1000" and _count(1255.1) == "about 1255" and _count(0.4) == "about 0"


def test_one_page_says_which_w_each_command_measures_and_the_others_link_it():
    """Issue 45: W was 306, 578 or 724 ns depending on which command printed
    it. docs/which-w.md names each command's W and what to trust it for;
    README and each command's document link it."""
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    page = open(os.path.join(root, "docs", "which-w.md")).read()
    for command in ("opskew check", "opskew calibrate", "opskew matrix", "opskew advise", "opskew.profile"):
        assert f"`{command}" in page, command
    assert "final `W`" in page and "use it for" in page
    assert "(docs/which-w.md)" in open(os.path.join(root, "README.md")).read()
    for doc in ("check.md", "commands.md", "correct.md", "profile.md"):
        assert "(which-w.md)" in open(os.path.join(root, "docs", doc)).read(), doc
