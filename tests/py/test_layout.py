"""The Python shell's layout (docs/design.md, "The Python shell"): the rules
that keep it readable, checked on the installed package. The layering
itself is import-linter's contract (pyproject.toml), run by `make test`."""

import ast
import os
import re
import subprocess
import sys

import grimp
import pytest

import opskew

PKG = os.path.dirname(os.path.abspath(opskew.__file__))
MAX_MODULE_LINES = 700
MAX_CLASS_LINES = 400
# What an import inside a function may defer: torch and the optional
# dependencies (plots, tables for notebooks), never an opskew module but the
# profile hook, whose loading loads a collector library into the process
# (opskew.tracer.session: only the instrument that needs it loads it).
DEFERRABLE = ("torch", "matplotlib", "pandas", "numpy")
DEFERRED_EXTENSIONS = ("from opskew import _pyhook",)


def _sources():
    for folder, dirs, files in os.walk(PKG):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(folder, f)


def _module(path):
    rel = os.path.relpath(path, os.path.dirname(PKG))[:-3].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def _tree(path):
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def test_no_module_or_class_is_too_long():
    long = []
    for path in _sources():
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        if n > MAX_MODULE_LINES:
            long.append(f"{_module(path)}: {n} lines")
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                long.append(f"{_module(path)}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert not long, long


# The C extension modules: the import graph cannot see them, so
# `from opskew import _engine` reads as an import of the package itself.
EXTENSIONS = re.compile(r"^from opskew import ((_engine|_reader|_correct|_pyhook)(, )?)+(\s*#.*)?$")


def _graph():
    """The package's import graph, every import counted (those inside
    functions too), with the imports of C extensions taken as what they are."""
    graph = grimp.build_graph("opskew")
    for m in graph.find_modules_that_directly_import("opskew"):
        details = graph.get_import_details(importer=m, imported="opskew")
        if details and all(EXTENSIONS.match(d["line_contents"]) for d in details):
            graph.remove_import(importer=m, imported="opskew")
    return graph


def test_the_modules_imports_form_no_cycle():
    graph = _graph()
    cycles = []
    for m in sorted(graph.modules):
        for n in graph.find_modules_directly_imported_by(m):
            if n != m and graph.find_shortest_chain(importer=n, imported=m):
                cycles.append(f"{m} -> {' -> '.join(graph.find_shortest_chain(importer=n, imported=m))}")
    assert not cycles, cycles


def _function_imports(tree):
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    yield node, [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    yield node, [("." * node.level) + (node.module or "")]


def test_imports_inside_functions_only_defer_torch_or_an_optional_dependency():
    found = []
    for path in _sources():
        for node, names in _function_imports(_tree(path)):
            for name in names:
                if name.split(".")[0] in DEFERRABLE:
                    continue
                if (name.startswith("opskew") or name.startswith(".")) \
                        and ast.unparse(node) not in DEFERRED_EXTENSIONS:
                    found.append(f"{_module(path)}:{node.lineno} imports {name}")
    assert not found, found


def test_no_library_module_imports_the_command_line():
    graph = _graph()
    cli = {m for m in graph.modules if m == "opskew.cli" or m.startswith("opskew.cli.")}
    programs = {m for m in graph.modules if m.startswith("opskew._entry") or m == "opskew.__main__"}
    bad = sorted(f"{m} imports {n}" for m in graph.modules - cli - programs
                 for n in graph.find_modules_directly_imported_by(m) if n in cli)
    assert not bad, bad


def test_every_view_named_below_render_is_registered_and_nothing_below_imports_render():
    """Results and computation reach render's words through
    opskew.results.views (docs/design.md, "The Python shell"): each name
    they pass to lazy() is one opskew.render.views registers (a misspelt
    name would fail only when its words are needed), and no module below
    render imports it."""
    from opskew.results import views

    graph = _graph()
    above = ("opskew.render", "opskew.cli", "opskew._entry", "opskew.integrations", "opskew.api", "opskew.__main__")
    below = {m for m in graph.modules if m != "opskew" and not m.startswith(above)}
    bad = sorted(f"{m} imports {n}" for m in below for n in graph.find_modules_directly_imported_by(m)
                 if n == "opskew.render" or n.startswith("opskew.render."))
    assert not bad, bad
    named = set()
    for path in _sources():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy":
                assert isinstance(node.args[0], ast.Constant), f"{_module(path)}:{node.lineno}: a view is named by a literal"
                named.add(node.args[0].value)
    assert named, "no module names a view: this test reads the wrong sources"
    assert not named - set(views._VIEWS), sorted(named - set(views._VIEWS))
    assert all(callable(v) for v in views._VIEWS.values())
    with pytest.raises(LookupError, match="no view"):
        views.lazy("no.such_view")()


def test_every_program_is_under_entry():
    """A module that runs as a program (`if __name__ == "__main__"`) lives in
    opskew/_entry/, opskew/__main__.py aside."""
    outside = []
    for path in _sources():
        mod = _module(path)
        if mod.startswith("opskew._entry") or mod == "opskew.__main__":
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "__name__" \
                    and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in node.comparators):
                outside.append(mod)
    assert not outside, outside


# The record child's files: run (or loaded by path) in the user's
# interpreter, where opskew may not be importable, so they import the
# standard library only, and the user's own torch (opskew/_entry/record_boot.py's
# docstring).
STDLIB_ONLY = ("_entry/record_boot.py", "tracer/collectors.py", "tracer/native.py", "exitcodes.py", "host.py")


@pytest.mark.parametrize("rel", STDLIB_ONLY)
def test_the_record_childs_files_import_the_standard_library_only(rel):
    stdlib = set(sys.stdlib_module_names) | {"torch"}
    bad = []
    for node in ast.walk(_tree(os.path.join(PKG, rel))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [("." * node.level) + (node.module or "")]
        else:
            continue
        bad += [n for n in names if n.split(".")[0] not in stdlib and n != "__future__"]
    assert not bad, bad


def test_results_stats_render_and_the_calibration_store_import_without_torch(tmp_path):
    """With torch made unimportable, the torch-free layers still import and work."""
    blocker = tmp_path / "torch.py"
    blocker.write_text("raise ImportError('torch is unimportable in this test')\n")
    code = (
        "import opskew.results, opskew.stats.estimators, opskew.stats.pricing, opskew.render.units, "
        "opskew.render.tables, opskew.calibration.store, opskew.options, opskew.output\n"
        "import sys\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "from opskew.results import Result\n"
        "r = Result.from_dict({'schema': 'opskew.summary/1', 'ops': [], 'status': 'ok'})\n"
        "assert type(r).__name__ == 'SummaryResult' and r.to_dict()['status'] == 'ok'\n"
        "from opskew.render.units import fmt_ns\n"
        "assert fmt_ns(1500) == '1.5 us'\n"
        "print('ok')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=str(tmp_path))
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr
