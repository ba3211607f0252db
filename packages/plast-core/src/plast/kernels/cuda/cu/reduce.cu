// Reductions over any set of dims, with warp shuffles: sum, prod, amax/amin (NaN propagates), all/any, p-norms,
// argmax/argmin, logsumexp, cumsum (a block scan per row), and the helpers of max/min and prod backward (tie
// weights, products of all elements but one).
//
// Layout convention: `lk` covers the kept dims (the output's shape, with the input's strides) and `lr` the
// reduced dims (their shape, with the input's strides); output element j reads input offsets
// layout_offset(lk, j) + layout_offset(lr, r) for r < R. Outputs are contiguous.
// Two schedules: WARP (one warp per output, many outputs) and BLOCK (a whole block per output, long rows).
#include "codes.h" // PLAST_RD_*: the reduce ops (plast/_core/codes.h)
#include "common.cuh"

template <typename A> __device__ __forceinline__ A red_identity(int op) {
    switch (op) {
    case PLAST_RD_PROD:
    case PLAST_RD_ALL: return A(1);
    case PLAST_RD_MAX: return A(0); // unused: max/min start from the first element
    default: return A(0);
    }
}

template <typename A> __device__ __forceinline__ bool a_nan(A v) { return v != v; }

template <typename A> __device__ __forceinline__ A red_combine(int op, A a, A b) {
    switch (op) {
    case PLAST_RD_PROD: return a * b;
    case PLAST_RD_MAX: return a_nan(a) || a_nan(b) ? (a_nan(a) ? a : b) : (a > b ? a : b);
    case PLAST_RD_MIN: return a_nan(a) || a_nan(b) ? (a_nan(a) ? a : b) : (a < b ? a : b);
    case PLAST_RD_ALL: return (a != A(0)) && (b != A(0)) ? A(1) : A(0);
    case PLAST_RD_ANY: return (a != A(0)) || (b != A(0)) ? A(1) : A(0);
    default: return a + b; // sum, norms (terms already transformed)
    }
}

template <typename T, typename A> __device__ __forceinline__ A red_term(int op, T v, double p) {
    switch (op) {
    case PLAST_RD_ALL:
    case PLAST_RD_ANY: return v != T(0) ? A(1) : A(0);
    case PLAST_RD_NORM_P: return (A)pow(fabs((double)v), p);
    case PLAST_RD_NORM_2: return (A)v * (A)v;
    default: return (A)v;
    }
}

template <typename A> __device__ __forceinline__ A red_finish(int op, A v, double p) {
    if (op == PLAST_RD_NORM_P) return (A)pow((double)v, 1.0 / p);
    if (op == PLAST_RD_NORM_2) return (A)sqrt((double)v);
    return v;
}

template <typename A> __device__ __forceinline__ A warp_combine(int op, A v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = red_combine<A>(op, v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Each participating thread folds elements tid, tid + nthr, ... of row j; `have` says whether it saw any.
template <typename T, typename A>
__device__ __forceinline__ A fold(int op, const T *x, int64_t base, const Layout &lr, int64_t R, int64_t tid,
                                  int64_t nthr, double p, bool &have) {
    A acc = red_identity<A>(op);
    have = false;
    for (int64_t r = tid; r < R; r += nthr) {
        A t = red_term<T, A>(op, x[base + layout_offset(lr, r)], p);
        acc = have ? red_combine<A>(op, acc, t) : t;
        have = true;
    }
    if (!have) acc = red_identity<A>(op);
    return acc;
}

template <typename T, typename A>
__device__ __forceinline__ void reduce_warp_body(int op, const T *x, Layout lk, Layout lr, int64_t R, A *out,
                                                 int64_t n_out, double p) {
    const int lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t j = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); j < n_out; j += warps) {
        bool have;
        A acc = fold<T, A>(op, x, layout_offset(lk, j), lr, R, lane, 32, p, have);
        // lanes that saw nothing hold the identity; for max/min that must not win, so borrow lane 0's value
        if ((op == PLAST_RD_MAX || op == PLAST_RD_MIN)) {
            A first = __shfl_sync(0xffffffffu, acc, 0);
            if (!have) acc = first;
        }
        acc = warp_combine<A>(op, acc);
        if (lane == 0) out[j] = red_finish<A>(op, acc, p);
    }
}

template <typename T, typename A>
__device__ __forceinline__ void reduce_block_body(int op, const T *x, Layout lk, Layout lr, int64_t R, A *out,
                                                  int64_t n_out, double p) {
    __shared__ A part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int64_t j = blockIdx.x; j < n_out; j += gridDim.x) {
        bool have;
        A acc = fold<T, A>(op, x, layout_offset(lk, j), lr, R, threadIdx.x, blockDim.x, p, have);
        if (op == PLAST_RD_MAX || op == PLAST_RD_MIN) {
            // every thread of the block sees at least one element when R >= blockDim (the launcher's rule)
            (void)have;
        }
        acc = warp_combine<A>(op, acc);
        __syncthreads();
        if (lane == 0) part[warp] = acc;
        __syncthreads();
        if (warp == 0) {
            A v = lane < nw ? part[lane] : part[0];
            v = warp_combine<A>(op, v);
            if (lane == 0) out[j] = red_finish<A>(op, v, p);
        }
    }
}

// ---- argmax / argmin (first index of the extreme; NaN counts as the extreme, as in torch) ----------------------
template <typename T> __device__ __forceinline__ bool arg_better(bool is_max, T v, int64_t i, T bv, int64_t bi) {
    bool vn = v != v, bn = bv != bv;
    if (vn || bn) return vn && (!bn || i < bi);
    if (v == bv) return i < bi;
    return is_max ? v > bv : v < bv;
}

template <typename T>
__device__ __forceinline__ void argreduce_body(int is_max, const T *x, Layout lk, int64_t R, int64_t rstride,
                                               int64_t *out, int64_t n_out) {
    const int lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t j = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); j < n_out; j += warps) {
        int64_t base = layout_offset(lk, j);
        T best = T(0);
        int64_t bi = -1;
        for (int64_t r = lane; r < R; r += 32) {
            T v = x[base + r * rstride];
            if (bi < 0 || arg_better<T>(is_max, v, r, best, bi)) {
                best = v;
                bi = r;
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            T ov = __shfl_xor_sync(0xffffffffu, best, o);
            int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (oi >= 0 && (bi < 0 || arg_better<T>(is_max, ov, oi, best, bi))) {
                best = ov;
                bi = oi;
            }
        }
        if (lane == 0) out[j] = bi < 0 ? 0 : bi;
    }
}

// ---- logsumexp over the reduced dims (warp per output) --------------------------------------------------------
template <typename T>
__device__ __forceinline__ void logsumexp_body(const T *x, Layout lk, Layout lr, int64_t R, T *out, int64_t n_out) {
    const int lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t j = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); j < n_out; j += warps) {
        int64_t base = layout_offset(lk, j);
        T m = -Limits<T>::inf();
        for (int64_t r = lane; r < R; r += 32) {
            T v = x[base + layout_offset(lr, r)];
            m = (v > m || v != v) ? v : m;
        }
        m = warp_combine<T>(PLAST_RD_MAX, m);
        T shift = (m == Limits<T>::inf() || m == -Limits<T>::inf()) ? T(0) : m;
        if (m != m) shift = T(0);
        T s = T(0);
        for (int64_t r = lane; r < R; r += 32) s += exp(x[base + layout_offset(lr, r)] - shift);
        s = warp_sum(s);
        if (lane == 0) out[j] = log(s) + shift;
    }
}

// ---- cumsum along one dim: a block per row, scanned in chunks of blockDim ---------------------------------------
// lrow: the other dims (row shape) with the input's strides; orow: the same with the output's strides.
template <typename T, typename A>
__device__ __forceinline__ void cumsum_body(const T *x, Layout lrow, int64_t len, int64_t xstride, A *out, Layout orow,
                                            int64_t ostride, int64_t n_rows, int reverse) {
    __shared__ A warp_tot[32];
    __shared__ A carry_s;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
        const int64_t xb = layout_offset(lrow, row), ob = layout_offset(orow, row);
        if (threadIdx.x == 0) carry_s = A(0);
        __syncthreads();
        for (int64_t c0 = 0; c0 < len; c0 += blockDim.x) {
            int64_t k = c0 + threadIdx.x;
            int64_t pos = reverse ? len - 1 - k : k;
            A v = k < len ? (A)x[xb + pos * xstride] : A(0);
            // inclusive warp scan
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                A t = __shfl_up_sync(0xffffffffu, v, o);
                if (lane >= o) v += t;
            }
            if (lane == 31) warp_tot[warp] = v;
            __syncthreads();
            if (warp == 0) {
                A t = lane < nw ? warp_tot[lane] : A(0);
#pragma unroll
                for (int o = 1; o < 32; o <<= 1) {
                    A u = __shfl_up_sync(0xffffffffu, t, o);
                    if (lane >= o) t += u;
                }
                if (lane < nw) warp_tot[lane] = t; // inclusive prefix of warp totals
            }
            __syncthreads();
            A carry = carry_s;
            A pre = warp > 0 ? warp_tot[warp - 1] : A(0);
            if (k < len) out[ob + pos * ostride] = carry + pre + v;
            __syncthreads();
            if (threadIdx.x == 0) carry_s = carry + warp_tot[nw - 1];
            __syncthreads();
        }
    }
}

// ---- tie weights (the backward of max/amax over whole dims): 1/count where x equals its slice's extreme -------
// m holds the extremes (keepdim shape; `lm` maps kept index j to its element); NaN matches NaN, as on the CPU.
// The output (x's shape, contiguous) is addressed by its own kept/reduced layouts `olk`/`olr`.
template <typename T> __device__ __forceinline__ bool tie_match(T v, T m) { return v == m || (v != v && m != m); }

template <typename T>
__device__ __forceinline__ void tie_weights_body(const T *x, Layout lk, Layout lr, int64_t R, const T *m, Layout lm,
                                                 T *out, Layout olk, Layout olr, int64_t n_out) {
    const int lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t j = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); j < n_out; j += warps) {
        const int64_t xb = layout_offset(lk, j), ob = layout_offset(olk, j);
        const T mv = m[layout_offset(lm, j)];
        int64_t count = 0;
        for (int64_t r = lane; r < R; r += 32) count += tie_match<T>(x[xb + layout_offset(lr, r)], mv);
        count = warp_sum(count);
        const T w = (T)(1.0 / (double)(count > 0 ? count : 1)); // the CPU divides in double, then rounds
        for (int64_t r = lane; r < R; r += 32)
            out[ob + layout_offset(olr, r)] = tie_match<T>(x[xb + layout_offset(lr, r)], mv) ? w : T(0);
    }
}

// ---- products of all elements but one along a dim (prod's gradient), exact with zeros: no division ------------
// One thread per row (all dims but `dim`): lrow / orow / grow map a row to its first element in x / out / g, and
// xs / os / gs are the strides along `dim`. prod_others: out[k] = left[k] * right[k], the exclusive prefix and
// suffix products, multiplied in the CPU's order. prod_others_bw: out[k] = sum_{i != k} g[i] prod_{j != i, k} x[j]
// = acc_l[k] right[k] + left[k] acc_r[k] with running sums acc_l, acc_r; `left` is scratch for the prefixes.
template <typename T>
__device__ __forceinline__ void prod_others_body(const T *x, Layout lrow, int64_t xs, T *out, Layout orow, int64_t os,
                                                 int64_t len, int64_t n_rows) {
    PLAST_GRID_LOOP(row, n_rows) {
        const int64_t xb = layout_offset(lrow, row), ob = layout_offset(orow, row);
        T acc = T(1);
        for (int64_t k = 0; k < len; k++) {
            out[ob + k * os] = acc;
            acc *= x[xb + k * xs];
        }
        acc = T(1);
        for (int64_t k = len - 1; k >= 0; k--) {
            out[ob + k * os] *= acc;
            acc *= x[xb + k * xs];
        }
    }
}

template <typename T>
__device__ __forceinline__ void prod_others_bw_body(const T *x, Layout lrow, int64_t xs, const T *g, Layout grow,
                                                    int64_t gs, T *out, Layout orow, int64_t os, T *left, int64_t len,
                                                    int64_t n_rows) {
    PLAST_GRID_LOOP(row, n_rows) {
        const int64_t xb = layout_offset(lrow, row), gb = layout_offset(grow, row), ob = layout_offset(orow, row);
        T *lp = left + row * len;
        T pre = T(1), acc = T(0);
        for (int64_t k = 0; k < len; k++) {
            const T xv = x[xb + k * xs];
            lp[k] = pre;
            out[ob + k * os] = acc; // acc_l[k]
            acc = acc * xv + g[gb + k * gs] * pre;
            pre *= xv;
        }
        T suf = T(1);
        acc = T(0);
        for (int64_t k = len - 1; k >= 0; k--) {
            const T xv = x[xb + k * xs];
            out[ob + k * os] = out[ob + k * os] * suf + lp[k] * acc;
            acc = acc * xv + g[gb + k * gs] * suf; // acc_r[k - 1]
            suf *= xv;
        }
    }
}

// ---- instantiations -----------------------------------------------------------------------------------------
#define REDUCE(NAME, T, A)                                                                                             \
    extern "C" __global__ void reduce_warp_##NAME(int op, const T *x, Layout lk, Layout lr, int64_t R, A *out,         \
                                                  int64_t n_out, double p) {                                           \
        reduce_warp_body<T, A>(op, x, lk, lr, R, out, n_out, p);                                                       \
    }                                                                                                                  \
    extern "C" __global__ void reduce_block_##NAME(int op, const T *x, Layout lk, Layout lr, int64_t R, A *out,        \
                                                   int64_t n_out, double p) {                                          \
        reduce_block_body<T, A>(op, x, lk, lr, R, out, n_out, p);                                                      \
    }

// (input, output) pairs: same type, integer sums/products into int64, and all/any into bool
REDUCE(f32_f32, float, float)
REDUCE(f64_f64, double, double)
REDUCE(i32_i32, int32_t, int32_t)
REDUCE(i64_i64, int64_t, int64_t)
REDUCE(i32_i64, int32_t, int64_t)
REDUCE(u8_i64, uint8_t, int64_t)
REDUCE(u8_u8, uint8_t, uint8_t)
REDUCE(i32_u8, int32_t, uint8_t)
REDUCE(i64_u8, int64_t, uint8_t)
REDUCE(f32_u8, float, uint8_t)
REDUCE(f64_u8, double, uint8_t)

#define ARGRED(SUF, T)                                                                                                 \
    extern "C" __global__ void argreduce_##SUF(int is_max, const T *x, Layout lk, int64_t R, int64_t rs, int64_t *out, \
                                               int64_t n_out) {                                                        \
        argreduce_body<T>(is_max, x, lk, R, rs, out, n_out);                                                           \
    }
ARGRED(u8, uint8_t)
ARGRED(i32, int32_t)
ARGRED(i64, int64_t)
ARGRED(f32, float)
ARGRED(f64, double)

#define LSE(SUF, T)                                                                                                    \
    extern "C" __global__ void logsumexp_##SUF(const T *x, Layout lk, Layout lr, int64_t R, T *out, int64_t n_out) {   \
        logsumexp_body<T>(x, lk, lr, R, out, n_out);                                                                   \
    }
LSE(f32, float)
LSE(f64, double)

#define CUMSUM(NAME, T, A)                                                                                             \
    extern "C" __global__ void cumsum_##NAME(const T *x, Layout lrow, int64_t len, int64_t xs, A *out, Layout orow,    \
                                             int64_t os, int64_t n_rows, int reverse) {                                \
        cumsum_body<T, A>(x, lrow, len, xs, out, orow, os, n_rows, reverse);                                           \
    }
CUMSUM(f32_f32, float, float)
CUMSUM(f64_f64, double, double)
CUMSUM(i32_i64, int32_t, int64_t)
CUMSUM(i64_i64, int64_t, int64_t)
CUMSUM(u8_i64, uint8_t, int64_t)

#define TIE_PROD(SUF, T)                                                                                               \
    extern "C" __global__ void tie_weights_##SUF(const T *x, Layout lk, Layout lr, int64_t R, const T *m, Layout lm,   \
                                                 T *out, Layout olk, Layout olr, int64_t n_out) {                      \
        tie_weights_body<T>(x, lk, lr, R, m, lm, out, olk, olr, n_out);                                                \
    }                                                                                                                  \
    extern "C" __global__ void prod_others_##SUF(const T *x, Layout lrow, int64_t xs, T *out, Layout orow, int64_t os, \
                                                 int64_t len, int64_t n_rows) {                                        \
        prod_others_body<T>(x, lrow, xs, out, orow, os, len, n_rows);                                                  \
    }                                                                                                                  \
    extern "C" __global__ void prod_others_bw_##SUF(const T *x, Layout lrow, int64_t xs, const T *g, Layout grow,      \
                                                    int64_t gs, T *out, Layout orow, int64_t os, T *left, int64_t len, \
                                                    int64_t n_rows) {                                                  \
        prod_others_bw_body<T>(x, lrow, xs, g, grow, gs, out, orow, os, left, len, n_rows);                            \
    }
TIE_PROD(f32, float)
TIE_PROD(f64, double)
