#include "elementwise_chain.h"

#include <string.h>

#include "elementwise.h"
#include "plast_omp.h"
#include "unary.h"

#define TILE_BYTES 2048
/* tiles per task: enough work per OpenMP iteration, few enough tasks to balance */
#define MAX_NDIM 16

int plast_fused_check(const int32_t *prog, int ninstr, int nin, int nout) {
    int written[PLAST_FX_MAX_REGS] = {0};
    for (int i = 0; i < ninstr; i++) {
        const int32_t *ins = prog + 4 * i;
        int op = ins[0], d = ins[1], a = ins[2], b = ins[3];
        int bad = 0;
        if (op == PLAST_FX_LOAD) bad = d < 0 || d >= PLAST_FX_MAX_REGS || a < 0 || a >= nin;
        else if (op == PLAST_FX_CONST) bad = d < 0 || d >= PLAST_FX_MAX_REGS;
        else if (op == PLAST_FX_STORE) bad = d < 0 || d >= nout || a < 0 || a >= PLAST_FX_MAX_REGS || !written[a];
        else if (op >= PLAST_FX_ADD && op < PLAST_FX_ADD + PLAST_BIN_COUNT)
            bad = d < 0 || d >= PLAST_FX_MAX_REGS || a < 0 || a >= PLAST_FX_MAX_REGS || b < 0 ||
                  b >= PLAST_FX_MAX_REGS || !written[a] || !written[b];
        else if (op >= PLAST_FX_UNARY && op < PLAST_FX_UNARY + PLAST_UN_COUNT)
            bad = d < 0 || d >= PLAST_FX_MAX_REGS || a < 0 || a >= PLAST_FX_MAX_REGS || !written[a];
        else bad = 1;
        if (bad) return -(1 + i);
        if (op != PLAST_FX_STORE) written[d] = 1;
    }
    return 0;
}

/* One tile: m elements; ip[k] / op[k] point at the tile's first element of input / output k, with inner
 * strides is[k] / os[k]. regs: this thread's register file. */
#define TILE_FN(T, SUF, BINFN, UNFN)                                                                                   \
    static void tile_##SUF(int simd, const int32_t *prog, int ninstr, ptrdiff_t m, const char *const *ip,              \
                           const ptrdiff_t *is, char *const *op, const ptrdiff_t *os, T *regs) {                       \
        const T *ptr[PLAST_FX_MAX_REGS];                                                                               \
        int scal[PLAST_FX_MAX_REGS];                                                                                   \
        T val[PLAST_FX_MAX_REGS];                                                                                      \
        const ptrdiff_t cap = TILE_BYTES / (ptrdiff_t)sizeof(T);                                                       \
        for (int i = 0; i < ninstr; i++) {                                                                             \
            const int32_t *in = prog + 4 * i;                                                                          \
            int o = in[0], d = in[1], a = in[2], b = in[3];                                                            \
            T *own = regs + (ptrdiff_t)d * cap;                                                                        \
            if (o == PLAST_FX_LOAD) {                                                                                  \
                const T *src = (const T *)ip[a];                                                                       \
                if (is[a] == 0) {                                                                                      \
                    val[d] = src[0];                                                                                   \
                    ptr[d] = &val[d];                                                                                  \
                    scal[d] = 1;                                                                                       \
                } else if (is[a] == 1) {                                                                               \
                    ptr[d] = src;                                                                                      \
                    scal[d] = 0;                                                                                       \
                } else {                                                                                               \
                    for (ptrdiff_t j = 0; j < m; j++) own[j] = src[j * is[a]];                                         \
                    ptr[d] = own;                                                                                      \
                    scal[d] = 0;                                                                                       \
                }                                                                                                      \
            } else if (o == PLAST_FX_CONST) {                                                                          \
                uint64_t bits = (uint64_t)(uint32_t)a | ((uint64_t)(uint32_t)b << 32);                                 \
                double v;                                                                                              \
                memcpy(&v, &bits, 8);                                                                                  \
                val[d] = (T)v;                                                                                         \
                ptr[d] = &val[d];                                                                                      \
                scal[d] = 1;                                                                                           \
            } else if (o == PLAST_FX_STORE) {                                                                          \
                T *dst = (T *)op[d];                                                                                   \
                const T *src = ptr[a];                                                                                 \
                ptrdiff_t s = os[d];                                                                                   \
                if (scal[a])                                                                                           \
                    for (ptrdiff_t j = 0; j < m; j++) dst[j * s] = src[0];                                             \
                else if (s == 1) memcpy(dst, src, (size_t)m * sizeof(T));                                              \
                else                                                                                                   \
                    for (ptrdiff_t j = 0; j < m; j++) dst[j * s] = src[j];                                             \
            } else if (o < PLAST_FX_UNARY) {                                                                           \
                if (scal[a] && scal[b]) {                                                                              \
                    T r;                                                                                               \
                    BINFN(simd, o - PLAST_FX_ADD, ptr[a], 1, ptr[b], 1, &r, 1);                                        \
                    val[d] = r;                                                                                        \
                    ptr[d] = &val[d];                                                                                  \
                    scal[d] = 1;                                                                                       \
                } else {                                                                                               \
                    BINFN(simd, o - PLAST_FX_ADD, ptr[a], scal[a], ptr[b], scal[b], own, m);                           \
                    ptr[d] = own;                                                                                      \
                    scal[d] = 0;                                                                                       \
                }                                                                                                      \
            } else {                                                                                                   \
                if (scal[a]) {                                                                                         \
                    T r;                                                                                               \
                    UNFN(o - PLAST_FX_UNARY, ptr[a], &r, 1);                                                           \
                    val[d] = r;                                                                                        \
                    ptr[d] = &val[d];                                                                                  \
                    scal[d] = 1;                                                                                       \
                } else {                                                                                               \
                    UNFN(o - PLAST_FX_UNARY, ptr[a], own, m);                                                          \
                    ptr[d] = own;                                                                                      \
                    scal[d] = 0;                                                                                       \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

#define UN_F32(op, x, y, n)                     plast_unary_contig_f32(simd, op, x, y, n)
#define UN_F64(op, x, y, n)                     plast_unary_contig_f64(op, x, y, n)
#define BIN_F64(simd, op, a, ab, b, bb, out, n) plast_binary_contig_f64(simd, op, a, ab, b, bb, out, n)
TILE_FN(float, f32, plast_binary_contig_f32, UN_F32)
TILE_FN(double, f64, BIN_F64, UN_F64)

/* A call's merged loop nest: sh (nd dims, innermost last), st (each operand's strides: inputs, then outputs),
 * and its tasks (tiles of up to cap elements, per_row of them to a row). */
typedef struct {
    int simd, dtype, ninstr, nd, nin, nout;
    const int32_t *prog;
    const ptrdiff_t *sh;
    ptrdiff_t (*st)[MAX_NDIM];
    ptrdiff_t es, cap, inner, per_row, tasks;
    const char *const *ins;
    char *const *outs;
} fx_job;

/* Thread tid of T's share of the tasks. */
static void fx_part(const fx_job *j, int tid, int T) {
    const int simd = j->simd, dtype = j->dtype, ninstr = j->ninstr, nd = j->nd, nin = j->nin, nout = j->nout;
    const int nops = nin + nout;
    const int32_t *prog = j->prog;
    const ptrdiff_t *sh = j->sh;
    ptrdiff_t (*st)[MAX_NDIM] = j->st;
    const ptrdiff_t es = j->es, cap = j->cap, inner = j->inner, per_row = j->per_row;
    const char *const *ins = j->ins;
    char *const *outs = j->outs;
    /* this thread's registers, 64-byte aligned */
    _Alignas(64) char regs[PLAST_FX_MAX_REGS * TILE_BYTES];
    const char *ip[PLAST_FX_MAX_IO];
    char *op[PLAST_FX_MAX_IO];
    ptrdiff_t is[PLAST_FX_MAX_IO], os[PLAST_FX_MAX_IO];
    for (int k = 0; k < nin; k++) is[k] = st[k][nd - 1];
    for (int k = 0; k < nout; k++) os[k] = st[nin + k][nd - 1];
    ptrdiff_t lo, hi;
    plast_omp_range(j->tasks, tid, T, &lo, &hi);
    for (ptrdiff_t t = lo; t < hi; t++) {
        ptrdiff_t row = t / per_row, start = (t % per_row) * cap;
        ptrdiff_t m = inner - start < cap ? inner - start : cap;
        ptrdiff_t off[2 * PLAST_FX_MAX_IO];
        for (int k = 0; k < nops; k++) off[k] = start * st[k][nd - 1];
        ptrdiff_t r = row;
        for (int d = nd - 2; d >= 0; d--) {
            ptrdiff_t i = r % sh[d];
            r /= sh[d];
            for (int k = 0; k < nops; k++) off[k] += i * st[k][d];
        }
        for (int k = 0; k < nin; k++) ip[k] = ins[k] + off[k] * es;
        for (int k = 0; k < nout; k++) op[k] = outs[k] + off[nin + k] * es;
        if (dtype == PLAST_DT_F32) tile_f32(simd, prog, ninstr, m, ip, is, op, os, (float *)regs);
        else tile_f64(simd, prog, ninstr, m, ip, is, op, os, (double *)regs);
    }
}

int plast_fused_run(int simd, int nthreads, int dtype, const int32_t *prog, int ninstr, int ndim,
                    const ptrdiff_t *shape, int nin, const char *const *ins, const ptrdiff_t *in_strides, int nout,
                    char *const *outs, const ptrdiff_t *out_strides) {
    if ((dtype != PLAST_DT_F32 && dtype != PLAST_DT_F64) || ndim > MAX_NDIM || nin > PLAST_FX_MAX_IO ||
        nout > PLAST_FX_MAX_IO)
        return -1;
    if (plast_fused_check(prog, ninstr, nin, nout)) return -2;
    int nops = nin + nout;
    ptrdiff_t sh[MAX_NDIM], st[2 * PLAST_FX_MAX_IO][MAX_NDIM];
    int nd = 0;
    /* drop size-1 dims, merge neighbours contiguous for every operand */
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0) return 0;
        if (shape[d] == 1) continue;
        int merge = nd > 0;
        for (int k = 0; k < nops && merge; k++) {
            ptrdiff_t s = k < nin ? in_strides[k * ndim + d] : out_strides[(k - nin) * ndim + d];
            if (st[k][nd - 1] != s * shape[d]) merge = 0;
        }
        for (int k = 0; k < nops; k++) {
            ptrdiff_t s = k < nin ? in_strides[k * ndim + d] : out_strides[(k - nin) * ndim + d];
            st[k][merge ? nd - 1 : nd] = s;
        }
        if (merge) sh[nd - 1] *= shape[d];
        else sh[nd++] = shape[d];
    }
    if (nd == 0) {
        sh[0] = 1;
        for (int k = 0; k < nops; k++) st[k][0] = 0;
        nd = 1;
    }
    ptrdiff_t es = dtype == PLAST_DT_F32 ? 4 : 8, cap = TILE_BYTES / es;
    ptrdiff_t inner = sh[nd - 1], outer = 1;
    for (int d = 0; d < nd - 1; d++) outer *= sh[d];
    ptrdiff_t per_row = (inner + cap - 1) / cap, tasks = outer * per_row;
    int nt = nthreads;
    if (outer * inner < 32768 || tasks < 2) nt = 1;
    if (nt > tasks) nt = (int)tasks;
    const fx_job j = {simd, dtype, ninstr, nd, nin, nout, prog, sh, st, es, cap, inner, per_row, tasks, ins, outs};
    PLAST_PARALLEL(nt, fx_part, &j);
    return 0;
}
