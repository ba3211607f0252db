"""Compile the CUDA sources on first use, cache the binaries on disk, and load them into the GPU's context.

Each ``kernels/<name>.cu`` is one module. On first use it is compiled with nvcc for the device's own
architecture (``sm_<major><minor>``), the cubin is cached on disk under ``$PLAST_CUDA_CACHE`` (default
``~/.cache/plast/cuda``) keyed by a hash of the module's source, every header next to it, the nvcc version, the
options and the architecture, and loaded through PyCUDA (``module_from_buffer``). A failed compile raises
``CudaCompileError`` listing each diagnostic as ``file:line: message``.

Generated source text (codegen.py: fused elementwise chains) goes the same way through ``compile_source`` /
``get_source_module``, its cache key a hash of the text instead of the files.

NOTE: nvcc compiles the files in place (rather than PyCUDA's SourceModule, which compiles a copy in a temporary
directory) so that compile errors name plast's own files and lines; PyCUDA still owns the context and loading.

Nothing here imports pycuda at import time.
"""

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from ..._core import cuda_driver
from ..._core.errors import PlastError
from ...memory import cuda as memory

KERNEL_DIR = Path(__file__).resolve().parent / "cu"
CODES_H = Path(__file__).resolve().parents[2] / "_core" / "codes.h"  # the codes C, CUDA and Python share
NVCC_OPTIONS = ("-O3", "-std=c++17", "-lineinfo")


class CudaCompileError(PlastError, RuntimeError):
    """nvcc rejected a kernel source; ``diagnostics`` holds (file, line, kind, message) tuples."""

    def __init__(self, message, diagnostics=()):
        super().__init__(message)
        self.diagnostics = list(diagnostics)


# ---- nvcc --------------------------------------------------------------------------------------------------


def find_nvcc():
    """Path of nvcc: $PLAST_NVCC, PATH, $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin; None if absent."""
    explicit = os.environ.get("PLAST_NVCC")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    return None


_nvcc_versions = {}


def nvcc_version(nvcc):
    v = _nvcc_versions.get(nvcc)
    if v is None:
        res = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
        v = _nvcc_versions[nvcc] = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else "unknown"
    return v


_DIAG = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<kind>error|warning|remark)[^:]*: (?P<msg>.*)$")


def parse_nvcc_output(text):
    """(file, line, kind, message) for each diagnostic in nvcc's output (its ``file(line): error: ...`` lines)."""
    out = []
    for line in text.splitlines():
        m = _DIAG.match(line.strip())
        if m:
            out.append((m["file"], int(m["line"]), m["kind"], m["msg"].strip()))
    return out


def module_names():
    """Names of the kernel modules (the .cu files next to this loader)."""
    return sorted(p.stem for p in KERNEL_DIR.glob("*.cu"))


def source_path(name):
    path = KERNEL_DIR / f"{name}.cu"
    if not path.is_file():
        raise FileNotFoundError(
            f"no CUDA module {name!r}: {path} does not exist (modules: {', '.join(module_names())})"
        )
    return path


def include_flags():
    """nvcc's -I options: the kernels' folder and the one with codes.h."""
    return ["-I", str(KERNEL_DIR), "-I", str(CODES_H.parent)]


def module_key(name, arch, nvcc, options=NVCC_OPTIONS):
    """Cache key of a module's binary: source, every header, compiler version, options and architecture."""
    h = hashlib.sha256()
    h.update(source_path(name).read_bytes())
    for hdr in [*sorted(KERNEL_DIR.glob("*.cuh")), CODES_H]:
        h.update(hdr.name.encode())
        h.update(hdr.read_bytes())
    h.update(nvcc_version(nvcc).encode())
    h.update(" ".join(options).encode())
    h.update(arch.encode())
    return h.hexdigest()[:32]


def cache_dir():
    d = os.environ.get("PLAST_CUDA_CACHE")
    return Path(d) if d else Path.home() / ".cache" / "plast" / "cuda"


def compile_module(name, arch, *, nvcc=None, options=NVCC_OPTIONS, use_cache=True, output="cubin"):
    """The compiled binary (bytes) of kernels/<name>.cu for `arch` ("sm_80", ...), from the disk cache when there.

    Raises CudaCompileError (with file:line diagnostics) when nvcc fails, and RuntimeError when nvcc is absent.
    ``output="ptx"`` returns PTX text instead (for devices newer than this nvcc knows).
    """
    nvcc = _need_nvcc(nvcc)
    key = module_key(name, arch, nvcc, options)
    return _cached_build(name, arch, key, nvcc, options, output, use_cache, lambda tmp: source_path(name))


def source_key(source, arch, nvcc, options=NVCC_OPTIONS):
    """Cache key of generated source text: the text itself, compiler version, options and architecture."""
    h = hashlib.sha256()
    h.update(source.encode())
    h.update(nvcc_version(nvcc).encode())
    h.update(" ".join(options).encode())
    h.update(arch.encode())
    return h.hexdigest()[:32]


def compile_source(name, source, arch, *, nvcc=None, options=NVCC_OPTIONS, use_cache=True, output="cubin"):
    """The compiled binary of generated CUDA source text (codegen.py), cached on disk like compile_module's but
    keyed by the text. A compile error quotes the generated lines it names."""
    nvcc = _need_nvcc(nvcc)
    key = source_key(source, arch, nvcc, options)

    def write(tmp):
        path = Path(tmp) / f"{name}.cu"
        path.write_text(source)
        return path

    try:
        return _cached_build(name, arch, key, nvcc, options, output, use_cache, write)
    except CudaCompileError as e:
        text = source.splitlines()
        quoted = [f"  {ln}: {text[ln - 1].strip()}" for _, ln, _, _ in e.diagnostics if 0 < ln <= len(text)]
        raise CudaCompileError(
            f"{e}\n(generated source {name}.cu)\n" + "\n".join(quoted[:10]), e.diagnostics
        ) from None


def _need_nvcc(nvcc):
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise RuntimeError(
            "the CUDA backend compiles its kernels with nvcc at first use, and nvcc was not found (PATH, "
            "$CUDA_HOME/bin, /usr/local/cuda/bin, or set PLAST_NVCC)"
        )
    return nvcc


def _cached_build(name, arch, key, nvcc, options, output, use_cache, source_file):
    """The binary from the disk cache, else from nvcc on the file `source_file(tmpdir)` returns (then cached)."""
    cached = cache_dir() / f"{name}-{arch}-{key}.{output}"
    if use_cache and cached.is_file():
        return cached.read_bytes()
    flag = "--cubin" if output == "cubin" else "--ptx"
    arch_flag = f"-arch={arch}" if output == "cubin" else f"-arch={arch.replace('sm_', 'compute_')}"
    with tempfile.TemporaryDirectory(prefix="plast-nvcc-") as tmp:
        src = source_file(tmp)
        out = Path(tmp) / f"{name}.{output}"
        cmd = [nvcc, flag, arch_flag, *options, *include_flags(), "-o", str(out), str(src)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0 or not out.is_file():
            diags = parse_nvcc_output(res.stderr + res.stdout)
            errors = [d for d in diags if d[2] == "error"] or diags
            lines = [f"{Path(f).name}:{ln}: {kind}: {msg}" for f, ln, kind, msg in errors[:20]]
            raise CudaCompileError(
                f"nvcc could not compile {src.name} for {arch} (exit code {res.returncode}):\n"
                + ("\n".join(lines) if lines else (res.stderr or res.stdout).strip()[-4000:]),
                diags,
            )
        data = out.read_bytes()
    if use_cache:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_path = tempfile.mkstemp(dir=cached.parent, prefix=f".{name}-")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp_path, cached)  # atomic: concurrent processes never read half a file
        except OSError:
            pass  # an unwritable cache only costs a recompile next time
    return data


# ---- context and modules -------------------------------------------------------------------------------------

_lock = threading.Lock()
_modules = {}


class Module:
    """A loaded kernel module; ``function(name)`` looks a kernel up once and keeps it."""

    __slots__ = ("name", "_mod", "_funcs")

    def __init__(self, name, mod):
        self.name = name
        self._mod = mod
        self._funcs = {}

    def function(self, fname):
        f = self._funcs.get(fname)
        if f is None:
            try:
                f = self._mod.get_function(fname)
            except Exception as e:
                raise AttributeError(f"CUDA module {self.name!r} has no kernel {fname!r}: {e}") from None
            self._funcs[fname] = f
        return f


def get_module(name):
    """The loaded module kernels/<name>.cu, compiled for this GPU on first use."""
    m = _modules.get(name)
    if m is None:
        m = _load(name, name, lambda arch, **kw: compile_module(name, arch, **kw))
    return m


def get_source_module(name, source, options=NVCC_OPTIONS):
    """A module compiled from generated source text (codegen.py), loaded once per text: the key is `name` and
    a hash of the text, so equal programs share one module."""
    key = f"{name}:{hashlib.sha256(source.encode()).hexdigest()[:32]}"
    m = _modules.get(key)
    if m is None:
        m = _load(key, name, lambda arch, **kw: compile_source(name, source, arch, options=options, **kw))
    return m


def _load(key, name, build):
    drv, _, a = cuda_driver.context()
    with _lock:
        m = _modules.get(key)
        if m is None:
            try:
                binary = build(a)
            except CudaCompileError as e:
                # a GPU newer than this nvcc: fall back to PTX for the newest arch it knows, JIT-ed by the driver
                if "Unsupported gpu architecture" not in str(e) and "not defined for option" not in str(e):
                    raise
                binary = build("sm_90", output="ptx")
            m = _modules[key] = Module(name, drv.module_from_buffer(binary))
    return m


def function(module, name):
    return get_module(module).function(name)


def launch(func, grid, block, params, shared=0, stream=None):
    """Launch `func` with a packed parameter buffer (abi.Params), on `stream` or the current one (the capturing
    stream while graphs.py records a graph, else the legacy default stream)."""
    grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
    block = tuple(int(b) for b in block) + (1,) * (3 - len(block))
    func._launch_kernel(
        grid, block, params.bytes(), int(shared), stream if stream is not None else memory.capture_stream
    )


def build_all(arch_=None):
    """Compile (or load from the cache) every module for `arch_` (default: this GPU's); returns the names."""
    names = module_names()
    if arch_ is None:
        for n in names:
            get_module(n)
    else:
        for n in names:
            compile_module(n, arch_)
    return names
