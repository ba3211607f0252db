"""CUDA graphs for ``@plast.jit`` plans (DESIGN §2.5): a plan whose steps are all CUDA kernels is captured once,
and each later call is one graph launch instead of a Python launcher per kernel.

Capture. The plan's steps run once while a stream records (relaxed mode, so an arena may still grow with
cuMemAlloc): kernel launches (loader.launch), device memsets and device-to-device copies (memory.py) go to the
capturing stream and are recorded, not run. Host copies cannot be replayed by a graph: a launcher that copies to
or from the host while a capture is on raises NotCapturable (memory.py), and the plan replays step by step.

Fixed addresses. A graph replays the addresses it recorded, so while one is captured:
* kernel scratch memory comes from the persistent arena and the graph holds it (kernels.scratch), as it holds the
  parameter tables the launchers upload (kernels_nn._device_bytes);
* random fills launch the ``*_devstate`` Philox kernels, which read (seed, offset) from a slot of device memory.
  Before each launch the plan's random steps run in binding mode: they take their offsets from their generators
  (the same calls, in the same order, as a step-by-step replay) and one copy writes them to the slots;
* kernels that check indices get an error flag of their own (kernels.checked); after each launch the flags are
  read back and the first error is raised, as the kernel's launcher raises it in eager mode;
* argument tensors change memory between calls: PlanGraph copies them into buffers the plan owns before each
  launch (and back after it when the plan writes them), so the graph never needs capturing again.

The graph launches on a stream created with default flags, which the legacy default stream (where every eager
kernel and copy runs) waits for and is waited on by: no events are needed around a launch.

API. Released PyCUDA (2026.1 and older) binds no graph calls; the driver library's own functions are called by
ctypes then (same context, PyCUDA's streams). A PyCUDA that binds them (``Stream.begin_capture``/``end_capture``,
``Graph.instantiate``, ``GraphExec.launch``) is used directly.

``PLAST_CUDA_GRAPHS=0`` turns graphs off: plans then replay step by step. Importable without pycuda.
"""

import ctypes
import os

import numpy as np

from ..._core import cuda_driver
from ...memory import cuda as memory
from ...memory.cuda import NotCapturable  # raised by host copies during a capture, and here
from .abi import flagged_error

MAX_CAPTURE_TRIES = 2  # a plan whose capture failed this often replays step by step for good
RELAXED = 2  # CU_STREAM_CAPTURE_MODE_RELAXED

_capture = None  # the Capture being recorded
_binding = None  # the RngBinding being filled (random steps run for their offsets only)
_api = None
_stream = None
STATS = {"captures": 0, "launches": 0, "failed_captures": 0}


class GraphsUnavailable(RuntimeError):
    """This PyCUDA / driver offers no stream capture."""


def enabled():
    """False when PLAST_CUDA_GRAPHS=0."""
    return os.environ.get("PLAST_CUDA_GRAPHS", "1") != "0"


def stats():
    """Counts of captures, graph launches and failed captures since the process started."""
    return dict(STATS)


def active():
    """The Capture being recorded, or None."""
    return _capture


def binding():
    """The RngBinding being filled, or None."""
    return _binding


# ---- the two ways to reach stream capture ----------------------------------------------------------------------


class PycudaGraphs:
    """Stream capture through a PyCUDA that binds it."""

    def __init__(self, drv):
        self.drv = drv

    def begin(self, stream):
        stream.begin_capture(self.drv.capture_mode.RELAXED)

    def end(self, stream):
        return stream.end_capture()

    def instantiate(self, graph):
        return graph.instantiate()

    def launch(self, exe, stream):
        exe.launch(stream)

    def free(self, graph, exe):
        pass  # PyCUDA's objects destroy their handles


class DriverGraphs:
    """Stream capture through the driver library's C API (ctypes), on PyCUDA's context and streams. `lib` is
    the loaded driver library (or a stand-in with the same functions)."""

    def __init__(self, lib):
        self.lib = lib
        for name in ("cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphInstantiateWithFlags",
                     "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy"):  # fmt: skip
            if not hasattr(lib, name):
                raise GraphsUnavailable(
                    f"the CUDA driver library has no {name} (a driver for CUDA 11.4+ has)"
                )
        vp = ctypes.c_void_p
        sigs = {
            "cuStreamBeginCapture_v2": (vp, ctypes.c_int),
            "cuStreamEndCapture": (vp, ctypes.POINTER(vp)),
            "cuGraphInstantiateWithFlags": (ctypes.POINTER(vp), vp, ctypes.c_ulonglong),
            "cuGraphLaunch": (vp, vp),
            "cuGraphExecDestroy": (vp,),
            "cuGraphDestroy": (vp,),
        }
        for name, args in sigs.items():
            f = getattr(lib, name)
            if hasattr(f, "argtypes"):
                f.argtypes, f.restype = list(args), ctypes.c_int

    def _check(self, res, what):
        if res != 0:
            text = ctypes.c_char_p()
            get = getattr(self.lib, "cuGetErrorString", None)
            msg = ""
            if get is not None and get(int(res), ctypes.byref(text)) == 0 and text.value:
                msg = f": {text.value.decode(errors='replace')}"
            raise RuntimeError(f"{what} failed with CUDA error {int(res)}{msg}")

    def begin(self, stream):
        self._check(
            self.lib.cuStreamBeginCapture_v2(ctypes.c_void_p(stream.handle), RELAXED), "stream capture"
        )

    def end(self, stream):
        g = ctypes.c_void_p()
        self._check(
            self.lib.cuStreamEndCapture(ctypes.c_void_p(stream.handle), ctypes.byref(g)), "end capture"
        )
        return g

    def instantiate(self, graph):
        e = ctypes.c_void_p()
        self._check(self.lib.cuGraphInstantiateWithFlags(ctypes.byref(e), graph, 0), "graph instantiation")
        return e

    def launch(self, exe, stream):
        self._check(self.lib.cuGraphLaunch(exe, ctypes.c_void_p(stream.handle)), "graph launch")

    def free(self, graph, exe):
        if exe is not None:
            self.lib.cuGraphExecDestroy(exe)
        if graph is not None:
            self.lib.cuGraphDestroy(graph)


def _driver_library():
    names = ("nvcuda.dll",) if os.name == "nt" else ("libcuda.so.1", "libcuda.so")
    for n in names:
        try:
            return ctypes.CDLL(n)
        except OSError:
            continue
    raise GraphsUnavailable(f"the CUDA driver library ({' or '.join(names)}) could not be loaded")


def api():
    """The stream-capture API of this process (raises GraphsUnavailable saying why there is none)."""
    global _api
    if _api is None:
        drv = cuda_driver.driver()
        if hasattr(getattr(drv, "Stream", None), "begin_capture"):
            _api = PycudaGraphs(drv)
        else:
            _api = DriverGraphs(_driver_library())
    return _api


def stream():
    """The stream graphs are captured on and launched on (default flags: ordered with the legacy stream)."""
    global _stream
    if _stream is None:
        _stream = cuda_driver.driver().Stream()
    return _stream


# ---- capture -----------------------------------------------------------------------------------------------


class Capture:
    """What a graph needs beyond its recorded launches: memory it must hold, error flags to read after each
    launch, and the device slots its random fills read (seed, offset) from."""

    def __init__(self, stream_, rng_slots):
        self.stream = stream_
        self.keep = []
        self.flags = []  # (storage, checked instance)
        self.rng_host = np.zeros((max(rng_slots, 1), 2), dtype=np.uint64)
        self.rng_used = 0
        self.rng_block = memory.persistent_arena().new(self.rng_host.nbytes) if rng_slots else None

    def hold(self, storage):
        """Keep `storage` alive (and out of anyone else's hands) as long as the graph lives."""
        self.keep.append(storage)
        return storage

    def new(self, nbytes):
        """Memory for the graph alone: persistent, held by it (replays write the same addresses again)."""
        return self.hold(memory.persistent_arena().new(max(int(nbytes), 1)))

    def error_flag(self, checker):
        buf = self.new(32)
        self.flags.append((buf, checker))
        return buf

    def rng_slot(self, seed, offset):
        """Device address of the next random fill's (seed, offset), which now holds these values."""
        i = self.rng_used
        if self.rng_block is None or i >= len(self.rng_host):
            raise NotCapturable("a random fill the plan did not announce")
        self.rng_host[i] = (seed & 0xFFFFFFFFFFFFFFFF, offset)
        self.rng_used += 1
        return self.rng_block.address + 16 * i


class RngBinding:
    """Filled by the random steps of a captured plan, run for their offsets only (kernels_nn.philox_fill)."""

    def __init__(self, graph):
        self.graph = graph
        self.i = 0

    def take(self, seed, offset):
        g = self.graph
        if self.i >= g.rng_used:
            raise RuntimeError("a captured plan's random steps drew more often than when it was captured")
        g.rng_host[self.i] = (seed & 0xFFFFFFFFFFFFFFFF, offset)
        self.i += 1


def capture(run, rng_slots=0):
    """Record what ``run()`` launches into a Graph. Nothing runs on the GPU. Raises NotCapturable (or what
    ``run()`` or the driver raised) when the steps can't be recorded."""
    global _capture
    a = api()
    s = stream()
    cap = Capture(s, rng_slots)
    a.begin(s)
    prev = memory.capture_stream
    _capture, memory.capture_stream = cap, s
    try:
        run()
    except BaseException:
        _capture, memory.capture_stream = None, prev
        try:
            g = a.end(s)
            a.free(g, None)
        except Exception:
            pass  # an invalidated capture ends with an error of its own; the first one is what matters
        STATS["failed_captures"] += 1
        raise
    _capture, memory.capture_stream = None, prev
    g = a.end(s)
    try:
        exe = a.instantiate(g)
    except BaseException:
        a.free(g, None)
        raise
    STATS["captures"] += 1
    return Graph(a, s, g, exe, cap)


class Graph:
    """An instantiated graph and what it holds: ``launch()`` runs it once."""

    def __init__(self, api_, stream_, graph, exe, cap):
        self._api, self.stream, self._graph, self._exe = api_, stream_, graph, exe
        self.keep, self.flags = cap.keep, cap.flags
        self.rng_host, self.rng_used, self.rng_block = cap.rng_host, cap.rng_used, cap.rng_block
        self.launches = 0

    def bind_rng(self, random_steps):
        """Run `random_steps` (jit Steps) for their (seed, offset) only: each draws as a step-by-step replay
        would, and the values go to the graph's slots at the next launch."""
        global _binding
        if not self.rng_used:
            return
        b = RngBinding(self)
        _binding = b
        try:
            for st in random_steps:
                st.kernel(st.node, st.inputs, st.outputs)
        finally:
            _binding = None
        if b.i != self.rng_used:
            raise RuntimeError(
                f"a captured plan's random steps drew {b.i} times, {self.rng_used} when it was captured"
            )

    def launch(self):
        """One launch (after writing the random fills' offsets); raises what a kernel's error flag says."""
        if self.rng_used:
            memory.from_host(self.rng_block, self.rng_host[: self.rng_used])
        self._api.launch(self._exe, self.stream)
        self.launches += 1
        STATS["launches"] += 1
        self.check_flags()

    def check_flags(self):
        for buf, checker in self.flags:
            err = flagged_error(memory.to_host(buf, (4,), np.int64), checker.fmt)
            if err is not None:
                raise err

    def __del__(self):
        try:
            self._api.free(self._graph, self._exe)
        except Exception:
            pass  # at interpreter exit the context may be gone already


# ---- a jit plan as a graph ---------------------------------------------------------------------------------


def _extent(t, rel):
    """[lo, hi) element offsets, relative to an argument's offset, that tensor t (at `rel`) touches."""
    lo = hi = rel
    for s, st in zip(t._shape, t._strides):
        if s == 0:
            return None
        if st < 0:
            lo += (s - 1) * st
        else:
            hi += (s - 1) * st
    return lo, hi + 1


class _ArgBuffer:
    """A plan-owned copy of the part of one argument's memory the plan touches."""

    __slots__ = ("lo", "hi", "isz", "storage", "written")

    def __init__(self, lo, hi, isz, written):
        self.lo, self.hi, self.isz, self.written = lo, hi, isz, written
        self.storage = memory.persistent_arena().new(max((hi - lo) * isz, 1))

    def source(self, t):
        """(device address, bytes) of the argument's span in `t`, or None when t's memory doesn't hold it."""
        st = t._storage
        start = t._offset + self.lo
        if start < 0 or (t._offset + self.hi) * self.isz > st.nbytes:
            return None
        return st.address + start * self.isz, (self.hi - self.lo) * self.isz


class PlanGraph:
    """A jit plan (_jit/trace.py) replayed as one CUDA graph. ``run(tensors)`` returns False when this call
    must replay step by step instead (nothing has run then)."""

    def __init__(self, steps, aliases, arg_views, debug=False):
        self.steps = steps
        self.aliases = aliases
        self.arg_views = arg_views
        self.random_steps = [s for s in steps if s.kind == "random"]
        self.graph = None
        self.tries = 0
        self.debug = debug
        self.buffers = self._buffers()

    @property
    def usable(self):
        return self.buffers is not None and self.tries < MAX_CAPTURE_TRIES

    def _why(self, msg):
        if self.debug:
            print(f"plast.jit: CUDA graph: {msg}; replaying step by step")

    def _buffers(self):
        written = set()
        for s in self.steps:
            for t in s.outputs + (s.inputs if s.kind == "mutation" else []):
                written.add(id(t._storage))
        seen = set()
        out = []
        for al, views in zip(self.aliases, self.arg_views):
            if id(al._storage) in seen:
                self._why("two arguments share memory")
                return None
            seen.add(id(al._storage))
            isz = al.dtype.itemsize
            spans = [_extent(al, 0)] + [_extent(v, rel) for v, rel in views if v.dtype.itemsize == isz]
            if len(spans) != len(views) + 1:
                self._why("an argument is viewed with another dtype")
                return None
            spans = [sp for sp in spans if sp is not None]
            if not spans:
                out.append(None)  # an empty argument: nothing to copy
                continue
            lo, hi = min(sp[0] for sp in spans), max(sp[1] for sp in spans)
            out.append(_ArgBuffer(lo, hi, isz, id(al._storage) in written))
        return out

    def _bind_buffers(self):
        """Point the argument aliases and their views at the plan's buffers (what the capture records)."""
        for al, views, buf in zip(self.aliases, self.arg_views, self.buffers):
            if buf is None:
                continue
            al._storage, al._offset = buf.storage, -buf.lo
            for v, rel in views:
                v._storage, v._offset, v._npcache = buf.storage, rel - buf.lo, None

    def _sources(self, tensors):
        out = []
        for t, buf in zip(tensors, self.buffers):
            if buf is None:
                out.append(None)
                continue
            src = buf.source(t)
            if src is None:
                return None
            out.append(src)
        return out

    def _run_steps(self):
        for s in self.steps:
            s.kernel(s.node, s.inputs, s.outputs)

    def run(self, tensors):
        if not self.usable:
            return False
        srcs = self._sources(tensors)
        if srcs is None:
            self._why("an argument's memory does not hold the span the plan reads")
            return False
        for buf, src in zip(self.buffers, srcs):
            if src is not None:
                memory.copy_device(buf.storage.address, src[0], src[1])
        if self.graph is None:
            gens = _generators(self.random_steps)
            saved = [(g, g._seed, g._offset) for g in gens]
            self._bind_buffers()
            try:
                self.graph = capture(self._run_steps, len(self.random_steps))
            except NotCapturable as e:
                _restore(saved)
                self.tries += 1
                self._why(str(e))
                return False
            except Exception as e:
                _restore(saved)
                self.tries = MAX_CAPTURE_TRIES
                self._why(f"capture failed ({type(e).__name__}: {e})")
                return False
        else:
            self.graph.bind_rng(self.random_steps)
        self.graph.launch()
        for buf, src in zip(self.buffers, srcs):
            if src is not None and buf.written:
                memory.copy_device(src[0], buf.storage.address, src[1])
        return True


def _restore(saved):
    """Put generators back where they were before a failed capture: its draws never ran, and the step-by-step
    replay that runs instead draws them."""
    for g, seed, off in saved:
        g._seed, g._offset = seed, off


def _generators(random_steps):
    """The plast Generators the random steps draw from (found in their fill functions' closures), so a failed
    capture can put their offsets back."""
    out, seen = {}, set()
    fns = [s.kernel for s in random_steps]
    while fns:
        f = fns.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        for cell in getattr(f, "__closure__", None) or ():
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if hasattr(v, "_seed") and hasattr(v, "_offset") and hasattr(v, "_take"):  # a plast.Generator
                out[id(v)] = v
            elif callable(v) and getattr(v, "__closure__", None):
                fns.append(v)
    return list(out.values())
