# cython: language_level=3
# distutils: sources = src/plast/kernels/cpu/csrc/elementwise_chain.c src/plast/kernels/cpu/csrc/elementwise.c src/plast/kernels/cpu/csrc/unary.c
"""The fused elementwise-chain interpreter (csrc/elementwise_chain.c): a register bytecode run over L1-sized
tiles, so a chain of elementwise ops makes one pass over memory.

Build a program with `assemble`, run it on numpy arrays with `run_program` (tests, benchmarks) or on raw
addresses and element strides with `run_program_nd` (the engine's fused groups):

>>> import numpy as np
>>> prog = assemble([("load", 0, 0), ("const", 1, 2.0), ("mul", 2, 0, 1), ("exp", 2, 2), ("store", 0, 2)])
>>> x = np.zeros(3, np.float32); out = np.empty(3, np.float32)
>>> run_program(prog, [x], [out]); out.tolist()
[1.0, 1.0, 1.0]
"""

from libc.stdint cimport int32_t, uintptr_t
from libc.stdlib cimport free, malloc

import struct

import numpy as np

from plast._core.codes cimport PLAST_DT_F32, PLAST_DT_F64

from plast._core.codes import BINARY_CODES, BINARY_CPU_COUNT, UNARY_CODES, UNARY_CPU_COUNT

from plast.kernels.cpu._runtime cimport NOGIL_MIN_WORK, num_threads, simd_level
from plast.kernels.cpu._tensors cimport TensorBase, fill_bcast_strides, fill_shape, tensor_ptr

cdef extern from "elementwise_chain.h" nogil:
    int PLAST_FX_MAX_REGS
    int PLAST_FX_MAX_IO
    int PLAST_FX_LOAD
    int PLAST_FX_CONST
    int PLAST_FX_STORE
    int PLAST_FX_ADD
    int PLAST_FX_UNARY
    int plast_fused_check(const int32_t *prog, int ninstr, int nin, int nout)
    int plast_fused_run(int simd, int nthreads, int dtype, const int32_t *prog, int ninstr, int ndim,
                        const Py_ssize_t *shape, int nin, const char *const *ins, const Py_ssize_t *in_strides,
                        int nout, char *const *outs, const Py_ssize_t *out_strides)

MAX_REGS = PLAST_FX_MAX_REGS
MAX_IO = PLAST_FX_MAX_IO
# the ops the bytecode takes: the binary and unary codes of _core/codes.h the CPU kernels take, by op name
BINARY = tuple(name for name, code in sorted(BINARY_CODES.items(), key=lambda kv: kv[1]) if code < BINARY_CPU_COUNT)
UNARY = tuple(name for name, code in sorted(UNARY_CODES.items(), key=lambda kv: kv[1]) if code < UNARY_CPU_COUNT)
OPCODES = {"load": PLAST_FX_LOAD, "const": PLAST_FX_CONST, "store": PLAST_FX_STORE}
OPCODES.update({name: PLAST_FX_ADD + BINARY_CODES[name] for name in BINARY})
OPCODES.update({name: PLAST_FX_UNARY + UNARY_CODES[name] for name in UNARY})

DEF MAXD = 16


def assemble(instructions):
    """Bytes of a program from (name, dst, a[, b]) tuples: ("load", r, input), ("const", r, value),
    ("store", output, r), (binary, r, a, b), (unary, r, a)."""
    words = []
    for ins in instructions:
        name = ins[0]
        if name not in OPCODES:
            raise ValueError(f"unknown fused opcode {name!r}; expected one of {', '.join(OPCODES)}")
        if name == "const":
            lo, hi = struct.unpack("<iI", struct.pack("<d", float(ins[2])))
            words += [OPCODES[name], ins[1], lo, hi - (1 << 32) if hi >= (1 << 31) else hi]
        else:
            args = list(ins[1:]) + [0] * (3 - len(ins[1:]))
            words += [OPCODES[name]] + [int(v) for v in args]
    return np.asarray(words, dtype=np.int32).tobytes()


cdef int _check(const int32_t *p, int ninstr, int nin, int nout) except -1:
    cdef int rc = plast_fused_check(p, ninstr, nin, nout)
    if rc:
        raise ValueError(
            f"fused program: instruction {-rc - 1} is invalid (unknown opcode, register out of 0..{MAX_REGS - 1}, "
            f"input/output index out of range for {nin} inputs / {nout} outputs, or a register read before "
            "it is written)"
        )
    return 0


def run_program_nd(bytes program, int dtype, shape, in_addrs, in_strides, out_addrs, out_strides):
    """Run `program` over `shape` (dtype code PLAST_DT_F32 / PLAST_DT_F64) on raw addresses; strides in elements,
    one tuple per operand (0 along broadcast dims)."""
    cdef int nd = len(shape), nin = len(in_addrs), nout = len(out_addrs)
    if len(program) % 16:
        raise ValueError("fused program: length must be a multiple of 16 bytes (4 int32 per instruction)")
    if nd > MAXD or nin > MAX_IO or nout > MAX_IO:
        raise ValueError(f"fused program: at most {MAXD} dims and {MAX_IO} inputs/outputs")
    if dtype != PLAST_DT_F32 and dtype != PLAST_DT_F64:
        raise ValueError(
            f"fused program: dtype code must be {PLAST_DT_F32} (float32) or {PLAST_DT_F64} (float64), got {dtype}"
        )
    cdef const int32_t *p = <const int32_t *><const char *>program
    cdef int ninstr = len(program) // 16
    _check(p, ninstr, nin, nout)
    cdef Py_ssize_t sh[MAXD]
    cdef Py_ssize_t *ist = <Py_ssize_t *>malloc(sizeof(Py_ssize_t) * MAXD * (nin + 1))
    cdef Py_ssize_t *ost = <Py_ssize_t *>malloc(sizeof(Py_ssize_t) * MAXD * (nout + 1))
    cdef const char *ins[16]
    cdef char *outs[16]
    cdef int i, k, rc
    cdef int simd = simd_level(), nt = num_threads()
    if ist == NULL or ost == NULL:
        free(ist)
        free(ost)
        raise MemoryError("fused program: out of memory")
    try:
        for i in range(nd):
            sh[i] = shape[i]
        for k in range(nin):
            ins[k] = <const char *><uintptr_t>in_addrs[k]
            for i in range(nd):
                ist[k * nd + i] = in_strides[k][i]
        for k in range(nout):
            outs[k] = <char *><uintptr_t>out_addrs[k]
            for i in range(nd):
                ost[k * nd + i] = out_strides[k][i]
        with nogil:
            rc = plast_fused_run(simd, nt, dtype, p, ninstr, nd, sh, nin, ins, ist, nout, outs, ost)
    finally:
        free(ist)
        free(ost)
    if rc:
        raise ValueError(f"fused program: run failed (code {rc})")


cdef int chain_run(bytes program, TensorBase out, object inputs) except -1:
    """The elementwise-chain group kernel's body: run `program` writing `out` (any strides) from the tensors
    `inputs` (broadcast to out's shape), reading addresses and strides from the tensors directly."""
    cdef int nin = len(inputs), k, rc, code = out.dtype.code
    if nin > MAX_IO:
        raise ValueError(f"fused program: at most {MAX_IO} inputs")
    if code != PLAST_DT_F32 and code != PLAST_DT_F64:
        raise ValueError(f"fused program: float32 or float64 only, got {out.dtype}")
    if len(program) % 16:
        raise ValueError("fused program: length must be a multiple of 16 bytes (4 int32 per instruction)")
    cdef const int32_t *p = <const int32_t *><const char *>program
    cdef int ninstr = len(program) // 16
    _check(p, ninstr, nin, 1)
    cdef Py_ssize_t sh[MAXD]
    cdef Py_ssize_t ist[MAXD * 16]
    cdef Py_ssize_t ost[MAXD]
    cdef const char *ins[16]
    cdef char *outs[1]
    cdef int nd = fill_shape(out._shape, sh, MAXD)
    cdef Py_ssize_t n = 1
    for k in range(nd):
        n *= sh[k]
    if n == 0:
        return 0
    for k in range(nin):
        fill_bcast_strides(<TensorBase?>inputs[k], sh, nd, &ist[k * nd])
        ins[k] = tensor_ptr(<TensorBase>inputs[k])
    fill_bcast_strides(out, sh, nd, ost)
    outs[0] = tensor_ptr(out)
    cdef int simd = simd_level(), nt = num_threads()
    if n >= NOGIL_MIN_WORK:
        with nogil:
            rc = plast_fused_run(simd, nt, code, p, ninstr, nd, sh, nin, ins, ist, 1, outs, ost)
    else:
        rc = plast_fused_run(simd, nt, code, p, ninstr, nd, sh, nin, ins, ist, 1, outs, ost)
    if rc:
        raise ValueError(f"fused program: run failed (code {rc})")
    return 0


_CODES = {np.dtype(np.float32): PLAST_DT_F32, np.dtype(np.float64): PLAST_DT_F64}


def run_program(bytes program, inputs, outputs):
    """Test/bench entry: run `program` on numpy arrays. Inputs broadcast to the outputs' common shape; all
    arrays share one dtype (float32 or float64); outputs are written in place."""
    outputs = list(outputs)
    if not outputs:
        raise ValueError("fused program: needs at least one output")
    shape = outputs[0].shape
    dt = outputs[0].dtype
    if dt not in _CODES:
        raise TypeError(f"fused program: float32 or float64 arrays only, got {dt}")
    ins = []
    for a in inputs:
        a = np.asarray(a)
        if a.dtype != dt:
            raise TypeError(f"fused program: every array must be {dt}, got {a.dtype}")
        ins.append(np.broadcast_to(a, shape))
    for o in outputs:
        if o.shape != shape or o.dtype != dt:
            raise ValueError("fused program: outputs must share one shape and dtype")
    es = dt.itemsize
    for a in ins + outputs:
        if any(s % es for s in a.strides):
            raise ValueError("fused program: strides must be multiples of the item size")
    run_program_nd(
        program, _CODES[dt], shape,
        [a.__array_interface__["data"][0] for a in ins], [tuple(s // es for s in a.strides) for a in ins],
        [o.__array_interface__["data"][0] for o in outputs], [tuple(s // es for s in o.strides) for o in outputs],
    )


cdef class ChainKernel:
    """The elementwise-chain group kernel ``kernel(root, inputs, outputs, args)``: the chain's program (args[0])
    over the output's shape, here for host memory; `device_kernel` runs it elsewhere (a generated CUDA kernel)."""

    def __init__(self, device_kernel):
        self.device_kernel = device_kernel

    def __call__(self, root, inputs, outputs, args):
        self.run(root, inputs, outputs, args)

    cdef int run(self, object root, object inputs, object outputs, object args) except -1:
        cdef TensorBase out = <TensorBase?>outputs[0]
        if out.device.type == "cpu":
            chain_run(<bytes?>args[0], out, inputs)
        else:
            self.device_kernel(root, inputs, outputs, args)
        return 0
