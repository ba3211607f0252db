"""plast-core's layers point one way (DESIGN §1): every import and cimport of core's .py, .pyx and .pxd files is read
here and checked against the layer order below.

Three rules. Rules 1 and 3 have a table of what is still owed: a table lists only what exists today, with the
reason; the test fails when a module has MORE than its entry (new debt) and also when it has FEWER (then lower the
entry: the tables only shrink). Aim: every table empty.

1. A module-level import never points up the layer order.
2. No import inside a function, except of pycuda and of the CUDA backend from outside it (lazy on purpose: a
   CPU-only program never loads them; loading plast.kernels.cuda and plast.memory.cuda with plast costs ~170 ms
   of import time on a 2-core machine), and of the sibling distributions. No debt is left: the CUDA context lives
   in plast._core.cuda_driver, below device memory and the kernels, and the op table's CUDA column is gathered
   by kernels/cuda/table.py, above the launchers, and filled by the op layer.
3. No late-binding setter (a lower module handed a class or table from above at import time), except the counted
   debt in LATE_BINDING_DEBT.

And: plast-nn, plast-data and plast-experiment import nothing private from core.
"""

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

CORE_SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGES = Path(__file__).resolve().parents[2]

# Bottom to top. A module may import its own layer and every layer below it. "plast" (the top) holds the public
# faces: __init__, _tensor (Tensor), creation, random, serialization, linalg, cuda, errors, compiler, _config.
LAYERS = [
    "plast._core",  # errors, dtypes, devices, grad mode, shape arithmetic, the CUDA driver probe
    "plast.memory",  # arenas over host or CUDA memory
    "plast.kernels",  # kernels/cpu (C + Cython), kernels/cuda (CUDA C through PyCUDA)
    "plast.graph",  # recording, scheduling, plan cache, fusion, chains, the jit tape, in-place writes
    "plast.ops",  # the op table and the op-layer functions
    "plast.autograd",  # backward, grad, eager backward replays
    "plast._jit",  # @plast.jit: trace and replay
    "plast.distributed",  # MPI collectives (mpi4py is imported inside functions: the optional `mpi` extra)
    "plast",  # the public faces
]

# Module-level imports that point up (rule 1), each with what is owed.
UPWARD_MODULE_IMPORTS: dict[tuple[str, str], str] = {}

# Late-binding setters (rule 3), per module: the recorder handed the Tensor class (``bind(Tensor)``). (The compiled
# op modules register their own rows now, as ops/elementwise.pyx does.)
LATE_BINDING_DEBT = {
    "plast._tensor": 1,  # bind(Tensor): the class graph/_graph.pyx's record makes tensors of
}
LATE_BINDING = re.compile(
    r"(?<![\w.])(?:\w+\.)?bind\(|\b_bind_(?:ops|kernels|fusion)\(|\bsetattr\(|\bglobals\(\)\.update\(|\binstall_tensor_methods\("
)

# core modules that the upper packages may import (the public API); every other plast-core module is private
PUBLIC_CORE = {
    "plast",
    "plast.errors",
    "plast.compiler",
    "plast.cuda",
    "plast.linalg",
    "plast.autograd",
    "plast.random",
    "plast.distributed",
}
SIBLINGS = ("plast.nn", "plast.optim", "plast.data", "plast.experiment")
# the CUDA backend: modules outside it import it inside functions, on first CUDA use (rule 2)
CUDA_BACKEND = ("plast.kernels.cuda", "plast.memory.cuda")


def _in(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _lazy_on_purpose(module: str, target: str) -> bool:
    """An import inside a function that rule 2 allows: pycuda, a sibling distribution, or the CUDA backend
    imported from a module outside it."""
    return not _is_plast_core(target) or (_in(target, CUDA_BACKEND) and not _in(module, CUDA_BACKEND))


_IMPORT = re.compile(r"^(\s*)(?:from\s+(\.*[\w.]*)\s+c?import\s+(.+)|c?import\s+([\w.]+))")
_DEF = re.compile(r"^(\s*)(?:(?:async\s+)?def\b|cpdef\b|cdef\s+(?:inline\s+)?[\w\s*\[\],.]*\()")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, target: str) -> str:
    if not target.startswith("."):
        return target
    dots = len(target) - len(target.lstrip("."))
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (dots - 1)]
    rest = target.lstrip(".")
    return ".".join(base + ([rest] if rest else []))


def _names(spec: str) -> list[str]:
    spec = spec.split("#", 1)[0].strip().strip("()")
    return [n.split(" as ")[0].strip() for n in spec.split(",") if n.strip()]


def _imports_py(path: Path, module: str, known: set[str]):
    """(target module, line, in_function) for each import in a .py file, read with ast."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    funcs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            funcs.update(id(n) for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno, id(node) in funcs
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_pkg, "." * node.level + (node.module or ""))
            for a in node.names:
                sub = f"{base}.{a.name}"
                yield (sub if sub in known else base), node.lineno, id(node) in funcs


def _imports_cython(path: Path, module: str, known: set[str]):
    """The same for .pyx/.pxd, read line by line: an import is in a function when it is indented under a def."""
    is_pkg = path.stem == "__init__"
    defs = []  # indents of the enclosing defs
    lines = path.read_text().splitlines()
    for lineno, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        while defs and indent <= defs[-1]:
            defs.pop()
        if _DEF.match(line):
            defs.append(indent)
            continue
        m = _IMPORT.match(line)
        if not m:
            continue
        if m.group(4):
            yield m.group(4), lineno, bool(defs)
            continue
        base = _resolve(module, is_pkg, m.group(2))
        spec = m.group(3)
        if spec.strip().startswith("(") and ")" not in spec:  # a parenthesised list over several lines
            rest = []
            for more in lines[lineno:]:
                rest.append(more)
                if ")" in more:
                    break
            spec = spec + " " + " ".join(rest)
        for name in _names(spec):
            sub = f"{base}.{name}"
            yield (sub if sub in known else base), lineno, bool(defs)


def _core_files():
    for path in sorted((CORE_SRC / "plast").rglob("*")):
        if (
            path.suffix in (".py", ".pyx", ".pxd")
            and "build" not in path.parts
            and path.name != "_build_info.py"
        ):
            yield path, _module_name(path, CORE_SRC)


def _all_imports():
    files = list(_core_files())
    known = {m for _, m in files} | {"plast._build_info"}  # written by setup.py at build time
    out = []
    for path, module in files:
        read = _imports_py if path.suffix == ".py" else _imports_cython
        for target, lineno, in_function in read(path, module, known):
            out.append((module, path, target, lineno, in_function))
    return out


def _layer(module: str) -> int:
    best = None
    for i, prefix in enumerate(LAYERS):
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > len(LAYERS[best]):
                best = i
    assert best is not None, f"{module} is in no layer"
    return best


IMPORTS = _all_imports()


def _is_plast_core(target: str) -> bool:
    return (target == "plast" or target.startswith("plast.")) and not target.startswith(SIBLINGS)


def test_every_core_module_is_in_a_layer():
    for _, module in _core_files():
        _layer(module)  # raises for a module outside LAYERS


def test_module_level_imports_point_down():
    bad = []
    for module, path, target, lineno, in_function in IMPORTS:
        if in_function or not _is_plast_core(target):
            continue
        if _layer(target) > _layer(module) and (module, target) not in UPWARD_MODULE_IMPORTS:
            bad.append(
                f"{path.relative_to(CORE_SRC)}:{lineno}: {module} ({LAYERS[_layer(module)]}) imports {target}"
            )
    assert not bad, "module-level imports that point up the layer order:\n" + "\n".join(bad)
    found = {(m, t) for m, _, t, _, f in IMPORTS if not f}
    for (module, target), reason in UPWARD_MODULE_IMPORTS.items():
        assert reason, f"UPWARD_MODULE_IMPORTS[{module!r}, {target!r}] needs its reason"
        assert (module, target) in found, (
            f"{module} no longer imports {target}: drop it from UPWARD_MODULE_IMPORTS"
        )


def test_module_level_imports_form_no_cycle():
    # within a layer too: a module never needs itself to be half-imported (no circle of module-level imports)
    graph: dict[str, set[str]] = {}
    for module, _, target, _, in_function in IMPORTS:
        if not in_function and _is_plast_core(target) and target != module:
            graph.setdefault(module, set()).add(target)
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    assert not cycles, f"module-level import cycles: {cycles}"


def test_no_imports_inside_functions():
    bad = [
        f"{path.relative_to(CORE_SRC)}:{lineno}: {module} imports {target}"
        for module, path, target, lineno, in_function in IMPORTS
        if in_function and not _lazy_on_purpose(module, target)
    ]
    assert not bad, (
        "imports inside functions; hoist them to module level, or move the code they need down a layer:\n"
        + "\n".join(bad)
    )


def test_late_binding_only_shrinks():
    counts = Counter()
    for path, module in _core_files():
        for line in path.read_text().splitlines():
            code = line.split("#", 1)[0]
            if LATE_BINDING.search(code) and not re.match(r"\s*(c?p?def|class)\b", code):
                counts[module] += 1
    grown = {
        m: (n, LATE_BINDING_DEBT.get(m, 0)) for m, n in counts.items() if n > LATE_BINDING_DEBT.get(m, 0)
    }
    assert not grown, f"new late-binding setters (module: found, allowed); import down instead: {grown}"
    shrunk = {m: (counts.get(m, 0), n) for m, n in LATE_BINDING_DEBT.items() if counts.get(m, 0) < n}
    assert not shrunk, f"late binders were removed: lower LATE_BINDING_DEBT to match {shrunk}"


def test_the_checks_see_what_they_check():
    # the readers above must find the imports they judge, or every rule passes vacuously
    assert len(IMPORTS) > 400
    assert any(in_function for *_, in_function in IMPORTS)
    assert any(p.suffix == ".pyx" and not f for _, p, _, _, f in IMPORTS)
    assert ("plast.graph._graph", "plast.memory.arena") in {(m, t) for m, _, t, _, _ in IMPORTS}
    assert ("plast.kernels.cpu._tensors", "plast._core._structs") in {(m, t) for m, _, t, _, _ in IMPORTS}
    assert _layer("plast.graph.tape") > _layer("plast.kernels.cpu._optim")
    with pytest.raises(AssertionError):
        _layer("numpy")


@pytest.mark.parametrize("dist", ["plast-nn", "plast-data", "plast-experiment"])
def test_upper_packages_import_only_public_core(dist):
    src = PACKAGES / dist / "src"
    if not src.is_dir():
        pytest.skip(f"{dist} is not in this checkout")
    bad = []
    private_attr = re.compile(r"\bplast\.(?:_[a-z]\w*|graph|kernels|memory|ops)\.")
    for path in sorted(src.rglob("*.py")):
        module = _module_name(path, src)
        text = path.read_text()
        for target, lineno, _ in _imports_py(path, module, set()):
            if _is_plast_core(target) and target not in PUBLIC_CORE:
                bad.append(f"{path.relative_to(src)}:{lineno}: imports {target}")
        for lineno, line in enumerate(text.splitlines(), 1):
            if private_attr.search(line.split("#", 1)[0]):
                bad.append(f"{path.relative_to(src)}:{lineno}: reaches into core: {line.strip()}")
    assert not bad, (
        f"{dist} uses private plast-core modules (use the public API, plast.compiler for jit):\n"
        + ("\n".join(bad))
    )
