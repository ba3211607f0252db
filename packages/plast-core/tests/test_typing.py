"""plast-core's public API is annotated (PEP 484) and ships ``py.typed``.

Walked: every public function of ``plast`` and of its public submodules (amp, linalg, autograd, cuda, distributed,
compiler, random), and every method and property written in Tensor's class body (_tensor.py; the op methods there
are the op functions themselves). A Python function must annotate every parameter and its return, with names that
resolve (typing.get_type_hints). A compiled function (a ``def`` in a .pyx) carries no annotations at run time, so
it must have a stub instead: a ``.pyi`` beside its module with the same parameters, annotated. Exempt, with the
reason, are only the names in EXEMPT below.

Not walked: the methods of ``TensorBase``, Tensor's compiled base class (_core/_structs.pyx: shape, dtype, numel,
dim, ...). Below the top layer the op modules annotate tensors as TensorBase (_core/hints.py says why), and type
checkers treat that unstubbed compiled class as Any, so an op's result passes where a Tensor is expected; a stub for
it would make TensorBase a real class without Tensor's methods and every ``plast.relu(x).sum()`` a type error.
"""

import ast
import importlib
import inspect
import typing
from pathlib import Path

import pytest

import plast

SUBMODULES = ("amp", "linalg", "autograd", "cuda", "distributed", "compiler", "random")

# public names that need no annotations here, each with its reason
EXEMPT = {
    "plast.extend_path": "pkgutil.extend_path, imported by plast/__init__.py to make plast a namespace package",
}


def _public_functions():
    """(qualified name, object) for every public callable that is a function, compiled or not."""
    seen = set()
    for name in sorted(dir(plast)):
        obj = getattr(plast, name)
        if not name.startswith("_") and _is_function(obj):
            seen.add(id(obj))
            yield f"plast.{name}", obj
    for sub in SUBMODULES:
        mod = getattr(plast, sub)
        names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
        for name in names:
            obj = getattr(mod, name)
            if _is_function(obj) and id(obj) not in seen:
                seen.add(id(obj))
                yield f"plast.{sub}.{name}", obj


def _is_function(obj):
    return inspect.isfunction(obj) or _is_compiled(obj)


def _is_compiled(obj):
    return type(obj).__name__ == "cython_function_or_method"


def _tensor_members():
    """(qualified name, function) for each method and property in Tensor's class body, public ones and the
    operators (dunders); the compiled ones among them come back as they are (their stubs are checked)."""
    for name, member in vars(plast.Tensor).items():
        if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
            continue  # private helpers
        if isinstance(member, property):
            yield f"Tensor.{name}", member.fget
            if member.fset is not None:
                yield f"Tensor.{name} (setter)", member.fset
        elif _is_function(member):
            yield f"Tensor.{name}", member


ALL = list(_public_functions()) + list(_tensor_members())
PYTHON = [(n, f) for n, f in ALL if inspect.isfunction(f) and n not in EXEMPT]
COMPILED = [(n, f) for n, f in ALL if _is_compiled(f) and n not in EXEMPT]


def test_the_walk_sees_the_api():
    names = {n for n, _ in ALL}
    assert {
        "plast.tensor",
        "plast.relu",
        "plast.cross_entropy",
        "plast.save",
        "plast.jit",
        "plast.linalg.norm",
    } <= names
    assert {
        "plast.autograd.grad",
        "plast.cuda.is_available",
        "plast.distributed.all_reduce",
        "Tensor.item",
    } <= names
    assert {"plast.add", "plast.sum", "Tensor.view"} <= {n for n, _ in COMPILED}
    assert len(PYTHON) > 300 and len(COMPILED) >= 19
    assert set(EXEMPT) <= names, "EXEMPT names something that is not public any more: drop it"


def _missing(fn):
    sig = inspect.signature(fn)
    out = [
        p.name
        for i, p in enumerate(sig.parameters.values())
        if p.annotation is inspect.Parameter.empty and not (i == 0 and p.name in ("self", "cls"))
    ]
    if sig.return_annotation is inspect.Signature.empty:
        out.append("return")
    return out


def test_python_functions_are_annotated():
    bad = {name: m for name, fn in PYTHON if (m := _missing(fn))}
    assert not bad, f"annotate these parameters (and returns): {bad}"


def test_annotations_resolve():
    # a typo or a name the module does not import fails here, not in a user's type checker. Tensor is imported
    # under TYPE_CHECKING by the top-layer modules that name it, so it is supplied here.
    bad = {}
    for name, fn in PYTHON:
        try:
            typing.get_type_hints(fn, localns={"Tensor": plast.Tensor})
        except Exception as e:  # noqa: BLE001 -- any failure to evaluate is the finding
            bad[name] = f"{type(e).__name__}: {e}"
    assert not bad, bad


def _stub_for(fn):
    """The .pyi beside the compiled module that defines fn, parsed, and the def of fn in it (or None)."""
    mod = importlib.import_module(fn.__module__)
    path = Path(mod.__file__)
    stub = path.with_name(path.name.split(".", 1)[0] + ".pyi")
    if not stub.is_file():
        return stub, None
    tree = ast.parse(stub.read_text())
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    return stub, defs.get(fn.__name__)


def _stub_params(node):
    a = node.args
    out = []
    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    for arg, d in zip(pos, defaults):
        out.append((arg.arg, "POSITIONAL_OR_KEYWORD", d, arg.annotation))
    if a.vararg:
        out.append((a.vararg.arg, "VAR_POSITIONAL", None, a.vararg.annotation))
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append((arg.arg, "KEYWORD_ONLY", d, arg.annotation))
    if a.kwarg:
        out.append((a.kwarg.arg, "VAR_KEYWORD", None, a.kwarg.annotation))
    return out


@pytest.mark.parametrize("name, fn", COMPILED, ids=[n for n, _ in COMPILED])
def test_compiled_functions_have_stubs(name, fn):
    stub, node = _stub_for(fn)
    assert node is not None, f"{name} is compiled ({fn.__module__}): write its annotated def in {stub.name}"
    runtime = [(p.name, p.kind.name, p.default) for p in inspect.signature(fn).parameters.values()]
    written = _stub_params(node)
    assert [(n, k) for n, k, _ in runtime] == [(n, k) for n, k, _, _ in written], (
        f"{stub.name}: {fn.__name__}'s parameters differ from the compiled function's {inspect.signature(fn)}"
    )
    for (pname, _, default), (_, _, sdefault, ann) in zip(runtime, written):
        assert ann is not None, f"{stub.name}: {fn.__name__}: annotate {pname}"
        if default is inspect.Parameter.empty:
            assert sdefault is None, f"{stub.name}: {fn.__name__}: {pname} has no default at run time"
        else:
            assert sdefault is not None and ast.literal_eval(sdefault) == default, (
                f"{stub.name}: {fn.__name__}: {pname}'s default is {default!r} at run time"
            )
    assert node.returns is not None, f"{stub.name}: {fn.__name__}: annotate the return"


def test_py_typed_and_the_stubs_are_installed():
    # the installed package (a wheel in CI) carries the marker and the compiled modules' stubs
    root = Path(plast.__file__).parent
    assert (root / "py.typed").is_file(), (
        f"py.typed is missing from {root}: check package-data in pyproject.toml"
    )
    for _, fn in COMPILED:
        stub, _ = _stub_for(fn)
        assert stub.is_file(), f"{stub} is missing from the installed package"
