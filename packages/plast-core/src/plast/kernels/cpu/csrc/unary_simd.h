/* Level-generic body of unary.c (instantiated per SIMD level by vec_levels.h). */

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

VTARGET static void VN(unary_f32)(int op, const float *x, float *y, ptrdiff_t n) {
    switch (op) {
    case PLAST_UN_EXP: UN_LOOP(VN(v_exp)(v)) break;
    case PLAST_UN_LOG: UN_LOOP(VN(v_log)(v)) break;
    case PLAST_UN_LOG1P: UN_LOOP(VN(v_log1p)(v)) break;
    case PLAST_UN_SQRT: UN_LOOP(vsqrt(v)) break;
    case PLAST_UN_RSQRT: UN_LOOP(vdiv(vset1(1.0f), vsqrt(v))) break;
    case PLAST_UN_TANH: UN_LOOP(VN(v_tanh)(v)) break;
    case PLAST_UN_SIGMOID: UN_LOOP(VN(v_sigmoid)(v)) break;
    case PLAST_UN_RELU: UN_LOOP(vmax(vset1(0.0f), v)) break; /* NaN stays NaN */
    case PLAST_UN_ABS: UN_LOOP(vabs(v)) break;
    case PLAST_UN_NEG: UN_LOOP(vneg(v)) break;
    case PLAST_UN_GELU_TANH: UN_LOOP(VN(v_gelu_tanh)(v)) break;
    case PLAST_UN_GELU_ERF: UN_LOOP(VN(v_gelu_erf)(v)) break;
    case PLAST_UN_GELU_TANH_GRAD: UN_LOOP(VN(v_gelu_tanh_grad)(v)) break;
    case PLAST_UN_GELU_ERF_GRAD: UN_LOOP(VN(v_gelu_erf_grad)(v)) break;
    case PLAST_UN_SILU: UN_LOOP(VN(v_silu)(v)) break;
    case PLAST_UN_ERF: UN_LOOP(VN(v_erf)(v)) break;
    case PLAST_UN_RECIP: UN_LOOP(vdiv(vset1(1.0f), v)) break;
    case PLAST_UN_SQUARE: UN_LOOP(vmul(v, v)) break;
    case PLAST_UN_SIGN:
        UN_LOOP(vsel(visnan(v), v,
                     vsub(vsel(vgt(v, vset1(0.0f)), vset1(1.0f), vset1(0.0f)),
                          vsel(vlt(v, vset1(0.0f)), vset1(1.0f), vset1(0.0f)))))
        break;
    case PLAST_UN_SIN: UN_LOOP(VN(v_sincos)(v, 0)) break;
    case PLAST_UN_COS: UN_LOOP(VN(v_sincos)(v, 1)) break;
    case PLAST_UN_FLOOR: UN_LOOP(vfloor(v)) break;
    case PLAST_UN_CEIL: UN_LOOP(vceil(v)) break;
    case PLAST_UN_TRUNC: UN_LOOP(vtrunc(v)) break;
    case PLAST_UN_ROUND: UN_LOOP(vround(v)) break; /* half to even */
    case PLAST_UN_EXP2: UN_LOOP(VN(v_exp2)(v)) break;
    case PLAST_UN_LOG2: UN_LOOP(VN(v_log2)(v)) break;
    case PLAST_UN_LOG10: UN_LOOP(VN(v_log10)(v)) break;
    case PLAST_UN_EXPM1: UN_LOOP(VN(v_expm1)(v)) break;
    }
}
#undef UN_LOOP
