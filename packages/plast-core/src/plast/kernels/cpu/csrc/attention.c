#include "attention.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plast_omp.h"

/* Block sizes: a query block's scores (BQ x BK) and a packed key block stay in L1 for head dims up to 64. */
#define ATT_BQ 32
#define ATT_BK 64
/* Packed rows are padded to a multiple of 16 elements (one AVX-512 float vector), row counts to 4. */
#define PAD(n)  (((n) + 15) / 16 * 16)
#define PAD4(n) (((n) + 3) / 4 * 4)
/* Causal-mask modes of the block product (see AN(mm) in attention_body.h). */
#define AT_TRI_N      1
#define AT_TRI_KEND   2
#define AT_TRI_KBEGIN 3
/* Multiply-adds below which a call stays on one thread. */
#define GRAIN (1 << 16)

/* One call's shapes, derived sizes and operands (read by the level-generic body). */
typedef struct {
    ptrdiff_t B, H, L, S, D, Dv;
    ptrdiff_t DP, DVP, SP, LP; /* padded D, Dv, S, and L (to 4) */
    ptrdiff_t nqb, nkb;        /* query and key blocks */
    int causal;
    double scale;
    plast_attn_op q, k, v, out, lse, dout, dq, dk, dv;
    plast_attn_op kmask; /* bytes, nonzero = visible key; p == NULL: no mask */
} attn_ctx;

#define PLAST_VEC_BODY "attention_simd.h"
#include "vec_levels.h"

static int check_dims(int dtype, const plast_attn_dims *d) {
    if (dtype != PLAST_DT_F32 && dtype != PLAST_DT_F64) return PLAST_ATTN_EINVAL;
    if (d->B < 0 || d->H < 0 || d->L < 0 || d->S < 0 || d->D < 1 || d->Dv < 1) return PLAST_ATTN_EINVAL;
    if (!isfinite(d->scale)) return PLAST_ATTN_EINVAL;
    return PLAST_ATTN_OK;
}

static void ctx_init(attn_ctx *c, const plast_attn_dims *d) {
    memset(c, 0, sizeof *c);
    c->B = d->B;
    c->H = d->H;
    c->L = d->L;
    c->S = d->S;
    c->D = d->D;
    c->Dv = d->Dv;
    c->DP = PAD(d->D);
    c->DVP = PAD(d->Dv);
    c->SP = PAD(d->S);
    c->LP = PAD4(d->L);
    c->nqb = (d->L + ATT_BQ - 1) / ATT_BQ;
    c->nkb = (d->S + ATT_BK - 1) / ATT_BK;
    c->causal = d->causal != 0;
    c->scale = d->scale;
}

/* Threads for `tasks` tasks worth `work` multiply-adds in all. */
static int threads_for(int nthreads, double work, ptrdiff_t tasks) {
    if (nthreads <= 1 || tasks < 2 || work < 2.0 * GRAIN) return 1;
    double t = work / GRAIN;
    if (t < nthreads) nthreads = (int)t;
    return tasks < nthreads ? (int)tasks : nthreads;
}

/* Per-thread scratch, 64-byte aligned (NULL when it can't be had). */
static void *scratch_new(ptrdiff_t elems, size_t esize) {
    size_t bytes = ((size_t)elems * esize + 63) / 64 * 64;
    return aligned_alloc(64, bytes ? bytes : 64);
}

/* Thread tid of T's share of the forward tasks (part t % nparts of head t / nparts), with its own scratch. */
static void fwd_part(int simd, int dtype, const attn_ctx *c, ptrdiff_t need, size_t esize, ptrdiff_t nparts,
                     ptrdiff_t tasks, int *fail, int tid, int T) {
    void *scratch = scratch_new(need, esize);
    if (!scratch) {
#if PLAST_HAVE_OPENMP
#pragma omp atomic write
#endif
        *fail = 1;
    }
    ptrdiff_t lo, hi;
    plast_omp_range(tasks, tid, T, &lo, &hi);
    for (ptrdiff_t t = lo; t < hi; t++) {
        if (!scratch) continue;
        if (dtype == PLAST_DT_F32)
            PLAST_VEC_DISPATCH(fwd_task_f32, c, t / nparts, t % nparts, nparts, (float *)scratch);
        else PLAST_VEC_DISPATCH(fwd_task_f64, c, t / nparts, t % nparts, nparts, (double *)scratch);
    }
    free(scratch);
}

int plast_attn_fwd(int simd, int nthreads, int dtype, const plast_attn_dims *dims, plast_attn_op q, plast_attn_op k,
                   plast_attn_op v, plast_attn_op out, plast_attn_op lse) {
    plast_attn_op none;
    memset(&none, 0, sizeof none);
    return plast_attn_fwd_masked(simd, nthreads, dtype, dims, q, k, v, none, out, lse);
}

int plast_attn_fwd_masked(int simd, int nthreads, int dtype, const plast_attn_dims *dims, plast_attn_op q,
                          plast_attn_op k, plast_attn_op v, plast_attn_op kmask, plast_attn_op out, plast_attn_op lse) {
    int rc = check_dims(dtype, dims);
    if (rc) return rc;
    if (kmask.p && dims->causal) return PLAST_ATTN_EINVAL;
    attn_ctx c;
    ctx_init(&c, dims);
    c.q = q, c.k = k, c.v = v, c.out = out, c.lse = lse, c.kmask = kmask;
    const ptrdiff_t BH = c.B * c.H;
    if (BH == 0 || c.L == 0) return PLAST_ATTN_OK;
    double work = (double)BH * (double)c.L * (double)c.S * (double)(c.D + c.Dv) * (c.causal ? 0.5 : 1.0);
    /* split a head's query blocks (interleaved, so causal work stays even) only when heads alone can't fill
     * the threads: every part packs the head's keys again */
    int nt = threads_for(nthreads, work, BH * c.nqb);
    ptrdiff_t nparts = 1;
    if (BH < nt) nparts = (nt + BH - 1) / BH < c.nqb ? (nt + BH - 1) / BH : c.nqb;
    const ptrdiff_t tasks = BH * nparts;
    const size_t esize = dtype == PLAST_DT_F32 ? sizeof(float) : sizeof(double);
    const ptrdiff_t need = dtype == PLAST_DT_F32 ? fwd_scratch_f32_scalar(&c) : fwd_scratch_f64_scalar(&c);
    int fail = 0;
    PLAST_PARALLEL(nt, fwd_part, simd, dtype, &c, need, esize, nparts, tasks, &fail);
    return fail ? PLAST_ATTN_ENOMEM : PLAST_ATTN_OK;
}

/* Thread tid of T's share of the backward: whole heads, or (split) key blocks, then, once every thread is done
 * with those, query blocks. */
static void bwd_part(int simd, int dtype, const attn_ctx *c, ptrdiff_t need, size_t esize, int split, int *fail,
                     int tid, int T) {
    const ptrdiff_t BH = c->B * c->H;
    void *scratch = scratch_new(need, esize);
    if (!scratch) {
#if PLAST_HAVE_OPENMP
#pragma omp atomic write
#endif
        *fail = 1;
    }
    ptrdiff_t lo, hi;
    if (!split) {
        plast_omp_range(BH, tid, T, &lo, &hi);
        for (ptrdiff_t bh = lo; bh < hi; bh++) {
            if (!scratch) continue;
            if (dtype == PLAST_DT_F32) PLAST_VEC_DISPATCH(bwd_head_task_f32, c, bh, (float *)scratch);
            else PLAST_VEC_DISPATCH(bwd_head_task_f64, c, bh, (double *)scratch);
        }
    } else {
        const ptrdiff_t kv_tasks = BH * c->nkb, q_tasks = BH * c->nqb;
        plast_omp_range(kv_tasks, tid, T, &lo, &hi);
        for (ptrdiff_t t = lo; t < hi; t++) {
            if (!scratch) continue;
            if (dtype == PLAST_DT_F32) PLAST_VEC_DISPATCH(bwd_kv_task_f32, c, t / c->nkb, t % c->nkb, (float *)scratch);
            else PLAST_VEC_DISPATCH(bwd_kv_task_f64, c, t / c->nkb, t % c->nkb, (double *)scratch);
        }
#if PLAST_HAVE_OPENMP
        if (T > 1) {
#pragma omp barrier
        }
#endif
        plast_omp_range(q_tasks, tid, T, &lo, &hi);
        for (ptrdiff_t t = lo; t < hi; t++) {
            if (!scratch) continue;
            if (dtype == PLAST_DT_F32) PLAST_VEC_DISPATCH(bwd_q_task_f32, c, t / c->nqb, t % c->nqb, (float *)scratch);
            else PLAST_VEC_DISPATCH(bwd_q_task_f64, c, t / c->nqb, t % c->nqb, (double *)scratch);
        }
    }
    free(scratch);
}

int plast_attn_bwd(int simd, int nthreads, int dtype, const plast_attn_dims *dims, plast_attn_op q, plast_attn_op k,
                   plast_attn_op v, plast_attn_op out, plast_attn_op lse, plast_attn_op dout, plast_attn_op dq,
                   plast_attn_op dk, plast_attn_op dv) {
    int rc = check_dims(dtype, dims);
    if (rc) return rc;
    attn_ctx c;
    ctx_init(&c, dims);
    c.q = q, c.k = k, c.v = v, c.out = out, c.lse = lse, c.dout = dout, c.dq = dq, c.dk = dk, c.dv = dv;
    const ptrdiff_t BH = c.B * c.H;
    if (BH == 0) return PLAST_ATTN_OK;
    double work = 2.5 * (double)BH * (double)c.L * (double)c.S * (double)(c.D + c.Dv);
    work *= c.causal ? 0.5 : 1.0;
    int nt = threads_for(nthreads, work, BH * (c.nqb > c.nkb ? c.nqb : c.nkb));
    /* fewer heads than threads: dk/dv by (head, key block), then dq by (head, query block), so that no two
     * threads accumulate into the same gradient rows */
    const int split = BH < nt && c.L > 0 && c.S > 0;
    const size_t esize = dtype == PLAST_DT_F32 ? sizeof(float) : sizeof(double);
    const ptrdiff_t need = dtype == PLAST_DT_F32 ? bwd_scratch_f32_scalar(&c) : bwd_scratch_f64_scalar(&c);
    int fail = 0;
    PLAST_PARALLEL(nt, bwd_part, simd, dtype, &c, need, esize, split, &fail);
    return fail ? PLAST_ATTN_ENOMEM : PLAST_ATTN_OK;
}
