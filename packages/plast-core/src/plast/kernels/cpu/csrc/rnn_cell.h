/* Fused pointwise LSTM and GRU cells: the gate math of one time step, forward and backward, in one pass over the
 * rows (the GEMMs that make the gate pre-activations run before, in gemm.c).
 *
 * Gate order and formulas are torch's. LSTM: gates = gx + gh, (N, 4H) in the order i, f, g, o;
 *   c = sigmoid(f) * c0 + sigmoid(i) * tanh(g),  h = sigmoid(o) * tanh(c).
 * GRU: gx, gh (N, 3H) in the order r, z, n (gh = h0 @ W_hh^T + b_hh, so the reset gate scales its bias too);
 *   r = sigmoid(gx_r + gh_r), z = sigmoid(gx_z + gh_z), n = tanh(gx_n + r * gh_n),  h = n + z * (h0 - n).
 * The backward passes recompute the gate activations from the same inputs (a few exp per element, cheaper than
 * keeping an (N, 4H) workspace alive through the step) and write every input gradient at once.
 *
 * Inputs are rows of H (or 3H, 4H) contiguous elements with a row stride (elements); outputs are contiguous.
 * dh / dc may be NULL in the LSTM backward (that output got no gradient: zeros). float32 runs the vector math
 * of vmath_simd.h at the level `simd`; float64 runs libm. Each entry returns 0, or -1 for a bad size.
 */
#ifndef PLAST_RNN_CELL_H
#define PLAST_RNN_CELL_H

#include <stddef.h>

#include "plast_simd.h"

int plast_lstm_cell_f32(int simd, int nthreads, ptrdiff_t n, ptrdiff_t hsz, const float *gx, ptrdiff_t gx_row,
                        const float *gh, ptrdiff_t gh_row, const float *c0, ptrdiff_t c0_row, float *h, float *c);
int plast_lstm_cell_f64(int nthreads, ptrdiff_t n, ptrdiff_t hsz, const double *gx, ptrdiff_t gx_row, const double *gh,
                        ptrdiff_t gh_row, const double *c0, ptrdiff_t c0_row, double *h, double *c);
/* dgates (N, 4H): the gradient of gx and of gh alike; dc0 (N, H) */
int plast_lstm_cell_bw_f32(int simd, int nthreads, ptrdiff_t n, ptrdiff_t hsz, const float *gx, ptrdiff_t gx_row,
                           const float *gh, ptrdiff_t gh_row, const float *c0, ptrdiff_t c0_row, const float *dh,
                           ptrdiff_t dh_row, const float *dc, ptrdiff_t dc_row, float *dgates, float *dc0);
int plast_lstm_cell_bw_f64(int nthreads, ptrdiff_t n, ptrdiff_t hsz, const double *gx, ptrdiff_t gx_row,
                           const double *gh, ptrdiff_t gh_row, const double *c0, ptrdiff_t c0_row, const double *dh,
                           ptrdiff_t dh_row, const double *dc, ptrdiff_t dc_row, double *dgates, double *dc0);

int plast_gru_cell_f32(int simd, int nthreads, ptrdiff_t n, ptrdiff_t hsz, const float *gx, ptrdiff_t gx_row,
                       const float *gh, ptrdiff_t gh_row, const float *h0, ptrdiff_t h0_row, float *h);
int plast_gru_cell_f64(int nthreads, ptrdiff_t n, ptrdiff_t hsz, const double *gx, ptrdiff_t gx_row, const double *gh,
                       ptrdiff_t gh_row, const double *h0, ptrdiff_t h0_row, double *h);
/* dgx, dgh (N, 3H) (they differ in the n gate: dgh_n = dgx_n * r), dh0 (N, H) */
int plast_gru_cell_bw_f32(int simd, int nthreads, ptrdiff_t n, ptrdiff_t hsz, const float *gx, ptrdiff_t gx_row,
                          const float *gh, ptrdiff_t gh_row, const float *h0, ptrdiff_t h0_row, const float *dh,
                          ptrdiff_t dh_row, float *dgx, float *dgh, float *dh0);
int plast_gru_cell_bw_f64(int nthreads, ptrdiff_t n, ptrdiff_t hsz, const double *gx, ptrdiff_t gx_row,
                          const double *gh, ptrdiff_t gh_row, const double *h0, ptrdiff_t h0_row, const double *dh,
                          ptrdiff_t dh_row, double *dgx, double *dgh, double *dh0);

#endif
