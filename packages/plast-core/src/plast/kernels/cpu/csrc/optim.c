#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if PLAST_HAVE_OPENMP
#include <omp.h>
#endif

/* Per-entry mode bits the bodies test (derived from the call's flags and the entry's hyperparameters). */
enum {
    OPT_M_MAXIMIZE = 1,
    OPT_M_WD = 2,    /* coupled weight decay: grad += wd * param */
    OPT_M_BUF = 4,   /* SGD momentum buffer */
    OPT_M_FRESH = 8, /* SGD: the buffer starts now */
    OPT_M_NESTEROV = 16,
    OPT_M_DECAY = 32, /* AdamW: param *= 1 - lr * wd */
    OPT_M_AMSGRAD = 64,
    OPT_M_CENTERED = 128,
    OPT_M_MOM = 256, /* RMSprop momentum */
};

/* float32 bodies at every level (with the helpers and dispatch macros of vec_levels.h), then float64 ones */
#define VT             float
#define PLAST_VEC_BODY "optim_simd.h"
#include "vec_levels.h"
#undef VT

#define VT double
#if PLAST_X86
#define VLEVEL 2
#include "vec_begin_f64.h"
#include "vec_begin_f64_more.h" /* vabs (Adamax) */
#include "optim_simd.h"
#include "vec_end.h"
#define VLEVEL 1
#include "vec_begin_f64.h"
#include "vec_begin_f64_more.h" /* vabs (Adamax) */
#include "optim_simd.h"
#include "vec_end.h"
#endif
#define VLEVEL 0
#include "vec_begin_f64.h"
#include "vec_begin_f64_more.h" /* vabs (Adamax) */
#include "optim_simd.h"
#include "vec_end.h"
#undef VT

/* Elements below which a call stays on one thread, and the size of the chunks threads take. */
#define PAR_MIN 65536
#define CHUNK   16384

#define NCOEF 10

typedef struct {
    double c[NCOEF];
    int mode;
} opt_coef;

static double read_scalar(const void *p, int dtype) {
    return dtype == PLAST_DT_F32 ? (double)*(const float *)p : *(const double *)p;
}

/* step += 1 in the counter's own dtype (as torch's `step_t += 1`); returns the new value */
static double bump(void *p, int dtype) {
    if (dtype == PLAST_DT_F32) return (double)(*(float *)p += 1.0f);
    return *(double *)p += 1.0;
}

static int valid_entry(int kind, int flags, const plast_opt_tensor *t, int nrows) {
    if (t->row < 0 || t->row >= nrows || t->n < 0) return 0;
    if (t->dtype != PLAST_DT_F32 && t->dtype != PLAST_DT_F64) return 0;
    int need_counter = kind != PLAST_OPT_SGD || (flags & PLAST_OPT_MOMENTUM);
    if (need_counter && (!t->counter || (t->counter_dtype != PLAST_DT_F32 && t->counter_dtype != PLAST_DT_F64)))
        return 0;
    if (kind == PLAST_OPT_NADAM && (!t->aux || (t->aux_dtype != PLAST_DT_F32 && t->aux_dtype != PLAST_DT_F64)))
        return 0;
    if (t->n == 0) return 1;
    if (!t->param || !t->grad) return 0;
    switch (kind) {
    case PLAST_OPT_SGD: return !(flags & PLAST_OPT_MOMENTUM) || t->state[0];
    case PLAST_OPT_ADAM: return t->state[0] && t->state[1] && (!(flags & PLAST_OPT_AMSGRAD) || t->state[2]);
    case PLAST_OPT_RMSPROP:
        return t->state[0] && (!(flags & PLAST_OPT_MOMENTUM) || t->state[1]) &&
               (!(flags & PLAST_OPT_CENTERED) || t->state[2]);
    case PLAST_OPT_ADAGRAD: return t->state[0] != NULL;
    case PLAST_OPT_ADADELTA:
    case PLAST_OPT_ADAMAX: return t->state[0] && t->state[1];
    case PLAST_OPT_NADAM: return t->state[0] && t->state[1];
    }
    return 0;
}

/* The serial part: counters and the per-entry scalars, in double as torch's Python code computes them. */
static void prepare(int kind, int flags, const double *hyper, const plast_opt_tensor *t, opt_coef *k) {
    const double *h = hyper + (ptrdiff_t)t->row * PLAST_OPT_HYPER_WIDTH;
    int mode = (flags & PLAST_OPT_MAXIMIZE) ? OPT_M_MAXIMIZE : 0;
    memset(k->c, 0, sizeof k->c);
    if (kind == PLAST_OPT_SGD) {
        double lr = h[0], momentum = h[1], dampening = h[2], wd = h[3];
        if (wd != 0) mode |= OPT_M_WD;
        if (flags & PLAST_OPT_MOMENTUM) {
            mode |= OPT_M_BUF;
            if (read_scalar(t->counter, t->counter_dtype) != 0) {
                mode |= OPT_M_FRESH;
                if (t->counter_dtype == PLAST_DT_F32) *(float *)t->counter = 0.0f;
                else *(double *)t->counter = 0.0;
            }
            if (flags & PLAST_OPT_NESTEROV) mode |= OPT_M_NESTEROV;
        }
        k->c[0] = -lr;
        k->c[1] = wd;
        k->c[2] = momentum;
        k->c[3] = 1 - dampening;
    } else if (kind == PLAST_OPT_ADAM) {
        double lr = h[0], beta1 = h[1], beta2 = h[2], eps = h[3], wd = h[4];
        double step = bump(t->counter, t->counter_dtype);
        if (wd != 0) mode |= (flags & PLAST_OPT_DECOUPLED) ? OPT_M_DECAY : OPT_M_WD;
        if (flags & PLAST_OPT_AMSGRAD) mode |= OPT_M_AMSGRAD;
        double bias_correction1 = 1 - pow(beta1, step);
        double bias_correction2 = 1 - pow(beta2, step);
        k->c[0] = 1 - lr * wd;
        k->c[1] = wd;
        k->c[2] = 1 - beta1;
        k->c[3] = beta2;
        k->c[4] = 1 - beta2;
        k->c[5] = pow(bias_correction2, 0.5); /* Python's `** 0.5` is pow, not sqrt */
        k->c[6] = eps;
        k->c[7] = -(lr / bias_correction1);
    } else if (kind == PLAST_OPT_RMSPROP) {
        double lr = h[0], alpha = h[1], eps = h[2], wd = h[3], momentum = h[4];
        bump(t->counter, t->counter_dtype);
        if (wd != 0) mode |= OPT_M_WD;
        if (flags & PLAST_OPT_CENTERED) mode |= OPT_M_CENTERED;
        if ((flags & PLAST_OPT_MOMENTUM) && momentum > 0) mode |= OPT_M_MOM;
        k->c[0] = wd;
        k->c[1] = alpha;
        k->c[2] = 1 - alpha;
        k->c[3] = eps;
        k->c[4] = momentum;
        k->c[5] = -lr;
    } else if (kind == PLAST_OPT_ADADELTA) {
        double lr = h[0], rho = h[1], eps = h[2], wd = h[3];
        bump(t->counter, t->counter_dtype);
        if (wd != 0) mode |= OPT_M_WD;
        k->c[0] = wd;
        k->c[1] = rho;
        k->c[2] = 1 - rho;
        k->c[3] = eps;
        k->c[4] = -lr;
    } else if (kind == PLAST_OPT_ADAGRAD) {
        double lr = h[0], lr_decay = h[1], wd = h[2], eps = h[3];
        double step = bump(t->counter, t->counter_dtype);
        if (wd != 0) mode |= OPT_M_WD;
        k->c[0] = wd;
        k->c[1] = eps;
        k->c[2] = -(lr / (1 + (step - 1) * lr_decay)); /* -clr, clr as torch's Python computes it */
    } else if (kind == PLAST_OPT_ADAMAX) {
        double lr = h[0], beta1 = h[1], beta2 = h[2], eps = h[3], wd = h[4];
        double step = bump(t->counter, t->counter_dtype);
        if (wd != 0) mode |= OPT_M_WD;
        k->c[0] = wd;
        k->c[1] = 1 - beta1;
        k->c[2] = beta2;
        k->c[3] = eps;
        k->c[4] = -(lr / (1 - pow(beta1, step)));
    } else {
        double lr = h[0], beta1 = h[1], beta2 = h[2], eps = h[3], wd = h[4], md = h[5];
        double step = bump(t->counter, t->counter_dtype);
        if (wd != 0) mode |= (flags & PLAST_OPT_DECOUPLED) ? OPT_M_DECAY : OPT_M_WD;
        double mu = beta1 * (1.0 - 0.5 * pow(0.96, step * md));
        double mu_next = beta1 * (1.0 - 0.5 * pow(0.96, (step + 1) * md));
        /* mu_product *= mu in the tensor's own dtype (torch multiplies the 0-d tensor by a Python float), then
         * read back as a Python float */
        if (t->aux_dtype == PLAST_DT_F32) *(float *)t->aux *= (float)mu;
        else *(double *)t->aux *= mu;
        double mu_product = read_scalar(t->aux, t->aux_dtype);
        double mu_product_next = mu_product * mu_next;
        k->c[0] = 1 - lr * wd;
        k->c[1] = wd;
        k->c[2] = 1 - beta1;
        k->c[3] = beta2;
        k->c[4] = 1 - beta2;
        k->c[5] = 1 - pow(beta2, step); /* bias_correction2 */
        k->c[6] = eps;
        k->c[7] = -lr * (1.0 - mu) / (1.0 - mu_product);
        k->c[8] = -lr * mu_next / (1.0 - mu_product_next);
    }
    k->mode = mode;
}

/* elements [lo, hi) of entry t */
static void run_range(int simd, int kind, const plast_opt_tensor *t, const opt_coef *k, ptrdiff_t lo, ptrdiff_t hi) {
    (void)simd; /* only the scalar path exists off x86 */
    if (lo >= hi) return;
    if (t->dtype == PLAST_DT_F32) {
        float *p = t->param, *s0 = t->state[0], *s1 = t->state[1], *s2 = t->state[2];
        const float *g = t->grad;
        switch (kind) {
        case PLAST_OPT_SGD: PLAST_VEC_DISPATCH(opt_sgd, p, g, s0, lo, hi, k->mode, k->c); break;
        case PLAST_OPT_ADAM: PLAST_VEC_DISPATCH(opt_adam, p, g, s0, s1, s2, lo, hi, k->mode, k->c); break;
        case PLAST_OPT_RMSPROP: PLAST_VEC_DISPATCH(opt_rms, p, g, s0, s1, s2, lo, hi, k->mode, k->c); break;
        case PLAST_OPT_ADADELTA: PLAST_VEC_DISPATCH(opt_adadelta, p, g, s0, s1, lo, hi, k->mode, k->c); break;
        case PLAST_OPT_ADAGRAD: PLAST_VEC_DISPATCH(opt_adagrad, p, g, s0, lo, hi, k->mode, k->c); break;
        case PLAST_OPT_ADAMAX: PLAST_VEC_DISPATCH(opt_adamax, p, g, s0, s1, lo, hi, k->mode, k->c); break;
        default: PLAST_VEC_DISPATCH(opt_nadam, p, g, s0, s1, lo, hi, k->mode, k->c); break;
        }
    } else {
        double *p = t->param, *s0 = t->state[0], *s1 = t->state[1], *s2 = t->state[2];
        const double *g = t->grad;
        switch (kind) {
        case PLAST_OPT_SGD: PLAST_VEC_DISPATCH(opt_sgd_f64, p, g, s0, lo, hi, k->mode, k->c); break;
        case PLAST_OPT_ADAM: PLAST_VEC_DISPATCH(opt_adam_f64, p, g, s0, s1, s2, lo, hi, k->mode, k->c); break;
        case PLAST_OPT_RMSPROP: PLAST_VEC_DISPATCH(opt_rms_f64, p, g, s0, s1, s2, lo, hi, k->mode, k->c); break;
        case PLAST_OPT_ADADELTA: PLAST_VEC_DISPATCH(opt_adadelta_f64, p, g, s0, s1, lo, hi, k->mode, k->c); break;
        case PLAST_OPT_ADAGRAD: PLAST_VEC_DISPATCH(opt_adagrad_f64, p, g, s0, lo, hi, k->mode, k->c); break;
        case PLAST_OPT_ADAMAX: PLAST_VEC_DISPATCH(opt_adamax_f64, p, g, s0, s1, lo, hi, k->mode, k->c); break;
        default: PLAST_VEC_DISPATCH(opt_nadam_f64, p, g, s0, s1, lo, hi, k->mode, k->c); break;
        }
    }
}

int plast_optim_update(int simd, int nthreads, int kind, int flags, const double *hyper, int nrows,
                       const plast_opt_tensor *ts, ptrdiff_t count) {
    if (kind < PLAST_OPT_SGD || kind > PLAST_OPT_NADAM) return -1;
    if (count <= 0) return 0;
    if (!ts || !hyper || nrows <= 0) return -1;
    ptrdiff_t total = 0;
    for (ptrdiff_t i = 0; i < count; i++) {
        if (!valid_entry(kind, flags, &ts[i], nrows)) return -1;
        total += ts[i].n;
    }
    opt_coef stack[16];
    opt_coef *k = count <= 16 ? stack : malloc((size_t)count * sizeof(opt_coef));
    if (!k) return -2;
    for (ptrdiff_t i = 0; i < count; i++) prepare(kind, flags, hyper, &ts[i], &k[i]);

    int nt = 1;
    if (nthreads > 1 && total >= PAR_MIN) {
        ptrdiff_t want = total / (2 * CHUNK); /* at least two chunks a thread */
        nt = want < nthreads ? (int)want : nthreads;
    }
    if (nt <= 1) {
        for (ptrdiff_t i = 0; i < count; i++) run_range(simd, kind, &ts[i], &k[i], 0, ts[i].n);
    } else {
        /* chunk c of the whole call is chunk c - first[i] of entry i */
        ptrdiff_t *first = malloc((size_t)(count + 1) * sizeof(ptrdiff_t));
        if (!first) {
            if (k != stack) free(k);
            return -2;
        }
        first[0] = 0;
        for (ptrdiff_t i = 0; i < count; i++) first[i + 1] = first[i] + (ts[i].n + CHUNK - 1) / CHUNK;
        ptrdiff_t chunks = first[count];
#if PLAST_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
#endif
        for (ptrdiff_t c = 0; c < chunks; c++) {
            ptrdiff_t lo = 0, hi = count; /* the entry whose chunks hold c: first[i] <= c < first[i + 1] */
            while (hi - lo > 1) {
                ptrdiff_t mid = (lo + hi) / 2;
                if (first[mid] <= c) lo = mid;
                else hi = mid;
            }
            ptrdiff_t start = (c - first[lo]) * CHUNK;
            ptrdiff_t end = start + CHUNK < ts[lo].n ? start + CHUNK : ts[lo].n;
            run_range(simd, kind, &ts[lo], &k[lo], start, end);
        }
        free(first);
    }
    if (k != stack) free(k);
    return 0;
}
