# cython: language_level=3
# distutils: sources = src/plast/kernels/cpu/csrc/optim.c
"""The C path of the fused optimizer updates (csrc/optim.c): one call updates every parameter of an
sgd_update / adam_update / rmsprop_update / adadelta_update / adagrad_update / adamax_update / nadam_update node.

``run(kind, node, inputs)`` packs the node's tensors into a table of addresses (a `Plan`), runs the C kernel on
it and returns the indices of the parameters it left to the numpy fallback (tensors it cannot take as flat
arrays: a gradient of another dtype than its parameter, layouts that are not dense or differ between a
parameter, its gradient and its state). Hyperparameters are read from their tensors on every call, never from
``node.args``; so is the optional found_inf (the last input), which skips the whole update while nonzero. A node that is run again (a ``@plast.jit`` plan's, or an eager optimizer's replayed update,
graph/_mutation.UpdateReplay) keeps its Plan: each call only checks that every input still lies at the same
address with the same shape, strides and dtype, so the per-call cost is well under a microsecond.

The check is by address, not by storage object: an eager step's gradients are new tensors every step, but the
arena hands them the blocks the previous step's gradients gave back, so the table usually still holds. A Plan
holds no storage (that would keep the old gradients' blocks from being reused).
"""

from libc.stdint cimport int8_t, int32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset


from plast.kernels.cpu._runtime cimport num_threads, simd_level
from plast._core._structs cimport Node, TensorBase
from plast.memory.arena cimport Storage
from plast._core.codes cimport (
    PLAST_DT_F32,
    PLAST_DT_F64,
    PLAST_OPT_ADADELTA,
    PLAST_OPT_ADAGRAD,
    PLAST_OPT_ADAM,
    PLAST_OPT_ADAMAX,
    PLAST_OPT_AMSGRAD,
    PLAST_OPT_CENTERED,
    PLAST_OPT_DECOUPLED,
    PLAST_OPT_MAXIMIZE,
    PLAST_OPT_MOMENTUM,
    PLAST_OPT_NADAM,
    PLAST_OPT_NESTEROV,
    PLAST_OPT_RMSPROP,
    PLAST_OPT_SGD,
)

from plast._core import dtypes as _dtypes
from plast.kernels.cpu._views import np_view

cdef extern from "optim.h" nogil:
    int PLAST_OPT_HYPER_WIDTH
    ctypedef struct plast_opt_tensor:
        void *param
        const void *grad
        void *state[3]
        void *counter
        void *aux
        Py_ssize_t n
        int32_t row
        int8_t dtype
        int8_t counter_dtype
        int8_t aux_dtype
    int plast_optim_update(int simd, int nthreads, int kind, int flags, const double *hyper, int nrows,
                           const plast_opt_tensor *ts, Py_ssize_t count)

SGD = PLAST_OPT_SGD
ADAM = PLAST_OPT_ADAM
RMSPROP = PLAST_OPT_RMSPROP
ADADELTA = PLAST_OPT_ADADELTA
ADAGRAD = PLAST_OPT_ADAGRAD
ADAMAX = PLAST_OPT_ADAMAX
NADAM = PLAST_OPT_NADAM

# Work (elements) above which the C call releases the GIL.
DEF NOGIL_MIN = 16384

cdef object _F32 = _dtypes.float32
cdef object _F64 = _dtypes.float64
cdef Py_ssize_t _cached = 0  # Plans kept on nodes (Node.scratch) since import
cdef Py_ssize_t _built = 0  # Plans packed since import (tests check that replays reuse theirs)


cdef inline int _dtype_code(TensorBase t) noexcept:
    """PLAST_DT_F32 / PLAST_DT_F64 for a float32 / float64 tensor, else -1."""
    if t.dtype is _F32:
        return PLAST_DT_F32
    if t.dtype is _F64:
        return PLAST_DT_F64
    return -1


cdef inline char *_ptr(TensorBase t, int code, Py_ssize_t k) except NULL:
    """Address of t's first element (t is float32 or float64: `code`)."""
    st = t._storage
    if type(st) is not Storage:
        raise RuntimeError(f"optimizer update: input {k} has no host memory (never computed, or not on the CPU)")
    if (<Storage>st).stale():
        st.check()  # raises StaleTensorError
    return (<Storage>st).ptr + t._offset * (4 if code == PLAST_DT_F32 else 8)


cdef bint _contiguous(object shape, object strides, Py_ssize_t *numel) except -1:
    """Row-major and dense (size-1 dims may have any stride); sets numel either way."""
    cdef Py_ssize_t i, sz, expect = 1
    cdef bint ok = len(shape) == len(strides)
    for i in range(len(shape) - 1, -1, -1):
        sz = shape[i]
        if ok and sz != 1 and <Py_ssize_t>strides[i] != expect:
            ok = False
        expect *= sz
    numel[0] = expect
    return ok


cdef bint _dense(shape, strides):
    """True when the tensor covers exactly numel consecutive elements (any order of dimensions)."""
    expect = 1
    for st, sz in sorted([(a, b) for a, b in zip(strides, shape) if b != 1]):
        if st != expect:
            return False
        expect *= sz
    return True


cdef tuple _order(shape, strides):
    """Strides of the dimensions longer than 1: tensors with equal orders and dense layouts line up element by
    element in memory."""
    return tuple([st for st, sz in zip(strides, shape) if sz != 1])


cdef class Plan:
    """The packed view of one node's tensors: a C table with one entry per parameter the C path takes, the
    hyperparameter tensors' addresses, and what each input's layout was when it was packed."""

    cdef plast_opt_tensor *ts
    cdef Py_ssize_t *pidx     # the parameter index of each table entry
    cdef Py_ssize_t count, total, ninputs, n, h
    cdef Py_ssize_t roles[3]  # input index of parameter 0's state buffers (parameter i's: + i), or -1
    cdef Py_ssize_t rc        # ... and of its step counter, or -1
    cdef Py_ssize_t ra        # ... and of its one-element auxiliary state (NAdam's mu_product), or -1
    cdef Py_ssize_t fixed     # inputs before the optional found_inf (GradScaler's, the last input)
    cdef int kind, flags, nhyper, width
    cdef double *hyper
    cdef const char **hptr
    cdef int8_t *hdt
    cdef list hslow           # hyper tensors read through numpy (not contiguous), else None
    cdef char **addrs         # every input's storage base address, offset, shape, strides and dtype when packed
    cdef Py_ssize_t *offsets
    cdef tuple shapes, strides, dtypes
    cdef readonly tuple rest  # parameter indices left to the numpy fallback

    def __cinit__(self):
        self.ts = NULL
        self.hyper = NULL
        self.hptr = NULL
        self.hdt = NULL
        self.offsets = NULL
        self.addrs = NULL
        self.pidx = NULL

    def __dealloc__(self):
        free(self.ts)
        free(self.hyper)
        free(self.hptr)
        free(self.hdt)
        free(self.offsets)
        free(self.addrs)
        free(self.pidx)

    def __init__(self, int kind, tuple args, inputs):
        cdef Py_ssize_t n = args[0], h = args[1], m = len(inputs)
        cdef tuple hidx = args[2]
        # input index of each state buffer of parameter 0 (parameter i's is that + i), or -1; the counter's
        cdef Py_ssize_t r0 = -1, r1 = -1, r2 = -1, rc = -1, ra = -1
        if m < h + 2 * n:
            raise ValueError(f"optimizer update: {m} inputs for {n} parameters and {h} hyperparameter tensors")
        self.kind = kind
        self.nhyper = h
        # hyperparameters per row (csrc/optim.h)
        self.width = 4 if kind in (PLAST_OPT_SGD, PLAST_OPT_ADADELTA, PLAST_OPT_ADAGRAD) else 5
        if kind == PLAST_OPT_NADAM:
            self.width = 6
        self.ninputs = m
        if kind == PLAST_OPT_SGD:
            _, _, _, has_bufs, nesterov, maximize = args
            self.flags = (PLAST_OPT_MOMENTUM if has_bufs else 0) | (PLAST_OPT_NESTEROV if nesterov else 0)
            if has_bufs:
                r0, rc = h + 2 * n, h + 3 * n
        elif kind == PLAST_OPT_ADAM:
            _, _, _, amsgrad, decoupled, maximize = args
            self.flags = (PLAST_OPT_AMSGRAD if amsgrad else 0) | (PLAST_OPT_DECOUPLED if decoupled else 0)
            r0, r1, rc = h + 2 * n, h + 3 * n, h + 4 * n
            if amsgrad:
                r2 = h + 5 * n
        elif kind == PLAST_OPT_RMSPROP:
            _, _, _, has_mom, centered, maximize = args
            self.flags = (PLAST_OPT_MOMENTUM if has_mom else 0) | (PLAST_OPT_CENTERED if centered else 0)
            r0, rc = h + 2 * n, h + 3 * n
            if has_mom:
                r1 = h + 4 * n
            if centered:
                r2 = h + 4 * n + (n if has_mom else 0)
        elif kind == PLAST_OPT_ADAGRAD:
            _, _, _, maximize = args
            r0, rc = h + 2 * n, h + 3 * n
        elif kind == PLAST_OPT_ADADELTA or kind == PLAST_OPT_ADAMAX:
            _, _, _, maximize = args
            r0, r1, rc = h + 2 * n, h + 3 * n, h + 4 * n
        elif kind == PLAST_OPT_NADAM:
            _, _, _, decoupled, maximize = args
            self.flags = PLAST_OPT_DECOUPLED if decoupled else 0
            r0, r1, rc, ra = h + 2 * n, h + 3 * n, h + 4 * n, h + 5 * n
        else:
            raise ValueError(f"optimizer update: unknown kind {kind}")
        if maximize:
            self.flags |= PLAST_OPT_MAXIMIZE
        self.fixed = max(h + 2 * n, max(r0, r1, r2, rc, ra) + n)
        if self.fixed > m:
            raise ValueError(f"optimizer update: {m} inputs are too few for the node's arguments {args}")
        if m > self.fixed + 1:
            raise ValueError(f"optimizer update: {m} inputs are too many for the node's arguments {args}")
        self._record_layout(inputs)
        self._pack_hyper(inputs)
        self.ts = <plast_opt_tensor *>malloc(max(1, n) * sizeof(plast_opt_tensor))
        self.pidx = <Py_ssize_t *>malloc(max(1, n) * sizeof(Py_ssize_t))
        if self.ts == NULL or self.pidx == NULL:
            raise MemoryError("optimizer update: out of memory")
        self.n, self.h, self.rc, self.ra = n, h, rc, ra
        self.roles[0], self.roles[1], self.roles[2] = r0, r1, r2
        cdef Py_ssize_t *roles = self.roles
        rest = []
        cdef Py_ssize_t i, numel, c = 0
        cdef int j, dt
        cdef TensorBase p, g, t
        cdef plast_opt_tensor *e
        for i in range(n):
            e = &self.ts[c]
            memset(e, 0, sizeof(plast_opt_tensor))
            p = inputs[h + i]
            g = inputs[h + n + i]
            dt = _dtype_code(p)
            ok = dt >= 0 and _dtype_code(g) == dt
            if _contiguous(p._shape, p._strides, &numel):
                for j in range(-1, 3):
                    if not ok:
                        break
                    if j >= 0 and roles[j] < 0:
                        continue
                    t = g if j < 0 else inputs[roles[j] + i]
                    ok = _contiguous(t._shape, t._strides, &numel) or _same_order(p, t)
            elif ok and numel:
                # dense in another order (a transposed parameter): fine if everything shares that order
                ok = _dense(p._shape, p._strides)
                for j in range(-1, 3):
                    if ok and (j < 0 or roles[j] >= 0):
                        ok = _same_order(p, g if j < 0 else inputs[roles[j] + i])
            if rc >= 0:
                t = inputs[rc + i]
                e.counter_dtype = _dtype_code(t)
                ok = ok and e.counter_dtype >= 0
            if ra >= 0:
                t = inputs[ra + i]
                e.aux_dtype = _dtype_code(t)
                ok = ok and e.aux_dtype >= 0
            if not ok:
                rest.append(i)
                continue
            e.n = numel
            e.row = hidx[i]
            e.dtype = dt
            self.pidx[c] = i
            self.total += numel
            c += 1
        self.count = c
        self.rest = tuple(rest)
        self._point(inputs)

    cdef int _point(self, inputs) except -1:
        """Fill the table's addresses from `inputs` (laid out as when the table was packed)."""
        cdef Py_ssize_t c, i, n = self.n, h = self.h
        cdef int j, dt
        cdef plast_opt_tensor *e
        for c in range(self.count):
            e = &self.ts[c]
            i = self.pidx[c]
            dt = e.dtype
            if self.rc >= 0:
                e.counter = _ptr(inputs[self.rc + i], e.counter_dtype, self.rc + i)
            if self.ra >= 0:
                e.aux = _ptr(inputs[self.ra + i], e.aux_dtype, self.ra + i)
            if e.n:
                e.param = _ptr(inputs[h + i], dt, h + i)
                e.grad = _ptr(inputs[h + n + i], dt, h + n + i)
                for j in range(3):
                    if self.roles[j] >= 0:
                        e.state[j] = _ptr(inputs[self.roles[j] + i], dt, self.roles[j] + i)
        for j in range(self.nhyper):
            if self.hptr[j] != NULL:
                self.hptr[j] = _ptr(inputs[j], self.hdt[j], j)
        for c in range(self.ninputs):
            self.addrs[c] = _base(inputs[c])
        return 0

    cdef _record_layout(self, inputs):
        cdef Py_ssize_t k, m = self.ninputs
        cdef TensorBase t
        self.offsets = <Py_ssize_t *>malloc(max(1, m) * sizeof(Py_ssize_t))
        self.addrs = <char **>malloc(max(1, m) * sizeof(char *))
        if self.offsets == NULL or self.addrs == NULL:
            raise MemoryError("optimizer update: out of memory")
        shs, strs, dts = [], [], []
        for k in range(m):
            t = inputs[k]
            self.offsets[k] = t._offset
            self.addrs[k] = _base(t)
            shs.append(t._shape)
            strs.append(t._strides)
            dts.append(t.dtype)
        self.shapes = tuple(shs)
        self.strides = tuple(strs)
        self.dtypes = tuple(dts)

    cdef _pack_hyper(self, inputs):
        cdef int r, dt, h = self.nhyper
        cdef Py_ssize_t numel
        cdef TensorBase t
        self.hyper = <double *>malloc(max(1, h) * PLAST_OPT_HYPER_WIDTH * sizeof(double))
        self.hptr = <const char **>malloc(max(1, h) * sizeof(char *))
        self.hdt = <int8_t *>malloc(max(1, h) * sizeof(int8_t))
        if self.hyper == NULL or self.hptr == NULL or self.hdt == NULL:
            raise MemoryError("optimizer update: out of memory")
        memset(self.hyper, 0, max(1, h) * PLAST_OPT_HYPER_WIDTH * sizeof(double))
        slow = None
        for r in range(h):
            t = inputs[r]
            dt = _dtype_code(t)
            if dt >= 0 and _contiguous(t._shape, t._strides, &numel) and numel >= self.width:
                self.hptr[r] = _ptr(t, dt, r)
                self.hdt[r] = dt
            else:
                self.hptr[r] = NULL
                slow = slow or []
                slow.append(r)
        self.hslow = slow

    cdef int matches(self, inputs) except -1:
        """2 when every input still lies where it lay when packed, with the same offset, shape, strides and
        dtype (then every address and length in the table is still right, whichever storage objects hold the
        memory now); 1 when only storage addresses differ (``_point`` makes the table right again); else 0."""
        cdef Py_ssize_t k
        cdef TensorBase t
        cdef tuple shs = self.shapes, strs = self.strides, dts = self.dtypes
        cdef int same = 2
        if len(inputs) != self.ninputs:
            return 0
        for k in range(self.ninputs):
            t = inputs[k]
            if type(t._storage) is not Storage or t._offset != self.offsets[k] or t.dtype is not dts[k]:
                return 0
            if (<Storage>t._storage).ptr != self.addrs[k]:
                same = 1
            if t._shape is not shs[k] and t._shape != shs[k]:
                return 0
            if t._strides is not strs[k] and t._strides != strs[k]:
                return 0
        return same

    cdef int skipped(self, inputs) except -1:
        """1 when the node has a found_inf input and it is nonzero (or NaN) now: the whole update is skipped."""
        if self.ninputs == self.fixed:
            return 0
        cdef TensorBase t = inputs[self.fixed]
        cdef int dt = _dtype_code(t)
        if dt != PLAST_DT_F32:
            raise TypeError("optimizer update: found_inf must be a float32 tensor")
        return (<const float *>_ptr(t, dt, self.fixed))[0] != 0.0

    cdef int run(self, inputs) except -1:
        cdef int r, j, rc
        cdef double *row
        for r in range(self.nhyper):
            row = self.hyper + r * PLAST_OPT_HYPER_WIDTH
            if self.hptr[r] != NULL:
                for j in range(self.width):
                    if self.hdt[r] == PLAST_DT_F32:
                        row[j] = (<const float *>self.hptr[r])[j]
                    else:
                        row[j] = (<const double *>self.hptr[r])[j]
        if self.hslow is not None:
            for r in self.hslow:
                vals = np_view(inputs[r]).reshape(-1).tolist()
                for j in range(self.width):
                    self.hyper[r * PLAST_OPT_HYPER_WIDTH + j] = vals[j]
        if self.count == 0:
            return 0
        cdef int simd = simd_level(), nt = num_threads()
        if self.total >= NOGIL_MIN:
            with nogil:
                rc = plast_optim_update(simd, nt, self.kind, self.flags, self.hyper, self.nhyper, self.ts,
                                        self.count)
        else:
            rc = plast_optim_update(simd, nt, self.kind, self.flags, self.hyper, self.nhyper, self.ts, self.count)
        if rc == -2:
            raise MemoryError("optimizer update: out of memory")
        if rc != 0:
            raise RuntimeError("optimizer update: the C kernel rejected its table (a plast bug)")
        return 0


cdef inline char *_base(TensorBase t) noexcept:
    """The base address of t's host storage, or NULL (no host memory: such a Plan never matches)."""
    st = t._storage
    return (<Storage>st).ptr if type(st) is Storage else NULL


cdef bint _same_order(TensorBase p, TensorBase t):
    """t (of p's shape) lays its elements out in memory in p's order."""
    if t._strides is p._strides or t._strides == p._strides:
        return True
    return _order(p._shape, t._strides) == _order(p._shape, p._strides)


def stats():
    """{'plans_built': Plans packed since import, 'plans_cached': Plans kept on nodes that run again}."""
    return {"plans_built": _built, "plans_cached": _cached}


def run(int kind, node, inputs):
    """Update what the C path can of `node` (an optimizer-update node whose kernel is running on `inputs`);
    returns the indices of the parameters left to the numpy fallback, or None when the node's found_inf (its
    optional last input, GradScaler's) is nonzero now: then nothing at all is updated."""
    global _built, _cached
    cdef Node nd = <Node?>node
    cdef Plan plan = nd.scratch if type(nd.scratch) is Plan else None
    cdef int fit = plan.matches(inputs) if plan is not None else 0
    if fit == 1:
        plan._point(inputs)  # the same layouts in other blocks (an eager step's new gradients)
    elif fit == 0:
        # kept for nodes that run again (a jit plan's, an eager optimizer's replayed update's: they say so)
        keep = plan is not None or nd.reruns
        plan = Plan(kind, node.args, inputs)
        _built += 1
        if keep:
            nd.scratch = plan  # dies with the node
            _cached += 1
    if plan.skipped(inputs):
        return None
    plan.run(inputs)
    return plan.rest
