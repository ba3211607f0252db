/* Level-generic body of reduce.c. */

/* sum of a contiguous run: 4 vector accumulators over blocks of 2048, each block's total added in double */
VTARGET static double VN(rd_sum)(const float *x, ptrdiff_t n) {
    double total = 0.0;
    for (ptrdiff_t b = 0; b < n; b += 2048) {
        ptrdiff_t e = n - b < 2048 ? n : b + 2048, i = b;
        vf s0 = vset1(0.0f), s1 = s0, s2 = s0, s3 = s0;
        for (; i + 4 * VW <= e; i += 4 * VW) {
            s0 = vadd(s0, vload(x + i));
            s1 = vadd(s1, vload(x + i + VW));
            s2 = vadd(s2, vload(x + i + 2 * VW));
            s3 = vadd(s3, vload(x + i + 3 * VW));
        }
        for (; i + VW <= e; i += VW) s0 = vadd(s0, vload(x + i));
        if (i < e) s1 = vadd(s1, vloadn(x + i, e - i));
        total += (double)vhsum(vadd(vadd(s0, s1), vadd(s2, s3)));
    }
    return total;
}

/* max (is_max) or min of a contiguous run; NaN if any element is NaN */
VTARGET static float VN(rd_ext)(const float *x, ptrdiff_t n, int is_max) {
    float init = is_max ? -INFINITY : INFINITY;
    vf a0 = vset1(init), a1 = a0;
    vm nan = visnan(vset1(0.0f));
    ptrdiff_t i = 0;
    for (; i + 2 * VW <= n; i += 2 * VW) {
        vf v0 = vload(x + i), v1 = vload(x + i + VW);
        a0 = is_max ? vmax(a0, v0) : vmin(a0, v0);
        a1 = is_max ? vmax(a1, v1) : vmin(a1, v1);
        nan = vmor(nan, vmor(visnan(v0), visnan(v1)));
    }
    for (; i + VW <= n; i += VW) {
        vf v = vload(x + i);
        a0 = is_max ? vmax(a0, v) : vmin(a0, v);
        nan = vmor(nan, visnan(v));
    }
    if (i < n) {
        vf v = vloadn_fill(x + i, n - i, init);
        a1 = is_max ? vmax(a1, v) : vmin(a1, v);
        nan = vmor(nan, visnan(v));
    }
    if (vmany(nan)) return NAN;
    return is_max ? vhmax(vmax(a0, a1)) : vhmin(vmin(a0, a1));
}

/* out[j] = reduce over n rows (`xn` apart) of x[k, j], j < w <= 4096: rows stream through, the w accumulators
 * stay in L1/L2. max/min keep a NaN once one is seen. */
VTARGET static void VN(rd_cols)(int op, const float *x, ptrdiff_t xn, ptrdiff_t n, float *out, ptrdiff_t w) {
    float acc[4096];
    float init = op == PLAST_RD_MAX ? -INFINITY : op == PLAST_RD_MIN ? INFINITY : 0.0f;
    for (ptrdiff_t j = 0; j < w; j++) acc[j] = init;
    for (ptrdiff_t k = 0; k < n; k++) {
        const float *row = x + k * xn;
        ptrdiff_t j = 0;
        if (op == PLAST_RD_SUM) {
            for (; j + VW <= w; j += VW) vstore(acc + j, vadd(vload(acc + j), vload(row + j)));
            if (j < w) vstoren(acc + j, vadd(vloadn(acc + j, w - j), vloadn(row + j, w - j)), w - j);
        } else if (op == PLAST_RD_MAX) {
            for (; j + VW <= w; j += VW) {
                vf a = vload(acc + j);
                vstore(acc + j, vsel(visnan(a), a, vmax(a, vload(row + j))));
            }
            if (j < w) {
                vf a = vloadn(acc + j, w - j);
                vstoren(acc + j, vsel(visnan(a), a, vmax(a, vloadn(row + j, w - j))), w - j);
            }
        } else {
            for (; j + VW <= w; j += VW) {
                vf a = vload(acc + j);
                vstore(acc + j, vsel(visnan(a), a, vmin(a, vload(row + j))));
            }
            if (j < w) {
                vf a = vloadn(acc + j, w - j);
                vstoren(acc + j, vsel(visnan(a), a, vmin(a, vloadn(row + j, w - j))), w - j);
            }
        }
    }
    memcpy(out, acc, (size_t)w * sizeof(float));
}
