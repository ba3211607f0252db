"""The integer codes Python hands to C and CUDA kernels (the dtypes, the GEMM epilogue's activations, the losses'
reductions, the binary, unary, comparison, predicate and reduce op codes, scatter_reduce's modes, the softmax
modes, the loss target kinds, the optimizer kinds and flags) and reads back from them (the CUDA error flag) are
numbered once, each family one enum in plast/_core/codes.h, and every side reads them from there: C and CUDA
include the header, Cython cimports codes.pxd, Python reads the dicts of plast._core.codes. Here: the dicts are
the header's numbers, and no other file numbers a code of a family."""

import os
import re
from pathlib import Path

import pytest

from plast._core import codes, dtypes

PLAST = Path(__file__).resolve().parents[1] / "src" / "plast"
HEADER = PLAST / "_core" / "codes.h"

# each family: its enum in codes.h, and the dict of plast._core.codes that names its codes for Python (by the op
# table's names), as {python name: header name}
FAMILIES = {
    "plast_dtype": (
        codes.DTYPE_CODES,
        {
            "bool": "PLAST_DT_BOOL",
            "int32": "PLAST_DT_I32",
            "int64": "PLAST_DT_I64",
            "float32": "PLAST_DT_F32",
            "float64": "PLAST_DT_F64",
            "bfloat16": "PLAST_DT_BF16",
            "float16": "PLAST_DT_F16",
            "uint8": "PLAST_DT_U8",
            "int8": "PLAST_DT_I8",
            "int16": "PLAST_DT_I16",
        },
    ),
    "plast_act": (
        codes.ACT_CODES,
        {
            "none": "PLAST_ACT_NONE",
            "relu": "PLAST_ACT_RELU",
            "gelu_tanh": "PLAST_ACT_GELU_TANH",
            "gelu": "PLAST_ACT_GELU_ERF",
            "gelu_erf": "PLAST_ACT_GELU_ERF",
        },
    ),
    "plast_reduction": (
        codes.REDUCTION_CODES,
        {"none": "PLAST_RED_NONE", "mean": "PLAST_RED_MEAN", "sum": "PLAST_RED_SUM"},
    ),
    "plast_binary": (
        codes.BINARY_CODES,
        {
            "add": "PLAST_BIN_ADD",
            "sub": "PLAST_BIN_SUB",
            "mul": "PLAST_BIN_MUL",
            "div": "PLAST_BIN_DIV",
            "maximum": "PLAST_BIN_MAX",
            "minimum": "PLAST_BIN_MIN",
            "pow": "PLAST_BIN_POW",
            "floor_divide": "PLAST_BIN_FLOORDIV",
            "remainder": "PLAST_BIN_REMAINDER",
            "fmod": "PLAST_BIN_FMOD",
            "atan2": "PLAST_BIN_ATAN2",
            "copysign": "PLAST_BIN_COPYSIGN",
            "nextafter": "PLAST_BIN_NEXTAFTER",
            "igamma": "PLAST_BIN_IGAMMA",
            "igammac": "PLAST_BIN_IGAMMAC",
            "polygamma": "PLAST_BIN_POLYGAMMA",
            "bitwise_and": "PLAST_BIN_BITAND",
            "bitwise_or": "PLAST_BIN_BITOR",
            "bitwise_xor": "PLAST_BIN_BITXOR",
            "gcd": "PLAST_BIN_GCD",
            "lcm": "PLAST_BIN_LCM",
            "bitwise_left_shift": "PLAST_BIN_SHL",
            "bitwise_right_shift": "PLAST_BIN_SHR",
        },
    ),
    "plast_unary": (
        codes.UNARY_CODES,
        {
            **{
                n: f"PLAST_UN_{n.upper()}"
                for n in (
                    "exp log log1p sqrt rsqrt tanh sigmoid relu abs neg gelu_tanh gelu_erf silu erf square sign sin "
                    "cos floor ceil trunc round exp2 log2 log10 expm1 asin acos atan asinh acosh atanh erfc erfinv lgamma "
                    "digamma trigamma i0 i1 gelu_tanh_grad gelu_erf_grad"
                ).split()
            },
            "reciprocal": "PLAST_UN_RECIP",
            "bitwise_not": "PLAST_UN_BITNOT",
        },
    ),
    "plast_compare": (
        codes.COMPARE_CODES,
        {
            **{n: f"PLAST_CMP_{n.upper()}" for n in ("eq", "ne", "lt", "le", "gt", "ge")},
            "logical_and": "PLAST_CMP_LAND",
            "logical_or": "PLAST_CMP_LOR",
            "logical_xor": "PLAST_CMP_LXOR",
        },
    ),
    "plast_predicate": (
        codes.PREDICATE_CODES,
        {n: f"PLAST_PRED_{n.upper()}" for n in ("isfinite", "isnan", "isinf", "logical_not", "nonzero")},
    ),
    "plast_reduce_op": (
        codes.REDUCE_OP_CODES,
        {
            "sum": "PLAST_RD_SUM",
            "amax": "PLAST_RD_MAX",
            "amin": "PLAST_RD_MIN",
            "prod": "PLAST_RD_PROD",
            "all": "PLAST_RD_ALL",
            "any": "PLAST_RD_ANY",
            "norm_p": "PLAST_RD_NORM_P",
            "norm_2": "PLAST_RD_NORM_2",
        },
    ),
    "plast_scatter_reduce": (
        codes.SCATTER_REDUCE_CODES,
        {n: f"PLAST_SR_{n.upper()}" for n in ("sum", "prod", "mean", "amax", "amin")},
    ),
    "plast_softmax_mode": (
        codes.SOFTMAX_MODES,
        {n: f"PLAST_SM_{n.upper()}" for n in ("softmax", "safe_softmax", "log_softmax")},
    ),
    "plast_loss_kind": (
        codes.LOSS_KIND_CODES,
        {n: f"PLAST_LOSS_{n.upper()}" for n in ("index", "prob", "nll")},
    ),
    "plast_optim": (
        codes.OPTIM_CODES,
        {
            n: f"PLAST_OPT_{n.upper()}"
            for n in ("sgd", "adam", "rmsprop", "adadelta", "adagrad", "adamax", "nadam")
        },
    ),
    "plast_loss_bwd_mode": (
        codes.LOSS_BWD_MODES,
        {"grad": "PLAST_LOSS_BWD_GRAD", "coeffs": "PLAST_LOSS_BWD_COEFFS"},
    ),
    "plast_conv_mode": (
        codes.CONV_MODES,
        {n: f"PLAST_CONV_{n.upper()}" for n in ("forward", "grad_input", "grad_weight")},
    ),
    "plast_error": (
        codes.ERROR_CODES,
        {
            "ok": "PLAST_OK",
            "index": "PLAST_ERR_INDEX",
            "zero_div": "PLAST_ERR_ZERO_DIV",
            "value": "PLAST_ERR_VALUE",
        },
    ),
    "plast_multinomial_error": (
        codes.MULTINOMIAL_ERROR_CODES,
        {"bad_weight": "PLAST_MN_BAD_WEIGHT", "no_positive": "PLAST_MN_NO_POSITIVE"},
    ),
}
# families that are not op codes Python names, read by Cython only (codes.pxd)
OTHER_ENUMS = ("plast_optim_flag",)


def _enums():
    """{enum name: {enumerator: value}} of codes.h."""
    text = re.sub(r"/\*.*?\*/", "", HEADER.read_text(), flags=re.S)
    out = {}
    for name, body in re.findall(r"enum\s+(\w+)\s*\{(.*?)\}", text, flags=re.S):
        out[name] = {k: int(v) for k, v in re.findall(r"\b(PLAST_\w+)\s*=\s*(\d+)", body)}
    return out


ENUMS = _enums()
NAMES = {k: v for enum in ENUMS.values() for k, v in enum.items()}


def test_every_enum_is_a_known_family():
    assert set(ENUMS) == set(FAMILIES) | set(OTHER_ENUMS)
    for name, enum in ENUMS.items():
        assert len(set(enum.values())) == len(enum), f"{name} numbers two codes alike"
        assert len(enum) >= 2


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_python_reads_the_header(family):
    table, names = FAMILIES[family]
    enum = ENUMS[family]
    assert table == {py: enum[c] for py, c in names.items()}
    assert set(names.values()) == set(enum), f"every code of {family} has a Python name"


def test_every_dtype_has_its_header_code():
    # a dtype's `code` is what the kernels are told they run on and what plan fingerprints hash: the header's
    # number, every dtype one, and none renumbered (fingerprints of saved plans would no longer match)
    assert {d.name: d.code for d in dtypes.ALL} == codes.DTYPE_CODES
    assert codes.DTYPE_CODES == {
        "bool": 0,
        "int32": 1,
        "int64": 2,
        "float32": 3,
        "float64": 4,
        "bfloat16": 5,
        "float16": 6,
        "uint8": 7,
        "int8": 8,
        "int16": 9,
    }
    assert re.search(r"#define\s+PLAST_DT_COUNT\s+\(PLAST_DT_I16 \+ 1\)", HEADER.read_text())
    assert max(codes.DTYPE_CODES.values()) == ENUMS["plast_dtype"]["PLAST_DT_I16"]


def test_the_cpu_kernels_take_the_first_codes():
    # the CPU kernels take a prefix of the binary and unary codes (csrc/elementwise.c, csrc/unary.c, and the
    # chain bytecode built on them); their tables are cut from the shared ones, not numbered again
    from plast.kernels.cpu import _fast, _kernels

    assert codes.BINARY_CPU_COUNT == ENUMS["plast_binary"]["PLAST_BIN_POLYGAMMA"] + 1
    assert codes.UNARY_CPU_COUNT == ENUMS["plast_unary"]["PLAST_UN_GELU_ERF_GRAD"] + 1
    assert _kernels.BINARY_CODES == {
        n: c for n, c in codes.BINARY_CODES.items() if c < codes.BINARY_CPU_COUNT
    }
    assert _fast.UNARY_CODES == {n: c for n, c in codes.UNARY_CODES.items() if c < codes.UNARY_CPU_COUNT}
    assert _fast.UNARY_OPS == tuple(sorted(_fast.UNARY_CODES, key=_fast.UNARY_CODES.get))
    assert (_fast.RD_SUM, _fast.RD_MAX, _fast.RD_MIN) == tuple(
        codes.REDUCE_OP_CODES[n] for n in ("sum", "amax", "amin")
    )
    sm = codes.SOFTMAX_MODES
    assert (_fast.SM_SOFTMAX, _fast.SM_SAFE_SOFTMAX, _fast.SM_LOG_SOFTMAX) == (
        sm["softmax"],
        sm["safe_softmax"],
        sm["log_softmax"],
    )


def _sources():
    for path in sorted(PLAST.rglob("*")):
        if path == HEADER or path.suffix not in (".h", ".c", ".cu", ".cuh", ".py", ".pyx", ".pxd"):
            continue
        if path.suffix == ".c" and path.with_suffix(".pyx").exists():
            continue  # Cython's output
        yield path, path.read_text()


def _suffixes(family):
    """The family's names without their common prefix (PLAST_BIN_ADD -> ADD, PLAST_ERR_INDEX -> ERR_INDEX)."""
    names = list(ENUMS[family])
    prefix = os.path.commonprefix(names)
    prefix = prefix[: prefix.rindex("_") + 1]
    return {k[len(prefix) :] for k in names}


def _numberings(path, text):
    """What in `text` numbers a code of a family: (family, evidence) pairs."""
    found = []
    # the header's names given a number (#define X 3, X = 3)
    for name in NAMES:
        if re.search(rf"#define\s+{name}\s+\(?-?\d|\b{name}\s*=\s*-?\d", text):
            found.append(("", name))
    if path.suffix in (".h", ".c", ".cu", ".cuh"):
        # an enum of its own with two or more codes of one family, under any prefix (enum UnOp { U_EXP = 0, ... })
        code = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
        for body in re.findall(r"\benum\b[^{;]*\{(.*?)\}", code, flags=re.S):
            items = re.findall(r"\b([A-Z][A-Z0-9_]*)\s*(?:=[^,]*)?(?:,|$)", body.strip())
            for family in FAMILIES:
                hits = {s for s in _suffixes(family) for it in items if it == s or it.endswith("_" + s)}
                if len(hits) >= 2:
                    found.append((family, f"enum {{{', '.join(items[:4])}, ...}}"))
    else:
        code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
        for family, (table, _) in FAMILIES.items():
            # a dict literal numbering two or more of its Python names ({"add": 0, "sub": 1, ...})
            hits = {n for n in table if re.search(rf"[\"']{re.escape(n)}[\"']\s*:\s*-?\d", code)}
            if len(hits) >= 2:
                found.append((family, f"a dict numbering {sorted(hits)}"))
            # codes under a short prefix bound to literals (K_INDEX, K_PROB = 0, 1; DEF RD_SUM = 0), the way a
            # family gets abbreviated (a longer name such as NOGIL_MIN is something else); dtype codes also bare
            # (F32, F64 = 3, 4), as no other name is spelled like them (a bare SUM or MAX is another numbering)
            for m in re.finditer(
                r"^\s*(?:DEF\s+)?([A-Z][A-Z0-9_]*(?:\s*,\s*[A-Z][A-Z0-9_]*)*)\s*=\s*-?\d", code, re.M
            ):
                names = [n.strip() for n in m.group(1).split(",")]
                hits = {
                    n
                    for n in names
                    for s in _suffixes(family)
                    if re.fullmatch(rf"[A-Z][A-Z0-9]{{0,3}}_{s}", n) or family == "plast_dtype" and n == s
                }
                if hits:
                    found.append((family, m.group(0).strip()))
    return found


# A dtype code is mostly compared, not named: `dtype == 3` in C, `code in (3, 4)` or `{np.dtype(np.float32): 3}` in
# Python. These are the shapes that numbering takes, by what holds the code (dtype, code, dtype_code, dt; a tensor's
# or operand's .code); the number must be a name of codes.h's plast_dtype instead (PLAST_DT_F32 in C and Cython,
# codes.DTYPE_CODES or a dtype's .code in Python).
_CODE_HOLDER = r"\b(?:dtype|code|dtype_code|src_code|dst_code|dt|\w+\.code)"
_NP_TYPE = r"np\.(?:bool_|int32|int64|float16|float32|float64)\b"
_TYPE_NAME = (
    r"[\"'](?:u8|i32|i64|f32|f64|bool|int32|int64|float32|float64|bfloat16|float16|float|double)[\"']"
)
DTYPE_NUMBERINGS = (
    rf"{_CODE_HOLDER}\s*(?:==|!=|<=|>=|<|>)\s*\d",  # dtype == 3, code != 4
    rf"\b\d\s*(?:==|!=)\s*{_CODE_HOLDER}\b",  # 3 == dtype
    rf"{_CODE_HOLDER}\s+(?:not\s+)?in\s+[(\[{{]\s*\d",  # code in (3, 4)
    r"#define\s+\w*(?:CODE|DT|DTYPE)_(?:BOOL|I32|I64|F32|F64|BF16|F16)\s+\(?\d",  # #define PLAST_CODE_F32 3
    rf"{_NP_TYPE}\)?\s*:\s*\d",  # {np.dtype(np.float32): 3}
    rf"{_TYPE_NAME}\s*:\s*\d",  # {"float32": 3}
    rf"\{{\s*\d\s*:\s*(?:{_NP_TYPE}|{_TYPE_NAME})",  # {3: "f32"}, {3: np.float32}
    r"\bdtype\s+(?:code\s+)?\d\s+(?:or|and)\s+\d",  # comments: "dtype 3 or 4"
    r"\bcodes?\s+\d\s*\((?:float|int|bool|bfloat)",  # "code 3 (float32)"
    r"\b\d\s*\((?:float32|float64|int32|int64|bool|bfloat16|float16)\)",  # "3 (float32) or 4 (float64)"
)
# what looks like a dtype numbering and is not: a process's exit code, and the optimizer's "no dtype" (-1) test
NOT_DTYPE_CODES = re.compile(r"returncode|\bdt\s*>=\s*0|counter_dtype\s*>=\s*0")
# files where `code` is something else than a dtype code, with what it is
OTHER_CODES = {"distributed/run.py": "a worker process's exit code"}


def _dtype_numberings(path, text):
    """(line number, line) of each line of `text` that numbers a dtype code with a bare literal."""
    found = []
    for i, line in enumerate(text.splitlines(), 1):
        if NOT_DTYPE_CODES.search(line):
            continue
        if any(re.search(p, line) for p in DTYPE_NUMBERINGS):
            found.append((i, line.strip()))
    return found


def test_no_file_compares_a_dtype_code_with_a_number():
    bad = [
        f"{path.relative_to(PLAST)}:{i}: {line}"
        for path, text in _sources()
        if str(path.relative_to(PLAST)) not in OTHER_CODES
        for i, line in _dtype_numberings(path, text)
    ]
    assert not bad, "these lines number dtype codes themselves (use the PLAST_DT_* names):\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "path, text",
    [
        ("x.c", "if (dtype == 3) tile_f32();"),
        ("x.c", "if ((dtype != 3 && dtype != 4) || ndim > 16) return -1;"),
        ("x.c", "ptrdiff_t es = dtype == 3 ? 4 : 8;"),
        ("x.h", "/* dtype 3 or 4. */"),
        ("x.h", "#define PLAST_CODE_BF16 5"),
        ("x.pyx", "_CODES = {np.dtype(np.float32): 3, np.dtype(np.float64): 4}"),
        ("x.pyx", 'raise ValueError(f"dtype code must be 3 (float32) or 4 (float64), got {dtype}")'),
        ("x.py", "if t.dtype.code not in (3, 4):"),
        ("x.py", 'SUF = {0: "u8", 1: "i32", 2: "i64"}'),
        ("x.py", 'CTYPE = {3: "float", 4: "double"}'),
        ("x.py", "tf32 = code == 3 and flags.allow_tf32"),
    ],
)
def test_the_check_sees_a_dtype_numbering(path, text):
    assert _dtype_numberings(Path(path), text)


@pytest.mark.parametrize(
    "text",
    [
        "if (dtype == PLAST_DT_F32) tile_f32();",
        "if t.dtype.code not in (F32, F64):",
        "if res.returncode != 0:",
    ],
)
def test_the_dtype_check_passes_the_names(text):
    assert not _dtype_numberings(Path("x.c"), text)


def test_no_other_file_numbers_a_code():
    bad = [
        f"{path.relative_to(PLAST)}: {what} ({fam})"
        for path, text in _sources()
        for fam, what in _numberings(path, text)
    ]
    assert not bad, "these files number codes themselves (take them from _core/codes.h):\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "text",
    [
        "enum BinOp {\n    B_ADD = 0,\n    B_SUB = 1,\n};",
        "enum { PLAST_RD_SUM = 0, PLAST_RD_MAX = 1 };",
        "#define PLAST_UN_EXP 0",
    ],
)
def test_the_check_sees_a_c_numbering(text):
    assert _numberings(Path("x.cu"), text)


@pytest.mark.parametrize(
    "text",
    [
        'UNARY_CODES = {"exp": 0, "log": 1}',
        "K_INDEX, K_PROB, K_NLL = 0, 1, 2",
        "DEF RD_SUM = 0",
        "SM_SOFTMAX = 0",
        "F32, F64 = 3, 4",
        "KIND_BF16 = 1",
    ],
)
def test_the_check_sees_a_python_numbering(text):
    assert _numberings(Path("x.pyx"), text)


CUDA_SWITCHES = {
    "matmul.cu": "PLAST_ACT_",
    "elementwise.cu": "PLAST_BIN_",
    "reduce.cu": "PLAST_RD_",
    "scatter_reduce.cuh": "PLAST_SR_",
    "loss.cu": "PLAST_LOSS_",
    "conv.cu": "PLAST_CONV_",
}


@pytest.mark.parametrize("name", sorted(CUDA_SWITCHES))
def test_the_cuda_kernels_switch_on_names(name):
    body = (PLAST / "kernels" / "cuda" / "cu" / name).read_text()
    assert '#include "codes.h"' in body
    assert not re.search(r"\bcase\s+\d", body), f"{name} numbers its cases itself"
    assert CUDA_SWITCHES[name] in body


def test_the_cuda_epilogue_switches_on_names():
    body = (PLAST / "kernels" / "cuda" / "cu" / "matmul.cu").read_text()
    activate = body[body.index("activate(int act") :].split("\n}\n", 1)[0]
    assert '#include "codes.h"' in body
    assert not re.search(r"case\s+\d", activate), "the CUDA epilogue numbers its activations itself"
    assert "PLAST_ACT_GELU_TANH" in activate and "PLAST_ACT_GELU_ERF" in activate
