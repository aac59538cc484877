"""The type stubs of the C extension modules (python/opskew/_*.pyi) against
the compiled modules they describe: the same public names, and each
function's parameters as its C docstring's signature line names them."""

import ast
import importlib
import re
from pathlib import Path

import pytest

MODULES = ["opskew._engine", "opskew._reader", "opskew._correct", "opskew._pyhook"]


def stub_of(module):
    """The installed .pyi next to the compiled module, parsed."""
    path = Path(module.__file__).parent / (module.__name__.rsplit(".", 1)[1] + ".pyi")
    assert path.is_file(), f"{path} is not installed with the package"
    return ast.parse(path.read_text(), filename=str(path))


def public_stub_names(tree):
    """{name: the ast node} for the stub's public top-level functions and
    constants (names starting with "_" are the stub's own aliases)."""
    names = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.Assign):
            names.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
    return {n: node for n, node in names.items() if not n.startswith("_")}


def doc_params(doc, name):
    """[(param, default source or None, keyword-only)] from a C docstring's
    first line, "name(a, b=1.0, *, c=False) -> ..."."""
    m = re.match(rf"{name}\((.*?)\)", doc, re.S)
    assert m, f"{name}'s docstring does not start with its signature: {doc[:60]!r}"
    out, kwonly = [], False
    for part in (p.strip() for p in m.group(1).split(",")):
        if part == "*":
            kwonly = True
        elif part:
            param, _, default = part.partition("=")
            out.append((param.split(":")[0].strip(), default.strip() or None, kwonly))
    return out


def stub_params(fn):
    """The same triples from the stub's def."""
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + [ast.unparse(d) for d in a.defaults]
    kw_defaults = [None if d is None else ast.unparse(d) for d in a.kw_defaults]
    return ([(p.arg, d, False) for p, d in zip(positional, defaults)]
            + [(p.arg, d, True) for p, d in zip(a.kwonlyargs, kw_defaults)])


def same_default(x, y):
    return x is None or y is None or ast.literal_eval(x) == ast.literal_eval(y)


@pytest.mark.parametrize("name", MODULES)
def test_stub_names_match_the_compiled_module(name):
    module = importlib.import_module(name)
    stub = public_stub_names(stub_of(module))
    real = {n for n in dir(module) if not n.startswith("_")}
    assert sorted(set(stub) - real) == [], "in the stub, not in the module"
    assert sorted(real - set(stub)) == [], "in the module, not in the stub"
    for n, node in stub.items():
        is_function = isinstance(node, ast.FunctionDef)
        assert callable(getattr(module, n)) == is_function, f"{name}.{n}: function in one, constant in the other"


@pytest.mark.parametrize("name", MODULES)
def test_stub_parameters_match_the_docstrings(name):
    module = importlib.import_module(name)
    for n, node in public_stub_names(stub_of(module)).items():
        if not isinstance(node, ast.FunctionDef):
            continue
        doc, stub = doc_params(getattr(module, n).__doc__, n), stub_params(node)
        assert [p for p, _, _ in stub] == [p for p, _, _ in doc], f"{name}.{n}: parameter names"
        assert [k for _, _, k in stub] == [k for _, _, k in doc], f"{name}.{n}: keyword-only parameters"
        for (p, ds, _), (_, dd, _) in zip(stub, doc):
            assert same_default(ds, dd), f"{name}.{n}({p}=...): stub {ds} vs docstring {dd}"
