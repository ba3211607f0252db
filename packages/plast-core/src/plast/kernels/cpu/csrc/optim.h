/* Fused optimizer updates (SGD, Adam/AdamW, RMSprop, Adadelta, Adagrad, Adamax, NAdam): one call updates every parameter of an optimizer step and
 * its state in place, float32 and float64.
 *
 * The caller passes a table with one entry per parameter (addresses of the parameter, its gradient, its state
 * buffers and its step counter, the element count, which hyperparameter row it uses) and the rows themselves.
 * The arithmetic follows torch's single-tensor CPU kernels operation by operation in the parameter's dtype
 * (FMA where torch's vectorized kernels use one), with the scalars computed in double as torch's Python code
 * does. Small totals run on one thread; large ones are split into chunks across OpenMP threads.
 */
#ifndef PLAST_OPTIM_H
#define PLAST_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "codes.h" /* PLAST_OPT_*: the update kinds and flags; PLAST_DT_*: the dtypes (plast/_core/codes.h) */
#include "plast_simd.h"

#define PLAST_OPT_HYPER_WIDTH 6 /* doubles per hyperparameter row (the widest rule, NAdam's, uses all 6) */

/* One parameter. State buffers by kind:
 *   SGD:     state[0] momentum buffer; counter: the "fresh" flag (nonzero: the buffer takes the gradient as
 *            is, as torch's first step does; cleared by the update)
 *   Adam:    state[0] exp_avg, state[1] exp_avg_sq, state[2] max_exp_avg_sq (amsgrad); counter: step
 *   RMSprop: state[0] square_avg, state[1] momentum buffer, state[2] grad_avg (centered); counter: step
 *   Adadelta: state[0] square_avg, state[1] acc_delta; counter: step
 *   Adagrad: state[0] sum; counter: step
 *   Adamax:  state[0] exp_avg, state[1] exp_inf; counter: step
 *   NAdam:   state[0] exp_avg, state[1] exp_avg_sq; counter: step; aux: mu_product (a one-element tensor of its
 *            own dtype, as torch keeps it in the default dtype whatever the parameter's)
 * Unused pointers may be NULL. */
typedef struct {
    void *param;
    const void *grad;
    void *state[3];
    void *counter; /* one element of counter_dtype */
    void *aux;     /* one element of aux_dtype (NAdam's mu_product), else NULL */
    ptrdiff_t n;   /* elements of param, grad and each state buffer (all dense, one layout) */
    int32_t row;   /* hyperparameter row */
    int8_t dtype;  /* PLAST_DT_F32 / PLAST_DT_F64: param, grad and state */
    int8_t counter_dtype;
    int8_t aux_dtype;
} plast_opt_tensor;

/* Hyperparameter rows (PLAST_OPT_HYPER_WIDTH doubles each):
 *   SGD [lr, momentum, dampening, weight_decay], Adam [lr, beta1, beta2, eps, weight_decay],
 *   RMSprop [lr, alpha, eps, weight_decay, momentum], Adadelta [lr, rho, eps, weight_decay],
 *   Adagrad [lr, lr_decay, weight_decay, eps], Adamax [lr, beta1, beta2, eps, weight_decay],
 *   NAdam [lr, beta1, beta2, eps, weight_decay, momentum_decay].
 * Returns 0; -1 for a bad kind, dtype, row or missing pointer (nothing is written then); -2 out of memory. */
int plast_optim_update(int simd, int nthreads, int kind, int flags, const double *hyper, int nrows,
                       const plast_opt_tensor *ts, ptrdiff_t count);

#endif /* PLAST_OPTIM_H */
