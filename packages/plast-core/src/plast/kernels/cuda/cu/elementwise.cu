// Elementwise kernels: binary ops with broadcasting (strides 0 along broadcast dims, up to 8 dims), unary ops,
// predicates, where, clamp, casts/strided copies, fills, tril/triu and a few mask helpers.
//
// Op codes are runtime arguments (one kernel per dtype, a switch inside): the switch is uniform across a warp,
// and it keeps the number of instantiations, and so the compile time, small. The codes are numbered once, in
// plast/_core/codes.h: PLAST_BIN_* (binary), PLAST_CMP_* (comparisons), PLAST_UN_* (unary), PLAST_PRED_*.
#include "codes.h"
#include "common.cuh"
#include "special.h" // digamma, trigamma, erfinv, I0, I1, igamma: the CPU's (plast/_core/special.h)

#include <type_traits>

// ---- binary -------------------------------------------------------------------------------------------------
template <typename T> __device__ __forceinline__ bool is_nan(T v) { return v != v; }

template <typename T> __device__ __forceinline__ T float_binary(int op, T a, T b) {
    switch (op) {
    case PLAST_BIN_ADD: return a + b;
    case PLAST_BIN_SUB: return a - b;
    case PLAST_BIN_MUL: return a * b;
    case PLAST_BIN_DIV: return a / b;
    case PLAST_BIN_MAX: return is_nan(a) || is_nan(b) ? Limits<T>::nan() : (a > b ? a : b);
    case PLAST_BIN_MIN: return is_nan(a) || is_nan(b) ? Limits<T>::nan() : (a < b ? a : b);
    case PLAST_BIN_POW: return pow(a, b);
    case PLAST_BIN_FLOORDIV: {
        // numpy's floor_divide for floats (npy_divmod)
        if (b == T(0)) return a / b;
        T mod = fmod(a, b);
        T div = (a - mod) / b;
        if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
        T fl;
        if (div != T(0)) {
            fl = floor(div);
            if (div - fl > T(0.5)) fl += T(1);
        } else {
            fl = copysign(T(0), a / b);
        }
        return fl;
    }
    case PLAST_BIN_REMAINDER: {
        T m = fmod(a, b);
        if (m != T(0) && ((b < T(0)) != (m < T(0)))) m += b;
        return m;
    }
    case PLAST_BIN_FMOD: return fmod(a, b);
    case PLAST_BIN_ATAN2: return atan2(a, b);
    case PLAST_BIN_COPYSIGN: return copysign(a, b);
    case PLAST_BIN_NEXTAFTER: return nextafter(a, b);
    case PLAST_BIN_IGAMMA: return (T)plast_igamma(0, (double)a, (double)b); // in double, as the CPU
    case PLAST_BIN_IGAMMAC: return (T)plast_igamma(1, (double)a, (double)b);
    case PLAST_BIN_POLYGAMMA: return (T)plast_polygamma((int)a, (double)b);
    default: return Limits<T>::nan();
    }
}

template <typename T> __device__ __forceinline__ T int_binary(int op, T a, T b, int64_t *err, int64_t pos) {
    typedef typename std::conditional<sizeof(T) == 8, unsigned long long, unsigned int>::type U;
    switch (op) {
    case PLAST_BIN_ADD: return (T)((U)a + (U)b); // wraps around, as in torch
    case PLAST_BIN_SUB: return (T)((U)a - (U)b);
    case PLAST_BIN_MUL: return (T)((U)a * (U)b);
    case PLAST_BIN_MAX: return a > b ? a : b;
    case PLAST_BIN_MIN: return a < b ? a : b;
    case PLAST_BIN_POW: {
        if (b < 0) return a == 1 ? T(1) : (a == -1 ? ((b & 1) ? T(-1) : T(1)) : T(0));
        U r = 1, base = (U)a;
        for (T e = b; e > 0; e >>= 1) {
            if (e & 1) r *= base;
            base *= base;
        }
        return (T)r;
    }
    case PLAST_BIN_FLOORDIV:
    case PLAST_BIN_REMAINDER:
    case PLAST_BIN_FMOD: {
        if (b == 0) {
            plast_set_error(err, PLAST_ERR_ZERO_DIV, (int64_t)a, 0, pos);
            return 0;
        }
        if (b == -1) return op == PLAST_BIN_FLOORDIV ? (T)(U(0) - (U)a) : T(0); // no overflow trap on MIN / -1
        T q = a / b, r = a % b;
        if (op == PLAST_BIN_FMOD) return r;
        bool adjust = r != 0 && ((r < 0) != (b < 0));
        return op == PLAST_BIN_FLOORDIV ? (adjust ? q - 1 : q) : (adjust ? r + b : r);
    }
    case PLAST_BIN_BITAND: return a & b;
    case PLAST_BIN_BITOR: return a | b;
    case PLAST_BIN_BITXOR: return a ^ b;
    case PLAST_BIN_GCD:
    case PLAST_BIN_LCM: {
        // Euclid on the magnitudes (unsigned: |INT_MIN| fits), as torch's: gcd(INT_MIN, 0) wraps to INT_MIN
        U x = a < 0 ? U(0) - (U)a : (U)a, y = b < 0 ? U(0) - (U)b : (U)b;
        while (y != 0) {
            U t = x % y;
            x = y;
            y = t;
        }
        if (op == PLAST_BIN_GCD) return (T)x;
        if (x == 0) return T(0);
        T r = (T)((U)(a / (T)x) * (U)b); // torch's |a / gcd * b|, wrapping where it overflows
        return r < 0 ? (T)(U(0) - (U)r) : r;
    }
    // shifts by a negative count or by the width or more: 0 to the left, the sign to the right (torch's rule)
    case PLAST_BIN_SHL: return b < 0 || b >= T(8 * sizeof(T)) ? T(0) : (T)((U)a << b);
    case PLAST_BIN_SHR: return b < 0 || b >= T(8 * sizeof(T)) ? (a < 0 ? T(-1) : T(0)) : (T)(a >> b);
    default: return 0;
    }
}

template <typename T> struct IsFloat {
    static const bool value = false;
};
template <> struct IsFloat<float> {
    static const bool value = true;
};
template <> struct IsFloat<double> {
    static const bool value = true;
};

// bool: add/max/or -> or, mul/min/and -> and, sub/xor -> xor (torch's rules for bool tensors)
__device__ __forceinline__ uint8_t bool_binary(int op, uint8_t a, uint8_t b) {
    bool x = a != 0, y = b != 0;
    switch (op) {
    case PLAST_BIN_ADD:
    case PLAST_BIN_MAX:
    case PLAST_BIN_BITOR: return x || y;
    case PLAST_BIN_MUL:
    case PLAST_BIN_MIN:
    case PLAST_BIN_BITAND:
    case PLAST_BIN_POW: return op == PLAST_BIN_POW ? (x || !y) : (x && y);
    default: return x != y;
    }
}

template <typename T>
__device__ __forceinline__ void binary_body(int op, const T *a, Layout la, const T *b, Layout lb, T *out, Layout lo,
                                            int64_t n, int64_t *err) {
    PLAST_GRID_LOOP(i, n) {
        T x = a[layout_offset(la, i)], y = b[layout_offset(lb, i)];
        T r;
        if constexpr (IsFloat<T>::value) r = float_binary<T>(op, x, y);
        else if constexpr (sizeof(T) == 1) r = bool_binary(op, x, y);
        else r = int_binary<T>(op, x, y, err, i);
        out[layout_offset(lo, i)] = r;
    }
}

// ---- comparisons and logical ops (bool out) -------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ void compare_body(int op, const T *a, Layout la, const T *b, Layout lb, uint8_t *out,
                                             Layout lo, int64_t n) {
    PLAST_GRID_LOOP(i, n) {
        T x = a[layout_offset(la, i)], y = b[layout_offset(lb, i)];
        bool r;
        switch (op) {
        case PLAST_CMP_EQ: r = x == y; break;
        case PLAST_CMP_NE: r = x != y; break;
        case PLAST_CMP_LT: r = x < y; break;
        case PLAST_CMP_LE: r = x <= y; break;
        case PLAST_CMP_GT: r = x > y; break;
        case PLAST_CMP_GE: r = x >= y; break;
        case PLAST_CMP_LAND: r = (x != T(0)) && (y != T(0)); break;
        case PLAST_CMP_LOR: r = (x != T(0)) || (y != T(0)); break;
        default: r = (x != T(0)) != (y != T(0)); break;
        }
        out[layout_offset(lo, i)] = r ? 1 : 0;
    }
}

// ---- unary --------------------------------------------------------------------------------------------------
template <typename T> __device__ __forceinline__ T float_unary(int op, T x, int decimals) {
    switch (op) {
    case PLAST_UN_EXP: return exp(x);
    case PLAST_UN_LOG: return log(x);
    case PLAST_UN_LOG1P: return log1p(x);
    case PLAST_UN_SQRT: return sqrt(x);
    case PLAST_UN_SIN: return sin(x);
    case PLAST_UN_COS: return cos(x);
    case PLAST_UN_TANH: return tanh(x);
    case PLAST_UN_SIGMOID: return T(0.5) * (T(1) + tanh(T(0.5) * x)); // the CPU's formula
    case PLAST_UN_ABS: return fabs(x);
    case PLAST_UN_SIGN: return is_nan(x) ? x : (x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0)));
    case PLAST_UN_RELU: return is_nan(x) ? x : (x > T(0) ? x : T(0));
    case PLAST_UN_ERF: return erf(x);
    case PLAST_UN_NEG: return -x;
    case PLAST_UN_FLOOR: return floor(x);
    case PLAST_UN_CEIL: return ceil(x);
    case PLAST_UN_TRUNC: return trunc(x);
    case PLAST_UN_ROUND: {
        if (decimals == 0) return rint(x);
        double p = pow(10.0, (double)(decimals > 0 ? decimals : -decimals));
        return decimals > 0 ? (T)(rint((double)x * p) / p) : (T)(rint((double)x / p) * p);
    }
    case PLAST_UN_EXP2: return exp2(x);
    case PLAST_UN_LOG2: return log2(x);
    case PLAST_UN_LOG10: return (T)log10((double)x); // the CPU computes log10 in double too
    case PLAST_UN_EXPM1: return expm1(x);
    case PLAST_UN_GELU_ERF: return T(0.5) * x * (T(1) + erf(x * T(0.70710678118654752440)));
    case PLAST_UN_GELU_TANH: {
        const T k = T(0.79788456080286535588); // sqrt(2 / pi)
        return T(0.5) * x * (T(1) + tanh(k * (x + T(0.044715) * x * x * x)));
    }
    case PLAST_UN_GELU_TANH_GRAD: { // torch's gelu_backward formulas (csrc/unary.c)
        const T b = T(0.79788456080286535588), k = T(0.044715);
        const T t = tanh(b * (x + k * x * x * x));
        return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * b * (T(1) + T(3) * k * x * x);
    }
    case PLAST_UN_GELU_ERF_GRAD:
        return T(0.5) * (T(1) + erf(x * T(0.70710678118654752440))) +
               x * exp(T(-0.5) * x * x) * T(0.39894228040143267794);
    case PLAST_UN_SILU: return x / (T(1) + exp(-x));
    case PLAST_UN_RECIP: return T(1) / x;
    case PLAST_UN_RSQRT: return T(1) / sqrt(x);
    case PLAST_UN_SQUARE: return x * x;
    case PLAST_UN_ASIN: return asin(x);
    case PLAST_UN_ACOS: return acos(x);
    case PLAST_UN_ATAN: return atan(x);
    case PLAST_UN_ASINH: return asinh(x);
    case PLAST_UN_ACOSH: return acosh(x);
    case PLAST_UN_ATANH: return atanh(x);
    // in double, rounded once, as the CPU computes them (csrc/unary.c)
    case PLAST_UN_ERFC: return (T)erfc((double)x);
    case PLAST_UN_LGAMMA: return (T)lgamma((double)x);
    case PLAST_UN_ERFINV: return (T)plast_erfinv((double)x);
    case PLAST_UN_DIGAMMA: return (T)plast_digamma((double)x);
    case PLAST_UN_TRIGAMMA: return (T)plast_trigamma((double)x);
    case PLAST_UN_I0: return (T)plast_bessel_i(0, (double)x);
    case PLAST_UN_I1: return (T)plast_bessel_i(1, (double)x);
    default: return Limits<T>::nan();
    }
}

template <typename T> __device__ __forceinline__ T int_unary(int op, T x) {
    switch (op) {
    case PLAST_UN_ABS: return x < 0 ? -x : x;
    case PLAST_UN_SIGN: return x > 0 ? T(1) : (x < 0 ? T(-1) : T(0));
    case PLAST_UN_RELU: return x > 0 ? x : T(0);
    case PLAST_UN_NEG: return -x;
    case PLAST_UN_BITNOT: return ~x;
    case PLAST_UN_SQUARE: return x * x;
    default: return x; // floor/ceil/trunc/round of an integer is itself
    }
}

template <typename T>
__device__ __forceinline__ void unary_body(int op, const T *x, Layout lx, T *out, Layout lo, int64_t n, int decimals) {
    PLAST_GRID_LOOP(i, n) {
        T v = x[layout_offset(lx, i)];
        T r;
        if constexpr (IsFloat<T>::value) r = float_unary<T>(op, v, decimals);
        else if constexpr (sizeof(T) == 1)
            r = (op == PLAST_UN_BITNOT || op == PLAST_UN_NEG) ? (v == 0) : (op == PLAST_UN_SIGN ? (v != 0) : v);
        else r = int_unary<T>(op, v);
        out[layout_offset(lo, i)] = r;
    }
}

// predicates: bool out
template <typename T>
__device__ __forceinline__ void predicate_body(int op, const T *x, Layout lx, uint8_t *out, Layout lo, int64_t n) {
    PLAST_GRID_LOOP(i, n) {
        T v = x[layout_offset(lx, i)];
        bool r;
        if constexpr (IsFloat<T>::value) {
            switch (op) {
            case PLAST_PRED_ISFINITE: r = isfinite(v); break;
            case PLAST_PRED_ISNAN: r = isnan(v); break;
            case PLAST_PRED_ISINF: r = isinf(v); break;
            case PLAST_PRED_LOGICAL_NOT: r = v == T(0); break;
            default: r = v != T(0); break;
            }
        } else {
            r = op == PLAST_PRED_ISFINITE
                    ? true
                    : (op == PLAST_PRED_LOGICAL_NOT ? v == 0 : (op == PLAST_PRED_NONZERO ? v != 0 : false));
        }
        out[layout_offset(lo, i)] = r ? 1 : 0;
    }
}

// ---- where / clamp --------------------------------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ void where_body(const uint8_t *c, Layout lc, const T *a, Layout la, const T *b, Layout lb,
                                           T *out, Layout lo, int64_t n) {
    PLAST_GRID_LOOP(i, n) {
        out[layout_offset(lo, i)] = c[layout_offset(lc, i)] ? a[layout_offset(la, i)] : b[layout_offset(lb, i)];
    }
}

// out = min(max(x, lo), hi) with NaN propagating (numpy's maximum/minimum); lo/hi may be null
template <typename T>
__device__ __forceinline__ void clamp_body(const T *x, Layout lx, const T *mn, Layout lmn, const T *mx, Layout lmx,
                                           T *out, Layout lo, int64_t n) {
    PLAST_GRID_LOOP(i, n) {
        T v = x[layout_offset(lx, i)];
        if (mn != nullptr) {
            T m = mn[layout_offset(lmn, i)];
            if constexpr (IsFloat<T>::value) v = is_nan(v) || is_nan(m) ? Limits<T>::nan() : (v > m ? v : m);
            else v = v > m ? v : m;
        }
        if (mx != nullptr) {
            T m = mx[layout_offset(lmx, i)];
            if constexpr (IsFloat<T>::value) v = is_nan(v) || is_nan(m) ? Limits<T>::nan() : (v < m ? v : m);
            else v = v < m ? v : m;
        }
        out[layout_offset(lo, i)] = v;
    }
}

// ---- casts and strided copies -----------------------------------------------------------------------------------
template <typename D, typename S> __device__ __forceinline__ D convert(S v) { return (D)v; }
template <> __device__ __forceinline__ uint8_t convert<uint8_t, float>(float v) { return v != 0.0f; }
template <> __device__ __forceinline__ uint8_t convert<uint8_t, double>(double v) { return v != 0.0; }
template <> __device__ __forceinline__ uint8_t convert<uint8_t, int32_t>(int32_t v) { return v != 0; }
template <> __device__ __forceinline__ uint8_t convert<uint8_t, int64_t>(int64_t v) { return v != 0; }

template <typename S, typename D>
__device__ __forceinline__ void copy_body(const S *x, Layout lx, D *out, Layout lo, int64_t n) {
    PLAST_GRID_LOOP(i, n) out[layout_offset(lo, i)] = convert<D, S>(x[layout_offset(lx, i)]);
}

// out[i] = pattern (1, 4 or 8 bytes): the launcher packs the value in the target dtype
template <typename U> __device__ __forceinline__ void fill_body(U *out, Layout lo, int64_t n, U pattern) {
    PLAST_GRID_LOOP(i, n) out[layout_offset(lo, i)] = pattern;
}

// out = x where (col - row) <= k (tril) / >= k (triu), else 0; the last two dims of the out shape are (rows, cols)
template <typename T>
__device__ __forceinline__ void tril_body(const T *x, Layout lx, T *out, int64_t n, int64_t rows, int64_t cols,
                                          int64_t k, int upper) {
    PLAST_GRID_LOOP(i, n) {
        int64_t c = i % cols, r = (i / cols) % rows;
        bool keep = upper ? (c - r >= k) : (c - r <= k);
        out[i] = keep ? x[layout_offset(lx, i)] : T(0);
    }
}

// out = (u >= p) * scale
template <typename T> __device__ __forceinline__ void dropout_mask_body(const T *u, T *out, int64_t n, T p, T scale) {
    PLAST_GRID_LOOP(i, n) out[i] = u[i] >= p ? scale : T(0);
}

// out = 0 where the mask is true, -inf where false
template <typename T>
__device__ __forceinline__ void mask_to_additive_body(const uint8_t *m, Layout lm, T *out, int64_t n) {
    PLAST_GRID_LOOP(i, n) out[i] = m[layout_offset(lm, i)] ? T(0) : -Limits<T>::inf();
}

// frexp: x = m * 2^e, |m| in [0.5, 1) (0, inf and nan keep themselves with exponent 0, as the CPU's numpy)
template <typename T>
__device__ __forceinline__ void frexp_body(const T *x, Layout lx, T *m, Layout lm, int32_t *e, Layout le, int64_t n) {
    PLAST_GRID_LOOP(i, n) {
        T v = x[layout_offset(lx, i)];
        int ex = 0;
        T r = isfinite(v) ? frexp(v, &ex) : v;
        m[layout_offset(lm, i)] = r;
        e[layout_offset(le, i)] = isfinite(v) ? ex : 0;
    }
}

// ---- instantiations -------------------------------------------------------------------------------------------
#define BINARY(SUF, T)                                                                                                 \
    extern "C" __global__ void binary_##SUF(int op, const T *a, Layout la, const T *b, Layout lb, T *out, Layout lo,   \
                                            int64_t n, int64_t *err) {                                                 \
        binary_body<T>(op, a, la, b, lb, out, lo, n, err);                                                             \
    }                                                                                                                  \
    extern "C" __global__ void compare_##SUF(int op, const T *a, Layout la, const T *b, Layout lb, uint8_t *out,       \
                                             Layout lo, int64_t n) {                                                   \
        compare_body<T>(op, a, la, b, lb, out, lo, n);                                                                 \
    }                                                                                                                  \
    extern "C" __global__ void unary_##SUF(int op, const T *x, Layout lx, T *out, Layout lo, int64_t n,                \
                                           int decimals) {                                                             \
        unary_body<T>(op, x, lx, out, lo, n, decimals);                                                                \
    }                                                                                                                  \
    extern "C" __global__ void predicate_##SUF(int op, const T *x, Layout lx, uint8_t *out, Layout lo, int64_t n) {    \
        predicate_body<T>(op, x, lx, out, lo, n);                                                                      \
    }                                                                                                                  \
    extern "C" __global__ void where_##SUF(const uint8_t *c, Layout lc, const T *a, Layout la, const T *b, Layout lb,  \
                                           T *out, Layout lo, int64_t n) {                                             \
        where_body<T>(c, lc, a, la, b, lb, out, lo, n);                                                                \
    }                                                                                                                  \
    extern "C" __global__ void clamp_##SUF(const T *x, Layout lx, const T *mn, Layout lmn, const T *mx, Layout lmx,    \
                                           T *out, Layout lo, int64_t n) {                                             \
        clamp_body<T>(x, lx, mn, lmn, mx, lmx, out, lo, n);                                                            \
    }                                                                                                                  \
    extern "C" __global__ void tril_##SUF(const T *x, Layout lx, T *out, int64_t n, int64_t rows, int64_t cols,        \
                                          int64_t k, int upper) {                                                      \
        tril_body<T>(x, lx, out, n, rows, cols, k, upper);                                                             \
    }

#define FREXP(SUF, T)                                                                                                  \
    extern "C" __global__ void frexp_##SUF(const T *x, Layout lx, T *m, Layout lm, int32_t *e, Layout le, int64_t n) { \
        frexp_body<T>(x, lx, m, lm, e, le, n);                                                                         \
    }
FREXP(f32, float)
FREXP(f64, double)

BINARY(u8, uint8_t)
BINARY(i32, int32_t)
BINARY(i64, int64_t)
BINARY(f32, float)
BINARY(f64, double)

#define FLOAT_ONLY(SUF, T)                                                                                             \
    extern "C" __global__ void dropout_mask_##SUF(const T *u, T *out, int64_t n, T p, T scale) {                       \
        dropout_mask_body<T>(u, out, n, p, scale);                                                                     \
    }                                                                                                                  \
    extern "C" __global__ void mask_to_additive_##SUF(const uint8_t *m, Layout lm, T *out, int64_t n) {                \
        mask_to_additive_body<T>(m, lm, out, n);                                                                       \
    }

FLOAT_ONLY(f32, float)
FLOAT_ONLY(f64, double)

#define COPY(SS, S, DS, D)                                                                                             \
    extern "C" __global__ void copy_##SS##_##DS(const S *x, Layout lx, D *out, Layout lo, int64_t n) {                 \
        copy_body<S, D>(x, lx, out, lo, n);                                                                            \
    }
#define COPY_FROM(SS, S)                                                                                               \
    COPY(SS, S, u8, uint8_t)                                                                                           \
    COPY(SS, S, i32, int32_t) COPY(SS, S, i64, int64_t) COPY(SS, S, f32, float) COPY(SS, S, f64, double)

COPY_FROM(u8, uint8_t)
COPY_FROM(i32, int32_t)
COPY_FROM(i64, int64_t)
COPY_FROM(f32, float)
COPY_FROM(f64, double)

extern "C" __global__ void fill_b1(uint8_t *out, Layout lo, int64_t n, uint8_t v) { fill_body<uint8_t>(out, lo, n, v); }
extern "C" __global__ void fill_b4(uint32_t *out, Layout lo, int64_t n, uint32_t v) {
    fill_body<uint32_t>(out, lo, n, v);
}
extern "C" __global__ void fill_b8(uint64_t *out, Layout lo, int64_t n, uint64_t v) {
    fill_body<uint64_t>(out, lo, n, v);
}
