#include "embedding.h"

#include <string.h>

#include "plast_omp.h"

/* float32 bodies at every level (vec_levels.h), then float64 ones (vec_levels_f64.h) */
#define PLAST_VEC_BODY "embedding_simd.h"
#define VT             float
#define VT_F64         0
#include "vec_levels.h"
#undef VT
#define VT double
#include "vec_levels_f64.h"
#undef VT

static inline int64_t id_at(const int64_t *ids64, const int32_t *ids32, ptrdiff_t r) {
    return ids64 ? ids64[r] : (int64_t)ids32[r];
}

static int check_ids(ptrdiff_t nids, const int64_t *ids64, const int32_t *ids32, ptrdiff_t num, int64_t *bad) {
    for (ptrdiff_t r = 0; r < nids; r++) {
        int64_t id = id_at(ids64, ids32, r);
        if (id < 0 || id >= num) {
            *bad = id;
            return PLAST_EMB_BAD_ID;
        }
    }
    return 0;
}

/* out row r: w's row ids[r], or zeros for padding_idx under zero_padding. */
static inline void emb_fwd_row(const int64_t *ids64, const int32_t *ids32, const char *w, ptrdiff_t w_row,
                               ptrdiff_t row_bytes, char *out, int64_t padding_idx, int zero_padding, ptrdiff_t r) {
    int64_t id = id_at(ids64, ids32, r);
    if (zero_padding && id == padding_idx) memset(out + r * row_bytes, 0, (size_t)row_bytes);
    else memcpy(out + r * row_bytes, w + id * w_row, (size_t)row_bytes);
}

int plast_embedding_fwd(int nthreads, ptrdiff_t nids, const int64_t *ids64, const int32_t *ids32, ptrdiff_t num,
                        const char *w, ptrdiff_t w_row, ptrdiff_t row_bytes, char *out, int64_t padding_idx,
                        int zero_padding, int64_t *bad) {
    int rc = check_ids(nids, ids64, ids32, num, bad);
    if (rc) return rc;
    int nt = nids * row_bytes >= (1 << 18) ? nthreads : 1;
    PLAST_PARALLEL_FOR(nt, nids, emb_fwd_row, ids64, ids32, w, w_row, row_bytes, out, padding_idx, zero_padding);
    return 0;
}

/* Thread tid of T's slice of the columns: out[ids[r], slice] += g[r, slice] for every r. */
static void emb_bw_slice(int simd, int dtype, ptrdiff_t nids, const int64_t *ids64, const int32_t *ids32, ptrdiff_t dim,
                         const char *g, ptrdiff_t g_row, char *out, int tid, int T) {
    /* slice boundaries rounded to 16 elements so each slice starts on its own cache line */
    ptrdiff_t c0 = (dim * tid / T) & ~(ptrdiff_t)15, c1 = tid == T - 1 ? dim : (dim * (tid + 1) / T) & ~(ptrdiff_t)15;
    ptrdiff_t len = c1 - c0;
    if (len > 0) {
        for (ptrdiff_t r = 0; r < nids; r++) {
            int64_t id = id_at(ids64, ids32, r);
            if (dtype == PLAST_DT_F32)
                PLAST_VEC_DISPATCH(emb_add, (float *)out + id * dim + c0, (const float *)g + r * g_row + c0, len);
            else
                PLAST_VEC_DISPATCH(emb_add_f64, (double *)out + id * dim + c0, (const double *)g + r * g_row + c0, len);
        }
    }
}

int plast_embedding_bw(int simd, int nthreads, int dtype, ptrdiff_t nids, const int64_t *ids64, const int32_t *ids32,
                       ptrdiff_t num, ptrdiff_t dim, const char *g, ptrdiff_t g_row, char *out, int64_t padding_idx,
                       int64_t *bad) {
    if (dtype != PLAST_DT_F32 && dtype != PLAST_DT_F64) return -1;
    int rc = check_ids(nids, ids64, ids32, num, bad);
    if (rc) return rc;
    ptrdiff_t es = dtype == PLAST_DT_F32 ? 4 : 8;
    memset(out, 0, (size_t)(num * dim * es));
    /* column slices of at least 32 elements (a cache line or two per row), one per thread */
    int nt = nthreads;
    if (nids * dim < (1 << 15)) nt = 1;
    if (nt > dim / 32) nt = dim / 32 > 0 ? (int)(dim / 32) : 1;
    PLAST_PARALLEL(nt, emb_bw_slice, simd, dtype, nids, ids64, ids32, dim, g, g_row, out);
    if (padding_idx >= 0 && padding_idx < num) memset(out + padding_idx * dim * es, 0, (size_t)(dim * es));
    return 0;
}
