"""A fake CUDA device for tests on machines without a GPU: host memory behind the part of ``pycuda.driver`` that
plast's arenas and copies call. Kernels cannot run on it (``module_from_buffer`` raises); transfers, arenas,
stale checks, planning and fusion decisions can be tested.

    @pytest.fixture
    def fake_cuda(monkeypatch):
        with fake_cuda.installed(monkeypatch) as drv:
            yield drv
"""

import contextlib
import ctypes
import sys

import numpy as np


class FakeAllocation:
    """Host memory posing as one cuMemAlloc block (int() gives its address, as pycuda's DeviceAllocation)."""

    def __init__(self, nbytes):
        self.nbytes = nbytes
        self.buf = (ctypes.c_char * max(nbytes, 1))()
        self.address = ctypes.addressof(self.buf)

    def __int__(self):
        return self.address


class FakeDriver:
    """The part of pycuda.driver that plast's arenas and copies call, over host memory. Every access must fall
    inside one allocation, else AssertionError: an out-of-bounds device copy fails the test. ``calls`` records
    (what, bytes) for each allocation and copy. Subclasses hook ``sync(what)`` (called before every synchronous
    copy) to check more, e.g. that no stream is capturing."""

    MemoryError = MemoryError

    def __init__(self):
        self.allocations = []
        self.calls = []

    def sync(self, what):
        pass

    def check(self, address, nbytes):
        address = int(address)
        for a in self.allocations:
            if a.address <= address and address + nbytes <= a.address + a.nbytes:
                return address
        raise AssertionError(f"device access [{address:#x}, +{nbytes}) is outside every allocation")

    _check = check  # the name older tests use

    def mem_alloc(self, nbytes):
        a = FakeAllocation(int(nbytes))
        self.allocations.append(a)
        self.calls.append(("mem_alloc", nbytes))
        return a

    def memcpy_htod(self, dest, src):
        self.sync("memcpy_htod")
        src = np.ascontiguousarray(src)
        ctypes.memmove(self.check(dest, src.nbytes), src.ctypes.data, src.nbytes)
        self.calls.append(("htod", src.nbytes))

    def memcpy_dtoh(self, dest, src):
        self.sync("memcpy_dtoh")
        assert dest.flags.c_contiguous and dest.flags.writeable
        ctypes.memmove(dest.ctypes.data, self.check(src, dest.nbytes), dest.nbytes)
        self.calls.append(("dtoh", dest.nbytes))

    def memcpy_dtod(self, dest, src, nbytes):
        self.sync("memcpy_dtod")
        ctypes.memmove(self.check(dest, nbytes), self.check(src, nbytes), nbytes)
        self.calls.append(("dtod", nbytes))

    def memset_d8(self, dest, value, nbytes):
        self.sync("memset_d8")
        ctypes.memset(self.check(dest, nbytes), value, nbytes)
        self.calls.append(("memset", nbytes))

    def module_from_buffer(self, binary):
        raise RuntimeError("the fake CUDA driver runs no kernels")


INFO = {"name": "fake", "compute_capability": (9, 0), "devices": 1, "memory_bytes": 1 << 30}


@contextlib.contextmanager
def installed(monkeypatch, driver=None, modules=None):
    """Put `driver` (a new FakeDriver by default) behind plast's CUDA backend for the block; the op table's CUDA
    column, the CUDA arenas and the scalar cache's CUDA entries are restored afterwards. `modules` preloads the
    loader's module cache (for fakes that can run some kernels)."""
    import plast._core.cuda_driver as cuda_backend
    from plast.kernels.cuda import loader
    from plast.memory import arenas as _arenas
    from plast.ops.registry import OPS

    factory = sys.modules["plast.ops.factory"]  # the shared 0-d constants
    drv = driver if driver is not None else FakeDriver()
    monkeypatch.setattr(cuda_backend, "_probe", (True, "", INFO))
    monkeypatch.setattr(cuda_backend, "_ctx", (drv, None, "sm_90"))
    monkeypatch.setattr(loader, "_modules", dict(modules or {}))
    monkeypatch.setattr(loader, "compile_module", lambda *a, **k: b"")  # nvcc is never needed for the fake
    columns = {name: op.kernels.get("cuda") for name, op in OPS.items()}
    saved = _arenas._arenas.pop("cuda", None)
    try:
        yield drv
    finally:
        _arenas._arenas.pop("cuda", None)
        if saved is not None:
            _arenas._arenas["cuda"] = saved
        for name, k in columns.items():
            if k is None:
                OPS[name].kernels.pop("cuda", None)
            else:
                OPS[name].kernels["cuda"] = k
        for key in [k for k, t in factory.SCALAR_CACHE.items() if t.device.type == "cuda"]:
            del factory.SCALAR_CACHE[key]
