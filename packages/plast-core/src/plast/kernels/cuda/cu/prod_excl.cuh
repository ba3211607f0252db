// reduce_prod_excl's arithmetic (prod's derivatives of order 3 and up), shared by the CUDA kernel (prod_excl.cu)
// and a host build in the tests (tests/test_cuda_kernels_extra.py compiles it with g++ against the CPU backend).
//
// The CPU kernel's definition (kernels/cpu/kernels_reduce.py): along one row of length len, with r >= 2 vectors
// g_1..g_r,
//     out[k] = sum over distinct i_1..i_r, all != k, of g_1[i_1] ... g_r[i_r] * prod_{j not in {k, i_1..i_r}} x[j],
// the coefficient of t_1 ... t_r in prod_{j != k} f_j, f_j = x[j] + sum_s t_s g_s[j], where t_s^2 = 0. A
// polynomial in the t's is stored as its 2^r coefficients, indexed by the bitmask of the t's in each monomial.
// One row is two sequential passes without division (exact with zeros): prefix products P_k = f_0 ... f_{k-1}
// (kept in `pre`, len * 2^r values), then suffix products S_k built from the right while
// out[k] = sum_T P_k[T] S_k[all - T]. The CPU multiplies in a different order (log-depth doubling), so the two
// agree to rounding, not bit for bit.
#pragma once

#include <stdint.h>

#ifdef __CUDACC__
#define PLAST_PE_HD __host__ __device__ __forceinline__
#else
#define PLAST_PE_HD static inline
#endif

// b = a * f_j where f_j = xv + sum_s t_s g_s[j] (b may be a: coefficients are updated from the highest mask
// down, and a mask only reads masks below it)
template <typename T>
PLAST_PE_HD void plast_pe_mul_factor(const T *a, T *b, int r, T xv, const T *g, int64_t gv, int64_t j) {
    const int64_t full = ((int64_t)1 << r) - 1;
    for (int64_t S = full; S >= 0; S--) {
        T acc = a[S] * xv;
        for (int s = 0; s < r; s++)
            if ((S >> s) & 1) acc += a[S ^ ((int64_t)1 << s)] * g[s * gv + j];
        b[S] = acc;
    }
}

// One row. x: len values at stride xs; g_s[j] = g[s * gv + j]; out at stride os. pre: len << r scratch values,
// suf: 1 << r.
template <typename T>
PLAST_PE_HD void plast_prod_excl_row(const T *x, int64_t xs, const T *g, int64_t gv, int r, int64_t len, T *out,
                                     int64_t os, T *pre, T *suf) {
    const int64_t m = (int64_t)1 << r, full = m - 1;
    if (len <= 0) return;
    for (int64_t S = 0; S < m; S++) pre[S] = S == 0 ? T(1) : T(0);
    for (int64_t k = 0; k + 1 < len; k++) plast_pe_mul_factor<T>(pre + k * m, pre + (k + 1) * m, r, x[k * xs], g, gv, k);
    for (int64_t S = 0; S < m; S++) suf[S] = S == 0 ? T(1) : T(0);
    for (int64_t k = len - 1; k >= 0; k--) {
        const T *p = pre + k * m;
        T acc = T(0);
        for (int64_t S = 0; S < m; S++) acc += p[S] * suf[full ^ S];
        out[k * os] = acc;
        plast_pe_mul_factor<T>(suf, suf, r, x[k * xs], g, gv, k);
    }
}
