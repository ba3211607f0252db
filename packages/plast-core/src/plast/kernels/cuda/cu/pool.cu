// 2-d max and average pooling and their backward passes, as the CPU kernels define them (kernels_nn.py):
// max pooling returns the flat index h * W + w of each window's first maximum (NaN wins), windows may hang over
// the padded edge (ceil mode); average pooling divides by the count its options say.
#include "common.cuh"


template <typename T> __device__ __forceinline__ void max_pool_fwd_body(const T *x, T *vals, int64_t *idx, PoolArgs p) {
    PLAST_GRID_LOOP(e, p.N * p.C * p.Ho * p.Wo) {
        int64_t wo = e % p.Wo, ho = (e / p.Wo) % p.Ho, c = (e / (p.Wo * p.Ho)) % p.C, n = e / (p.Wo * p.Ho * p.C);
        const T *xp = x + n * p.xs[0] + c * p.xs[1];
        T best = -Limits<T>::inf();
        int64_t bi = -1;
        bool best_nan = false;
        for (int64_t i = 0; i < p.kh; i++) {
            int64_t h = ho * p.sh - p.ph + i * p.dh;
            if (h < 0 || h >= p.H) continue;
            for (int64_t j = 0; j < p.kw; j++) {
                int64_t w = wo * p.sw - p.pw + j * p.dw;
                if (w < 0 || w >= p.W) continue;
                T v = xp[h * p.xs[2] + w * p.xs[3]];
                if (bi < 0) bi = h * p.W + w; // first element inside the input (all -inf windows)
                if (!best_nan && (v > best || v != v)) {
                    best = v;
                    bi = h * p.W + w;
                    best_nan = v != v;
                }
            }
        }
        vals[e] = best;
        idx[e] = bi < 0 ? 0 : bi;
    }
}

template <typename T> __device__ __forceinline__ void atomic_add_t(T *p, T v) { atomicAdd(p, v); }

// gx (N, C, H, W), zeroed by the launcher: gx[n, c, idx] += g
template <typename T>
__device__ __forceinline__ void max_pool_bwd_body(const T *g, Layout lg, const int64_t *idx, T *gx, int64_t NC,
                                                  int64_t HoWo, int64_t HW) {
    PLAST_GRID_LOOP(e, NC * HoWo) {
        int64_t plane = e / HoWo;
        int64_t k = idx[e];
        if (k >= 0 && k < HW) atomic_add_t<T>(gx + plane * HW + k, g[layout_offset(lg, e)]);
    }
}

// out[n, c, i, j] = h[n, c, idx[n, c, i, j]]
template <typename T>
__device__ __forceinline__ void pool_gather_body(const T *h, Layout lh_plane, int64_t hs2, int64_t hs3, int64_t W,
                                                 const int64_t *idx, T *out, int64_t NC, int64_t HoWo) {
    PLAST_GRID_LOOP(e, NC * HoWo) {
        int64_t plane = e / HoWo, k = idx[e];
        out[e] = h[layout_offset(lh_plane, plane) + (k / W) * hs2 + (k % W) * hs3];
    }
}

__device__ __forceinline__ int64_t avg_divisor(const PoolArgs &p, int64_t ho, int64_t wo) {
    if (p.divisor_override) return p.divisor_override;
    int64_t hs = ho * p.sh - p.ph, ws = wo * p.sw - p.pw;
    int64_t he = min(hs + p.kh, p.H + p.ph), we = min(ws + p.kw, p.W + p.pw);
    if (p.count_include_pad) return (he - hs) * (we - ws);
    int64_t hc = min(he, p.H) - max(hs, (int64_t)0), wc = min(we, p.W) - max(ws, (int64_t)0);
    return hc * wc;
}

template <typename T> __device__ __forceinline__ void avg_pool_fwd_body(const T *x, T *out, PoolArgs p) {
    PLAST_GRID_LOOP(e, p.N * p.C * p.Ho * p.Wo) {
        int64_t wo = e % p.Wo, ho = (e / p.Wo) % p.Ho, c = (e / (p.Wo * p.Ho)) % p.C, n = e / (p.Wo * p.Ho * p.C);
        const T *xp = x + n * p.xs[0] + c * p.xs[1];
        T s = T(0);
        for (int64_t i = 0; i < p.kh; i++) {
            int64_t h = ho * p.sh - p.ph + i;
            if (h < 0 || h >= p.H) continue;
            for (int64_t j = 0; j < p.kw; j++) {
                int64_t w = wo * p.sw - p.pw + j;
                if (w >= 0 && w < p.W) s += xp[h * p.xs[2] + w * p.xs[3]];
            }
        }
        out[e] = s / T(avg_divisor(p, ho, wo));
    }
}

// gx[n, c, h, w] = sum over the windows containing (h, w) of g / divisor (a gather: no atomics)
template <typename T> __device__ __forceinline__ void avg_pool_bwd_body(const T *g, Layout lg, T *gx, PoolArgs p) {
    PLAST_GRID_LOOP(e, p.N * p.C * p.H * p.W) {
        int64_t w = e % p.W, h = (e / p.W) % p.H, plane = e / (p.W * p.H);
        int64_t hp = h + p.ph, wp = w + p.pw;
        int64_t ho_lo = hp >= p.kh ? (hp - p.kh) / p.sh + 1 : 0, ho_hi = min(hp / p.sh, p.Ho - 1);
        int64_t wo_lo = wp >= p.kw ? (wp - p.kw) / p.sw + 1 : 0, wo_hi = min(wp / p.sw, p.Wo - 1);
        T s = T(0);
        for (int64_t ho = ho_lo; ho <= ho_hi; ho++)
            for (int64_t wo = wo_lo; wo <= wo_hi; wo++)
                s += g[layout_offset(lg, (plane * p.Ho + ho) * p.Wo + wo)] / T(avg_divisor(p, ho, wo));
        gx[e] = s;
    }
}

#define POOL(SUF, T)                                                                                                   \
    extern "C" __global__ void max_pool_fwd_##SUF(const T *x, T *vals, int64_t *idx, PoolArgs p) {                     \
        max_pool_fwd_body<T>(x, vals, idx, p);                                                                         \
    }                                                                                                                  \
    extern "C" __global__ void max_pool_bwd_##SUF(const T *g, Layout lg, const int64_t *idx, T *gx, int64_t NC,        \
                                                  int64_t HoWo, int64_t HW) {                                          \
        max_pool_bwd_body<T>(g, lg, idx, gx, NC, HoWo, HW);                                                            \
    }                                                                                                                  \
    extern "C" __global__ void pool_gather_##SUF(const T *h, Layout lhp, int64_t hs2, int64_t hs3, int64_t W,          \
                                                 const int64_t *idx, T *out, int64_t NC, int64_t HoWo) {               \
        pool_gather_body<T>(h, lhp, hs2, hs3, W, idx, out, NC, HoWo);                                                  \
    }                                                                                                                  \
    extern "C" __global__ void avg_pool_fwd_##SUF(const T *x, T *out, PoolArgs p) { avg_pool_fwd_body<T>(x, out, p); } \
    extern "C" __global__ void avg_pool_bwd_##SUF(const T *g, Layout lg, T *gx, PoolArgs p) {                          \
        avg_pool_bwd_body<T>(g, lg, gx, p);                                                                            \
    }
POOL(f32, float)
POOL(f64, double)
