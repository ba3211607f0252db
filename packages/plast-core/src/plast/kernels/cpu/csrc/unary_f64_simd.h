/* float64 body of unary.c (instantiated per SIMD level by vec_levels_f64.h): the ops whose vector form needs
 * only exp (vmath_f64_simd.h), rounding or plain arithmetic. Returns 0 for the others (log, log1p, tanh, erf,
 * gelu_erf, sin, cos, exp2, log2, log10, expm1), which unary.c runs through libm. */

#define UN_LOOP(EXPR)                                                                                                  \
    {                                                                                                                  \
        ptrdiff_t i = 0;                                                                                               \
        for (; i + VW <= n; i += VW) {                                                                                 \
            vf v = vload(x + i);                                                                                       \
            vstore(y + i, EXPR);                                                                                       \
        }                                                                                                              \
        if (i < n) {                                                                                                   \
            vf v = vloadn(x + i, n - i);                                                                               \
            vstoren(y + i, EXPR, n - i);                                                                               \
        }                                                                                                              \
    }

VTARGET static int VN(unary)(int op, const double *x, double *y, ptrdiff_t n) {
    switch (op) {
    case PLAST_UN_EXP: UN_LOOP(VN(v_exp)(v)) return 1;
    case PLAST_UN_SQRT: UN_LOOP(vsqrt(v)) return 1;
    case PLAST_UN_RSQRT: UN_LOOP(vdiv(vset1(1.0), vsqrt(v))) return 1;
    case PLAST_UN_SIGMOID: UN_LOOP(VN(v_sigmoid)(v)) return 1;
    case PLAST_UN_RELU: UN_LOOP(vmax(vset1(0.0), v)) return 1; /* NaN stays NaN */
    case PLAST_UN_ABS: UN_LOOP(vabs(v)) return 1;
    case PLAST_UN_NEG: UN_LOOP(vneg(v)) return 1;
    case PLAST_UN_SILU: UN_LOOP(vmul(v, VN(v_sigmoid)(v))) return 1;
    case PLAST_UN_RECIP: UN_LOOP(vdiv(vset1(1.0), v)) return 1;
    case PLAST_UN_SQUARE: UN_LOOP(vmul(v, v)) return 1;
    case PLAST_UN_GELU_TANH:
        /* x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): the libm loop's formula, no cancellation */
        UN_LOOP(vmul(
            v, VN(v_sigmoid)(vmul(vfma(vmul(vmul(v, v), v), vset1(0.044715), v), vset1(2.0 * 0.79788456080286536)))))
        return 1;
    case PLAST_UN_SIGN:
        UN_LOOP(vsel(
            visnan(v), v,
            vsub(vsel(vgt(v, vset1(0.0)), vset1(1.0), vset1(0.0)), vsel(vlt(v, vset1(0.0)), vset1(1.0), vset1(0.0)))))
        return 1;
    case PLAST_UN_FLOOR: UN_LOOP(vfloor(v)) return 1;
    case PLAST_UN_CEIL: UN_LOOP(vceil(v)) return 1;
    case PLAST_UN_TRUNC: UN_LOOP(vtrunc(v)) return 1;
    case PLAST_UN_ROUND: UN_LOOP(vround(v)) return 1; /* half to even */
    }
    return 0;
}
#undef UN_LOOP
