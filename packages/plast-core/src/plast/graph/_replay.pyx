# cython: boundscheck=True, wraparound=True
"""The player of recorded kernel steps, compiled (DESIGN §2.5): ``@plast.jit`` plans and the eager backward
replays (autograd/backward_replay.py) both run their tapes here.

A recorded plan is a list of kernel calls on fixed tensors. Here each call becomes a small C-struct step: the
common CPU kernels (elementwise binary ops, same-dtype copies, GEMMs with their epilogues, fused elementwise
chains, sums) run through C entry points of their Cython modules with no Python call at all; every other kernel is called as
``kernel(node, inputs, outputs)``. A step reads its tensors' storages when it runs, not when it is built, so
arguments rebound before a replay (_jit/trace.py) are seen.
"""

cimport cython

from plast.kernels.cpu._fused cimport chain_run
from plast.kernels.cpu._kernels cimport binary_run, copy_run
from plast.kernels.cpu._matmul cimport matmul_run
from plast.kernels.cpu.fastpath cimport SumKernel
from .._core._structs cimport TensorBase
from .._core.codes cimport PLAST_DT_BOOL
from ._timing cimport add_time, now_ns, timing_flag

from plast.kernels.cpu import _kernels, _matmul
from plast.kernels.cpu import kernels as _K
from plast.kernels.cpu import kernels_fused as _KF
from plast.kernels.cpu import kernels_nn as _KN
from . import _timing as _timing_mod
from . import chains as _chains

cdef int *_timing = timing_flag()  # nonzero while plast.profiler counts kernel time


cdef class _Step:
    cdef object kernel, node, inputs, outputs  # the Python call, also the fallback of the compiled steps

    cdef int run(self) except -1:
        self.kernel(self.node, self.inputs, self.outputs)
        return 0


@cython.final
cdef class _BinaryStep(_Step):
    cdef int op
    cdef TensorBase a, b, out

    cdef int run(self) except -1:
        return binary_run(self.op, self.a, self.b, self.out)


@cython.final
cdef class _CopyStep(_Step):
    cdef TensorBase x, out

    cdef int run(self) except -1:
        if not copy_run(self.x, self.out):
            self.kernel(self.node, self.inputs, self.outputs)
        return 0


@cython.final
cdef class _MatmulStep(_Step):
    cdef TensorBase out, a, b, bias
    cdef int act
    cdef double alpha

    cdef int run(self) except -1:
        if not matmul_run(self.out, self.a, self.b, self.bias, self.act, self.alpha, 0.0):
            self.kernel(self.node, self.inputs, self.outputs)
        return 0


@cython.final
cdef class _ChainStep(_Step):
    cdef bytes program
    cdef TensorBase out

    cdef int run(self) except -1:
        return chain_run(self.program, self.out, self.inputs)


@cython.final
cdef class _SumStep(_Step):
    cdef SumKernel sum

    cdef int run(self) except -1:
        return self.sum.run(self.node, self.inputs, self.outputs)


cdef _Step _compile(object kernel, object node, object inputs, object outputs):
    cdef _Step s
    cdef bint cpu = all([o.device.type == "cpu" for o in outputs]) and all([x.device.type == "cpu" for x in inputs])
    if not cpu:  # another device's kernels keep their own calls (and the CUDA backend may replay them as a graph)
        s = _Step.__new__(_Step)
    elif kernel is _K.binary and len(outputs) == 1 and outputs[0].dtype.code != PLAST_DT_BOOL:
        s = _BinaryStep.__new__(_BinaryStep)
        (<_BinaryStep>s).op = _kernels.BINARY_CODES[node.op.name]
        (<_BinaryStep>s).a, (<_BinaryStep>s).b = inputs[0], inputs[1]
        (<_BinaryStep>s).out = outputs[0]
    elif kernel is _K.copy and len(outputs) == 1 and len(inputs) == 1:
        s = _CopyStep.__new__(_CopyStep)
        (<_CopyStep>s).x, (<_CopyStep>s).out = inputs[0], outputs[0]
    elif kernel is _K.matmul_nd:
        s = _MatmulStep.__new__(_MatmulStep)
        (<_MatmulStep>s).out, (<_MatmulStep>s).a, (<_MatmulStep>s).b = outputs[0], inputs[0], inputs[1]
        (<_MatmulStep>s).alpha = 1.0
    elif kernel is _KN.addmm and node.args[0] in (0, 1):
        s = _MatmulStep.__new__(_MatmulStep)
        (<_MatmulStep>s).out, (<_MatmulStep>s).a, (<_MatmulStep>s).b = outputs[0], inputs[1], inputs[2]
        (<_MatmulStep>s).bias = inputs[0] if node.args[0] == 1 else None
        (<_MatmulStep>s).alpha = float(node.args[1])
    elif type(kernel).__name__ == "_GroupKernel" and kernel.kernel is _KF.addmm_act:
        s = _MatmulStep.__new__(_MatmulStep)
        (<_MatmulStep>s).out, (<_MatmulStep>s).a, (<_MatmulStep>s).b = outputs[0], inputs[1], inputs[2]
        (<_MatmulStep>s).bias = inputs[0]
        (<_MatmulStep>s).act = _matmul.ACT_CODES[kernel.args[0] or "none"]
        (<_MatmulStep>s).alpha = 1.0
    elif type(kernel).__name__ == "_GroupKernel" and kernel.kernel is _chains.kernel and len(outputs) == 1:
        s = _ChainStep.__new__(_ChainStep)
        (<_ChainStep>s).program = kernel.args[0]
        (<_ChainStep>s).out = outputs[0]
    elif type(kernel) is SumKernel:
        s = _SumStep.__new__(_SumStep)
        (<_SumStep>s).sum = kernel
    else:
        s = _Step.__new__(_Step)
    s.kernel, s.node, s.inputs, s.outputs = kernel, node, inputs, outputs
    return s


def compile_steps(steps):
    """The compiled form of a plan's steps (_jit/trace.py Step: kernel, node, inputs, outputs)."""
    return [_compile(st.kernel, st.node, st.inputs, st.outputs) for st in steps]


def run(list compiled):
    """Run a compiled plan's steps in order."""
    cdef _Step s
    cdef unsigned long long t0
    if _timing[0]:
        for x in compiled:
            s = <_Step>x
            t0 = now_ns()
            s.run()
            add_time(_timing_mod.step_key(s.kernel, s.node, s.outputs), t0)
        return
    for x in compiled:
        s = <_Step>x
        s.run()
