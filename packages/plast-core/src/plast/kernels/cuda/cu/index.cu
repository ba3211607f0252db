// Indexing: embedding (+ scatter-add backward with atomics), one_hot, and one general gather / scatter that
// covers take_along_dim, index_select, x[idx] with one index tensor, put_along_dim and index backward.
//
// Every index is data: it is checked against its bound on the device, and the first bad one sets the error
// flag (IndexError in Python, naming the index and the size); the kernel then skips that element.
#include "common.cuh"

__device__ __forceinline__ int64_t load_index(const void *idx, int i64, int64_t off) {
    return i64 ? static_cast<const int64_t *>(idx)[off] : (int64_t)static_cast<const int32_t *>(idx)[off];
}

// checked (and, with wrap, negative-wrapped) index; returns -1 and flags the error when out of range
__device__ __forceinline__ int64_t check_index(int64_t v, int64_t size, int wrap, int64_t *err, int64_t pos) {
    if (wrap && v < 0 && v >= -size) v += size;
    if (v < 0 || v >= size) {
        plast_set_error(err, PLAST_ERR_INDEX, v, size, pos);
        return -1;
    }
    return v;
}

// out[i, :] = w[ids[i], :] (zeros where ids[i] == padding_idx and zero_padding); block per id row
template <typename T>
__device__ __forceinline__ void embedding_fwd_body(const void *ids, int i64, Layout lid, int64_t n_ids, const T *w,
                                                   int64_t V, int64_t D, int64_t sw0, int64_t sw1, T *out,
                                                   int64_t padding_idx, int zero_padding, int64_t *err) {
    for (int64_t r = blockIdx.x; r < n_ids; r += gridDim.x) {
        int64_t id = load_index(ids, i64, layout_offset(lid, r));
        bool bad = id < 0 || id >= V;
        if (bad && threadIdx.x == 0) plast_set_error(err, PLAST_ERR_INDEX, id, V, r);
        bool zero = bad || (zero_padding && id == padding_idx);
        for (int64_t d = threadIdx.x; d < D; d += blockDim.x) out[r * D + d] = zero ? T(0) : w[id * sw0 + d * sw1];
    }
}

template <typename T> __device__ __forceinline__ void atomic_add(T *p, T v) { atomicAdd(p, v); }
template <> __device__ __forceinline__ void atomic_add<int64_t>(int64_t *p, int64_t v) {
    atomicAdd(reinterpret_cast<unsigned long long *>(p), (unsigned long long)v);
}

// gw (V, D), zeroed by the launcher: gw[ids[i], :] += g[i, :] (rows of padding_idx stay zero)
template <typename T>
__device__ __forceinline__ void embedding_bwd_body(const T *g, Layout lg, const void *ids, int i64, Layout lid,
                                                   int64_t n_ids, T *gw, int64_t V, int64_t D, int64_t padding_idx,
                                                   int64_t *err) {
    for (int64_t r = blockIdx.x; r < n_ids; r += gridDim.x) {
        int64_t id = load_index(ids, i64, layout_offset(lid, r));
        if (id < 0 || id >= V) {
            if (threadIdx.x == 0) plast_set_error(err, PLAST_ERR_INDEX, id, V, r);
            continue;
        }
        if (id == padding_idx) continue;
        for (int64_t d = threadIdx.x; d < D; d += blockDim.x)
            atomic_add<T>(gw + id * D + d, g[layout_offset(lg, r * D + d)]);
    }
}

// out (n, K) int64, zeroed by the launcher: out[i, ids[i]] = 1
__device__ __forceinline__ void one_hot_body(const void *ids, int i64, Layout lid, int64_t n, int64_t K, int64_t *out,
                                             int64_t *err) {
    PLAST_GRID_LOOP(i, n) {
        int64_t v = check_index(load_index(ids, i64, layout_offset(lid, i)), K, 0, err, i);
        if (v >= 0) out[i * K + v] = 1;
    }
}


// sum over index tensors of (checked index) * stride; -1 when one is out of range (error flagged)
__device__ __forceinline__ int64_t index_offset(const Indices &ix, int64_t i, int64_t *err) {
    int64_t off = 0;
#pragma unroll
    for (int k = 0; k < PLAST_MAX_INDICES; k++) {
        if (k < ix.n) {
            const IndexArg &a = ix.a[k];
            int64_t v = check_index(load_index(a.ptr, a.i64, layout_offset(a.l, i)), a.size, ix.wrap, err, i);
            if (v < 0) return -1;
            off += v * a.stride;
        }
    }
    return off;
}

// General gather over the output's shape: out[i] = x[layout_offset(lx, i) + index_offset(i)], where lx carries
// x's strides on the dims that are not indexed (0 on the dims the index tensors span). Covers x[idx, ...],
// index_select and take_along_dim.
template <typename T>
__device__ __forceinline__ void gather_body(const T *x, Layout lx, Indices ix, T *out, int64_t n, int64_t *err) {
    PLAST_GRID_LOOP(i, n) {
        int64_t off = index_offset(ix, i, err);
        out[i] = off < 0 ? T(0) : x[layout_offset(lx, i) + off];
    }
}

// General scatter over the source's shape: out[layout_offset(lo, i) + index_offset(i)] (=|+=) src[...]
template <typename T>
__device__ __forceinline__ void scatter_body(const T *src, Layout ls, Indices ix, T *out, Layout lo, int64_t n,
                                             int accumulate, int64_t *err) {
    PLAST_GRID_LOOP(i, n) {
        int64_t off = index_offset(ix, i, err);
        if (off < 0) continue;
        T *p = out + layout_offset(lo, i) + off;
        T s = src[layout_offset(ls, i)];
        if (accumulate) atomic_add<T>(p, s);
        else *p = s;
    }
}

#define INDEX_FLOAT(SUF, T)                                                                                            \
    extern "C" __global__ void embedding_fwd_##SUF(const void *ids, int i64, Layout lid, int64_t n_ids, const T *w,    \
                                                   int64_t V, int64_t D, int64_t sw0, int64_t sw1, T *out,             \
                                                   int64_t padding_idx, int zero_padding, int64_t *err) {              \
        embedding_fwd_body<T>(ids, i64, lid, n_ids, w, V, D, sw0, sw1, out, padding_idx, zero_padding, err);           \
    }                                                                                                                  \
    extern "C" __global__ void embedding_bwd_##SUF(const T *g, Layout lg, const void *ids, int i64, Layout lid,        \
                                                   int64_t n_ids, T *gw, int64_t V, int64_t D, int64_t padding_idx,    \
                                                   int64_t *err) {                                                     \
        embedding_bwd_body<T>(g, lg, ids, i64, lid, n_ids, gw, V, D, padding_idx, err);                                \
    }

INDEX_FLOAT(f32, float)
INDEX_FLOAT(f64, double)

#define GATHER(SUF, T)                                                                                                 \
    extern "C" __global__ void gather_##SUF(const T *x, Layout lx, Indices ix, T *out, int64_t n, int64_t *err) {      \
        gather_body<T>(x, lx, ix, out, n, err);                                                                        \
    }                                                                                                                  \
    extern "C" __global__ void scatter_##SUF(const T *src, Layout ls, Indices ix, T *out, Layout lo, int64_t n,        \
                                             int accumulate, int64_t *err) {                                           \
        scatter_body<T>(src, ls, ix, out, lo, n, accumulate, err);                                                     \
    }

GATHER(i32, int32_t)
GATHER(i64, int64_t)
GATHER(f32, float)
GATHER(f64, double)

// bool: gather and plain stores only (no atomic add on single bytes)
extern "C" __global__ void gather_u8(const uint8_t *x, Layout lx, Indices ix, uint8_t *out, int64_t n, int64_t *err) {
    gather_body<uint8_t>(x, lx, ix, out, n, err);
}
extern "C" __global__ void scatter_store_u8(const uint8_t *src, Layout ls, Indices ix, uint8_t *out, Layout lo,
                                            int64_t n, int64_t *err) {
    PLAST_GRID_LOOP(i, n) {
        int64_t off = index_offset(ix, i, err);
        if (off >= 0) out[layout_offset(lo, i) + off] = src[layout_offset(ls, i)];
    }
}

extern "C" __global__ void one_hot(const void *ids, int i64, Layout lid, int64_t n, int64_t K, int64_t *out,
                                   int64_t *err) {
    one_hot_body(ids, i64, lid, n, K, out, err);
}

extern "C" __global__ void check_indices(Indices ix, int64_t n, int64_t *err) {
    PLAST_GRID_LOOP(i, n) index_offset(ix, i, err);
}
