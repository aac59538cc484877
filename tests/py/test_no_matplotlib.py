"""matplotlib is an optional extra (opskew[plot]): without it, a plot asked for
by name is refused in one line that says how to get it, and sweep, whose plot
is a default, measures, prints and writes its JSON, and says the plot was
skipped. matplotlib is made unimportable in the subprocess that runs the
command (sys.modules["matplotlib"] = None), as in an environment without it."""

import json
import subprocess
import sys

from conftest import one_line_error, python_c

WITHOUT = ("import sys\n"
           "sys.modules['matplotlib'] = None  # import matplotlib -> ImportError\n"
           "from opskew.cli import main\n"
           "sys.exit(main(sys.argv[1:]))\n")
HOW = "pip install 'opskew[plot]'"


def run_without_matplotlib(*args, timeout=300):
    return subprocess.run([sys.executable, "-c", WITHOUT, *args], capture_output=True, text=True, timeout=timeout)


def test_check_plot_is_refused_in_one_line_before_anything_runs(tmp_path):
    p = run_without_matplotlib("check", "--plot", str(tmp_path / "v.png"))
    line = one_line_error(p, "--plot needs matplotlib")
    assert HOW in line
    assert not (tmp_path / "v.png").exists()


def test_sweep_without_matplotlib_writes_its_table_and_skips_the_plot(tmp_path):
    out, js = tmp_path / "sw", tmp_path / "sw.json"
    p = run_without_matplotlib("sweep", "--op", "add", "--sizes", "1,64", "--trials", "2", "--window-ms", "1",
                               "--instrument", "torch", "--out", str(out), "--json", str(js))
    assert p.returncode == 0, p.stderr
    skipped = [ln for ln in p.stdout.splitlines() if "plot skipped" in ln]
    assert len(skipped) == 1 and HOW in skipped[0], p.stdout
    assert "--no-plot" in skipped[0]
    doc = json.loads(js.read_text())
    assert doc["status"] == "complete" and [pt["size"] for pt in doc["curves"][0]["points"]] == [1, 64]
    assert "plots" not in doc and HOW in doc["plot_skipped"]
    assert not list(tmp_path.glob("sw.*g"))  # no .png, no .svg


def test_the_api_plot_says_how_to_get_matplotlib():
    """A result's plot() raises ImportError with the same one line."""
    code = ("import sys\nsys.modules['matplotlib'] = None\n"
            "from opskew.render.sweep import plot\n"
            "try:\n    plot({'curves': []}, 'x')\n"
            "except ImportError as e:\n    print('IMPORTERROR', e)\n")
    out = python_c(code, timeout=60)
    assert "IMPORTERROR the sweep's plot needs matplotlib" in out and HOW in out
