"""Command-line behaviour: help, and every bad-input exit path (exit 2, one line)."""

import os

import pytest

from conftest import one_line_error

WL = os.path.join(os.path.dirname(__file__), "workloads", "wl.py")
FAST = ("--trials", "2", "--iters", "1", "--calls", "10", "--warmup", "0")


def test_help_explains_exit_codes(opskew):
    p = opskew("--help")
    assert p.returncode == 0
    assert "check" in p.stdout and "exit codes" in p.stdout
    p = opskew("check", "--help")
    assert p.returncode == 0
    for word in ("TARGET", "--with-stack", "--record-shapes", "--fail-on-skew", "--json", "confidence"):
        assert word in p.stdout


def test_no_command_prints_help_and_exits_2(opskew):
    p = opskew()
    assert p.returncode == 2
    assert "usage" in p.stderr


def test_unknown_option(opskew):
    one_line_error(opskew("check", "--no-such-option"), "unrecognized arguments")


def test_missing_file(opskew, tmp_path):
    one_line_error(opskew("check", str(tmp_path / "nope.py") + ":f"), "TARGET file not found")


def test_bad_target_syntax(opskew):
    one_line_error(opskew("check", "just_a_name"), "bad TARGET")
    one_line_error(opskew("check", "mod:not-an-identifier"), "bad TARGET")


def test_missing_module(opskew):
    one_line_error(opskew("check", "no_such_module_xyz:f"), "TARGET module not found")


def test_missing_function_and_not_callable(opskew):
    one_line_error(opskew("check", f"{WL}:nope", *FAST), "no callable named 'nope'")
    one_line_error(opskew("check", f"{WL}:not_callable", *FAST), "'not_callable' is not a function (it is a int")
    one_line_error(opskew("check", f"{WL}:step", "--setup", "nope", *FAST), "no setup callable")


def test_bad_numbers(opskew):
    one_line_error(opskew("check", "--trials", "1"), "--trials must be at least 2")
    one_line_error(opskew("check", "--iters", "0"), "--iters must be at least 1")
    one_line_error(opskew("check", "--trials", "x"), "invalid int value")
    one_line_error(opskew("check", "--json", "/no/such/dir/out.json"), "directory does not exist")


def test_bad_instrument(opskew):
    one_line_error(opskew("check", "--instrument", "perf"), "unknown instrument")
    one_line_error(opskew("check", "--instrument", "busy-wait:abc"), "bad busy-wait cost")
    one_line_error(opskew("check", "--instrument", "busy-wait:100", "--with-stack"),
                   "profiler options apply to --instrument torch only")


def test_cuda_absent(opskew, has_cuda):
    if has_cuda:
        pytest.skip("a CUDA device is present")
    one_line_error(opskew("check", "--device", "cuda"), "--device cuda was asked for")


def test_python_dash_m_and_console_script_agree(opskew):
    import shutil
    import subprocess
    import sys

    exe = shutil.which("opskew", path=os.path.dirname(sys.executable))
    assert exe, "console script `opskew` not installed next to the interpreter"
    p = subprocess.run([exe, "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("opskew ")


def test_every_exit_code_is_documented(opskew):
    """Each exit code in errors.py is in `--help` and in the docs' tables."""
    from opskew import errors

    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    assert errors.EXIT_RUNTIME == 6 and errors.EXIT_OUTPUT == 7 and len(codes) == 8
    top = opskew("--help")
    p = opskew("check", "--help")
    docs = os.path.join(os.path.dirname(__file__), "..", "..", "docs")
    with open(os.path.join(docs, "check.md")) as f:
        check_md = f.read()
    for code in codes:
        assert f"\n  {code} " in top.stdout, code
        if code not in (errors.EXIT_TRUNCATED,):  # check reads no trace of the user's
            assert f"\n  {code} " in p.stdout, code
            assert f"\n| {code} |" in check_md, code
    assert "exit code is 6" in p.stdout


# The exit codes each command can return, derived by reading its code (not
# from cli.py's table, which this checks):
# - every command: 0; 2 (UsageError, argparse); 6 (cli.main turns MemoryError
#   and the C's ENOMEM into RuntimeFailure); 130 (cli.main's KeyboardInterrupt);
# - 3 only from check.py's --fail-on-skew;
# - 4 where a workload runs through measure.run_rounds and _common.finish raises
#   WorkloadError: check, matrix, advise, and sweep (its user --op); calibrate's
#   `complete` turns a failed workload into a UsageError (2) and stores nothing;
# - 5 where a user's trace is read and may end early: summary, correct, compare;
# - 7 where an output goes through report.write_file: all but record's own
#   table (record's 7 is in its description).
EXIT_CODES = {
    "check": {0, 2, 3, 4, 6, 7, 130},
    "matrix": {0, 2, 4, 6, 7, 130},
    "sweep": {0, 2, 4, 6, 7, 130},
    "advise": {0, 2, 4, 6, 7, 130},
    "summary": {0, 2, 5, 6, 7, 130},
    "calibrate": {0, 2, 6, 7, 130},
    "correct": {0, 2, 5, 6, 7, 130},
    "compare": {0, 2, 5, 6, 7, 130},
}


def _listed_exit_codes(help_text: str) -> set:
    """The codes of the `exit codes:` section of a --help text."""
    import re

    _, found, rest = help_text.partition("\nexit codes:\n")
    assert found, help_text[-400:]
    codes = set()
    for line in rest.splitlines():
        m = re.match(r"  (\d+) ", line)
        if m:
            codes.add(int(m.group(1)))
        elif not line.startswith("       "):  # a continuation line is indented further
            break
    return codes


@pytest.mark.parametrize("command", sorted(EXIT_CODES))
def test_each_help_lists_only_its_own_exit_codes(opskew, command):
    p = opskew(command, "--help")
    assert p.returncode == 0
    assert _listed_exit_codes(p.stdout) == EXIT_CODES[command]


def test_record_help_has_no_generic_exit_code_table(opskew):
    """record exits with its command's status: its --help lists its own
    exceptions (2, 7) and not the measuring commands' 3, 4, 5."""
    p = opskew("record", "--help")
    assert "\nexit codes:\n" not in p.stdout
    for code in (3, 4, 5):
        assert f"\n  {code} " not in p.stdout, code


@pytest.mark.parametrize("argv", [
    ["check", WL + ":plain", *FAST, "--json", "{d}"],
    ["matrix", WL + ":plain", "--json", "{d}"],
    ["advise", WL + ":plain", "--snippet-out", "{d}"],
    ["sweep", "--out", "{d}/plot", "--json", "{d}"],
])
def test_an_output_onto_a_directory_is_refused_before_any_work(opskew, tmp_path, argv):
    """Every command's outputs go through report.check_output first: one
    line, exit 2, nothing measured and nothing written (docs/outputs.md)."""
    d = tmp_path / "d"
    d.mkdir()
    p = opskew(*[a.replace("{d}", str(d)) for a in argv])
    one_line_error(p, "is a directory")
    assert list(d.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["check", "{t}:plain", *FAST, "--json", "{t}"],
    ["check", "{t}:plain", *FAST, "--trace", "{t}"],
    ["advise", "{t}:plain", *FAST, "--snippet-out", "{t}"],
    ["calibrate", "{t}:plain", "--trials", "2", "--no-tracer", "--json", "{t}"],
    ["matrix", "{t}:plain", *FAST, "--json", "{t}"],
    ["sweep", "--op", "{t}:plain", "--no-plot", "--json", "{t}"],
])
def test_an_output_onto_the_workloads_own_file_is_refused(opskew, tmp_path, argv):
    """The TARGET's file.py (sweep: --op's) is an input: an output naming it
    was written over it (the user's script lost). Refused before any work."""
    t = tmp_path / "w.py"
    t.write_text(open(WL).read())
    before = t.read_bytes()
    p = opskew(*[a.replace("{t}", str(t)) for a in argv])
    one_line_error(p, "writing it would destroy it")
    assert "TARGET's file" in p.stderr or "--op's file" in p.stderr
    assert t.read_bytes() == before


@pytest.mark.parametrize("argv, fragment", [
    (["check", "--warmup", "nan"], "argument --warmup: not a finite number: 'nan'"),
    (["check", "--warmup", "inf"], "not a finite number: 'inf'"),
    (["check", "--threshold", "nan"], "argument --threshold: not a finite number"),
    (["calibrate", "--window-ms=-inf"], "not a finite number"),
    (["sweep", "--max-ms", "nan"], "argument --max-ms: not a finite number"),
    (["sweep", "--window-ms", "x"], "argument --window-ms: not a number: 'x'"),
    (["profile", "--threshold", "nan", "--", "python", "-c", "pass"], "not a finite number"),
])
def test_real_valued_options_must_be_finite(opskew, argv, fragment):
    """float() takes nan and inf: --warmup nan hung the warm-up, --threshold
    nan silenced the verdict and reached --json as NaN."""
    one_line_error(opskew(*argv), fragment)


def test_a_setup_that_raises_is_the_workloads_failure(opskew, tmp_path):
    """--setup runs the user's code: its exception is exit 4 with the user's
    frames, as when TARGET raises, not a bad command line (exit 2)."""
    t = tmp_path / "s.py"
    t.write_text("def boom():\n    raise ValueError('user boom')\n\n\ndef step(x):\n    pass\n")
    p = opskew("check", f"{t}:step", "--setup", "boom", *FAST)
    assert p.returncode == 4, p.stderr
    assert "Traceback" in p.stderr and f'File "{t}", line 2, in boom' in p.stderr
    assert p.stderr.rstrip().splitlines()[-1] == (
        "opskew check: --setup boom raised ValueError: user boom (nothing was measured)")


def test_calibrate_config_must_name_an_option(opskew):
    one_line_error(opskew("calibrate", "--config", ""), "names no profiler option")
    one_line_error(opskew("calibrate", "--config", " , "), "names no profiler option")


def test_record_help_documents_its_exit_status(opskew):
    p = opskew("record", "--help")
    assert p.returncode == 0
    assert "the command's own" in p.stdout and "\n  7 " in p.stdout and "\n  2 " in p.stdout
    p = opskew("--help")
    assert "\n  7 " in p.stdout and "outputs.md" in p.stdout
