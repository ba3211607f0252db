"""Build plast-core's Cython extensions.

Every ``.pyx`` under ``src/plast`` becomes an extension module. A module names its C sources in a
``# distutils: sources = ...`` line at its top, so adding a kernel never means editing this file.

Build-time switches (environment variables):
  PLAST_MARCH_NATIVE=1   compile for this machine only (-march=native). Off by default: the default build must
                         run on any x86-64 and picks its SIMD path at run time (csrc/cpu_features.c).
  PLAST_NO_OPENMP=1      build without OpenMP even when the compiler has it (single-threaded kernels).
  PLAST_DEBUG_BUILD=1    -O0 -g, bounds checks on in Cython.
  PLAST_BUILD_CACHE=DIR  keep each compiled extension in DIR under a hash of everything that goes into it (its
                         .pyx, every .pxd and C source and header of the package, the compiler flags and
                         versions; paths relative to this file, so a copy of the tree elsewhere shares it) and
                         copy it from there instead of compiling it again; a cached extension is not even
                         cythonized. nox sets it for the wheel build and the editable-install sessions, which
                         would otherwise translate and compile the same tree five times.
"""

import hashlib
import os
import shutil
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
    """Compile extensions in parallel (each .pyx is its own module), through PLAST_BUILD_CACHE when it is set."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def build_extension(self, ext):
        cache = os.environ.get("PLAST_BUILD_CACHE")
        if not cache:
            return super().build_extension(ext)
        target = Path(self.get_ext_fullpath(ext.name))
        cached = _cached_path(cache, ext.name)
        if cached.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            # a fresh mtime, not the cached file's: `build_ext --inplace` copies the build's file into the
            # tree only when it is newer than the one there, and a binary restored from the cache is usually
            # older than the one it must replace (an edit undone)
            shutil.copyfile(cached, target)
            shutil.copymode(cached, target)
            return None
        super().build_extension(ext)
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(cached.name + f".{os.getpid()}.tmp")
        shutil.copy2(target, tmp)
        os.replace(tmp, cached)  # atomic: a concurrent build never sees half a file
        return None


def _extension_key(ext) -> str:
    """A hash of everything that decides an extension's binary: its .pyx and every .pxd and C file of the
    package (what its generated C can include), its C sources, flags and Cython directives, and the compiler,
    Python, numpy and Cython versions. (Not the generated C itself: it names the .pxd files of the numpy it was
    made against, inside each virtualenv.)"""
    h = hashlib.sha256()
    for part in (
        _compiler(),
        _cc_version,
        sys.version,
        np.__version__,
        _cython_version(),
        repr(sorted(_DIRECTIVES.items())),
        repr(ext.extra_compile_args),
        repr(ext.extra_link_args),
        repr(ext.define_macros),
        # numpy's include dir lies inside each virtualenv: numpy is keyed by its version above; the others are
        # keyed relative to this file, so that the wheel build (in a temporary copy) and editable builds agree
        repr([os.path.relpath(d, HERE) for d in ext.include_dirs if d != np.get_include()]),
    ):
        h.update(part.encode() + b"\0")
    pyx = SRC / Path(*ext.name.split(".")).with_suffix(".pyx")
    h.update(pyx.read_bytes())
    for src in ext.sources:
        path = Path(src) if Path(src).is_absolute() else HERE / src
        if path.with_suffix(".pyx") != pyx:  # the generated C of the .pyx is keyed by the .pyx
            h.update(src.encode() + b"\0" + path.read_bytes())
    h.update(_package_digest())
    return h.hexdigest()[:24]


_PACKAGE_DIGEST = None


def _package_digest() -> bytes:
    global _PACKAGE_DIGEST
    if _PACKAGE_DIGEST is None:
        h = hashlib.sha256()
        # __init__.py files too: whether a folder is a package decides how Cython resolves its cimports
        files = [
            *(SRC / "plast").rglob("*.pxd"),
            *(SRC / "plast").rglob("csrc/*"),
            *(SRC / "plast").rglob("__init__.py"),
            *(SRC / "plast" / "_core").glob("*.h"),
        ]
        for f in sorted(files):
            if f.is_file():
                h.update(str(f.relative_to(SRC)).encode() + b"\0" + f.read_bytes())
        _PACKAGE_DIGEST = h.digest()
    return _PACKAGE_DIGEST


def _cython_version() -> str:
    import Cython

    return Cython.__version__


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
                include_dirs=[
                    np.get_include(),
                    str(SRC / "plast" / "kernels" / "cpu" / "csrc"),
                    str(SRC / "plast" / "_core"),  # codes.h
                ],
                define_macros=macros,
                extra_compile_args=cflags + omp_c,
                extra_link_args=omp_l,
            )
        )
    return exts


def _compiler_version() -> str:
    cc = _compiler()
    try:
        return subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return cc


# Recorded so that plast.show_config() can say how this copy was built.
_cc_version = _compiler_version()
_omp_on = bool(_omp()[0])
(SRC / "plast" / "_build_info.py").write_text(
    "# Written by setup.py at build time; do not edit.\n"
    f"COMPILER = {_cc_version!r}\n"
    f"OPENMP = {_omp_on!r}\n"
    f"MARCH_NATIVE = {os.environ.get('PLAST_MARCH_NATIVE') == '1'!r}\n"
)

_DIRECTIVES = {
    "boundscheck": os.environ.get("PLAST_DEBUG_BUILD") == "1",
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": False,
    "embedsignature": True,
}

# Each extension's cache key, computed before Cython runs (from the .pyx and the package's .pxd and C files, not
# from the generated C): an extension already in PLAST_BUILD_CACHE skips cythonize as well as the compiler.
_ALL = _extensions()
_KEYS = {ext.name: _extension_key(ext) for ext in _ALL}


def _cached_path(cache, name):
    return Path(cache) / f"{name}.{_KEYS[name]}{sysconfig.get_config_var('EXT_SUFFIX')}"


_CACHE = os.environ.get("PLAST_BUILD_CACHE")
_HITS = [ext for ext in _ALL if _CACHE and _cached_path(_CACHE, ext.name).is_file()]
_MISSES = [ext for ext in _ALL if ext not in _HITS]
if _HITS:
    print(
        f"plast-core: {len(_HITS)} of {len(_ALL)} extensions from PLAST_BUILD_CACHE ({_CACHE})",
        file=sys.stderr,
    )

setup(
    cmdclass={"build_ext": ParallelBuildExt},
    ext_modules=(
        cythonize(_MISSES, language_level=3, compiler_directives=_DIRECTIVES, nthreads=os.cpu_count() or 1)
        if _MISSES
        else []
    )
    + _HITS,
)
