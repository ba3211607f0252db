/* GEMM epilogue activations for one element type and ISA: act1 (scalar) and, when GVEC_ACT, vact (vector).
 *
 * A template like gemm_kernels.h, which includes it; gemm16.c includes it too, for the 16-bit GEMM's epilogue.
 * Needs GT GS GSFX GTARGET, GNAME(x) (x suffixed with GSFX) and, when GVEC_ACT is 1, the vector macros listed in
 * gemm_kernels.h (GV G_SET1 G_ADD G_SUB G_MUL G_DIV G_MIN G_MAX G_FMA G_RELU G_ABS G_ROUND G_LDEXP G_SELNEG).
 */

GTARGET static inline GT GNAME(act1)(GT x, int act) {
    switch (act) {
    case PLAST_ACT_RELU: return x < (GT)0 ? (GT)0 : x;
    case PLAST_ACT_GELU_TANH: {
        /* 0.5 x (1 + tanh(u)) == x / (1 + exp(-2u)): no cancellation for negative x. */
        GT u = (GT)0.7978845608028654 * (x + (GT)0.044715 * x * x * x);
        return x / ((GT)1 + GCAT(gemm_exp, GS)(-(GT)2 * u));
    }
    case PLAST_ACT_GELU_ERF:
        /* 1 + erf(z) == erfc(-z), accurate where erf(z) is close to -1. */
        return (GT)0.5 * x * GCAT(gemm_erfc, GS)(-x * (GT)0.7071067811865476);
    default: return x;
    }
}

#if GVEC_ACT
/* exp for the vector type: Cody-Waite reduction to r in [-ln2/2, ln2/2] and a degree-6 polynomial (Cephes'
 * expf coefficients). Inputs are clamped to [-87.3, 88], so results stay finite and normal. */
GTARGET PLAST_INLINE GV GNAME(vexp)(GV x) {
    x = G_MIN(G_MAX(x, G_SET1(-87.3f)), G_SET1(88.0f));
    GV n = G_ROUND(G_MUL(x, G_SET1(1.44269504088896341f)));
    GV r = G_FMA(n, G_SET1(-0.693359375f), x);
    r = G_FMA(n, G_SET1(2.12194440e-4f), r);
    GV p = G_SET1(1.9875691500e-4f);
    p = G_FMA(p, r, G_SET1(1.3981999507e-3f));
    p = G_FMA(p, r, G_SET1(8.3334519073e-3f));
    p = G_FMA(p, r, G_SET1(4.1665795894e-2f));
    p = G_FMA(p, r, G_SET1(1.6666665459e-1f));
    p = G_FMA(p, r, G_SET1(5.0000001201e-1f));
    p = G_FMA(p, G_MUL(r, r), G_ADD(r, G_SET1(1.0f)));
    return G_LDEXP(p, n);
}

/* erfc(z) for z >= 0 with fractional error below 1.2e-7 (the Chebyshev fit of Numerical Recipes, 6.2). */
GTARGET PLAST_INLINE GV GNAME(verfc_pos)(GV z) {
    GV t = G_DIV(G_SET1(1.0f), G_FMA(G_SET1(0.5f), z, G_SET1(1.0f)));
    GV p = G_SET1(0.17087277f);
    p = G_FMA(p, t, G_SET1(-0.82215223f));
    p = G_FMA(p, t, G_SET1(1.48851587f));
    p = G_FMA(p, t, G_SET1(-1.13520398f));
    p = G_FMA(p, t, G_SET1(0.27886807f));
    p = G_FMA(p, t, G_SET1(-0.18628806f));
    p = G_FMA(p, t, G_SET1(0.09678418f));
    p = G_FMA(p, t, G_SET1(0.37409196f));
    p = G_FMA(p, t, G_SET1(1.00002368f));
    p = G_FMA(p, t, G_SET1(-1.26551223f));
    p = G_SUB(p, G_MUL(z, z));
    return G_MUL(t, GNAME(vexp)(p));
}

GTARGET PLAST_INLINE GV GNAME(vact)(GV x, int act) {
    switch (act) {
    case PLAST_ACT_RELU: return G_RELU(x);
    case PLAST_ACT_GELU_TANH: {
        GV x2 = G_MUL(x, x);
        GV u = G_MUL(G_MUL(x, G_SET1(0.7978845608028654f)), G_FMA(x2, G_SET1(0.044715f), G_SET1(1.0f)));
        GV e = GNAME(vexp)(G_MUL(u, G_SET1(-2.0f)));
        return G_DIV(x, G_ADD(G_SET1(1.0f), e));
    }
    case PLAST_ACT_GELU_ERF: {
        GV z = G_MUL(G_ABS(x), G_SET1(0.7071067811865476f));
        GV ec = GNAME(verfc_pos)(z);                        /* erfc(|x|/sqrt2) */
        GV onep = G_SELNEG(x, ec, G_SUB(G_SET1(2.0f), ec)); /* 1 + erf(x/sqrt2) */
        return G_MUL(G_MUL(G_SET1(0.5f), x), onep);
    }
    default: return x;
    }
}
#endif
