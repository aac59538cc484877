"""Every output through the one writer (docs/outputs.md): modes, planted
links at the temporary names, targets that are not regular files, outputs
that are an input, and one-line failures with their exit codes. Commands
run for real (summary, correct) on a small trace written here."""

import json
import os
import stat

import pytest

from opskew import _engine
from opskew import cli
from opskew import output
from opskew.render.plots import figure_bytes
from opskew.errors import EXIT_OUTPUT, EXIT_USAGE, OutputError, UsageError

TRACE = {"traceEvents": [
    {"ph": "X", "name": "aten::add", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 0, "dur": 5},
    {"ph": "X", "name": "aten::mul", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 10, "dur": 3},
]}


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(TRACE))
    return path


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def one_line(p, fragment, rc):
    err = p.stderr.strip()
    assert p.returncode == rc, (p.returncode, p.stdout, p.stderr)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert fragment in err, err


def mknod_or_skip(path, minor):
    """A copy of /dev/null (minor 3) or /dev/full (7) inside the test's folder;
    /dev itself is never touched."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except PermissionError as exc:
        pytest.skip(f"mknod not permitted here: {exc}")


def test_summary_json_has_the_mode_of_a_trace(opskew, trace, tmp_path, umask022):
    # 0666 less the umask, as the tracer's traces get (mkstemp gave 0600).
    out = tmp_path / "s.json"
    p = opskew("summary", str(trace), "--json", str(out))
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert json.loads(out.read_text())["schema"]
    # An existing file keeps its own mode when replaced.
    out.chmod(0o600)
    p = opskew("summary", str(trace), "--json", str(out))
    assert p.returncode == 0 and stat.S_IMODE(out.stat().st_mode) == 0o600
    assert [n for n in os.listdir(tmp_path) if ".tmp-opskew." in n] == []


def test_planted_links_at_every_temporary_name_touch_nothing(trace, tmp_path, capsys):
    """The acceptance test, for the Python outputs: links at the first K
    temporary names the writer would try (this process's, from the writer
    itself) point at a victim file; a JSON output, a text snippet and a plot
    are written past them, and the victim and the links are unchanged."""
    victim = tmp_path / "victim"
    victim.write_text("secret")
    victim.chmod(0o600)
    outs = [tmp_path / "s.json", tmp_path / "snippet.py", tmp_path / "plot.png"]
    K = 5
    for out in outs:
        for n in range(K):
            os.symlink(victim, _engine.out_tmp_name(str(out), n))
    assert cli.main(["summary", str(trace), "--json", str(outs[0])]) == 0
    output.write_file(str(outs[1]), "import torch\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    output.write_file(str(outs[2]), figure_bytes(fig, "png"))
    plt.close(fig)
    assert json.loads(outs[0].read_text())["ops"]
    assert outs[1].read_text() == "import torch\n"
    assert outs[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert victim.read_text() == "secret" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    for out in outs:
        for n in range(K):
            assert os.readlink(_engine.out_tmp_name(str(out), n)) == str(victim)


def test_a_directory_is_refused_in_one_line(opskew, trace, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    one_line(opskew("summary", str(trace), "--json", str(d)), "is a directory", EXIT_USAGE)
    assert list(d.iterdir()) == []
    # a name ending in / (a folder, here a missing one) and an empty name: refused, not ignored
    one_line(opskew("summary", str(trace), "--json", str(tmp_path / "nd") + "/"), "a directory", EXIT_USAGE)
    one_line(opskew("summary", str(trace), "--json", ""), "path is empty", EXIT_USAGE)
    assert not (tmp_path / "nd").exists()
    with pytest.raises(OutputError, match="is a directory"):
        output.write_file(str(d), b"x")


def test_a_link_loop_is_refused_in_one_line(opskew, trace, tmp_path):
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    one_line(opskew("summary", str(trace), "--json", str(tmp_path / "a")),
             "too many levels of symbolic links", EXIT_USAGE)
    assert os.readlink(tmp_path / "a") == "b"


def test_a_fifo_is_refused_and_left_alone(opskew, trace, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    one_line(opskew("summary", str(trace), "--json", str(fifo)), "named pipe", EXIT_USAGE)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_link_to_a_file_is_written_through(opskew, trace, tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "latest.json"
    os.symlink("real.json", link)
    p = opskew("summary", str(trace), "--json", str(link))
    assert p.returncode == 0, p.stderr
    assert os.path.islink(link) and json.loads(real.read_text())["ops"]
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_a_character_device_is_written_through_never_replaced(opskew, trace, tmp_path):
    null, full = tmp_path / "null", tmp_path / "full"
    mknod_or_skip(null, 3)
    mknod_or_skip(full, 7)
    p = opskew("summary", str(trace), "--json", str(null))
    assert p.returncode == 0, p.stderr
    # A full disk: one line naming the path and the reason, exit 7.
    one_line(opskew("summary", str(trace), "--json", str(full)), f"{full}: no space left on device",
             EXIT_OUTPUT)
    for dev, minor in ((null, 3), (full, 7)):
        st = os.lstat(dev)
        assert stat.S_ISCHR(st.st_mode) and os.minor(st.st_rdev) == minor
    assert sorted(os.listdir(tmp_path)) == ["full", "null", "t.json"]


def test_dash_is_standard_output(opskew, trace):
    p = opskew("summary", str(trace), "--json", "-")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["ops"]


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink"])
def test_an_output_that_is_the_input_is_refused(opskew, trace, tmp_path, how):
    target = trace
    if how == "symlink":
        target = tmp_path / "alias.json"
        os.symlink(trace, target)
    elif how == "hardlink":
        target = tmp_path / "hard.json"
        os.link(trace, target)
    before = trace.read_bytes()
    one_line(opskew("correct", str(trace), "-o", str(target)), "is the input trace", EXIT_USAGE)
    one_line(opskew("summary", str(trace), "--json", str(target)), "is the input trace", EXIT_USAGE)
    assert trace.read_bytes() == before


def test_check_output_in_process(trace, tmp_path):
    output.check_output(str(tmp_path / "new.json"))
    output.check_output("-")
    with pytest.raises(UsageError, match="standard output"):
        output.check_output("-", stdout=False)
    with pytest.raises(UsageError, match="directory does not exist"):
        output.check_output(str(tmp_path / "missing" / "x.json"))
    with pytest.raises(UsageError, match="is the script"):
        output.check_output(str(trace), inputs=[("the script", str(trace))])


def test_correct_output_that_cannot_be_written_is_one_line_exit_7(opskew, trace, tmp_path):
    """The corrected trace goes through the same C writer: a full disk (a
    /dev/full copy) is one line naming the path and the reason, exit 7."""
    from opskew.analyze.correct import detect

    found = detect(str(trace))
    cal = tmp_path / "cal.json"
    import torch

    from opskew.calibration.store import make_key

    key = make_key(found["instrument"], found["config"], torch.__version__, "cpu", 1)
    cal.write_text(json.dumps({"schema": "opskew.calibration/1", "key": key,
                               "w_ns": {"median": 100.0}, "delta_ns": {"median": 10.0}}))
    full = tmp_path / "full"
    mknod_or_skip(full, 7)
    p = opskew("correct", str(trace), "--calibration", str(cal), "-o", str(full))
    assert p.returncode == EXIT_OUTPUT, (p.stdout, p.stderr)
    # The C writer of corrected traces skips links planted at its temporary
    # names too (the same names: this process's, n = 0, 1, ...).
    victim = tmp_path / "victim"
    victim.write_text("secret")
    planted = tmp_path / "planted.json"
    for n in range(4):
        os.symlink(victim, _engine.out_tmp_name(str(planted), n))
    assert cli.main(["correct", str(trace), "--calibration", str(cal), "-o", str(planted)]) == 0
    assert victim.read_text() == "secret" and json.loads(planted.read_text())["opskew"]["corrected"]
    assert p.stderr.strip() == f"opskew correct: cannot write {full}: no space left on device", p.stderr
    ok = tmp_path / "c.json"
    p = opskew("correct", str(trace), "--calibration", str(cal), "-o", str(ok))
    assert p.returncode == 0, p.stderr
    assert json.loads(ok.read_text())["opskew"]["corrected"]
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_check_corrected_trace_that_cannot_be_written_is_exit_7(opskew, tmp_path):
    """check's in-run corrected trace goes through the same writer: a full
    disk after the trials keeps their figures and exits 7 with the reason."""
    full = tmp_path / "full"
    mknod_or_skip(full, 7)
    wl = os.path.join(os.path.dirname(__file__), "workloads", "wl.py")
    js = tmp_path / "c.json"
    for _ in range(3):
        p = opskew("check", wl + ":plain", "--trials", "6", "--iters", "2", "--calls", "200", "--warmup", "0.1",
                   "--corrected-trace", str(full), "--json", str(js))
        # A noisy machine can make W come out negative: then nothing is
        # corrected (exit 6, said so), and the writer is not reached.
        if "came out negative" not in p.stderr:
            break
    assert p.returncode == EXIT_OUTPUT, (p.stdout, p.stderr)
    assert f"cannot write {full}: no space left on device" in p.stderr
    r = json.loads(js.read_text())
    assert "no space left on device" in r["correction_error"] and r["added_per_event_ns"]
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_two_outputs_of_one_run_at_one_new_path_are_refused(opskew, trace, tmp_path):
    """`correct t.json -o same.json --json same.json`, same.json not existing
    yet: the corrected trace used to be replaced by the JSON, silently."""
    same = tmp_path / "same.json"
    p = opskew("correct", str(trace), "--force", "--calibration", str(tmp_path / "nothing.json"),
               "-o", str(same), "--json", str(same))
    assert p.returncode == 2 and "the --json file" in p.stderr, p.stderr
    assert not same.exists()
    # Through a link to the folder, the same.
    (tmp_path / "via").symlink_to(tmp_path)
    p = opskew("correct", str(trace), "--force", "--calibration", str(tmp_path / "nothing.json"),
               "-o", str(same), "--json", str(tmp_path / "via" / "same.json"))
    assert p.returncode == 2 and "the --json file" in p.stderr, p.stderr


def test_write_failure_reads_the_c_message_not_the_paths():
    """A read error on an input whose path contains "output" is not a
    failure to write the output (exit 7): only the C's own words decide."""
    from opskew import errors
    from opskew.output import write_failure

    exc = errors.from_c_error(-5, "correct runs/outputs/t.json", message="cannot read the trace", sys_errno=5)
    assert write_failure(exc, "c.json") is None
    exc = errors.from_c_error(-5, "correct t.json", message="writing the corrected trace failed", sys_errno=28)
    assert write_failure(exc, "c.json").exit_code == 7


def test_write_file_gzips_a_gz_name(tmp_path):
    """Every output goes through one writer, and a .gz name means gzip there
    (check --trace t.json.gz wrote plain JSON under a .gz name); "-" and
    other names stay as they are."""
    import gzip

    data = json.dumps({"traceEvents": [{"ph": "X", "name": "a" * 100}] * 1000}).encode()
    output.write_file(str(tmp_path / "t.json.gz"), data)
    raw = (tmp_path / "t.json.gz").read_bytes()
    assert raw[:2] == b"\x1f\x8b" and gzip.decompress(raw) == data and len(raw) < len(data) // 10
    output.write_file(str(tmp_path / "t.json"), data)
    assert (tmp_path / "t.json").read_bytes() == data
