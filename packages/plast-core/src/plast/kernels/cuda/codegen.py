"""CUDA code generation for fused elementwise chains: a chain's program (graph/chains.py, the register bytecode
of kernels/cpu/_fused.pyx) becomes the source of one kernel, compiled at first use and kept per program.

The kernel is a grid-stride loop over the output's elements. Each operand (the inputs, then the output) is
classified over the output's merged iteration shape: ``c`` contiguous (offset = the linear index), ``s`` one
repeated value (loaded once, before the loop) or ``g`` strided (offset from the index's coordinates, with shape
and strides passed as kernel arguments; the number of dims is a constant of the source). Each instruction is a
line of C with the math of the CPU interpreter: float32 ops take the formulas of the vectorized CPU kernels
(csrc/vmath_simd.h: sigmoid through exp(-|x|), gelu_tanh as x * sigmoid(2u), ...), float64 ops those of its libm
loops (csrc/unary.c). Modules compile with ``--fmad=false`` so that, as on the CPU, every instruction rounds by
itself: a mul followed by an add never fuses into one FMA.

Indices are 32-bit when the element count and every operand's reach fit (64-bit division is several times
slower on the GPU). The source compiles as host C++ too (the kernel entry aside), so the tests run the same
text on the CPU against the interpreter (tests/test_cuda_codegen.py).

Pure Python: importable without pycuda; pycuda is touched only when a kernel is loaded.
"""

import struct

import numpy as np

from ..cpu import _fused
from . import loader
from .abi import Params
from .kernels import F32, F64, addr, collapse, grid1

# opcodes of the chain bytecode: _fused.OPCODES is the one table (csrc/elementwise_chain.h, unary.h)
OPCODES = dict(_fused.OPCODES)
NAMES = {code: name for name, code in OPCODES.items()}
BINARY = tuple(_fused.BINARY)
UNARY = tuple(_fused.UNARY)

KERNEL_NAME = "plast_chain"
BLOCK = 256
MAX_DIMS = 16  # the CPU interpreter's limit
MAX_INPUTS = _fused.MAX_IO
# --fmad=false: instructions round one by one, as on the CPU (see the module docstring)
NVCC_OPTIONS = ("-O3", "-std=c++17", "-lineinfo", "--fmad=false")

_CTYPE = {F32: "float", F64: "double"}
_BIN_EXPR = {
    "add": "{a} + {b}",
    "sub": "{a} - {b}",
    "mul": "{a} * {b}",
    "div": "{a} / {b}",
    # NaN-propagating, as csrc/elementwise.c's S_MAX / S_MIN
    "maximum": "({a} > {b} || {a} != {a}) ? {a} : {b}",
    "minimum": "({a} < {b} || {a} != {a}) ? {a} : {b}",
    "pow": "pl_pow({a}, {b})",
    "floor_divide": "pl_floor_divide({a}, {b})",
    "remainder": "pl_remainder({a}, {b})",
    "fmod": "pl_fmod({a}, {b})",
    "atan2": "pl_atan2({a}, {b})",
    "copysign": "pl_copysign({a}, {b})",
    "nextafter": "pl_nextafter({a}, {b})",
}


def _binary_helpers(T, f):
    """Bodies of the binary helpers over (a, b) of C type `T`, with libm's suffix `f` ("f" for float32): torch's
    rules, as csrc/elementwise.c's floordiv/remainder."""
    return {
        "pow": f"return pow{f}(a, b);",
        "floor_divide": (
            "if (b == 0) return a / b;\n"
            f"    const {T} mod = fmod{f}(a, b);\n"
            f"    {T} div = (a - mod) / b;\n"
            "    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;\n"
            f"    if (div == 0) return copysign{f}(({T})0, a / b);\n"
            f"    const {T} fl = floor{f}(div);\n"
            f"    return div - fl > ({T})0.5 ? fl + 1 : fl;"
        ),
        "remainder": (
            f"const {T} mod = fmod{f}(a, b);\n    return mod != 0 && (b < 0) != (mod < 0) ? mod + b : mod;"
        ),
        "fmod": f"return fmod{f}(a, b);",
        "atan2": f"return atan2{f}(a, b);",
        "copysign": f"return copysign{f}(a, b);",
        "nextafter": f"return nextafter{f}(a, b);",
    }


_BINARY = {3: _binary_helpers("float", "f"), 4: _binary_helpers("double", "")}

# Unary helpers: (body, helpers it calls). float32 follows csrc/vmath_simd.h's formulas with the CUDA libm for
# exp/log/tanh/erf; float64 follows csrc/unary.c's libm loops expression for expression.
_UNARY_F32 = {
    "exp": ("return expf(x);", ()),
    "log": ("return logf(x);", ()),
    "log1p": ("return log1pf(x);", ()),
    "sqrt": ("return sqrtf(x);", ()),
    "rsqrt": ("return 1.0f / sqrtf(x);", ()),
    "tanh": ("return tanhf(x);", ()),
    # through e = exp(-|x|): neither side overflows, small results keep their relative accuracy
    "sigmoid": (
        "const float e = expf(-fabsf(x));\n    const float r = 1.0f / (1.0f + e);\n    return x < 0.0f ? e * r : r;",
        (),
    ),
    "relu": ("return (x > 0.0f || x != x) ? x : 0.0f;", ()),
    "abs": ("return fabsf(x);", ()),
    "neg": ("return -x;", ()),
    # x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): no cancellation for negative x
    "gelu_tanh": (
        "const float u = fmaf(x * x * x, 0.044715f, x) * 0.79788456080286536f;\n    return x * pl_sigmoid(u + u);",
        ("sigmoid",),
    ),
    # the negative side through erfc: no 1 + erf cancellation
    "gelu_erf": (
        "const float k = 0.70710678118654752f;\n"
        "    return x < 0.0f ? 0.5f * x * erfcf(-x * k) : 0.5f * x * (1.0f + erff(x * k));",
        (),
    ),
    # the GELU derivatives, torch's gelu_backward formulas (csrc/vmath_simd.h)
    "gelu_tanh_grad": (
        "const float x2 = x * x;\n"
        "    const float t = tanhf(fmaf(x2 * x, 0.044715f, x) * 0.79788456080286536f);\n"
        "    const float d = 0.79788456080286536f * fmaf(x2, 3.0f * 0.044715f, 1.0f) * fmaf(-t, t, 1.0f);\n"
        "    return fmaf(0.5f * x, d, 0.5f * (1.0f + t));",
        (),
    ),
    "gelu_erf_grad": (
        "return fmaf(x, expf(x * x * -0.5f) * 0.39894228040143268f, 0.5f * (1.0f + erff(x * 0.70710678118654752f)));",
        (),
    ),
    "silu": ("return x * pl_sigmoid(x);", ("sigmoid",)),
    "erf": ("return erff(x);", ()),
    "reciprocal": ("return 1.0f / x;", ()),
    "square": ("return x * x;", ()),
    "sign": ("return x != x ? x : (float)(x > 0.0f) - (float)(x < 0.0f);", ()),
    "sin": ("return sinf(x);", ()),
    "cos": ("return cosf(x);", ()),
    "floor": ("return floorf(x);", ()),
    "ceil": ("return ceilf(x);", ()),
    "trunc": ("return truncf(x);", ()),
    "round": ("return rintf(x);", ()),  # half to even
    "exp2": ("return exp2f(x);", ()),
    "log2": ("return log2f(x);", ()),
    "log10": ("return log10f(x);", ()),
    "expm1": ("return expm1f(x);", ()),
    "asin": ("return asinf(x);", ()),
    "acos": ("return acosf(x);", ()),
    "atan": ("return atanf(x);", ()),
    "asinh": ("return asinhf(x);", ()),
    "acosh": ("return acoshf(x);", ()),
    "atanh": ("return atanhf(x);", ()),
    # in double, rounded once, as csrc/unary.c
    "erfc": ("return (float)erfc((double)x);", ()),
    "lgamma": ("return (float)lgamma((double)x);", ()),
}
_UNARY_F64 = {
    "exp": ("return exp(x);", ()),
    "log": ("return log(x);", ()),
    "log1p": ("return log1p(x);", ()),
    "sqrt": ("return sqrt(x);", ()),
    "rsqrt": ("return 1.0 / sqrt(x);", ()),
    "tanh": ("return tanh(x);", ()),
    "sigmoid": ("return 1.0 / (1.0 + exp(-x));", ()),
    "relu": ("return (x > 0 || x != x) ? x : 0.0;", ()),
    "abs": ("return fabs(x);", ()),
    "neg": ("return -x;", ()),
    "gelu_tanh": ("return x / (1.0 + exp(-2.0 * 0.79788456080286536 * (x + 0.044715 * x * x * x)));", ()),
    "gelu_erf": (
        "return x < 0 ? 0.5 * x * erfc(-x * 0.70710678118654752)\n"
        "             : 0.5 * x * (1.0 + erf(x * 0.70710678118654752));",
        (),
    ),
    "gelu_tanh_grad": (
        "const double t = tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x));\n"
        "    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.79788456080286535588 * (1.0 + 3.0 * 0.044715 * x * x);",
        (),
    ),
    "gelu_erf_grad": (
        "return 0.5 * (1.0 + erf(x * 0.70710678118654752440)) + x * exp(-0.5 * x * x) * 0.39894228040143267794;",
        (),
    ),
    "silu": ("return x / (1.0 + exp(-x));", ()),
    "erf": ("return erf(x);", ()),
    "reciprocal": ("return 1.0 / x;", ()),
    "square": ("return x * x;", ()),
    "sign": ("return x > 0 ? 1.0 : x < 0 ? -1.0 : x;", ()),
    "sin": ("return sin(x);", ()),
    "cos": ("return cos(x);", ()),
    "floor": ("return floor(x);", ()),
    "ceil": ("return ceil(x);", ()),
    "trunc": ("return trunc(x);", ()),
    "round": ("return rint(x);", ()),  # half to even
    "exp2": ("return exp2(x);", ()),
    "log2": ("return log2(x);", ()),
    "log10": ("return log10(x);", ()),
    "expm1": ("return expm1(x);", ()),
    "asin": ("return asin(x);", ()),
    "acos": ("return acos(x);", ()),
    "atan": ("return atan(x);", ()),
    "asinh": ("return asinh(x);", ()),
    "acosh": ("return acosh(x);", ()),
    "atanh": ("return atanh(x);", ()),
    "erfc": ("return erfc(x);", ()),
    "lgamma": ("return lgamma(x);", ()),
}
_UNARY = {F32: _UNARY_F32, F64: _UNARY_F64}
# the ops the generator knows: the bytecode's but the special functions (erfinv, digamma, trigamma, i0, i1,
# igamma, igammac, polygamma), whose code is _core/special.h (a generated source includes no header of plast's):
# chains.py leaves them unfused on CUDA, where their rows run cu/elementwise.cu's kernels
SUPPORTED = frozenset(_BIN_EXPR) | frozenset(_UNARY_F32)
NOT_GENERATED = (frozenset(BINARY) | frozenset(UNARY)) - SUPPORTED
assert set(_UNARY_F32) == set(_UNARY_F64) <= set(UNARY) and set(_BIN_EXPR) <= set(BINARY)
assert set(_BINARY[3]) == set(_BINARY[4]) <= set(BINARY)


# ---- the program ------------------------------------------------------------------------------------------------


def decode(program, nin):
    """The instructions of `program` as (name, dst, a, b) tuples (a const's b holds its float64 value), checked
    like csrc/elementwise_chain.c's plast_fused_check against `nin` inputs and one output."""
    if not isinstance(program, bytes | bytearray) or len(program) % 16:
        raise ValueError(
            "fused program: bytes of a length that is a multiple of 16 (4 int32 per instruction)"
        )
    words = np.frombuffer(program, dtype="<i4").reshape(-1, 4)
    out, written = [], set()
    for i, (op, d, a, b) in enumerate(words.tolist()):
        name = NAMES.get(op)
        regs_ok = 0 <= d < _fused.MAX_REGS
        if name == "load":
            bad = not regs_ok or not 0 <= a < nin
        elif name == "const":
            bad = not regs_ok
            a, b = 0, struct.unpack("<d", struct.pack("<iI", a, b & 0xFFFFFFFF))[0]
        elif name == "store":
            bad = d != 0 or a not in written
        elif name in BINARY:
            bad = not regs_ok or a not in written or b not in written
        elif name in UNARY:
            bad = not regs_ok or a not in written
        else:
            bad = True
        if bad:
            raise ValueError(
                f"fused program: instruction {i} ({name or f'opcode {op}'} {d}, {a}, {b}) is invalid (unknown "
                f"opcode, register out of 0..{_fused.MAX_REGS - 1}, input out of range for {nin} inputs, a "
                "store to an output other than 0, or a register read before it is written)"
            )
        if name != "store":
            written.add(d)
        out.append((name, d, a, b))
    if not any(ins[0] == "store" for ins in out):
        raise ValueError("fused program: no store instruction (the output would stay unwritten)")
    return out


def _literal(v, ctype):
    """A C expression for float64 `v` rounded to `ctype` as the CPU's (T)v: rounded here (numpy rounds to
    nearest like the C cast), then written as an exact hex literal, so the compiler never sees a value out of
    the type's range."""
    if ctype == "float":
        with np.errstate(over="ignore"):
            v = float(np.float32(v))
    if v != v:
        return f'({ctype})__builtin_nan("")'
    if v in (float("inf"), float("-inf")):
        return f"({ctype})({'-' if v < 0 else ''}__builtin_huge_val())"
    return f"({ctype})({v.hex()})"


def listing(instructions):
    """One line per instruction, for the source's header comment and error messages."""
    lines = []
    for name, d, a, b in instructions:
        if name == "load":
            lines.append(f"r{d} = in{a}")
        elif name == "const":
            lines.append(f"r{d} = {b!r}")
        elif name == "store":
            lines.append(f"out = r{a}")
        elif name in BINARY:
            lines.append(f"r{d} = {name}(r{a}, r{b})")
        else:
            lines.append(f"r{d} = {name}(r{a})")
    return lines


# ---- the source ------------------------------------------------------------------------------------------------


def generate(program, dtype_code, kinds, ndim, idx32=True):
    """CUDA C++ source of one kernel (`KERNEL_NAME`) computing `program` for dtype code F32 (float32) or
    F64 (float64). `kinds`: one of "c", "s", "g" per input and, last, for the output (see the module docstring);
    `ndim`: dims of the merged iteration shape; `idx32`: 32-bit index arithmetic."""
    if dtype_code not in _CTYPE:
        raise ValueError(
            f"fused program: float32 or float64 only (dtype code {F32} or {F64}), got {dtype_code}"
        )
    nin = len(kinds) - 1
    if nin < 1 or any(k not in "csg" for k in kinds):
        raise ValueError(
            f"fused program: kinds must be 'c', 's' or 'g' per input and the output, got {kinds!r}"
        )
    if not 1 <= ndim <= MAX_DIMS:
        raise ValueError(f"fused program: 1 to {MAX_DIMS} dims, got {ndim}")
    ins = decode(program, nin)
    T = _CTYPE[dtype_code]
    I = "int32_t" if idx32 else "int64_t"  # noqa: E741
    gen = [k for k, kd in enumerate(kinds) if kd == "g"]  # operands with a strided offset (nin: the output)

    # liveness: only instructions whose value reaches a store are emitted (no unused variables)
    live, keep = set(), [False] * len(ins)
    for j in range(len(ins) - 1, -1, -1):
        name, d, a, b = ins[j]
        if name == "store":
            keep[j] = True
            live.add(a)
        elif d in live:
            keep[j] = True
            live.discard(d)
            if name in BINARY:
                live.update((a, b))
            elif name in UNARY:
                live.add(a)
    loaded = sorted({a for (name, _, a, _), k in zip(ins, keep) if k and name == "load"})
    used_unary = {name for (name, *_), k in zip(ins, keep) if k and name in UNARY}
    used_binary = {name for (name, *_), k in zip(ins, keep) if k and name in _BINARY[dtype_code]}

    src = [
        "// A fused elementwise chain, generated by plast.kernels.cuda.codegen:",
        *(f"//   {line}" for line in listing(ins)),
        f"// {T}; {nin} input(s) of kinds {''.join(kinds[:-1])}, output {kinds[-1]}; {ndim} dim(s); {I} indices",
        "#include <stdint.h>",
        "#ifdef __CUDACC__",
        "#define PLAST_DEV __device__ __forceinline__",
        "#else  // the host build of the tests",
        "#include <math.h>",
        "#define PLAST_DEV static inline",
        "#endif",
        "",
    ]
    src += _helpers(dtype_code, used_unary)
    for name in sorted(used_binary, key=BINARY.index):
        src += [
            f"PLAST_DEV {T} pl_{name}(const {T} a, const {T} b) {{",
            f"    {_BINARY[dtype_code][name]}",
            "}",
            "",
        ]
    src += [
        "struct ChainArgs {",
        f"    {T} *out;",
        f"    const {T} *in[{nin}];",
        "    int64_t n;",
    ]
    if gen:
        src += [f"    int64_t shape[{ndim}];", f"    int64_t stride[{len(gen)}][{ndim}];"]
    src += ["};", "", f"PLAST_DEV void plast_chain_range(const ChainArgs &a, {I} start, {I} step) {{"]
    src.append(f"    const {I} n = ({I})a.n;")
    for d in range(1, ndim if gen else 0):
        src.append(f"    const {I} sh{d} = ({I})a.shape[{d}];")
    for j, k in enumerate(gen):
        for d in range(ndim):
            src.append(f"    const {I} st{k}_{d} = ({I})a.stride[{j}][{d}];")
    for k in loaded:
        src.append(f"    const {T} *const p{k} = a.in[{k}];")
        if kinds[k] == "s":
            src.append(f"    const {T} x{k} = p{k}[0];  // one repeated value: loaded once")
    src.append(f"    {T} *const po = a.out;")
    src.append(f"    for ({I} i = start; i < n; i += step) {{")
    if gen:
        src.append(f"        {I} " + ", ".join(f"o{k} = 0" for k in gen) + ", rest = i;")
        for d in range(ndim - 1, 0, -1):
            src.append(f"        {{ const {I} q = rest / sh{d}, c = rest - q * sh{d}; rest = q;")
            src.append("          " + " ".join(f"o{k} += c * st{k}_{d};" for k in gen) + " }")
        src.append("        " + " ".join(f"o{k} += rest * st{k}_0;" for k in gen))
    for k in loaded:
        if kinds[k] != "s":
            src.append(f"        const {T} x{k} = p{k}[{'i' if kinds[k] == 'c' else f'o{k}'}];")
    reg = {}  # register -> the C variable holding its current value
    out_off = {"c": "i", "s": "0", "g": f"o{nin}"}[kinds[-1]]
    for j, (name, d, a, b) in enumerate(ins):
        if not keep[j]:
            continue
        if name == "load":
            reg[d] = f"x{a}"
            continue
        if name == "store":
            src.append(f"        po[{out_off}] = {reg[a]};")
            continue
        if name == "const":
            expr = _literal(b, T)
        elif name in BINARY:
            expr = _BIN_EXPR[name].format(a=reg[a], b=reg[b])
        else:
            expr = f"pl_{name}({reg[a]})"
        src.append(f"        const {T} v{j} = {expr};  // {listing([(name, d, a, b)])[0]}")
        reg[d] = f"v{j}"
    src += [
        "    }",
        "}",
        "",
        "#ifdef __CUDACC__",
        f'extern "C" __global__ void __launch_bounds__({BLOCK}) {KERNEL_NAME}(const ChainArgs a) {{',
        f"    plast_chain_range(a, ({I})blockIdx.x * blockDim.x + threadIdx.x, ({I})blockDim.x * gridDim.x);",
        "}",
        "#endif",
        "",
    ]
    return "\n".join(src)


def _helpers(dtype_code, names):
    table, T = _UNARY[dtype_code], _CTYPE[dtype_code]
    need = set(names)
    for n in names:
        need.update(table[n][1])
    out = []
    # helpers something else calls come first
    for n in sorted(need, key=lambda n: (not any(n in table[m][1] for m in need), UNARY.index(n))):
        out += [f"PLAST_DEV {T} pl_{n}(const {T} x) {{", f"    {table[n][0]}", "}"]
    return out + [""] if out else out


# ---- arguments ----------------------------------------------------------------------------------------------


def classify(shape, strides):
    """The kind of an operand over the merged iteration `shape`: "s" (all strides 0), "c" (row-major
    contiguous) or "g"."""
    if all(s == 0 for s in strides):
        return "s"
    acc, want = 1, []
    for n in reversed(shape):
        want.append(acc)
        acc *= n
    return "c" if tuple(strides) == tuple(reversed(want)) else "g"


def fits_int32(n, shape, stride_lists):
    """Whether 32-bit indices are safe: the count leaves room for the grid-stride step (at most 2^28 threads),
    and every operand's offsets stay within int32."""
    if n > (1 << 30):
        return False
    for st in stride_lists:
        reach = sum((d - 1) * abs(s) for d, s in zip(shape, st))
        if reach >= (1 << 31):
            return False
    return True


def pack_args(out_addr, in_addrs, n, shape, general_strides):
    """Bytes of ``ChainArgs`` (pointers, count, then shape and strides when some operand is strided): every
    member is 8 bytes, so the C struct has no padding."""
    data = struct.pack(f"<{1 + len(in_addrs)}Qq", out_addr, *in_addrs, n)
    if general_strides:
        data += struct.pack(f"<{len(shape)}q", *shape)
        for st in general_strides:
            data += struct.pack(f"<{len(st)}q", *st)
    return data


_plans = {}  # plan's results by layout: a training step launches the same few layouts over and over
_MAX_PLANS = 4096


def plan(out_shape, in_shapes_strides, out_strides):
    """(merged shape, kinds, strides of the "g" operands, idx32) for an output and inputs given as
    (shape, strides) pairs, broadcast to the output's shape."""
    key = (tuple(out_shape), tuple(out_strides), tuple((tuple(a), tuple(b)) for a, b in in_shapes_strides))
    got = _plans.get(key)
    if got is None:
        if len(_plans) >= _MAX_PLANS:
            _plans.clear()
        got = _plans[key] = _plan(out_shape, in_shapes_strides, out_strides)
    return got


def _plan(out_shape, in_shapes_strides, out_strides):
    nd = len(out_shape)
    lists = []
    for shape, strides in in_shapes_strides:
        pad = nd - len(shape)
        if pad < 0 or any(s != 1 and s != out_shape[pad + i] for i, s in enumerate(shape)):
            raise ValueError(
                f"fused chain: input of shape {tuple(shape)} does not broadcast to the output's {tuple(out_shape)}"
            )
        b = [0] * nd
        for i, s in enumerate(shape):
            if s != 1 or out_shape[pad + i] == 1:
                b[pad + i] = strides[i]
        lists.append(tuple(b))
    if any(st == 0 and d > 1 for st, d in zip(out_strides, out_shape)):
        # threads would race on the shared elements (the CPU's sequential loop has a last writer; a GPU has none)
        raise ValueError(
            f"fused chain: the output (shape {tuple(out_shape)}, strides {tuple(out_strides)}) has elements that "
            "overlap; write into a tensor with its own memory per element"
        )
    lists.append(tuple(out_strides))
    shp, sts = collapse(out_shape, lists)
    if len(shp) > MAX_DIMS:
        raise ValueError(f"fused chain: at most {MAX_DIMS} dims after merging, got {len(shp)}")
    kinds = "".join(classify(shp, st) for st in sts)
    n = 1
    for s in shp:
        n *= s
    general = [st for st, kd in zip(sts, kinds) if kd == "g"]
    return shp, kinds, general, fits_int32(n, shp, sts)


# ---- compile and launch -----------------------------------------------------------------------------------------

_functions = {}  # (program, dtype code, ndim, kinds, idx32) -> loaded kernel


def function(program, dtype_code, ndim, kinds, idx32):
    """The loaded kernel for a program and layout class, generated and compiled on first use. A plan-cache hit
    rebuilds the same program bytes (chains.compile_chain), so it finds the module here."""
    key = (program, dtype_code, ndim, kinds, idx32)
    f = _functions.get(key)
    if f is None:
        src = generate(program, dtype_code, kinds, ndim, idx32)
        f = loader.get_source_module("chain", src, NVCC_OPTIONS).function(KERNEL_NAME)
        _functions[key] = f
    return f


def run_chain(program, out, inputs):
    """The elementwise-chain group kernel on the GPU: `program` over `out`'s shape, reading `inputs`
    (broadcast to it, any strides), one launch."""
    code = out.dtype.code
    if code not in _CTYPE:
        raise ValueError(f"fused chain: float32 or float64 only, got {out.dtype.name}")
    if len(inputs) > MAX_INPUTS:
        raise ValueError(f"fused chain: at most {MAX_INPUTS} inputs, got {len(inputs)}")
    for t in (*inputs, out):
        if t.device.type != "cuda":
            raise ValueError(
                f"fused chain on the GPU: every operand must be a CUDA tensor, got one on {t.device}"
            )
        if t.dtype is not out.dtype:
            raise ValueError(f"fused chain: every operand must be {out.dtype.name}, got {t.dtype.name}")
    n = out.numel()
    if n == 0:
        return
    shape, kinds, general, idx32 = plan(out._shape, [(t._shape, t._strides) for t in inputs], out._strides)
    f = function(program, code, len(shape), kinds, idx32)
    args = pack_args(addr(out), [addr(t) for t in inputs], n, shape, general)
    loader.launch(f, grid1(n, BLOCK), (BLOCK,), Params().raw(args))
