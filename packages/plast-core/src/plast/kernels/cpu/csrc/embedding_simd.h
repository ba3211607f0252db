/* Level-generic body of embedding.c over VT (float or double). */

VTARGET static void VN(emb_add)(VT *dst, const VT *src, ptrdiff_t n) {
    ptrdiff_t i = 0;
    for (; i + VW <= n; i += VW) vstore(dst + i, vadd(vload(dst + i), vload(src + i)));
    if (i < n) vstoren(dst + i, vadd(vloadn(dst + i, n - i), vloadn(src + i, n - i)), n - i);
}
