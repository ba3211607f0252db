/* Blocked ("flash") scaled-dot-product attention, forward and backward, float32 and float64.
 *
 *   out = softmax(q @ k^T * scale (+ causal mask)) @ v,   lse = logsumexp of each row of the scaled scores
 *
 * q is (B, H, L, D), k (B, H, S, D), v (B, H, S, Dv); every operand has its own element strides, so
 * transposed or sliced views (q from a projection split into heads) are read in place. The forward walks
 * query blocks and, for each, the key/value blocks with a running row max and sum (online softmax), so no
 * L x S matrix is ever allocated; it saves lse (L values per head) for the backward. The backward recomputes
 * the scores block by block from q, k and lse, and uses D_i = rowsum(dout * out) so that dS = P * (dP - D_i)
 * needs no full row. On the diagonal block pairs of a causal call the products stop at the mask, per 4 rows.
 *
 * Causal masking follows torch's is_causal (top-left aligned: query i sees keys 0..i, also when L != S); key
 * blocks that a query block cannot see are skipped entirely. Rows that see no key (S == 0) give zeros and
 * lse = -inf.
 *
 * A key mask (plast_attn_fwd_masked: one byte per (batch, head, key), nonzero = may be attended, the same for
 * every query row: a padding mask) is applied while packing: a head's visible keys and values are packed
 * together and the blocked loop runs over those alone, so padded keys cost nothing (a mask of leading ones
 * packs as the unmasked kernel does). Rows of a head with no visible key give zeros and lse = -inf. Not with
 * causal (EINVAL); the backward of a masked call is left to the caller (plast writes it in plast ops).
 *
 * Parallel over (batch*heads) x query blocks (forward). The backward runs one task per batch*head (dk and dv
 * accumulate inside the task, so no two threads write the same gradient) unless there are fewer of those than
 * threads; then it splits into a pass over (head, key block) for dk/dv and a pass over (head, query block)
 * for dq, which recomputes the scores once more but keeps every thread busy.
 *
 * Return value: 0, PLAST_ATTN_EINVAL for arguments the kernel does not take, PLAST_ATTN_ENOMEM when scratch
 * (O((L + S) * D) per thread) could not be allocated.
 */
#ifndef PLAST_ATTENTION_H
#define PLAST_ATTENTION_H

#include <stddef.h>

#include "codes.h" /* PLAST_DT_*: the dtype codes (plast/_core/codes.h) */
#include "plast_simd.h"

#define PLAST_ATTN_OK     0
#define PLAST_ATTN_EINVAL -1
#define PLAST_ATTN_ENOMEM -2

/* One operand: the address of element (0, 0, 0, 0) and its element strides along (B, H, rows, features).
 * lse operands use sb, sh, sl only. Outputs must not overlap inputs. */
typedef struct {
    void *p;
    ptrdiff_t sb, sh, sl, sd;
} plast_attn_op;

typedef struct {
    ptrdiff_t B, H, L, S, D, Dv;
    double scale;
    int causal;
} plast_attn_dims;

/* out (B, H, L, Dv) and lse (B, H, L) from q, k, v. */
int plast_attn_fwd(int simd, int nthreads, int dtype, const plast_attn_dims *dims, plast_attn_op q, plast_attn_op k,
                   plast_attn_op v, plast_attn_op out, plast_attn_op lse);

/* The same with a key mask: kmask.p points at bytes (nonzero = visible) with strides sb, sh and, per key, sl. */
int plast_attn_fwd_masked(int simd, int nthreads, int dtype, const plast_attn_dims *dims, plast_attn_op q,
                          plast_attn_op k, plast_attn_op v, plast_attn_op kmask, plast_attn_op out, plast_attn_op lse);

/* dq, dk, dv from q, k, v, the forward's out and lse, and dout = d(loss)/d(out). */
int plast_attn_bwd(int simd, int nthreads, int dtype, const plast_attn_dims *dims, plast_attn_op q, plast_attn_op k,
                   plast_attn_op v, plast_attn_op out, plast_attn_op lse, plast_attn_op dout, plast_attn_op dq,
                   plast_attn_op dk, plast_attn_op dv);

#endif /* PLAST_ATTENTION_H */
