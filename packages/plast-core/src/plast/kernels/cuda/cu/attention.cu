// Flash-attention style scaled dot-product attention (float32), forward and backward, with a causal flag.
//
// Never materializes the (L, S) score matrix: keys and values stream through shared memory in tiles of 32,
// each warp owns one query (forward, dQ) or one key (dK/dV), lane j scores key (or query) j of the tile, and the
// softmax is kept online (running max and sum). Forward also writes the log-sum-exp of each row, which the
// backward pass uses to recompute probabilities. Rows with nothing to attend give zeros (lse = -inf).
// Causal means key s is visible from query l when s <= l (torch's is_causal, top-left aligned).
// Head dims up to 32 * DCH (DCH = 1, 2, 4 are instantiated: D <= 32, 64, 128). The last dim of q, k, v and dO
// must be contiguous; other strides are free. Outputs are contiguous.
#include "common.cuh"

#define ATT_ROWS 8 // warps per block


template <int DCH>
__device__ __forceinline__ void attn_fwd_body(const float *q, const float *k, const float *v, float *o, float *lse,
                                              const AttnArgs &a) {
    constexpr int DP = DCH * 32;
    __shared__ float Ks[32][DP + 1];
    __shared__ float Vs[32][DP + 1];
    __shared__ float Qs[ATT_ROWS][DP];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
    const int64_t l = (int64_t)blockIdx.x * ATT_ROWS + warp;
    const bool row_ok = l < a.L;
    const float *qp = q + b * a.qs[0] + h * a.qs[1] + l * a.qs[2];
    const float *kb = k + b * a.ks[0] + h * a.ks[1];
    const float *vb = v + b * a.vs[0] + h * a.vs[1];
    for (int d = lane; d < DP; d += 32) Qs[warp][d] = (row_ok && d < a.D) ? qp[d] * a.scale : 0.0f;
    float acc[DCH];
#pragma unroll
    for (int c = 0; c < DCH; c++) acc[c] = 0.0f;
    float m = -Limits<float>::inf(), lsum = 0.0f;
    int64_t smax = a.S;
    if (a.causal) smax = min(a.S, (int64_t)blockIdx.x * ATT_ROWS + ATT_ROWS);
    for (int64_t s0 = 0; s0 < smax; s0 += 32) {
        __syncthreads();
        for (int e = threadIdx.x; e < 32 * DP; e += blockDim.x) {
            int j = e / DP, d = e % DP;
            int64_t s = s0 + j;
            Ks[j][d] = (s < a.S && d < a.D) ? kb[s * a.ks[2] + d] : 0.0f;
            Vs[j][d] = (s < a.S && d < a.Dv) ? vb[s * a.vs[2] + d] : 0.0f;
        }
        __syncthreads();
        if (!row_ok) continue;
        const int64_t s = s0 + lane;
        const bool allowed = s < a.S && (!a.causal || s <= l);
        float sc = 0.0f;
#pragma unroll 8
        for (int d = 0; d < DP; d++) sc += Qs[warp][d] * Ks[lane][d];
        sc = allowed ? sc : -Limits<float>::inf();
        const float mnew = fmaxf(m, warp_max(sc));
        if (mnew == -Limits<float>::inf()) continue; // nothing visible yet (warp-uniform)
        const float p = allowed ? __expf(sc - mnew) : 0.0f;
        const float corr = __expf(m - mnew);
        lsum = lsum * corr + warp_sum(p);
#pragma unroll
        for (int c = 0; c < DCH; c++) acc[c] *= corr;
#pragma unroll 4
        for (int jj = 0; jj < 32; jj++) {
            const float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
            for (int c = 0; c < DCH; c++) acc[c] += pj * Vs[jj][lane + 32 * c];
        }
        m = mnew;
    }
    if (!row_ok) return;
    const float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
    float *op = o + (bh * a.L + l) * a.Dv;
#pragma unroll
    for (int c = 0; c < DCH; c++) {
        int d = lane + 32 * c;
        if (d < a.Dv) op[d] = acc[c] * inv;
    }
    if (lane == 0) lse[bh * a.L + l] = lsum > 0.0f ? m + logf(lsum) : -Limits<float>::inf();
}

// dlt[row] = sum_d dO[row, d] * O[row, d]  (O contiguous; dO with strides gs)
__device__ __forceinline__ void attn_bwd_pre_body(const float *o, const float *g, float *dlt, const AttnArgs &a) {
    const int lane = threadIdx.x & 31;
    const int64_t rows = a.B * a.H * a.L, warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
        int64_t bh = r / a.L, l = r % a.L, b = bh / a.H, h = bh % a.H;
        const float *gp = g + b * a.gs[0] + h * a.gs[1] + l * a.gs[2];
        float s = 0.0f;
        for (int64_t d = lane; d < a.Dv; d += 32) s += gp[d] * o[r * a.Dv + d];
        s = warp_sum(s);
        if (lane == 0) dlt[r] = s;
    }
}

// dK, dV: one warp per key, streaming tiles of 32 queries
template <int DCH>
__device__ __forceinline__ void attn_bwd_kv_body(const float *q, const float *k, const float *v, const float *g,
                                                 const float *lse, const float *dlt, float *dk, float *dv,
                                                 const AttnArgs &a) {
    constexpr int DP = DCH * 32;
    __shared__ float Qs[32][DP + 1];
    __shared__ float Gs[32][DP + 1];
    __shared__ float Ls[32], Ds[32];
    __shared__ float Kw[ATT_ROWS][DP];
    __shared__ float Vw[ATT_ROWS][DP];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
    const int64_t s = (int64_t)blockIdx.x * ATT_ROWS + warp;
    const bool key_ok = s < a.S;
    const float *qb = q + b * a.qs[0] + h * a.qs[1];
    const float *gb = g + b * a.gs[0] + h * a.gs[1];
    for (int d = lane; d < DP; d += 32) {
        Kw[warp][d] = (key_ok && d < a.D) ? k[b * a.ks[0] + h * a.ks[1] + s * a.ks[2] + d] : 0.0f;
        Vw[warp][d] = (key_ok && d < a.Dv) ? v[b * a.vs[0] + h * a.vs[1] + s * a.vs[2] + d] : 0.0f;
    }
    float ak[DCH], av[DCH];
#pragma unroll
    for (int c = 0; c < DCH; c++) ak[c] = av[c] = 0.0f;
    const int64_t l_start = a.causal ? (int64_t)blockIdx.x * ATT_ROWS : 0;
    for (int64_t l0 = l_start; l0 < a.L; l0 += 32) {
        __syncthreads();
        for (int e = threadIdx.x; e < 32 * DP; e += blockDim.x) {
            int i = e / DP, d = e % DP;
            int64_t l = l0 + i;
            Qs[i][d] = (l < a.L && d < a.D) ? qb[l * a.qs[2] + d] : 0.0f;
            Gs[i][d] = (l < a.L && d < a.Dv) ? gb[l * a.gs[2] + d] : 0.0f;
        }
        if (threadIdx.x < 32) {
            int64_t l = l0 + threadIdx.x;
            Ls[threadIdx.x] = l < a.L ? lse[bh * a.L + l] : -Limits<float>::inf();
            Ds[threadIdx.x] = l < a.L ? dlt[bh * a.L + l] : 0.0f;
        }
        __syncthreads();
        if (!key_ok) continue;
        const int64_t l = l0 + lane;
        const bool allowed = l < a.L && (!a.causal || s <= l) && Ls[lane] != -Limits<float>::inf();
        float sc = 0.0f, dp = 0.0f;
#pragma unroll 8
        for (int d = 0; d < DP; d++) {
            sc += Qs[lane][d] * Kw[warp][d];
            dp += Gs[lane][d] * Vw[warp][d];
        }
        const float p = allowed ? __expf(sc * a.scale - Ls[lane]) : 0.0f;
        const float ds = p * (dp - Ds[lane]);
#pragma unroll 4
        for (int ii = 0; ii < 32; ii++) {
            const float pi = __shfl_sync(0xffffffffu, p, ii), dsi = __shfl_sync(0xffffffffu, ds, ii);
#pragma unroll
            for (int c = 0; c < DCH; c++) {
                av[c] += pi * Gs[ii][lane + 32 * c];
                ak[c] += dsi * Qs[ii][lane + 32 * c];
            }
        }
    }
    if (!key_ok) return;
#pragma unroll
    for (int c = 0; c < DCH; c++) {
        int d = lane + 32 * c;
        if (d < a.D) dk[(bh * a.S + s) * a.D + d] = ak[c] * a.scale;
        if (d < a.Dv) dv[(bh * a.S + s) * a.Dv + d] = av[c];
    }
}

// dQ: one warp per query, streaming tiles of 32 keys
template <int DCH>
__device__ __forceinline__ void attn_bwd_q_body(const float *q, const float *k, const float *v, const float *g,
                                                const float *lse, const float *dlt, float *dq, const AttnArgs &a) {
    constexpr int DP = DCH * 32;
    __shared__ float Ks[32][DP + 1];
    __shared__ float Vs[32][DP + 1];
    __shared__ float Qw[ATT_ROWS][DP];
    __shared__ float Gw[ATT_ROWS][DP];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
    const int64_t l = (int64_t)blockIdx.x * ATT_ROWS + warp;
    const bool row_ok = l < a.L;
    const float *kb = k + b * a.ks[0] + h * a.ks[1];
    const float *vb = v + b * a.vs[0] + h * a.vs[1];
    for (int d = lane; d < DP; d += 32) {
        Qw[warp][d] = (row_ok && d < a.D) ? q[b * a.qs[0] + h * a.qs[1] + l * a.qs[2] + d] : 0.0f;
        Gw[warp][d] = (row_ok && d < a.Dv) ? g[b * a.gs[0] + h * a.gs[1] + l * a.gs[2] + d] : 0.0f;
    }
    const float lse_l = row_ok ? lse[bh * a.L + l] : -Limits<float>::inf();
    const float dlt_l = row_ok ? dlt[bh * a.L + l] : 0.0f;
    float aq[DCH];
#pragma unroll
    for (int c = 0; c < DCH; c++) aq[c] = 0.0f;
    int64_t smax = a.S;
    if (a.causal) smax = min(a.S, (int64_t)blockIdx.x * ATT_ROWS + ATT_ROWS);
    for (int64_t s0 = 0; s0 < smax; s0 += 32) {
        __syncthreads();
        for (int e = threadIdx.x; e < 32 * DP; e += blockDim.x) {
            int j = e / DP, d = e % DP;
            int64_t s = s0 + j;
            Ks[j][d] = (s < a.S && d < a.D) ? kb[s * a.ks[2] + d] : 0.0f;
            Vs[j][d] = (s < a.S && d < a.Dv) ? vb[s * a.vs[2] + d] : 0.0f;
        }
        __syncthreads();
        if (!row_ok || lse_l == -Limits<float>::inf()) continue;
        const int64_t s = s0 + lane;
        const bool allowed = s < a.S && (!a.causal || s <= l);
        float sc = 0.0f, dp = 0.0f;
#pragma unroll 8
        for (int d = 0; d < DP; d++) {
            sc += Qw[warp][d] * Ks[lane][d];
            dp += Gw[warp][d] * Vs[lane][d];
        }
        const float p = allowed ? __expf(sc * a.scale - lse_l) : 0.0f;
        const float ds = p * (dp - dlt_l);
#pragma unroll 4
        for (int jj = 0; jj < 32; jj++) {
            const float dsj = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
            for (int c = 0; c < DCH; c++) aq[c] += dsj * Ks[jj][lane + 32 * c];
        }
    }
    if (!row_ok) return;
#pragma unroll
    for (int c = 0; c < DCH; c++) {
        int d = lane + 32 * c;
        if (d < a.D) dq[(bh * a.L + l) * a.D + d] = aq[c] * a.scale;
    }
}

#define ATTN(DCH)                                                                                                      \
    extern "C" __global__ void __launch_bounds__(ATT_ROWS * 32)                                                        \
        attn_fwd_d##DCH(const float *q, const float *k, const float *v, float *o, float *lse, AttnArgs a) {            \
        attn_fwd_body<DCH>(q, k, v, o, lse, a);                                                                        \
    }                                                                                                                  \
    extern "C" __global__ void __launch_bounds__(ATT_ROWS * 32)                                                        \
        attn_bwd_kv_d##DCH(const float *q, const float *k, const float *v, const float *g, const float *lse,           \
                           const float *dlt, float *dk, float *dv, AttnArgs a) {                                       \
        attn_bwd_kv_body<DCH>(q, k, v, g, lse, dlt, dk, dv, a);                                                        \
    }                                                                                                                  \
    extern "C" __global__ void __launch_bounds__(ATT_ROWS * 32)                                                        \
        attn_bwd_q_d##DCH(const float *q, const float *k, const float *v, const float *g, const float *lse,            \
                          const float *dlt, float *dq, AttnArgs a) {                                                   \
        attn_bwd_q_body<DCH>(q, k, v, g, lse, dlt, dq, a);                                                             \
    }
ATTN(1)
ATTN(2)
ATTN(4)

extern "C" __global__ void attn_bwd_pre(const float *o, const float *g, float *dlt, AttnArgs a) {
    attn_bwd_pre_body(o, g, dlt, a);
}
