"""The integer codes Python hands to C and CUDA kernels (the GEMM epilogue's activations, the losses' reductions,
the binary, unary, comparison, predicate and reduce op codes, scatter_reduce's modes, the softmax modes, the loss
target kinds, the optimizer kinds and flags) and reads back from them (the CUDA error flag) are numbered once, each family one enum in plast/_core/codes.h, and
every side reads them from there: C and CUDA include the header, Cython cimports codes.pxd, Python reads the dicts
of plast._core.codes. Here: the dicts are the header's numbers, and no other file numbers a code of a family."""

import os
import re
from pathlib import Path

import pytest

from plast._core import codes

PLAST = Path(__file__).resolve().parents[1] / "src" / "plast"
HEADER = PLAST / "_core" / "codes.h"

# each family: its enum in codes.h, and the dict of plast._core.codes that names its codes for Python (by the op
# table's names), as {python name: header name}
FAMILIES = {
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
            "bitwise_and": "PLAST_BIN_BITAND",
            "bitwise_or": "PLAST_BIN_BITOR",
            "bitwise_xor": "PLAST_BIN_BITXOR",
        },
    ),
    "plast_unary": (
        codes.UNARY_CODES,
        {
            **{
                n: f"PLAST_UN_{n.upper()}"
                for n in (
                    "exp log log1p sqrt rsqrt tanh sigmoid relu abs neg gelu_tanh gelu_erf silu erf square sign sin "
                    "cos floor ceil trunc round exp2 log2 log10 expm1"
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
    "plast_optim": (codes.OPTIM_CODES, {n: f"PLAST_OPT_{n.upper()}" for n in ("sgd", "adam", "rmsprop")}),
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
OTHER_ENUMS = ("plast_optim_dtype", "plast_optim_flag")


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


def test_the_cpu_kernels_take_the_first_codes():
    # the CPU kernels take a prefix of the binary and unary codes (csrc/elementwise.c, csrc/unary.c, and the
    # chain bytecode built on them); their tables are cut from the shared ones, not numbered again
    from plast.kernels.cpu import _fast, _kernels

    assert codes.BINARY_CPU_COUNT == ENUMS["plast_binary"]["PLAST_BIN_FMOD"] + 1
    assert codes.UNARY_CPU_COUNT == ENUMS["plast_unary"]["PLAST_UN_EXPM1"] + 1
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
            # family gets abbreviated (a longer name such as NOGIL_MIN is something else)
            for m in re.finditer(
                r"^\s*(?:DEF\s+)?([A-Z][A-Z0-9_]*(?:\s*,\s*[A-Z][A-Z0-9_]*)*)\s*=\s*-?\d", code, re.M
            ):
                names = [n.strip() for n in m.group(1).split(",")]
                hits = {
                    n
                    for n in names
                    for s in _suffixes(family)
                    if re.fullmatch(rf"[A-Z][A-Z0-9]{{0,3}}_{s}", n)
                }
                if hits:
                    found.append((family, m.group(0).strip()))
    return found


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
