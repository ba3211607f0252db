/* Level-generic body of reduce.c over VT (float with vec_begin.h, double with vec_begin_f64.h). */

#if !VT_F64
/* float32 sum of a contiguous run: 4 vector accumulators over blocks of 2048, each block's total added in
 * double */
VTARGET static double VN(rd_sum)(const VT *x, ptrdiff_t n) {
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
#else
/* float64 sum of a contiguous run, pairwise: leaves of RD_LEAF elements summed by 4 vector accumulators (at
 * most RD_LEAF / (4 VW) additions per lane), leaves combined as a binary tree kept on a stack of vectors (a
 * binary counter: leaf number k merges the subtrees its trailing zero bits complete), one horizontal sum at
 * the end. Error grows like log2(n), as numpy's pairwise sum; inf and NaN propagate as in a plain sum. */
#define RD_LEAF 256
VTARGET static double VN(rd_sum)(const VT *x, ptrdiff_t n) {
    vf stack[64];
    int top = 0;
    ptrdiff_t leaves = 0, i = 0;
    for (; i + RD_LEAF <= n; i += RD_LEAF) {
        vf s0 = vset1(0.0), s1 = s0, s2 = s0, s3 = s0;
        for (ptrdiff_t j = i; j < i + RD_LEAF; j += 4 * VW) {
            s0 = vadd(s0, vload(x + j));
            s1 = vadd(s1, vload(x + j + VW));
            s2 = vadd(s2, vload(x + j + 2 * VW));
            s3 = vadd(s3, vload(x + j + 3 * VW));
        }
        vf v = vadd(vadd(s0, s1), vadd(s2, s3));
        leaves++;
        for (ptrdiff_t c = leaves; !(c & 1); c >>= 1) v = vadd(stack[--top], v);
        stack[top++] = v;
    }
    vf s0 = vset1(0.0), s1 = s0, s2 = s0, s3 = s0;
    for (; i + 4 * VW <= n; i += 4 * VW) {
        s0 = vadd(s0, vload(x + i));
        s1 = vadd(s1, vload(x + i + VW));
        s2 = vadd(s2, vload(x + i + 2 * VW));
        s3 = vadd(s3, vload(x + i + 3 * VW));
    }
    for (; i + VW <= n; i += VW) s0 = vadd(s0, vload(x + i));
    if (i < n) s1 = vadd(s1, vloadn(x + i, n - i));
    vf v = vadd(vadd(s0, s1), vadd(s2, s3));
    while (top) v = vadd(stack[--top], v);
    return vhsum(v);
}
#undef RD_LEAF
#endif

/* max (is_max) or min of a contiguous run; NaN if any element is NaN */
VTARGET static VT VN(rd_ext)(const VT *x, ptrdiff_t n, int is_max) {
    VT init = is_max ? -INFINITY : INFINITY;
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

/* out[j] = reduce over n rows (`xn` apart) of x[k, j], j < w <= RD_COLS: rows stream through, the w
 * accumulators stay in L1/L2. max/min keep a NaN once one is seen. float64 sums add blocks of 64 rows into the
 * running total (error like 64 + n / 64 additions, not n). */
VTARGET static void VN(rd_cols)(int op, const VT *x, ptrdiff_t xn, ptrdiff_t n, VT *out, ptrdiff_t w) {
    VT acc[RD_COLS];
#if VT_F64
    VT blk[RD_COLS];
#endif
    VT init = op == PLAST_RD_MAX ? -INFINITY : op == PLAST_RD_MIN ? INFINITY : 0.0f;
    for (ptrdiff_t j = 0; j < w; j++) acc[j] = init;
    for (ptrdiff_t k0 = 0; k0 < n; k0 += 64) {
        ptrdiff_t k1 = n - k0 < 64 ? n : k0 + 64;
        VT *a = acc;
#if VT_F64
        if (op == PLAST_RD_SUM) {
            a = blk;
            memset(blk, 0, (size_t)w * sizeof(VT));
        }
#endif
        for (ptrdiff_t k = k0; k < k1; k++) {
            const VT *row = x + k * xn;
            ptrdiff_t j = 0;
            if (op == PLAST_RD_SUM) {
                for (; j + VW <= w; j += VW) vstore(a + j, vadd(vload(a + j), vload(row + j)));
                if (j < w) vstoren(a + j, vadd(vloadn(a + j, w - j), vloadn(row + j, w - j)), w - j);
            } else if (op == PLAST_RD_MAX) {
                for (; j + VW <= w; j += VW) {
                    vf v = vload(a + j);
                    vstore(a + j, vsel(visnan(v), v, vmax(v, vload(row + j))));
                }
                if (j < w) {
                    vf v = vloadn(a + j, w - j);
                    vstoren(a + j, vsel(visnan(v), v, vmax(v, vloadn(row + j, w - j))), w - j);
                }
            } else {
                for (; j + VW <= w; j += VW) {
                    vf v = vload(a + j);
                    vstore(a + j, vsel(visnan(v), v, vmin(v, vload(row + j))));
                }
                if (j < w) {
                    vf v = vloadn(a + j, w - j);
                    vstoren(a + j, vsel(visnan(v), v, vmin(v, vloadn(row + j, w - j))), w - j);
                }
            }
        }
#if VT_F64
        if (op == PLAST_RD_SUM) {
            ptrdiff_t j = 0;
            for (; j + VW <= w; j += VW) vstore(acc + j, vadd(vload(acc + j), vload(blk + j)));
            if (j < w) vstoren(acc + j, vadd(vloadn(acc + j, w - j), vloadn(blk + j, w - j)), w - j);
        }
#endif
    }
    memcpy(out, acc, (size_t)w * sizeof(VT));
}
