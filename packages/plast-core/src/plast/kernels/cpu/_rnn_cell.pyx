# cython: language_level=3
# distutils: sources = src/plast/kernels/cpu/csrc/rnn_cell.c
# distutils: depends = src/plast/kernels/cpu/csrc/rnn_cell.h src/plast/kernels/cpu/csrc/rnn_cell_simd.h src/plast/kernels/cpu/csrc/vmath_simd.h
"""Thin wrappers over the fused LSTM / GRU cell kernels (csrc/rnn_cell.c), float32 and float64.

Operands are raw addresses of (n, G * hsz) or (n, hsz) row-major matrices with a row stride in elements (inputs;
outputs are contiguous). An absent gradient is address 0. The calls pass the SIMD level and a thread count from
_runtime, and release the GIL from NOGIL_MIN_WORK elements; kernels_rnn.py lays the tensors out.
"""

from libc.stdint cimport uintptr_t

from plast.kernels.cpu._runtime cimport NOGIL_MIN_WORK, float_is64, simd_level, threads_for
from plast._core.codes cimport PLAST_DT_F32, PLAST_DT_F64

cdef extern from "rnn_cell.h" nogil:
    int plast_lstm_cell_f32(int simd, int nthreads, Py_ssize_t n, Py_ssize_t hsz, const float *gx,
                            Py_ssize_t gx_row, const float *gh, Py_ssize_t gh_row, const float *c0,
                            Py_ssize_t c0_row, float *h, float *c)
    int plast_lstm_cell_f64(int nthreads, Py_ssize_t n, Py_ssize_t hsz, const double *gx, Py_ssize_t gx_row,
                            const double *gh, Py_ssize_t gh_row, const double *c0, Py_ssize_t c0_row, double *h,
                            double *c)
    int plast_lstm_cell_bw_f32(int simd, int nthreads, Py_ssize_t n, Py_ssize_t hsz, const float *gx,
                               Py_ssize_t gx_row, const float *gh, Py_ssize_t gh_row, const float *c0,
                               Py_ssize_t c0_row, const float *dh, Py_ssize_t dh_row, const float *dc,
                               Py_ssize_t dc_row, float *dgates, float *dc0)
    int plast_lstm_cell_bw_f64(int nthreads, Py_ssize_t n, Py_ssize_t hsz, const double *gx, Py_ssize_t gx_row,
                               const double *gh, Py_ssize_t gh_row, const double *c0, Py_ssize_t c0_row,
                               const double *dh, Py_ssize_t dh_row, const double *dc, Py_ssize_t dc_row,
                               double *dgates, double *dc0)
    int plast_gru_cell_f32(int simd, int nthreads, Py_ssize_t n, Py_ssize_t hsz, const float *gx,
                           Py_ssize_t gx_row, const float *gh, Py_ssize_t gh_row, const float *h0,
                           Py_ssize_t h0_row, float *h)
    int plast_gru_cell_f64(int nthreads, Py_ssize_t n, Py_ssize_t hsz, const double *gx, Py_ssize_t gx_row,
                           const double *gh, Py_ssize_t gh_row, const double *h0, Py_ssize_t h0_row, double *h)
    int plast_gru_cell_bw_f32(int simd, int nthreads, Py_ssize_t n, Py_ssize_t hsz, const float *gx,
                              Py_ssize_t gx_row, const float *gh, Py_ssize_t gh_row, const float *h0,
                              Py_ssize_t h0_row, const float *dh, Py_ssize_t dh_row, float *dgx, float *dgh,
                              float *dh0)
    int plast_gru_cell_bw_f64(int nthreads, Py_ssize_t n, Py_ssize_t hsz, const double *gx, Py_ssize_t gx_row,
                              const double *gh, Py_ssize_t gh_row, const double *h0, Py_ssize_t h0_row,
                              const double *dh, Py_ssize_t dh_row, double *dgx, double *dgh, double *dh0)

F32, F64 = PLAST_DT_F32, PLAST_DT_F64

# NOTE: a row of one cell is a few hundred transcendental functions at most; below this many rows' worth of
# elements per thread a second thread costs more to wake than it saves (a small batch's step is microseconds)
cdef enum:
    _GRAIN = 8192


cdef _check(int rc, str what):
    if rc != 0:
        raise ValueError(f"{what}: bad sizes or strides (code {rc})")


cdef int _lstm(bint f64, int simd, int nt, Py_ssize_t n, Py_ssize_t hsz, uintptr_t gx, Py_ssize_t gx_row,
               uintptr_t gh, Py_ssize_t gh_row, uintptr_t c0, Py_ssize_t c0_row, uintptr_t h,
               uintptr_t c) noexcept nogil:
    if f64:
        return plast_lstm_cell_f64(nt, n, hsz, <const double *>gx, gx_row, <const double *>gh, gh_row,
                                   <const double *>c0, c0_row, <double *>h, <double *>c)
    return plast_lstm_cell_f32(simd, nt, n, hsz, <const float *>gx, gx_row, <const float *>gh, gh_row,
                               <const float *>c0, c0_row, <float *>h, <float *>c)


def lstm_cell(Py_ssize_t n, Py_ssize_t hsz, uintptr_t gx, Py_ssize_t gx_row, uintptr_t gh, Py_ssize_t gh_row,
              uintptr_t c0, Py_ssize_t c0_row, uintptr_t h, uintptr_t c, int dtype=F32):
    """h, c (n, hsz) of an LSTM step from the gate pre-activations gx + gh (n, 4 hsz) and c0."""
    cdef bint f64 = float_is64(dtype, "lstm_cell kernel")
    cdef int rc, simd = simd_level(), nt = threads_for(n * hsz, _GRAIN)
    if n * hsz >= NOGIL_MIN_WORK:
        with nogil:
            rc = _lstm(f64, simd, nt, n, hsz, gx, gx_row, gh, gh_row, c0, c0_row, h, c)
    else:
        rc = _lstm(f64, simd, nt, n, hsz, gx, gx_row, gh, gh_row, c0, c0_row, h, c)
    _check(rc, "lstm_cell kernel")


cdef int _lstm_bw(bint f64, int simd, int nt, Py_ssize_t n, Py_ssize_t hsz, uintptr_t gx, Py_ssize_t gx_row,
                  uintptr_t gh, Py_ssize_t gh_row, uintptr_t c0, Py_ssize_t c0_row, uintptr_t dh,
                  Py_ssize_t dh_row, uintptr_t dc, Py_ssize_t dc_row, uintptr_t dg, uintptr_t dc0) noexcept nogil:
    if f64:
        return plast_lstm_cell_bw_f64(nt, n, hsz, <const double *>gx, gx_row, <const double *>gh, gh_row,
                                      <const double *>c0, c0_row, <const double *>dh, dh_row,
                                      <const double *>dc, dc_row, <double *>dg, <double *>dc0)
    return plast_lstm_cell_bw_f32(simd, nt, n, hsz, <const float *>gx, gx_row, <const float *>gh, gh_row,
                                  <const float *>c0, c0_row, <const float *>dh, dh_row, <const float *>dc,
                                  dc_row, <float *>dg, <float *>dc0)


def lstm_cell_bw(Py_ssize_t n, Py_ssize_t hsz, uintptr_t gx, Py_ssize_t gx_row, uintptr_t gh, Py_ssize_t gh_row,
                 uintptr_t c0, Py_ssize_t c0_row, uintptr_t dh, Py_ssize_t dh_row, uintptr_t dc, Py_ssize_t dc_row,
                 uintptr_t dgates, uintptr_t dc0, int dtype=F32):
    """d(gates) (n, 4 hsz) and d(c0) (n, hsz) from dh, dc (either may be 0: no gradient)."""
    cdef bint f64 = float_is64(dtype, "lstm_cell backward kernel")
    cdef int rc, simd = simd_level(), nt = threads_for(n * hsz, _GRAIN)
    if n * hsz >= NOGIL_MIN_WORK:
        with nogil:
            rc = _lstm_bw(f64, simd, nt, n, hsz, gx, gx_row, gh, gh_row, c0, c0_row, dh, dh_row, dc, dc_row,
                          dgates, dc0)
    else:
        rc = _lstm_bw(f64, simd, nt, n, hsz, gx, gx_row, gh, gh_row, c0, c0_row, dh, dh_row, dc, dc_row,
                      dgates, dc0)
    _check(rc, "lstm_cell backward kernel")


cdef int _gru(bint f64, int simd, int nt, Py_ssize_t n, Py_ssize_t hsz, uintptr_t gx, Py_ssize_t gx_row,
              uintptr_t gh, Py_ssize_t gh_row, uintptr_t h0, Py_ssize_t h0_row, uintptr_t h) noexcept nogil:
    if f64:
        return plast_gru_cell_f64(nt, n, hsz, <const double *>gx, gx_row, <const double *>gh, gh_row,
                                  <const double *>h0, h0_row, <double *>h)
    return plast_gru_cell_f32(simd, nt, n, hsz, <const float *>gx, gx_row, <const float *>gh, gh_row,
                              <const float *>h0, h0_row, <float *>h)


def gru_cell(Py_ssize_t n, Py_ssize_t hsz, uintptr_t gx, Py_ssize_t gx_row, uintptr_t gh, Py_ssize_t gh_row,
             uintptr_t h0, Py_ssize_t h0_row, uintptr_t h, int dtype=F32):
    """h (n, hsz) of a GRU step from gx, gh (n, 3 hsz) and h0."""
    cdef bint f64 = float_is64(dtype, "gru_cell kernel")
    cdef int rc, simd = simd_level(), nt = threads_for(n * hsz, _GRAIN)
    if n * hsz >= NOGIL_MIN_WORK:
        with nogil:
            rc = _gru(f64, simd, nt, n, hsz, gx, gx_row, gh, gh_row, h0, h0_row, h)
    else:
        rc = _gru(f64, simd, nt, n, hsz, gx, gx_row, gh, gh_row, h0, h0_row, h)
    _check(rc, "gru_cell kernel")


cdef int _gru_bw(bint f64, int simd, int nt, Py_ssize_t n, Py_ssize_t hsz, uintptr_t gx, Py_ssize_t gx_row,
                 uintptr_t gh, Py_ssize_t gh_row, uintptr_t h0, Py_ssize_t h0_row, uintptr_t dh, Py_ssize_t dh_row,
                 uintptr_t dgx, uintptr_t dgh, uintptr_t dh0) noexcept nogil:
    if f64:
        return plast_gru_cell_bw_f64(nt, n, hsz, <const double *>gx, gx_row, <const double *>gh, gh_row,
                                     <const double *>h0, h0_row, <const double *>dh, dh_row, <double *>dgx,
                                     <double *>dgh, <double *>dh0)
    return plast_gru_cell_bw_f32(simd, nt, n, hsz, <const float *>gx, gx_row, <const float *>gh, gh_row,
                                 <const float *>h0, h0_row, <const float *>dh, dh_row, <float *>dgx, <float *>dgh,
                                 <float *>dh0)


def gru_cell_bw(Py_ssize_t n, Py_ssize_t hsz, uintptr_t gx, Py_ssize_t gx_row, uintptr_t gh, Py_ssize_t gh_row,
                uintptr_t h0, Py_ssize_t h0_row, uintptr_t dh, Py_ssize_t dh_row, uintptr_t dgx, uintptr_t dgh,
                uintptr_t dh0, int dtype=F32):
    """d(gx), d(gh) (n, 3 hsz) and d(h0) (n, hsz) from dh."""
    cdef bint f64 = float_is64(dtype, "gru_cell backward kernel")
    cdef int rc, simd = simd_level(), nt = threads_for(n * hsz, _GRAIN)
    if n * hsz >= NOGIL_MIN_WORK:
        with nogil:
            rc = _gru_bw(f64, simd, nt, n, hsz, gx, gx_row, gh, gh_row, h0, h0_row, dh, dh_row, dgx, dgh, dh0)
    else:
        rc = _gru_bw(f64, simd, nt, n, hsz, gx, gx_row, gh, gh_row, h0, h0_row, dh, dh_row, dgx, dgh, dh0)
    _check(rc, "gru_cell backward kernel")
