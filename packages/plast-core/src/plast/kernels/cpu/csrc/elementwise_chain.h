/* Fused elementwise chains: a small register bytecode evaluated tile by tile, so a chain of elementwise ops
 * reads each input once and writes each output once.
 *
 * A program is a sequence of instructions of four int32 words (op, dst, a, b):
 *   LOAD  r, k      r = input k (broadcast strides allowed: stride 0 makes r one repeated value)
 *   CONST r, lo, hi r = the float64 whose bits are hi:lo (rounded to the program's dtype)
 *   STORE k, r      output k = r
 *   binary  r, a, b r = a <op> b      (PLAST_FX_ADD + PLAST_BIN_*: add sub mul div max min pow floordiv ...)
 *   unary   r, a    r = op(a)         (PLAST_FX_UNARY + PLAST_UN_*: exp log tanh sigmoid relu gelu sin ...)
 * Registers hold one tile (2 KiB: 512 float32 or 256 float64) and stay in L1; a register loaded from an input
 * that is contiguous along the tile points at the input itself instead of copying it. The n-d driver
 * collapses dims, tiles the innermost one and splits tiles across OpenMP threads, each with its own registers.
 */
#ifndef PLAST_ELEMENTWISE_CHAIN_H
#define PLAST_ELEMENTWISE_CHAIN_H

#include <stddef.h>
#include <stdint.h>

#include "codes.h" /* PLAST_DT_*: the dtype codes (plast/_core/codes.h) */
#include "plast_simd.h"

#define PLAST_FX_MAX_REGS 16
#define PLAST_FX_MAX_IO   16

enum { PLAST_FX_LOAD = 0, PLAST_FX_CONST = 1, PLAST_FX_STORE = 2, PLAST_FX_ADD = 8, PLAST_FX_UNARY = 32 };

/* Checks a program against nin inputs / nout outputs: returns 0, or -(1 + index of the first bad instruction). */
int plast_fused_check(const int32_t *prog, int ninstr, int nin, int nout);

/* Runs a checked program over `shape` (strides in elements, one row of ndim per operand). dtype PLAST_DT_F32 or
 * PLAST_DT_F64. Returns 0, or a negative code (bad program, dtype or ndim). */
int plast_fused_run(int simd, int nthreads, int dtype, const int32_t *prog, int ninstr, int ndim,
                    const ptrdiff_t *shape, int nin, const char *const *ins, const ptrdiff_t *in_strides, int nout,
                    char *const *outs, const ptrdiff_t *out_strides);

#endif
