"""The codes C, CUDA and Python share (activations of the GEMM epilogue, reductions of the losses) are numbered
once, in plast/_core/codes.h, and every side reads them from there."""

import re
from pathlib import Path

from plast._core.codes import ACT_CODES, REDUCTION_CODES

PLAST = Path(__file__).resolve().parents[1] / "src" / "plast"
HEADER = PLAST / "_core" / "codes.h"


def _header():
    return {m[0]: int(m[1]) for m in re.findall(r"\b(PLAST_(?:ACT|RED)_\w+)\s*=\s*(\d+)", HEADER.read_text())}


def test_python_reads_the_header():
    h = _header()
    assert ACT_CODES == {
        "none": h["PLAST_ACT_NONE"],
        "relu": h["PLAST_ACT_RELU"],
        "gelu_tanh": h["PLAST_ACT_GELU_TANH"],
        "gelu": h["PLAST_ACT_GELU_ERF"],
        "gelu_erf": h["PLAST_ACT_GELU_ERF"],
    }
    assert REDUCTION_CODES == {
        "none": h["PLAST_RED_NONE"],
        "mean": h["PLAST_RED_MEAN"],
        "sum": h["PLAST_RED_SUM"],
    }
    assert len(set(REDUCTION_CODES.values())) == 3 and len(set(ACT_CODES.values())) == 4


def test_no_other_file_numbers_them():
    numbering = re.compile(
        r"#define\s+PLAST_(?:ACT|RED)_|\bPLAST_(?:ACT|RED)_\w+\s*=\s*\d|enum\s+Reduction\b|\bRED_(?:NONE|SUM|MEAN)\s*="
    )
    py_dict = re.compile(r"[\"']none[\"']\s*:\s*\d")  # an activation or reduction table (both have "none")
    bad = []
    for path in sorted(PLAST.rglob("*")):
        if path == HEADER or path.suffix not in (".h", ".c", ".cu", ".cuh", ".py", ".pyx", ".pxd"):
            continue
        if path.suffix == ".c" and path.with_suffix(".pyx").exists():
            continue  # Cython's output
        text = path.read_text()
        if numbering.search(text) or (path.suffix in (".py", ".pyx") and py_dict.search(text)):
            bad.append(str(path.relative_to(PLAST)))
    assert not bad, f"these files number activations or reductions themselves (use _core/codes.h): {bad}"


def test_the_cuda_epilogue_switches_on_names():
    body = (PLAST / "kernels" / "cuda" / "cu" / "matmul.cu").read_text()
    activate = body[body.index("activate(int act") :].split("\n}\n", 1)[0]
    assert '#include "codes.h"' in body
    assert not re.search(r"case\s+\d", activate), "the CUDA epilogue numbers its activations itself"
    assert "PLAST_ACT_GELU_TANH" in activate and "PLAST_ACT_GELU_ERF" in activate
