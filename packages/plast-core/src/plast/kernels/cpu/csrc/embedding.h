/* Embedding gather (forward) and scatter-add (backward) with id checks.
 *
 * ids are contiguous int64 or int32. Both directions check every id first and return PLAST_EMB_BAD_ID with the
 * value in *bad before writing anything. The backward never races: threads own disjoint column slices of the
 * gradient table and each walks all ids in order, so the result is the same for any thread count.
 */
#ifndef PLAST_EMBEDDING_H
#define PLAST_EMBEDDING_H

#include <stddef.h>
#include <stdint.h>

#include "codes.h" /* PLAST_DT_*: the dtype codes (plast/_core/codes.h) */
#include "plast_simd.h"

#define PLAST_EMB_BAD_ID (-3)

/* out[r, :] = w[ids[r], :] (rows of `row_bytes` bytes; w rows `w_row` bytes apart). With zero_padding, rows
 * whose id is padding_idx are zeros. */
int plast_embedding_fwd(int nthreads, ptrdiff_t nids, const int64_t *ids64, const int32_t *ids32, ptrdiff_t num,
                        const char *w, ptrdiff_t w_row, ptrdiff_t row_bytes, char *out, int64_t padding_idx,
                        int zero_padding, int64_t *bad);
/* out (num, dim), contiguous, = sum over r of g[r, :] into row ids[r]; the padding_idx row (if >= 0) stays 0.
 * dtype: PLAST_DT_F32 or PLAST_DT_F64; g rows are g_row elements apart. */
int plast_embedding_bw(int simd, int nthreads, int dtype, ptrdiff_t nids, const int64_t *ids64, const int32_t *ids32,
                       ptrdiff_t num, ptrdiff_t dim, const char *g, ptrdiff_t g_row, char *out, int64_t padding_idx,
                       int64_t *bad);

#endif
