// cross_entropy (class-index or probability targets, class weights, ignore_index, label smoothing), nll_loss,
// their backward pass and the dense loss coefficients, and binary cross-entropy (on probabilities or logits) with
// its backward, with the CPU kernel's formulas (kernels_nn.py).
//
// Input x is (N, K, d1, ...): `lx` maps a row m (over N, d1, ...) to its base offset and `sk` is the class
// stride. Index targets are int64 or int32 (`t64`) with row layout `lt`; probability targets share x's shape
// (row layout `lt`, class stride `st`). Bad class indices set the error flag (IndexError in Python).
#include "codes.h" // PLAST_RED_* (the reductions), PLAST_LOSS_* (the target kinds): plast/_core/codes.h
#include "common.cuh"

__device__ __forceinline__ int64_t load_target(const void *t, int t64, int64_t off) {
    return t64 ? static_cast<const int64_t *>(t)[off] : (int64_t)static_cast<const int32_t *>(t)[off];
}

// Per row: nll[m], smooth[m] and the target weight wt[m] (0 for ignored rows).
template <typename T>
__device__ __forceinline__ void loss_rows_body(int kind, const T *x, Layout lx, int64_t sk, int64_t K, int64_t M,
                                               const void *target, int t64, Layout lt, int64_t st, const T *w,
                                               int64_t ignore_index, T eps, T *nll, T *smooth, T *wt, int64_t *err) {
    __shared__ T scratch[32];
    for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
        const T *xr = x + layout_offset(lx, m);
        T lse = T(0);
        if (kind != PLAST_LOSS_NLL) {
            T mx = -Limits<T>::inf();
            for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
                T v = xr[k * sk];
                mx = (v > mx || v != v) ? v : mx;
            }
            mx = block_max<T>(mx, scratch, -Limits<T>::inf());
            T s = T(0);
            for (int64_t k = threadIdx.x; k < K; k += blockDim.x) s += exp(xr[k * sk] - mx);
            lse = log(block_sum<T>(s, scratch)) + mx;
        }
        if (kind == PLAST_LOSS_PROB) {
            // loss_row = -sum_c ((1 - eps) t_c + eps / K) w_c logp_c
            const T *tr = static_cast<const T *>(target) + layout_offset(lt, m);
            T acc = T(0);
            for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
                T c = (T(1) - eps) * tr[k * st] + eps / T(K);
                if (w != nullptr) c *= w[k];
                acc += c * (xr[k * sk] - lse);
            }
            acc = block_sum<T>(acc, scratch);
            if (threadIdx.x == 0) {
                nll[m] = -acc;
                smooth[m] = T(0);
                wt[m] = T(1);
            }
        } else {
            const int64_t t = load_target(target, t64, layout_offset(lt, m));
            const bool valid = t != ignore_index;
            if (valid && (t < 0 || t >= K)) {
                if (threadIdx.x == 0) plast_set_error(err, PLAST_ERR_INDEX, t, K, m);
            }
            const bool ok = valid && t >= 0 && t < K;
            T sm = T(0);
            if (kind == PLAST_LOSS_INDEX && eps != T(0) && ok) {
                for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
                    T lp = xr[k * sk] - lse;
                    sm += w != nullptr ? lp * w[k] : lp;
                }
            }
            sm = block_sum<T>(sm, scratch);
            if (threadIdx.x == 0) {
                T wv = ok ? (w != nullptr ? w[t] : T(1)) : T(0);
                T lp = ok ? xr[t * sk] - lse : T(0);
                nll[m] = ok ? -wv * lp : T(0);
                smooth[m] = -sm;
                wt[m] = wv;
            }
        }
        __syncthreads();
    }
}

// One block: reduce the per-row terms into the loss (sum / mean), or write the rows (none).
// index kind: loss = (1 - eps) * sum(nll) / dn + eps / K * sum(smooth) / dn, dn = sum(wt) for mean.
template <typename T>
__device__ __forceinline__ void loss_finish_body(int kind, int reduction, const T *nll, const T *smooth, const T *wt,
                                                 int64_t M, int64_t K, T eps, T *out) {
    __shared__ T scratch[32];
    const bool smoothing = kind == PLAST_LOSS_INDEX && eps != T(0);
    if (reduction == PLAST_RED_NONE) {
        for (int64_t m = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; m < M; m += (int64_t)gridDim.x * blockDim.x)
            out[m] = smoothing ? (T(1) - eps) * nll[m] + eps / T(K) * smooth[m] : nll[m];
        return;
    }
    if (blockIdx.x != 0) return;
    T a = T(0), b = T(0), c = T(0);
    for (int64_t m = threadIdx.x; m < M; m += blockDim.x) {
        a += nll[m];
        b += smooth[m];
        c += wt[m];
    }
    a = block_sum<T>(a, scratch);
    b = block_sum<T>(b, scratch);
    c = block_sum<T>(c, scratch);
    if (threadIdx.x != 0) return;
    T dn = T(1);
    if (reduction == PLAST_RED_MEAN) dn = kind == PLAST_LOSS_PROB ? T(M) : c;
    T total = a / dn;
    if (smoothing) total = (T(1) - eps) * total + eps / T(K) * b / dn;
    if (kind == PLAST_LOSS_PROB && reduction == PLAST_RED_MEAN && M == 0) total = Limits<T>::nan();
    out[0] = total;
}

// gx[m, c] = g_m * (p_c * S_m - C_mc) (PLAST_LOSS_BWD_GRAD), or the coefficients C_mc themselves
// (PLAST_LOSS_BWD_COEFFS, loss_coeffs).
// C for index targets: valid rows only, (1 - eps) wt / dn at the target plus eps / K * w_c / dn everywhere.
// C for probability targets: ((1 - eps) t_c + eps / K) w_c, divided by M for mean.
// `dn` points at the mean divisor (sum of target weights), computed by loss_rows + a sum on the device.
template <typename T>
__device__ __forceinline__ void loss_bwd_body(int mode, int kind, int reduction, const T *g, Layout lg, const T *x,
                                              Layout lx, int64_t sk, int64_t K, int64_t M, const void *target, int t64,
                                              Layout lt, int64_t st, const T *w, int64_t ignore_index, T eps,
                                              const T *dn_ptr, T *out, Layout lo, int64_t so, int64_t *err) {
    __shared__ T scratch[32];
    T dn = T(1);
    if (reduction == PLAST_RED_MEAN) dn = kind == PLAST_LOSS_PROB ? T(M) : *dn_ptr;
    for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
        const T *xr = x + layout_offset(lx, m);
        T *orow = out + layout_offset(lo, m);
        const T gm =
            mode == PLAST_LOSS_BWD_GRAD ? (reduction == PLAST_RED_NONE ? g[layout_offset(lg, m)] : g[0]) : T(1);
        T lse = T(0);
        if (mode == PLAST_LOSS_BWD_GRAD) {
            T mx = -Limits<T>::inf();
            for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
                T v = xr[k * sk];
                mx = (v > mx || v != v) ? v : mx;
            }
            mx = block_max<T>(mx, scratch, -Limits<T>::inf());
            T s = T(0);
            for (int64_t k = threadIdx.x; k < K; k += blockDim.x) s += exp(xr[k * sk] - mx);
            lse = log(block_sum<T>(s, scratch)) + mx;
        }
        if (kind == PLAST_LOSS_PROB) {
            const T *tr = static_cast<const T *>(target) + layout_offset(lt, m);
            T S = T(0);
            for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
                T c = ((T(1) - eps) * tr[k * st] + eps / T(K)) * (w != nullptr ? w[k] : T(1)) / dn;
                S += c;
            }
            S = block_sum<T>(S, scratch);
            for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
                T c = ((T(1) - eps) * tr[k * st] + eps / T(K)) * (w != nullptr ? w[k] : T(1)) / dn;
                orow[k * so] = mode == PLAST_LOSS_BWD_GRAD ? gm * (exp(xr[k * sk] - lse) * S - c) : c;
            }
        } else {
            const int64_t t = load_target(target, t64, layout_offset(lt, m));
            const bool valid = t != ignore_index;
            if (valid && (t < 0 || t >= K) && threadIdx.x == 0) plast_set_error(err, PLAST_ERR_INDEX, t, K, m);
            const bool ok = valid && t >= 0 && t < K;
            const T wv = ok ? (w != nullptr ? w[t] : T(1)) : T(0);
            const T ct = ok ? (T(1) - eps) * wv / dn : T(0);
            T ws = T(0);
            if (ok && eps != T(0)) {
                for (int64_t k = threadIdx.x; k < K; k += blockDim.x) ws += w != nullptr ? w[k] : T(1);
            }
            ws = block_sum<T>(ws, scratch);
            const T S = ct + (ok ? eps / T(K) * ws / dn : T(0));
            for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
                T c =
                    (k == t ? ct : T(0)) + (ok && eps != T(0) ? eps / T(K) * (w != nullptr ? w[k] : T(1)) / dn : T(0));
                orow[k * so] = mode == PLAST_LOSS_BWD_GRAD ? gm * (exp(xr[k * sk] - lse) * S - c) : c;
            }
        }
        __syncthreads();
    }
}

#define LOSS(SUF, T)                                                                                                   \
    extern "C" __global__ void loss_rows_##SUF(int kind, const T *x, Layout lx, int64_t sk, int64_t K, int64_t M,      \
                                               const void *target, int t64, Layout lt, int64_t st, const T *w,         \
                                               int64_t ignore_index, T eps, T *nll, T *smooth, T *wt, int64_t *err) {  \
        loss_rows_body<T>(kind, x, lx, sk, K, M, target, t64, lt, st, w, ignore_index, eps, nll, smooth, wt, err);     \
    }                                                                                                                  \
    extern "C" __global__ void loss_finish_##SUF(int kind, int reduction, const T *nll, const T *smooth, const T *wt,  \
                                                 int64_t M, int64_t K, T eps, T *out) {                                \
        loss_finish_body<T>(kind, reduction, nll, smooth, wt, M, K, eps, out);                                         \
    }                                                                                                                  \
    extern "C" __global__ void loss_bwd_##SUF(int mode, int kind, int reduction, const T *g, Layout lg, const T *x,    \
                                              Layout lx, int64_t sk, int64_t K, int64_t M, const void *target,         \
                                              int t64, Layout lt, int64_t st, const T *w, int64_t ignore_index, T eps, \
                                              const T *dn, T *out, Layout lo, int64_t so, int64_t *err) {              \
        loss_bwd_body<T>(mode, kind, reduction, g, lg, x, lx, sk, K, M, target, t64, lt, st, w, ignore_index, eps, dn, \
                         out, lo, so, err);                                                                            \
    }
LOSS(f32, float)
LOSS(f64, double)

// ---- binary cross-entropy -----------------------------------------------------------------------------------
// Elementwise over the input's n elements (layouts lx, lt, lw, lpw map element i to each operand; a null w / pw
// is absent), into `out` (contiguous): the loss terms, which bce_finish sums (mean: / n) for a reduction. Inputs
// outside [0, 1] set the error flag with the element's value bits (ValueError in Python); NaN passes, as on the CPU.
template <typename T> __device__ __forceinline__ T max_keep_nan(T v, T lo) { return v < lo ? lo : v; }

template <typename T>
__device__ __forceinline__ void bce_body(const T *x, Layout lx, const T *t, Layout lt, const T *w, Layout lw, T *out,
                                         int64_t n, int64_t *err) {
    PLAST_GRID_LOOP(i, n) {
        const T xv = x[layout_offset(lx, i)], tv = t[layout_offset(lt, i)];
        if (xv < T(0) || xv > T(1)) plast_set_error(err, PLAST_ERR_VALUE, __double_as_longlong((double)xv), 0, i);
        // logs clamped at -100 as torch does, so a confident wrong answer costs 100, not inf
        const T a = max_keep_nan<T>(log(xv), T(-100)), b = max_keep_nan<T>(log1p(-xv), T(-100));
        T l = -(tv * a + (T(1) - tv) * b);
        if (w != nullptr) l *= w[layout_offset(lw, i)];
        out[i] = l;
    }
}

// loss = (1 - t) x + (1 + (pw - 1) t) softplus(-x) (pw absent: 1), times w; softplus(-x) = log1p(exp(-|x|)) + max(-x, 0)
template <typename T>
__device__ __forceinline__ void bce_logits_body(const T *x, Layout lx, const T *t, Layout lt, const T *w, Layout lw,
                                                const T *pw, Layout lpw, T *out, int64_t n) {
    PLAST_GRID_LOOP(i, n) {
        const T xv = x[layout_offset(lx, i)], tv = t[layout_offset(lt, i)];
        const T sp = log1p(exp(-fabs(xv))) + (-xv > T(0) ? -xv : T(0));
        T l = (T(1) - tv) * xv;
        if (pw != nullptr) l += (T(1) + (pw[layout_offset(lpw, i)] - T(1)) * tv) * sp;
        else l += sp;
        if (w != nullptr) l *= w[layout_offset(lw, i)];
        out[i] = l;
    }
}

// gx = g (x - t) / max(x (1 - x), 1e-12), times w; g broadcast through its layout
template <typename T>
__device__ __forceinline__ void bce_bwd_body(const T *g, Layout lg, const T *x, Layout lx, const T *t, Layout lt,
                                             const T *w, Layout lw, T *out, int64_t n) {
    PLAST_GRID_LOOP(i, n) {
        const T xv = x[layout_offset(lx, i)];
        const T q = max_keep_nan<T>(xv * (T(1) - xv), T(1e-12));
        T r = g[layout_offset(lg, i)] * (xv - t[layout_offset(lt, i)]) / q;
        if (w != nullptr) r *= w[layout_offset(lw, i)];
        out[i] = r;
    }
}

// One block: out[0] = sum of the n terms (mean: divided by n, NaN for n = 0 as on the CPU).
template <typename T> __device__ __forceinline__ void bce_finish_body(const T *terms, int64_t n, int mean, T *out) {
    __shared__ T scratch[32];
    T acc = T(0);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += terms[i];
    acc = block_sum<T>(acc, scratch);
    if (threadIdx.x == 0) out[0] = mean ? acc / T(n) : acc;
}

#define BCE(SUF, T)                                                                                                    \
    extern "C" __global__ void bce_##SUF(const T *x, Layout lx, const T *t, Layout lt, const T *w, Layout lw, T *out,  \
                                         int64_t n, int64_t *err) {                                                    \
        bce_body<T>(x, lx, t, lt, w, lw, out, n, err);                                                                 \
    }                                                                                                                  \
    extern "C" __global__ void bce_logits_##SUF(const T *x, Layout lx, const T *t, Layout lt, const T *w, Layout lw,   \
                                                const T *pw, Layout lpw, T *out, int64_t n) {                          \
        bce_logits_body<T>(x, lx, t, lt, w, lw, pw, lpw, out, n);                                                      \
    }                                                                                                                  \
    extern "C" __global__ void bce_bwd_##SUF(const T *g, Layout lg, const T *x, Layout lx, const T *t, Layout lt,      \
                                             const T *w, Layout lw, T *out, int64_t n) {                               \
        bce_bwd_body<T>(g, lg, x, lx, t, lt, w, lw, out, n);                                                           \
    }                                                                                                                  \
    extern "C" __global__ void bce_finish_##SUF(const T *terms, int64_t n, int mean, T *out) {                         \
        bce_finish_body<T>(terms, n, mean, out);                                                                       \
    }
BCE(f32, float)
BCE(f64, double)
