/* Level-generic body of rnn_cell.c (instantiated per SIMD level by vec_levels.h): one row of each cell, in
 * blocks of VW lanes and a masked tail. RC_LD / RC_ST take the block's element count m (VW but in the tail). */

#define RC_LD(p, m)    ((m) == VW ? vload(p) : vloadn(p, m))
#define RC_ST(p, v, m) ((m) == VW ? vstore(p, v) : vstoren(p, v, m))

VTARGET static void VN(lstm_row_f32)(const plast_rnn_row_f32 *a, ptrdiff_t r) {
    const ptrdiff_t H = a->hsz;
    const float *gx = a->gx + r * a->gx_row, *gh = a->gh + r * a->gh_row, *c0 = a->s0 + r * a->s0_row;
    float *h = a->o0 + r * H, *c = a->o1 + r * H;
    for (ptrdiff_t j = 0; j < H; j += VW) {
        const ptrdiff_t m = H - j < VW ? H - j : VW;
        vf i = VN(v_sigmoid)(vadd(RC_LD(gx + j, m), RC_LD(gh + j, m)));
        vf f = VN(v_sigmoid)(vadd(RC_LD(gx + H + j, m), RC_LD(gh + H + j, m)));
        vf g = VN(v_tanh)(vadd(RC_LD(gx + 2 * H + j, m), RC_LD(gh + 2 * H + j, m)));
        vf o = VN(v_sigmoid)(vadd(RC_LD(gx + 3 * H + j, m), RC_LD(gh + 3 * H + j, m)));
        vf cn = vfma(f, RC_LD(c0 + j, m), vmul(i, g));
        RC_ST(c + j, cn, m);
        RC_ST(h + j, vmul(o, VN(v_tanh)(cn)), m);
    }
}

VTARGET static void VN(lstm_bw_row_f32)(const plast_rnn_row_f32 *a, ptrdiff_t r) {
    const ptrdiff_t H = a->hsz;
    const float *gx = a->gx + r * a->gx_row, *gh = a->gh + r * a->gh_row, *c0 = a->s0 + r * a->s0_row;
    const float *dh = a->dh ? a->dh + r * a->dh_row : NULL, *dc = a->ds ? a->ds + r * a->ds_row : NULL;
    float *dg = a->o0 + r * 4 * H, *dc0 = a->o1 + r * H;
    const vf one = vset1(1.0f), zero = vset1(0.0f);
    for (ptrdiff_t j = 0; j < H; j += VW) {
        const ptrdiff_t m = H - j < VW ? H - j : VW;
        vf i = VN(v_sigmoid)(vadd(RC_LD(gx + j, m), RC_LD(gh + j, m)));
        vf f = VN(v_sigmoid)(vadd(RC_LD(gx + H + j, m), RC_LD(gh + H + j, m)));
        vf g = VN(v_tanh)(vadd(RC_LD(gx + 2 * H + j, m), RC_LD(gh + 2 * H + j, m)));
        vf o = VN(v_sigmoid)(vadd(RC_LD(gx + 3 * H + j, m), RC_LD(gh + 3 * H + j, m)));
        vf cp = RC_LD(c0 + j, m);
        vf tc = VN(v_tanh)(vfma(f, cp, vmul(i, g))); /* the forward's c, to the bit */
        vf dhv = dh ? RC_LD(dh + j, m) : zero;
        vf dcv = dc ? RC_LD(dc + j, m) : zero;
        vf dct = vfma(vmul(dhv, o), vsub(one, vmul(tc, tc)), dcv); /* dc + dh * o * tanh'(c) */
        RC_ST(dg + j, vmul(vmul(dct, g), vmul(i, vsub(one, i))), m);
        RC_ST(dg + H + j, vmul(vmul(dct, cp), vmul(f, vsub(one, f))), m);
        RC_ST(dg + 2 * H + j, vmul(vmul(dct, i), vsub(one, vmul(g, g))), m);
        RC_ST(dg + 3 * H + j, vmul(vmul(dhv, tc), vmul(o, vsub(one, o))), m);
        RC_ST(dc0 + j, vmul(dct, f), m);
    }
}

VTARGET static void VN(gru_row_f32)(const plast_rnn_row_f32 *a, ptrdiff_t r) {
    const ptrdiff_t H = a->hsz;
    const float *gx = a->gx + r * a->gx_row, *gh = a->gh + r * a->gh_row, *h0 = a->s0 + r * a->s0_row;
    float *h = a->o0 + r * H;
    for (ptrdiff_t j = 0; j < H; j += VW) {
        const ptrdiff_t m = H - j < VW ? H - j : VW;
        vf rg = VN(v_sigmoid)(vadd(RC_LD(gx + j, m), RC_LD(gh + j, m)));
        vf z = VN(v_sigmoid)(vadd(RC_LD(gx + H + j, m), RC_LD(gh + H + j, m)));
        vf nn = VN(v_tanh)(vfma(rg, RC_LD(gh + 2 * H + j, m), RC_LD(gx + 2 * H + j, m)));
        RC_ST(h + j, vfma(z, vsub(RC_LD(h0 + j, m), nn), nn), m);
    }
}

VTARGET static void VN(gru_bw_row_f32)(const plast_rnn_row_f32 *a, ptrdiff_t r) {
    const ptrdiff_t H = a->hsz;
    const float *gx = a->gx + r * a->gx_row, *gh = a->gh + r * a->gh_row, *h0 = a->s0 + r * a->s0_row;
    const float *dh = a->dh + r * a->dh_row;
    float *dgx = a->o0 + r * 3 * H, *dgh = a->o1 + r * 3 * H, *dh0 = a->o2 + r * H;
    const vf one = vset1(1.0f);
    for (ptrdiff_t j = 0; j < H; j += VW) {
        const ptrdiff_t m = H - j < VW ? H - j : VW;
        vf rg = VN(v_sigmoid)(vadd(RC_LD(gx + j, m), RC_LD(gh + j, m)));
        vf z = VN(v_sigmoid)(vadd(RC_LD(gx + H + j, m), RC_LD(gh + H + j, m)));
        vf hn = RC_LD(gh + 2 * H + j, m);
        vf nn = VN(v_tanh)(vfma(rg, hn, RC_LD(gx + 2 * H + j, m)));
        vf g = RC_LD(dh + j, m);
        vf dn = vmul(vmul(g, vsub(one, z)), vsub(one, vmul(nn, nn)));             /* d(pre-activation of n) */
        vf dz = vmul(vmul(g, vsub(RC_LD(h0 + j, m), nn)), vmul(z, vsub(one, z))); /* d(pre-activation of z) */
        vf dr = vmul(vmul(dn, hn), vmul(rg, vsub(one, rg)));                      /* d(pre-activation of r) */
        RC_ST(dgx + j, dr, m);
        RC_ST(dgh + j, dr, m);
        RC_ST(dgx + H + j, dz, m);
        RC_ST(dgh + H + j, dz, m);
        RC_ST(dgx + 2 * H + j, dn, m);
        RC_ST(dgh + 2 * H + j, vmul(dn, rg), m);
        RC_ST(dh0 + j, vmul(g, z), m);
    }
}

#undef RC_LD
#undef RC_ST
