/* Level-generic bodies of optim.c: the update of elements [lo, hi) of one parameter, element type VT (float with
 * vec_begin.h, double with vec_begin_f64.h). `c` holds the entry's coefficients in double and `mode` its OPT_M_*
 * bits (optim.c computes both); each coefficient is rounded to VT once, as torch turns a Python scalar into the
 * tensor's dtype.
 *
 * The order of operations is torch's single-tensor path: one tensor op after another, each element rounded to
 * VT after each op, with an FMA exactly where torch's CPU kernels have one (add with alpha, lerp, addcmul; not
 * addcdiv, whose last step is a division). The last partial vector is done with masked loads and stores, so
 * every element goes through the same arithmetic. No include guard: included once per level and dtype.
 */

#define OPT_LD(p, k) ((k) == VW ? vload(p) : vloadn(p, k))
#define OPT_ST(p, v, k)                                                                                                \
    do {                                                                                                               \
        if ((k) == VW) vstore(p, v);                                                                                   \
        else vstoren(p, v, k);                                                                                         \
    } while (0)

/* torch's lerp(start, end, w) for a scalar weight: fma(w, end - start, start) when |w| < 0.5, else
 * fma(w - 1, end - start, end). */
#define OPT_LERP(start, end, small, w, wm1)                                                                            \
    ((small) ? vfma(w, vsub(end, start), start) : vfma(wm1, vsub(end, start), end))

/* ---- SGD: c = [-lr, weight_decay, momentum, 1 - dampening] ---- */

VTARGET static inline __attribute__((always_inline)) void
VN(opt_sgd_vec)(VT *p, const VT *g, VT *b, ptrdiff_t k, int mode, vf lr_neg, vf wd, vf mom, vf damp1) {
    vf x = OPT_LD(g, k);
    if (mode & OPT_M_MAXIMIZE) x = vneg(x);
    vf pv = OPT_LD(p, k);
    if (mode & OPT_M_WD) x = vfma(pv, wd, x); /* grad.add(param, alpha=weight_decay) */
    if (mode & OPT_M_BUF) {
        /* first step: buf = grad.clone(); then buf.mul_(momentum).add_(grad, alpha=1 - dampening) */
        vf bv = (mode & OPT_M_FRESH) ? x : vfma(x, damp1, vmul(OPT_LD(b, k), mom));
        OPT_ST(b, bv, k);
        x = (mode & OPT_M_NESTEROV) ? vfma(bv, mom, x) : bv; /* grad.add(buf, alpha=momentum) */
    }
    OPT_ST(p, vfma(x, lr_neg, pv), k); /* param.add_(grad, alpha=-lr) */
}

VTARGET static void VN(opt_sgd)(VT *p, const VT *g, VT *b, ptrdiff_t lo, ptrdiff_t hi, int mode, const double *c) {
    vf lr_neg = vset1((VT)c[0]), wd = vset1((VT)c[1]), mom = vset1((VT)c[2]), damp1 = vset1((VT)c[3]);
    VT *bb = (mode & OPT_M_BUF) ? b : p; /* never read or written without OPT_M_BUF */
    ptrdiff_t i = lo;
    for (; i + VW <= hi; i += VW) VN(opt_sgd_vec)(p + i, g + i, bb + i, VW, mode, lr_neg, wd, mom, damp1);
    if (i < hi) VN(opt_sgd_vec)(p + i, g + i, bb + i, hi - i, mode, lr_neg, wd, mom, damp1);
}

/* ---- Adam: c = [1 - lr*wd, wd, 1 - beta1, beta2, 1 - beta2, sqrt(bias_correction2), eps, -step_size] ---- */

typedef struct {
    vf decay, wd, w, wm1, beta2, beta2c, bc2s, eps, step;
    int small;
} VN(opt_adam_k);

VTARGET static inline __attribute__((always_inline)) void
VN(opt_adam_vec)(VT *p, const VT *g, VT *m, VT *v, VT *mx, ptrdiff_t k, int mode, const VN(opt_adam_k) * K) {
    vf x = OPT_LD(g, k);
    if (mode & OPT_M_MAXIMIZE) x = vneg(x);
    vf pv = OPT_LD(p, k);
    if (mode & OPT_M_DECAY) pv = vmul(pv, K->decay);           /* param.mul_(1 - lr * weight_decay) */
    if (mode & OPT_M_WD) x = vfma(pv, K->wd, x);               /* grad.add(param, alpha=weight_decay) */
    vf mv = OPT_LERP(OPT_LD(m, k), x, K->small, K->w, K->wm1); /* exp_avg.lerp_(grad, 1 - beta1) */
    OPT_ST(m, mv, k);
    /* exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2) */
    vf vv = vfma(vmul(K->beta2c, x), x, vmul(OPT_LD(v, k), K->beta2));
    OPT_ST(v, vv, k);
    if (mode & OPT_M_AMSGRAD) { /* torch.maximum(max_exp_avg_sq, exp_avg_sq): NaN propagates */
        vf old = OPT_LD(mx, k);
        vv = vsel(visnan(old), old, vmax(old, vv));
        OPT_ST(mx, vv, k);
    }
    vf den = vadd(vdiv(vsqrt(vv), K->bc2s), K->eps);      /* (sqrt / bias_correction2_sqrt).add_(eps) */
    OPT_ST(p, vadd(pv, vdiv(vmul(K->step, mv), den)), k); /* param.addcdiv_(exp_avg, denom, value=-step_size) */
}

VTARGET static void VN(opt_adam)(VT *p, const VT *g, VT *m, VT *v, VT *mx, ptrdiff_t lo, ptrdiff_t hi, int mode,
                                 const double *c) {
    VT w = (VT)c[2];
    VN(opt_adam_k) K;
    K.decay = vset1((VT)c[0]);
    K.wd = vset1((VT)c[1]);
    K.small = fabs((double)w) < 0.5;
    K.w = vset1(w);
    K.wm1 = vset1((VT)(w - (VT)1));
    K.beta2 = vset1((VT)c[3]);
    K.beta2c = vset1((VT)c[4]);
    K.bc2s = vset1((VT)c[5]);
    K.eps = vset1((VT)c[6]);
    K.step = vset1((VT)c[7]);
    VT *mm = (mode & OPT_M_AMSGRAD) ? mx : v; /* never touched without OPT_M_AMSGRAD */
    ptrdiff_t i = lo;
    for (; i + VW <= hi; i += VW) VN(opt_adam_vec)(p + i, g + i, m + i, v + i, mm + i, VW, mode, &K);
    if (i < hi) VN(opt_adam_vec)(p + i, g + i, m + i, v + i, mm + i, hi - i, mode, &K);
}

/* ---- RMSprop: c = [wd, alpha, 1 - alpha, eps, momentum, -lr] ---- */

typedef struct {
    vf wd, alpha, alphac, w, wm1, eps, mom, lr_neg;
    int small;
} VN(opt_rms_k);

VTARGET static inline __attribute__((always_inline)) void
VN(opt_rms_vec)(VT *p, const VT *g, VT *sq, VT *b, VT *ga, ptrdiff_t k, int mode, const VN(opt_rms_k) * K) {
    vf x = OPT_LD(g, k);
    if (mode & OPT_M_MAXIMIZE) x = vneg(x);
    vf pv = OPT_LD(p, k);
    if (mode & OPT_M_WD) x = vfma(pv, K->wd, x);
    /* square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha) */
    vf sv = vfma(vmul(K->alphac, x), x, vmul(OPT_LD(sq, k), K->alpha));
    OPT_ST(sq, sv, k);
    vf avg;
    if (mode & OPT_M_CENTERED) {
        vf gv = OPT_LERP(OPT_LD(ga, k), x, K->small, K->w, K->wm1); /* grad_avg.lerp_(grad, 1 - alpha) */
        OPT_ST(ga, gv, k);
        avg = vsqrt(vfma(vneg(gv), gv, sv)); /* square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_() */
    } else {
        avg = vsqrt(sv);
    }
    avg = vadd(avg, K->eps);
    if (mode & OPT_M_MOM) {
        vf bv = vadd(vmul(OPT_LD(b, k), K->mom), vdiv(x, avg)); /* buf.mul_(momentum).addcdiv_(grad, avg) */
        OPT_ST(b, bv, k);
        pv = vfma(bv, K->lr_neg, pv); /* param.add_(buf, alpha=-lr) */
    } else {
        pv = vadd(pv, vdiv(vmul(K->lr_neg, x), avg)); /* param.addcdiv_(grad, avg, value=-lr) */
    }
    OPT_ST(p, pv, k);
}

VTARGET static void VN(opt_rms)(VT *p, const VT *g, VT *sq, VT *b, VT *ga, ptrdiff_t lo, ptrdiff_t hi, int mode,
                                const double *c) {
    VT w = (VT)c[2];
    VN(opt_rms_k) K;
    K.wd = vset1((VT)c[0]);
    K.alpha = vset1((VT)c[1]);
    K.alphac = vset1(w);
    K.small = fabs((double)w) < 0.5;
    K.w = vset1(w);
    K.wm1 = vset1((VT)(w - (VT)1));
    K.eps = vset1((VT)c[3]);
    K.mom = vset1((VT)c[4]);
    K.lr_neg = vset1((VT)c[5]);
    VT *bb = (mode & OPT_M_MOM) ? b : sq; /* placeholders for buffers the mode never touches */
    VT *gg = (mode & OPT_M_CENTERED) ? ga : sq;
    ptrdiff_t i = lo;
    for (; i + VW <= hi; i += VW) VN(opt_rms_vec)(p + i, g + i, sq + i, bb + i, gg + i, VW, mode, &K);
    if (i < hi) VN(opt_rms_vec)(p + i, g + i, sq + i, bb + i, gg + i, hi - i, mode, &K);
}

/* ---- Adadelta: c = [wd, rho, 1 - rho, eps, -lr] ---- */

typedef struct {
    vf wd, rho, rhoc, eps, lr_neg;
} VN(opt_adadelta_k);

VTARGET static inline __attribute__((always_inline)) void
VN(opt_adadelta_vec)(VT *p, const VT *g, VT *sq, VT *acc, ptrdiff_t k, int mode, const VN(opt_adadelta_k) * K) {
    vf x = OPT_LD(g, k);
    if (mode & OPT_M_MAXIMIZE) x = vneg(x);
    vf pv = OPT_LD(p, k);
    if (mode & OPT_M_WD) x = vfma(pv, K->wd, x);
    /* square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho) */
    vf sv = vfma(vmul(K->rhoc, x), x, vmul(OPT_LD(sq, k), K->rho));
    OPT_ST(sq, sv, k);
    vf std = vsqrt(vadd(sv, K->eps)); /* square_avg.add(eps).sqrt_() */
    vf av = OPT_LD(acc, k);
    vf delta = vmul(vdiv(vsqrt(vadd(av, K->eps)), std), x); /* acc_delta.add(eps).sqrt_().div_(std).mul_(grad) */
    /* acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho) */
    OPT_ST(acc, vfma(vmul(K->rhoc, delta), delta, vmul(av, K->rho)), k);
    OPT_ST(p, vfma(delta, K->lr_neg, pv), k); /* param.add_(delta, alpha=-lr) */
}

VTARGET static void VN(opt_adadelta)(VT *p, const VT *g, VT *sq, VT *acc, ptrdiff_t lo, ptrdiff_t hi, int mode,
                                     const double *c) {
    VN(opt_adadelta_k) K;
    K.wd = vset1((VT)c[0]);
    K.rho = vset1((VT)c[1]);
    K.rhoc = vset1((VT)c[2]);
    K.eps = vset1((VT)c[3]);
    K.lr_neg = vset1((VT)c[4]);
    ptrdiff_t i = lo;
    for (; i + VW <= hi; i += VW) VN(opt_adadelta_vec)(p + i, g + i, sq + i, acc + i, VW, mode, &K);
    if (i < hi) VN(opt_adadelta_vec)(p + i, g + i, sq + i, acc + i, hi - i, mode, &K);
}

/* ---- Adagrad: c = [wd, eps, -clr] ---- */

VTARGET static inline __attribute__((always_inline)) void VN(opt_adagrad_vec)(VT *p, const VT *g, VT *sum, ptrdiff_t k,
                                                                              int mode, vf wd, vf eps, vf clr_neg) {
    vf x = OPT_LD(g, k);
    if (mode & OPT_M_MAXIMIZE) x = vneg(x);
    vf pv = OPT_LD(p, k);
    if (mode & OPT_M_WD) x = vfma(pv, wd, x);
    vf sv = vfma(x, x, OPT_LD(sum, k)); /* state_sum.addcmul_(grad, grad, value=1): 1 * grad is exact */
    OPT_ST(sum, sv, k);
    vf std = vadd(vsqrt(sv), eps);                       /* state_sum.sqrt().add_(eps) */
    OPT_ST(p, vadd(pv, vdiv(vmul(clr_neg, x), std)), k); /* param.addcdiv_(grad, std, value=-clr) */
}

VTARGET static void VN(opt_adagrad)(VT *p, const VT *g, VT *sum, ptrdiff_t lo, ptrdiff_t hi, int mode,
                                    const double *c) {
    vf wd = vset1((VT)c[0]), eps = vset1((VT)c[1]), clr_neg = vset1((VT)c[2]);
    ptrdiff_t i = lo;
    for (; i + VW <= hi; i += VW) VN(opt_adagrad_vec)(p + i, g + i, sum + i, VW, mode, wd, eps, clr_neg);
    if (i < hi) VN(opt_adagrad_vec)(p + i, g + i, sum + i, hi - i, mode, wd, eps, clr_neg);
}

/* ---- Adamax: c = [wd, 1 - beta1, beta2, eps, -clr] ---- */

typedef struct {
    vf wd, w, wm1, beta2, eps, clr_neg;
    int small;
} VN(opt_adamax_k);

VTARGET static inline __attribute__((always_inline)) void
VN(opt_adamax_vec)(VT *p, const VT *g, VT *m, VT *u, ptrdiff_t k, int mode, const VN(opt_adamax_k) * K) {
    vf x = OPT_LD(g, k);
    if (mode & OPT_M_MAXIMIZE) x = vneg(x);
    vf pv = OPT_LD(p, k);
    if (mode & OPT_M_WD) x = vfma(pv, K->wd, x);
    vf mv = OPT_LERP(OPT_LD(m, k), x, K->small, K->w, K->wm1); /* exp_avg.lerp_(grad, 1 - beta1) */
    OPT_ST(m, mv, k);
    /* torch.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)): a NaN on either side propagates (maxps
     * returns its second operand when either is NaN, so the first side's NaN is selected by hand) */
    vf a = vmul(OPT_LD(u, k), K->beta2), b = vadd(vabs(x), K->eps);
    vf uv = vsel(visnan(a), a, vmax(a, b));
    OPT_ST(u, uv, k);
    OPT_ST(p, vadd(pv, vdiv(vmul(K->clr_neg, mv), uv)), k); /* param.addcdiv_(exp_avg, exp_inf, value=-clr) */
}

VTARGET static void VN(opt_adamax)(VT *p, const VT *g, VT *m, VT *u, ptrdiff_t lo, ptrdiff_t hi, int mode,
                                   const double *c) {
    VT w = (VT)c[1];
    VN(opt_adamax_k) K;
    K.wd = vset1((VT)c[0]);
    K.small = fabs((double)w) < 0.5;
    K.w = vset1(w);
    K.wm1 = vset1((VT)(w - (VT)1));
    K.beta2 = vset1((VT)c[2]);
    K.eps = vset1((VT)c[3]);
    K.clr_neg = vset1((VT)c[4]);
    ptrdiff_t i = lo;
    for (; i + VW <= hi; i += VW) VN(opt_adamax_vec)(p + i, g + i, m + i, u + i, VW, mode, &K);
    if (i < hi) VN(opt_adamax_vec)(p + i, g + i, m + i, u + i, hi - i, mode, &K);
}

/* ---- NAdam: c = [1 - lr*wd, wd, 1 - beta1, beta2, 1 - beta2, bias_correction2, eps, grad coefficient,
 *      exp_avg coefficient] (the two addcdiv values, computed in double by optim.c) ---- */

typedef struct {
    vf decay, wd, w, wm1, beta2, beta2c, bc2, eps, cg, cm;
    int small;
} VN(opt_nadam_k);

VTARGET static inline __attribute__((always_inline)) void
VN(opt_nadam_vec)(VT *p, const VT *g, VT *m, VT *v, ptrdiff_t k, int mode, const VN(opt_nadam_k) * K) {
    vf x = OPT_LD(g, k);
    if (mode & OPT_M_MAXIMIZE) x = vneg(x);
    vf pv = OPT_LD(p, k);
    if (mode & OPT_M_DECAY) pv = vmul(pv, K->decay);           /* param.mul_(1 - lr * weight_decay) */
    if (mode & OPT_M_WD) x = vfma(pv, K->wd, x);               /* grad.add(param, alpha=weight_decay) */
    vf mv = OPT_LERP(OPT_LD(m, k), x, K->small, K->w, K->wm1); /* exp_avg.lerp_(grad, 1 - beta1) */
    OPT_ST(m, mv, k);
    /* exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2) */
    vf vv = vfma(vmul(K->beta2c, x), x, vmul(OPT_LD(v, k), K->beta2));
    OPT_ST(v, vv, k);
    vf den = vadd(vsqrt(vdiv(vv, K->bc2)), K->eps);     /* exp_avg_sq.div(bias_correction2).sqrt(), then add_(eps) */
    pv = vadd(pv, vdiv(vmul(K->cg, x), den));           /* param.addcdiv_(grad, denom, value=...) */
    OPT_ST(p, vadd(pv, vdiv(vmul(K->cm, mv), den)), k); /* param.addcdiv_(exp_avg, denom, value=...) */
}

VTARGET static void VN(opt_nadam)(VT *p, const VT *g, VT *m, VT *v, ptrdiff_t lo, ptrdiff_t hi, int mode,
                                  const double *c) {
    VT w = (VT)c[2];
    VN(opt_nadam_k) K;
    K.decay = vset1((VT)c[0]);
    K.wd = vset1((VT)c[1]);
    K.small = fabs((double)w) < 0.5;
    K.w = vset1(w);
    K.wm1 = vset1((VT)(w - (VT)1));
    K.beta2 = vset1((VT)c[3]);
    K.beta2c = vset1((VT)c[4]);
    K.bc2 = vset1((VT)c[5]);
    K.eps = vset1((VT)c[6]);
    K.cg = vset1((VT)c[7]);
    K.cm = vset1((VT)c[8]);
    ptrdiff_t i = lo;
    for (; i + VW <= hi; i += VW) VN(opt_nadam_vec)(p + i, g + i, m + i, v + i, VW, mode, &K);
    if (i < hi) VN(opt_nadam_vec)(p + i, g + i, m + i, v + i, hi - i, mode, &K);
}

#undef OPT_LD
#undef OPT_ST
#undef OPT_LERP
