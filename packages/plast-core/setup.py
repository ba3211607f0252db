"""Build plast-core's Cython extensions.

Every ``.pyx`` under ``src/plast`` becomes an extension module. A module names its C sources in a
``# distutils: sources = ...`` line at its top, so adding a kernel never means editing this file.

Build-time switches (environment variables):
  PLAST_MARCH_NATIVE=1   compile for this machine only (-march=native). Off by default: the default build must
                         run on any x86-64 and picks its SIMD path at run time (csrc/cpu_features.c).
  PLAST_NO_OPENMP=1      build without OpenMP even when the compiler has it (single-threaded kernels).
  PLAST_DEBUG_BUILD=1    -O0 -g, bounds checks on in Cython.
"""

import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class ParallelBuildExt(build_ext):
    """Compile extensions in parallel (each .pyx is its own module)."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1


HERE = Path(__file__).parent.resolve()
SRC = HERE / "src"


def _compiler() -> str:
    return os.environ.get("CC") or sysconfig.get_config_var("CC").split()[0] or "cc"


def _openmp_flags() -> tuple[list[str], list[str]]:
    """Return (compile_args, link_args) for OpenMP, or empty lists when the compiler has none."""
    if os.environ.get("PLAST_NO_OPENMP") == "1":
        return [], []
    probe = "#include <omp.h>\nint main(void){int n=0;\n#pragma omp parallel reduction(+:n)\nn+=1;\nreturn n>0?0:1;}\n"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "omp_probe.c"
        src.write_text(probe)
        try:
            res = subprocess.run(
                [_compiler(), "-fopenmp", str(src), "-o", str(Path(tmp) / "omp_probe")],
                capture_output=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired):
            return [], []
    if res.returncode != 0:
        print("plast-core: compiler has no OpenMP; building single-threaded kernels", file=sys.stderr)
        return [], []
    return ["-fopenmp"], ["-fopenmp"]


_OMP = None


def _omp() -> tuple[list[str], list[str]]:
    global _OMP
    if _OMP is None:
        _OMP = _openmp_flags()
    return _OMP


def _extensions() -> list[Extension]:
    omp_c, omp_l = _omp()
    debug = os.environ.get("PLAST_DEBUG_BUILD") == "1"
    cflags = ["-O0", "-g"] if debug else ["-O3", "-g0"]
    cflags += ["-std=c11", "-fno-strict-aliasing", "-Wno-unused-function", "-Wno-unreachable-code"]
    if os.environ.get("PLAST_MARCH_NATIVE") == "1":
        cflags.append("-march=native")
    macros = [
        ("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
        ("PLAST_HAVE_OPENMP", "1" if omp_c else "0"),
    ]
    exts = []
    for pyx in sorted(SRC.rglob("*.pyx")):
        rel = pyx.relative_to(SRC).with_suffix("")
        exts.append(
            Extension(
                ".".join(rel.parts),
                [str(pyx.relative_to(HERE))],
                include_dirs=[np.get_include(), str(SRC / "plast" / "backends" / "cpu" / "csrc")],
                define_macros=macros,
                extra_compile_args=cflags + omp_c,
                extra_link_args=omp_l,
            )
        )
    return exts


# Recorded so that plast.show_config() can say how this copy was built.
_cc = _compiler()
try:
    _cc_version = subprocess.run([_cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
except (OSError, IndexError):
    _cc_version = _cc
_omp_on = bool(_omp()[0])
(SRC / "plast" / "_build_info.py").write_text(
    "# Written by setup.py at build time; do not edit.\n"
    f"COMPILER = {_cc_version!r}\n"
    f"OPENMP = {_omp_on!r}\n"
    f"MARCH_NATIVE = {os.environ.get('PLAST_MARCH_NATIVE') == '1'!r}\n"
)

setup(
    cmdclass={"build_ext": ParallelBuildExt},
    ext_modules=cythonize(
        _extensions(),
        language_level=3,
        compiler_directives={
            "boundscheck": os.environ.get("PLAST_DEBUG_BUILD") == "1",
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "embedsignature": True,
        },
        nthreads=os.cpu_count() or 1,
    ),
)
