/* Checked size arithmetic (issue 23): a tensor's element count and byte size are products of its dims, and a
 * product that wraps would hand a kernel a tiny buffer for a huge shape. Every size computation multiplies
 * through plast_mul_ovf, which reports the wrap instead. */
#ifndef PLAST_SIZES_H
#define PLAST_SIZES_H

#include <Python.h>

/* *r = a * b; nonzero when the product does not fit in a Py_ssize_t (then *r is unspecified). */
static inline int plast_mul_ovf(Py_ssize_t a, Py_ssize_t b, Py_ssize_t *r) { return __builtin_mul_overflow(a, b, r); }

#endif
