"""plast.show_config(): what is installed and how this copy was built."""

from __future__ import annotations

import sys
from importlib import metadata
from typing import TextIO

from ._core import cuda_driver as cuda
from .kernels.cpu import _gemm, _runtime

try:  # written by setup.py at build time; absent in a tree built some other way
    from . import _build_info as _built
except ImportError:
    _built = None

DISTRIBUTIONS = ("plast-core", "plast-nn", "plast-data", "plast-experiment")


def _build_info():
    if _built is None:
        return "unknown (no _build_info: built outside setup.py?)", _runtime.have_openmp(), False
    return _built.COMPILER, _built.OPENMP, _built.MARCH_NATIVE


def cuda_status():
    """(usable, reason): asks the CUDA backend, which imports pycuda only now."""
    if cuda.is_available():
        return True, ""
    return False, cuda.unavailable_reason()


def config():
    compiler, openmp, native = _build_info()
    dists = {}
    for d in DISTRIBUTIONS:
        try:
            dists[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            dists[d] = None
    ok, why = cuda_status()
    return {
        "distributions": dists,
        "python": sys.version.split()[0],
        "compiler": compiler,
        "openmp": bool(openmp),
        "march_native": bool(native),
        "threads": _runtime.get_num_threads(),
        "usable_cores": _runtime.usable_cores(),
        "simd": _runtime.get_simd(),
        "simd_available": list(_runtime.simd_available()),
        "gemm_bf16": _gemm.gemm16_path("bfloat16"),
        "gemm_f16": _gemm.gemm16_path("float16"),
        "cuda": ok,
        "cuda_reason": why,
    }


def show_config(file: TextIO | None = None) -> None:
    """Print the installed plast distributions, the build (compiler, OpenMP), threads, SIMD paths and CUDA."""
    c = config()
    lines = ["plast configuration"]
    for d, v in c["distributions"].items():
        lines.append(f"  {d:<17} {v if v else 'not installed'}")
    lines += [
        f"  python            {c['python']}",
        f"  compiler          {c['compiler']}",
        f"  openmp            {'on' if c['openmp'] else 'off (single-threaded build)'}",
        f"  threads           {c['threads']} (usable cores: {c['usable_cores']})",
        f"  simd              {c['simd']} (available: {', '.join(c['simd_available'])})",
        f"  16-bit gemm       bfloat16: {c['gemm_bf16']}; float16: {c['gemm_f16']}",
        f"  -march=native     {'yes' if c['march_native'] else 'no (portable build, run-time dispatch)'}",
        f"  cuda              {'available' if c['cuda'] else 'unavailable: ' + c['cuda_reason']}",
    ]
    print("\n".join(lines), file=file or sys.stdout)
