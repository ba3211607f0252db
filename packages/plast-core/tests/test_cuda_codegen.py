"""CUDA code generation for fused elementwise chains (plast.kernels.cuda.codegen), checked without a GPU where
possible.

* host math: the generated source compiles as host C++ (its kernel entry aside); g++ builds a sample of programs
  (every opcode, constants, broadcasting, strided inputs and outputs, float32 and float64, 32- and 64-bit
  indices) and runs each element loop over numpy arrays, compared with the CPU interpreter (_fused);
* the program decoder rejects bad programs, and run_chain bad operands, with clear errors;
* fake driver (tests/test_cuda_wiring.py): CUDA chains are planned as one group whose kernel runs the generated
  code; with the generated source built for the host and "launched" over the fake's host memory, a whole graph
  computes through the scheduler, the plan cache and the generated kernel, and matches the CPU;
* ``@pytest.mark.cuda``: fused chains on a real GPU against the CPU path (skipped without one).

Skips (with a reason) where g++ is missing. nvcc builds of the same samples live in test_cuda_compile.py.
"""

import ctypes
import math
import shutil
import subprocess

import numpy as np
import pytest
from test_cuda_wiring import fake_cuda  # noqa: F401 -- the fake driver's fixture, used by name

import plast
import plast._core.cuda_driver as cuda_backend
from plast.graph import chains, realize
from plast.kernels.cpu import _fused
from plast.kernels.cuda import codegen, loader

CXX = shutil.which("g++") or shutil.which("c++")
needs_cxx = pytest.mark.skipif(CXX is None, reason="no host C++ compiler (g++)")
NP = {3: np.float32, 4: np.float64}

# ---- sample programs (also compiled with nvcc in test_cuda_compile.py) ----------------------------------------


def _prog(*ins):
    return _fused.assemble(list(ins))


_GEN_UNARY = [u for u in _fused.UNARY if u in codegen.SUPPORTED]
_GEN_BINARY = [b for b in _fused.BINARY if b in codegen.SUPPORTED]


def test_the_generator_knows_every_opcode_but_the_special_functions():
    # their code is _core/special.h, which no generated source includes: on CUDA they run unfused
    assert set(_fused.UNARY) | set(_fused.BINARY) == codegen.SUPPORTED | codegen.NOT_GENERATED
    assert codegen.NOT_GENERATED == {
        "erfinv",
        "digamma",
        "trigamma",
        "i0",
        "i1",
        "igamma",
        "igammac",
        "polygamma",
    }


def sample_programs():
    """{label: (program, number of inputs)}: every opcode on its own, constants (incl. -0, inf, NaN), and mixed
    chains with register reuse and repeated loads of one input."""
    out = {}
    # the generator's ops: the bytecode's but the special functions (codegen.NOT_GENERATED)
    for u in _GEN_UNARY:
        out[f"unary_{u}"] = (_prog(("load", 0, 0), (u, 1, 0), ("store", 0, 1)), 1)
    for b in _GEN_BINARY:
        out[f"binary_{b}"] = (_prog(("load", 0, 0), ("load", 1, 1), (b, 2, 0, 1), ("store", 0, 2)), 2)
    out["consts"] = (
        _prog(
            ("load", 0, 0),
            ("const", 1, 0.1),
            ("mul", 2, 0, 1),
            ("const", 1, -0.0),
            ("add", 2, 2, 1),
            ("const", 1, -math.inf),
            ("maximum", 2, 2, 1),
            ("const", 1, math.inf),
            ("minimum", 2, 2, 1),
            ("const", 3, 1e-300),  # rounds to 0 in float32, as the CPU's (T)v
            ("add", 2, 2, 3),
            ("const", 3, 1e-40),  # a float32 subnormal
            ("add", 2, 2, 3),
            ("store", 0, 2),
        ),
        1,
    )
    out["nan_const"] = (_prog(("load", 0, 0), ("const", 1, math.nan), ("add", 2, 0, 1), ("store", 0, 2)), 1)
    # gelu_tanh(x * w + b): a linear layer's epilogue
    out["bias_gelu"] = (
        _prog(("load", 0, 0), ("load", 1, 1), ("mul", 2, 0, 1), ("load", 3, 2), ("add", 2, 2, 3))
        + _prog(("gelu_tanh", 4, 2), ("store", 0, 4)),
        3,
    )
    # an LSTM-like cell: sigmoid(a) * tanh(b) + sigmoid(c) * b, input 1 loaded twice
    out["cell"] = (
        _prog(
            ("load", 0, 0),
            ("sigmoid", 0, 0),
            ("load", 1, 1),
            ("tanh", 2, 1),
            ("mul", 0, 0, 2),
            ("load", 3, 2),
            ("sigmoid", 3, 3),
            ("load", 4, 1),
            ("mul", 3, 3, 4),
            ("add", 0, 0, 3),
            ("store", 0, 0),
        ),
        3,
    )
    # softplus-ish and friends: log1p(exp(-|x|)) + relu(x), silu, gelu_erf, sign, square, rsqrt(|y| + 1)
    out["mixed"] = (
        _prog(
            ("load", 0, 0),
            ("abs", 1, 0),
            ("neg", 1, 1),
            ("exp", 1, 1),
            ("log1p", 1, 1),
            ("relu", 2, 0),
            ("add", 1, 1, 2),
            ("silu", 2, 0),
            ("sub", 1, 1, 2),
            ("gelu_erf", 2, 0),
            ("add", 1, 1, 2),
            ("load", 3, 1),
            ("abs", 4, 3),
            ("const", 5, 1.0),
            ("add", 4, 4, 5),
            ("rsqrt", 4, 4),
            ("sign", 6, 3),
            ("mul", 4, 4, 6),
            ("square", 6, 3),
            ("sqrt", 6, 6),
            ("add", 4, 4, 6),
            ("div", 1, 1, 4),
            ("store", 0, 1),
        ),
        2,
    )
    # every unary opcode in one sequence (kept finite: abs then +1 before log/sqrt/rsqrt/reciprocal)
    seq = [("load", 0, 0), ("const", 1, 1.0)]
    for u in _GEN_UNARY:
        if u in ("log", "sqrt", "rsqrt", "reciprocal", "log1p"):
            seq += [("abs", 0, 0), ("add", 0, 0, 1)]
        seq.append((u, 0, 0))
    out["all_unary"] = (_prog(*seq, ("store", 0, 0)), 1)
    return out


def nvcc_samples():
    """(label, source, bytes of its packed arguments) for nvcc: samples over several layout classes, both dtypes
    (and both index widths for two of them), which between them use every opcode."""
    progs = sample_programs()
    picks = [
        ("consts", "cc", 1),
        ("nan_const", "sc", 1),
        ("bias_gelu", "gssc", 2),
        ("cell", "cgsg", 3),
        ("mixed", "gcc", 2),
        ("all_unary", "cc", 1),
        ("binary_maximum", "gsg", 4),
        ("binary_minimum", "ccc", 1),
        ("binary_div", "gcc", 2),
        ("binary_sub", "ccc", 1),
        ("binary_pow", "csc", 1),
        ("binary_floor_divide", "ccc", 1),
        ("binary_remainder", "gcc", 2),
        ("binary_fmod", "ccc", 1),
        ("binary_atan2", "gcc", 2),
        ("binary_copysign", "ccc", 1),
        ("binary_nextafter", "csc", 1),
    ]
    out = []
    for label, kinds, ndim in picks:
        prog, nin = progs[label]
        assert len(kinds) == nin + 1, label
        ng = kinds.count("g")
        nbytes = len(codegen.pack_args(0, [0] * nin, 1, (1,) * ndim, [(0,) * ndim] * ng))
        for code in (3, 4):
            for idx32 in (True, False) if label in ("cell", "mixed") else (True,):
                src = codegen.generate(prog, code, kinds, ndim, idx32)
                out.append((f"{label}_{NP[code].__name__}_{kinds}_{'i32' if idx32 else 'i64'}", src, nbytes))
    return out


# ---- host builds of generated sources ---------------------------------------------------------------------------

_SHIM_HEAD = "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n"
_SHIM_CASE = """
namespace case{k} {{
{source}
}}
extern "C" int64_t size_{k}(void) {{ return (int64_t)sizeof(case{k}::ChainArgs); }}
extern "C" void run_{k}(const void *args, int64_t start, int64_t step) {{
    case{k}::ChainArgs a;
    memcpy(&a, args, sizeof a);
    case{k}::plast_chain_range(a, start, step);
}}
"""


def host_build(sources, tmp_dir):
    """One shared library of several generated sources, each in its own namespace: a ctypes library with
    ``size_<k>()`` (sizeof its ChainArgs) and ``run_<k>(args, start, step)`` (its element loop)."""
    if CXX is None:
        pytest.skip("no host C++ compiler (g++)")
    text = _SHIM_HEAD + "".join(_SHIM_CASE.format(k=k, source=s) for k, s in enumerate(sources))
    src = tmp_dir / "chains.cpp"
    src.write_text(text)
    lib = tmp_dir / "libchains.so"
    # -ffp-contract=off: no FMA the source does not ask for, as the device build's --fmad=false
    cmd = [CXX, "-std=c++17", "-O1", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC"]
    res = subprocess.run([*cmd, "-o", str(lib), str(src)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-4000:]
    dll = ctypes.CDLL(str(lib))
    for k in range(len(sources)):
        getattr(dll, f"size_{k}").restype = ctypes.c_int64
        getattr(dll, f"run_{k}").argtypes = (ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    return dll


def _elem_strides(a):
    return tuple(s // a.itemsize for s in a.strides)


def host_run(dll, k, prog_args, threads=1):
    """Run case k's element loop as `threads` grid-stride "threads" over packed ChainArgs bytes."""
    buf = ctypes.create_string_buffer(prog_args, len(prog_args))
    assert getattr(dll, f"size_{k}")() == len(prog_args), "ChainArgs size differs from the packed bytes"
    for t in range(threads):
        getattr(dll, f"run_{k}")(ctypes.addressof(buf), t, threads)


# ---- layouts --------------------------------------------------------------------------------------------------

SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-40, -1e-40, 80.0, -100.0, 30.0, -30.0, 1e30]


def _values(rng, shape, dt, specials=True):
    a = np.array(rng.standard_normal(shape) * 2, dtype=dt)  # an array even for shape (): it has an address
    if specials and a.size:
        flat = a.reshape(-1)
        idx = rng.choice(flat.size, size=min(flat.size, len(SPECIALS)), replace=False)
        flat[idx] = np.array(SPECIALS[: len(idx)], dtype=dt)
    return a


def _ident(t):
    return t


def _layout(name, rng, nin, dt, specials=True):
    """Inputs and output of a layout case as (base array, view function) pairs: the view function takes a numpy
    array or a plast tensor, so the GPU tests build the same strides on the device."""
    if name == "contig":
        return [(_values(rng, (4, 5), dt, specials), _ident) for _ in range(nin)], (
            np.zeros((4, 5), dt),
            _ident,
        )
    if name == "bcast":  # a transposed input, a broadcast row, a 0-d scalar; contiguous output
        pool = [((5, 4), lambda t: t.T), ((5,), _ident), ((), _ident)]
        ins = [(_values(rng, pool[k % 3][0], dt, specials), pool[k % 3][1]) for k in range(nin)]
        return ins, (np.zeros((4, 5), dt), _ident)
    if name == "strided":  # stepped slices in, a transposed output view out
        ins = [(_values(rng, (6, 10), dt, specials), lambda t: t[1::2, ::2]) for _ in range(nin)]
        return ins, (np.zeros((5, 3), dt), lambda t: t.T)
    if name == "size1":  # size-1 dims, broadcasting along them
        pool = [(3, 1, 5), (1, 1, 5), (3, 1, 1)]
        return [(_values(rng, pool[k % 3], dt, specials), _ident) for k in range(nin)], (
            np.zeros((3, 1, 5), dt),
            _ident,
        )
    raise AssertionError(name)


def _views(pairs):
    return [fn(base) for base, fn in pairs]


def _plan_arrays(ins, out):
    return codegen.plan(out.shape, [(a.shape, _elem_strides(a)) for a in ins], _elem_strides(out))


def _pack(ins, out, shape, general):
    return codegen.pack_args(
        out.__array_interface__["data"][0],
        [a.__array_interface__["data"][0] for a in ins],
        out.size,
        shape,
        general,
    )


def _host_cases():
    """(label, program, nin, dtype code, layout, idx32) for the host check."""
    cases = []
    for label, (prog, nin) in sample_programs().items():
        layouts = ["contig", "bcast"] if label.startswith(("unary_", "binary_")) else list(LAYOUTS)
        for code in (3, 4):
            for lay in layouts:
                cases.append((label, prog, nin, code, lay, True))
            cases.append((label, prog, nin, code, "strided", False))
    return cases


LAYOUTS = ("contig", "bcast", "strided", "size1")


@pytest.fixture(scope="module")
def host_cases(tmp_path_factory):
    """Every host case with its arrays, planned and generated, all built into one library."""
    rng = np.random.default_rng(7)
    built, sources = [], []
    for label, prog, nin, code, lay, idx32 in _host_cases():
        pairs, (out_base, out_fn) = _layout(lay, rng, nin, NP[code])
        ins, out = _views(pairs), out_fn(out_base)
        shape, kinds, general, fits = _plan_arrays(ins, out)
        assert fits
        sources.append(codegen.generate(prog, code, kinds, len(shape), idx32))
        built.append((label, prog, code, lay, idx32, ins, out, _pack(ins, out, shape, general), kinds))
    dll = host_build(sources, tmp_path_factory.mktemp("codegen_host"))
    return dll, built


def _cpu_reference(prog, ins, out):
    want = np.zeros(out.shape, out.dtype)
    _fused.run_program(prog, ins, [want])
    return want


@needs_cxx
def test_generated_math_matches_the_cpu_interpreter(host_cases):
    dll, built = host_cases
    failures, kinds_seen = [], set()
    for k, (label, prog, code, lay, idx32, ins, out, args, kinds) in enumerate(built):
        kinds_seen.update(kinds)
        out[...] = 12345.0  # every element must be written
        host_run(dll, k, args, threads=3 if k % 2 else 1)
        want = _cpu_reference(prog, ins, out)
        got = np.array(out)
        if label == "unary_gelu_erf" and code == 3:
            # the CPU's float32 gelu_erf gives NaN at +inf (inf * 0 in its erfc tail); torch and this kernel: inf
            pos_inf = np.broadcast_to(ins[0], out.shape) == np.inf
            assert (got[pos_inf] == np.inf).all()
            got, want = got[~pos_inf], want[~pos_inf]
        rtol, atol = (1e-5, 1e-6) if code == 3 else (1e-10, 1e-12)
        if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
            err = np.nanmax(np.abs(got.astype(np.float64) - want))
            failures.append(f"{label} {NP[code].__name__} {lay} idx32={idx32}: max abs error {err:.3g}")
    assert not failures, "\n".join(failures)
    assert kinds_seen == {"c", "s", "g"}
    assert len(built) > 100


@needs_cxx
def test_every_opcode_is_sampled():
    used = set()
    for prog, _ in sample_programs().values():
        used.update(ins[0] for ins in codegen.decode(prog, 3))
    assert used == set(_fused.OPCODES) - codegen.NOT_GENERATED
    nv = set()
    for _, src, _ in nvcc_samples():
        nv.update(
            line.split("= ")[-1].split("(")[0] for line in src.splitlines() if line.startswith("//   r")
        )
    assert set(_GEN_UNARY) | set(_GEN_BINARY) <= nv


def test_source_shape(rng):
    prog, nin = sample_programs()["bias_gelu"]
    src = codegen.generate(prog, 3, "gscc", 2, idx32=True)
    assert 'extern "C" __global__ void __launch_bounds__(256) plast_chain(const ChainArgs a)' in src
    assert "int32_t" in src and "int64_t shape[2];" in src and "int64_t stride[1][2];" in src
    assert "const float x1 = p1[0];" in src  # the scalar input is loaded once, before the loop
    assert "pl_gelu_tanh" in src and "pl_sigmoid" in src and "pl_erf" not in src  # only the helpers it needs
    contig = codegen.generate(prog, 4, "cccc", 1, idx32=False)
    assert "shape" not in contig and "po[i] = " in contig and "double" in contig and "int64_t i" in contig


def test_dead_instructions_are_not_emitted():
    prog = _prog(("load", 0, 0), ("exp", 1, 0), ("log", 2, 0), ("store", 0, 2))
    src = codegen.generate(prog, 3, "cc", 1)
    assert "pl_exp" not in src and "pl_log(x0)" in src


def test_plan_classifies_operands():
    # (4, 5) output; a contiguous input, a row, a column, a scalar and a transposed view
    shape, kinds, general, idx32 = codegen.plan(
        (4, 5), [((4, 5), (5, 1)), ((5,), (1,)), ((4, 1), (1, 1)), ((), ()), ((4, 5), (1, 4))], (5, 1)
    )
    assert shape == (4, 5) and kinds == "cggsgc" and idx32
    assert general == [(0, 1), (1, 0), (1, 4)]
    # everything contiguous merges to one dim
    assert codegen.plan((2, 3, 4), [((2, 3, 4), (12, 4, 1)), ((), ())], (12, 4, 1))[:2] == ((24,), "csc")
    with pytest.raises(ValueError, match=r"does not broadcast to the output's \(4, 5\)"):
        codegen.plan((4, 5), [((3,), (1,))], (5, 1))
    with pytest.raises(ValueError, match="overlap"):
        codegen.plan((4, 5), [((5,), (1,))], (0, 1))  # an expanded output: threads would race
    # offsets beyond int32 select 64-bit indices
    assert not codegen.plan((2, 3), [((2, 3), (1 << 31, 1))], (3, 1))[3]
    assert not codegen.fits_int32((1 << 30) + 1, (1,), [])


def test_decode_rejects_bad_programs():
    ok = _prog(("load", 0, 0), ("exp", 1, 0), ("store", 0, 1))
    assert [i[0] for i in codegen.decode(ok, 1)] == ["load", "exp", "store"]
    bad = {
        "unknown opcode": np.array([99, 0, 0, 0], np.int32).tobytes(),
        "input out of range": _prog(("load", 0, 3), ("store", 0, 0)),
        "register out of range": _prog(("load", 16, 0), ("store", 0, 16)),
        "read before write": _prog(("load", 0, 0), ("add", 1, 0, 5), ("store", 0, 1)),
        "store to output 1": _prog(("load", 0, 0), ("store", 1, 0)),
    }
    for prog in bad.values():
        with pytest.raises(ValueError, match="is invalid"):
            codegen.decode(prog, 1)
    with pytest.raises(ValueError, match="no store"):
        codegen.decode(_prog(("load", 0, 0)), 1)
    with pytest.raises(ValueError, match="multiple of 16"):
        codegen.decode(b"\0" * 12, 1)
    with pytest.raises(ValueError, match="float32 or float64"):
        codegen.generate(ok, 2, "cc", 1)
    with pytest.raises(ValueError, match="1 to 16 dims"):
        codegen.generate(ok, 3, "gg", 17)


def test_constants_are_exact_literals():
    for v in (0.1, -0.0, 1e-300, 3.4028235e38, 2.0**-1074):
        lit = codegen._literal(v, "double")
        assert float.fromhex(lit[len("(double)(") : -1]) == v or v == 0
    # float32: rounded first (to 0, a subnormal, inf) so that the compiler never sees an out-of-range value
    assert codegen._literal(1e-300, "float") == "(float)(0x0.0p+0)"
    assert float.fromhex(codegen._literal(1e-40, "float")[len("(float)(") : -1]) == float(np.float32(1e-40))
    assert codegen._literal(3.5e38, "float") == "(float)(__builtin_huge_val())"
    assert "__builtin_nan" in codegen._literal(math.nan, "float")
    assert codegen._literal(-math.inf, "float") == "(float)(-__builtin_huge_val())"


def test_every_unary_op_of_chains_is_supported():
    from plast.ops.registry import OPS

    opcodes = {op.chain for op in OPS.values() if op.chain is not None}
    # but the special functions (erfinv, digamma, i0, igamma), which CUDA runs unfused (chains.py asks codegen.SUPPORTED)
    assert len(opcodes) >= 16 and opcodes - codegen.NOT_GENERATED <= codegen.SUPPORTED
    assert {"erfinv", "digamma"} <= opcodes


# ---- fake driver: planning and dispatch ---------------------------------------------------------------------------


def _graph(root):
    order, seen = [], set()

    def visit(node):
        if id(node) in seen:
            return
        seen.add(id(node))
        for t in node.inputs:
            if t._storage is None and t._node is not None:
                visit(t._node)
        order.append(node)

    visit(root._node)
    internal = {(id(t._node), t._index) for n in order for t in n.inputs if t._node is not None}
    return order, internal


def _chain_expr(x, y, z):
    return ((x * y + z).sigmoid() * 0.5 - x.tanh()).relu()


def _tensors(rng, device, dt=np.float32):
    return [plast.tensor(rng.standard_normal(s).astype(dt), device=device) for s in ((4, 6), (6,), (4, 1))]


@pytest.mark.usefixtures("fake_cuda")
def test_cuda_chain_is_one_group_with_the_generated_kernel(rng):
    xs = _tensors(rng, "cpu")
    out_cpu = _chain_expr(*xs)
    order_cpu, internal_cpu = _graph(out_cpu)
    ((nodes_cpu, _, prog_cpu),) = chains.find_chains(order_cpu, internal_cpu, set()).values()

    out = _chain_expr(*(t.cuda() for t in xs))
    order, internal = _graph(out)
    found = chains.find_chains(order, internal, set())
    ((nodes, ext, prog),) = found.values()
    assert [n.op.name for n in nodes] == [n.op.name for n in nodes_cpu] and len(nodes) == len(order)
    assert prog == prog_cpu  # one program for both devices
    assert all(t.device == "cuda" for t in ext)
    groups, covered, _ = realize._plan(order)
    (g,) = groups.values()
    assert g.rule is chains.RULE and g.kernel is chains.kernel and g.args == (prog,)
    assert len(covered) == len(order) - 1


@pytest.mark.usefixtures("fake_cuda")
def test_cuda_chain_kernel_loads_a_generated_module(rng, monkeypatch):
    """Without a host build, the fake loads nothing: the chain reaches nvcc's entry for generated source (never
    the CPU interpreter) and stops where the fake refuses to load a module."""
    compiled = []
    monkeypatch.setattr(codegen, "_functions", {})
    monkeypatch.setattr(loader, "compile_source", lambda name, src, arch, **k: compiled.append(src) or b"")
    out = _chain_expr(*_tensors(rng, "cuda"))
    with pytest.raises(RuntimeError, match="runs no kernels"):
        out.cpu()
    (src,) = compiled
    assert "plast_chain(const ChainArgs a)" in src and "pl_sigmoid" in src and "pl_tanh" in src


@pytest.mark.usefixtures("fake_cuda")
def test_chains_never_span_devices():
    from plast.graph._graph import record
    from plast.ops.registry import OPS

    a = plast.randn(2, 3)
    e = record(OPS["exp"], (a,), (), [((2, 3), plast.float32)], plast.device("cpu"))[0]
    b = plast.zeros(2, 3, device="cuda")
    s = record(OPS["add"], (e, b), (), [((2, 3), plast.float32)], plast.device("cuda"))[0]
    t = record(OPS["tanh"], (s,), (), [((2, 3), plast.float32)], plast.device("cuda"))[0]
    order, internal = _graph(t)
    ((nodes, _, _),) = chains.find_chains(order, internal, set()).values()
    assert [n.op.name for n in nodes] == ["add", "tanh"]


@pytest.mark.usefixtures("fake_cuda")
def test_ops_the_generator_lacks_stay_unfused(rng, monkeypatch):
    monkeypatch.setattr(codegen, "SUPPORTED", codegen.SUPPORTED - {"tanh", "sigmoid"})
    out = _chain_expr(*_tensors(rng, "cuda"))
    order, internal = _graph(out)
    for nodes, _, _ in chains.find_chains(order, internal, set()).values():
        assert not {n.op.name for n in nodes} & {"tanh", "sigmoid"}
    out_cpu = _chain_expr(*_tensors(rng, "cpu"))  # the CPU interpreter runs every op regardless
    order, internal = _graph(out_cpu)
    assert len(chains.find_chains(order, internal, set())) == 1


@pytest.mark.usefixtures("fake_cuda")
def test_run_chain_rejects_bad_operands():
    prog = _prog(("load", 0, 0), ("exp", 1, 0), ("store", 0, 1))
    out = plast.zeros(3, device="cuda")
    with pytest.raises(ValueError, match="every operand must be a CUDA tensor"):
        codegen.run_chain(prog, out, [plast.zeros(3)])
    with pytest.raises(ValueError, match="must be float32, got float64"):
        codegen.run_chain(prog, out, [plast.zeros(3, dtype=plast.float64, device="cuda")])
    with pytest.raises(ValueError, match="float32 or float64 only"):
        codegen.run_chain(prog, plast.zeros(3, dtype=plast.int32, device="cuda"), [])


# ---- fake driver with the generated kernels built for the host --------------------------------------------------


class _HostFunction:
    """A generated kernel built for the host: launching it runs every thread's grid-stride loop in turn over the
    fake driver's memory (host memory), so the packed arguments and the generated indexing really run."""

    def __init__(self, dll, k, launches):
        self.dll, self.k, self.launches = dll, k, launches

    def _launch_kernel(self, grid, block, params, shared, stream):
        assert block == (codegen.BLOCK, 1, 1) and grid[1:] == (1, 1) and grid[0] >= 1
        threads = grid[0] * block[0]
        self.launches.append((grid, len(params)))
        host_run(self.dll, self.k, params, threads=threads)


@pytest.fixture
def host_gpu(request, monkeypatch, tmp_path):
    """The fake driver, with loader.get_source_module building generated sources for the host (counted)."""
    request.getfixturevalue("fake_cuda")
    built, launches = [], []

    class Module:
        def __init__(self, src):
            built.append(src)
            d = tmp_path / f"m{len(built)}"
            d.mkdir()
            self.fn = _HostFunction(host_build([src], d), 0, launches)

        def function(self, name):
            assert name == codegen.KERNEL_NAME
            return self.fn

    def get_source_module(name, src, options=loader.NVCC_OPTIONS):
        assert "--fmad=false" in options
        return Module(src)

    monkeypatch.setattr(codegen, "_functions", {})
    monkeypatch.setattr(loader, "get_source_module", get_source_module)
    return built, launches


@needs_cxx
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_fused_chain_runs_the_generated_kernel(host_gpu, rng, dt):
    built, launches = host_gpu
    xs = [rng.standard_normal(s).astype(dt) for s in ((4, 6), (6,), (4, 1))]
    want = _chain_expr(*(plast.tensor(a) for a in xs)).numpy()
    hits = realize.scheduler_stats()["hits"]
    for _ in range(2):  # the second graph is a plan-cache hit: same program, same module
        with realize.watch_fusions() as fired:
            got = _chain_expr(*(plast.tensor(a, device="cuda") for a in xs))
            res = got.numpy()
        assert got.device == "cuda" and fired == ["elementwise_chain"]
        np.testing.assert_allclose(res, want, rtol=1e-5 if dt is np.float32 else 1e-12, atol=1e-6)
    assert realize.scheduler_stats()["hits"] >= hits + 1
    assert len(built) == 1 and len(launches) == 2


@needs_cxx
def test_generated_kernel_reads_views_and_writes_every_element(host_gpu, rng):
    built, launches = host_gpu
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((3, 5)).astype(np.float32)

    def expr(x, y):
        return (x.T[:, ::2] * 2.0 + y.T).exp().sqrt() - y.T.abs()  # transposed, stepped and broadcast reads

    want = expr(plast.tensor(a), plast.tensor(b)).numpy()
    with realize.watch_fusions() as fired:
        got = expr(plast.tensor(a, device="cuda"), plast.tensor(b, device="cuda")).numpy()
    assert fired == ["elementwise_chain"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    (src,) = built
    assert "g" in src.split("of kinds ")[1].split(",")[0]  # strided inputs read through shape and strides


@needs_cxx
def test_large_index_path_on_the_host(host_gpu, rng, monkeypatch):
    """64-bit indices (chosen for big tensors) compute the same; forced here on a small one."""
    built, _ = host_gpu
    monkeypatch.setattr(codegen, "fits_int32", lambda *a: False)
    monkeypatch.setattr(codegen, "_plans", {})
    x = rng.standard_normal((3, 7)).astype(np.float64)
    want = (plast.tensor(x).T * 3.0).tanh().numpy()
    got = (plast.tensor(x, device="cuda").T * 3.0).tanh().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert "int64_t i = start" in built[0]


@needs_cxx
def test_empty_chain_launches_nothing(host_gpu, rng):
    built, launches = host_gpu
    x = plast.zeros(0, 4, device="cuda")
    y = plast.tensor(rng.standard_normal(4).astype(np.float32), device="cuda")
    with realize.watch_fusions() as fired:
        got = ((x * y).exp() + y).numpy()
    assert got.shape == (0, 4) and fired == ["elementwise_chain"]
    assert built == [] and launches == []


# ---- a real GPU --------------------------------------------------------------------------------------------------

needs_gpu = pytest.mark.skipif(
    not cuda_backend.is_available(), reason=f"CUDA backend not available: {cuda_backend.unavailable_reason()}"
)


def _gpu_cases():
    """(label, fn of (x, y, z)) over shapes that broadcast; each is one chain on both devices."""
    return {
        "mlp_tail": lambda x, y, z: ((x * y + z).sigmoid() * 0.5 - x.tanh()).relu(),
        "logs": lambda x, y, z: (x.abs() + 1).log() + (y.abs()).log1p() - (z * z + 1).sqrt(),
        "erf_sign": lambda x, y, z: (
            plast.erf(x - y).abs() * z.sign() + plast.maximum(x, z) - plast.minimum(y, x)
        ),
        "div_exp": lambda x, y, z: (x / (y * y + 1)).exp() / (z.abs() + 2),
    }


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(_gpu_cases()))
@pytest.mark.parametrize(
    "shapes,view",
    [
        (((64, 33), (33,), (64, 1)), None),
        (((3, 1, 5), (1, 4, 5), ()), None),
        (((33, 64), (64, 33), (64, 1)), "T"),  # transposed x, y contiguous
        (((70000,), (70000,), (1,)), None),  # many blocks
        (((0, 4), (4,), ()), None),
    ],
    ids=["bcast", "size1", "transposed", "large", "empty"],
)
def test_gpu_chains_match_the_cpu(rng, dt, case, shapes, view):
    fn = _gpu_cases()[case]
    arrays = [rng.standard_normal(s).astype(dt) for s in shapes]

    def run(device):
        x, y, z = (plast.tensor(a, device=device) for a in arrays)
        if view == "T":
            x = x.T
        with realize.watch_fusions() as fired:
            r = fn(x, y, z).numpy()
        return r, fired

    want, fired_cpu = run("cpu")
    got, fired = run("cuda")
    assert fired == fired_cpu and "elementwise_chain" in fired
    tol = dict(rtol=1e-5, atol=1e-6) if dt is np.float32 else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got, want, **tol, equal_nan=True)


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("code", [3, 4])
def test_gpu_every_sample_program(rng, code):
    """Every sample program (each opcode, the constants, the mixed chains) through run_chain on the GPU, against
    the CPU interpreter, on each layout."""
    failures = []
    for label, (prog, nin) in sample_programs().items():
        for lay in LAYOUTS:
            pairs, (out_base, out_fn) = _layout(lay, rng, nin, NP[code])
            ins, out = _views(pairs), out_fn(out_base)
            want = _cpu_reference(prog, ins, out)
            dev_in = [fn(plast.tensor(base, device="cuda")) for base, fn in pairs]  # the same strides
            dev_out = out_fn(plast.tensor(out_base, device="cuda"))
            codegen.run_chain(prog, dev_out, dev_in)
            got = dev_out.numpy()
            if label == "unary_gelu_erf" and code == 3:
                keep = np.broadcast_to(ins[0], out.shape) != np.inf  # the CPU's NaN at +inf (see above)
                got, want = got[keep], want[keep]
            rtol, atol = (1e-5, 1e-6) if code == 3 else (1e-10, 1e-12)
            if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
                failures.append(f"{label} {lay}")
    assert not failures, failures


@pytest.mark.cuda
@needs_gpu
def test_gpu_plan_cache_hit_reuses_the_module(rng):
    before = dict(loader._modules)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((8, 9), (9,), (8, 1))]
    for _ in range(3):
        _chain_expr(*(plast.tensor(a, device="cuda") for a in xs)).numpy()
    new = [k for k in loader._modules if k not in before and k.startswith("chain:")]
    assert len(new) <= 1
