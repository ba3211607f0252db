// Fused LSTM / GRU cells, the CPU kernels' formulas (kernels/cpu/csrc/rnn_cell.h): one thread per (row, unit),
// contiguous operands (the launcher copies strided ones first). The backward kernels recompute the gate
// activations from the inputs, as the CPU's do; dh / dc may be null (no gradient: zeros).
#include "common.cuh"

template <typename T> __device__ __forceinline__ T rc_sigmoid(T x) { return T(1) / (T(1) + exp(-x)); }

// gates = gx + gh (n, 4H: i, f, g, o); c = sigmoid(f) * c0 + sigmoid(i) * tanh(g), h = sigmoid(o) * tanh(c)
template <typename T>
__device__ __forceinline__ void lstm_fwd_body(const T *gx, const T *gh, const T *c0, T *h, T *c, int64_t n, int64_t H) {
    PLAST_GRID_LOOP(e, n * H) {
        const int64_t r = e / H, j = e % H, g0 = r * 4 * H + j;
        const T i = rc_sigmoid(gx[g0] + gh[g0]), f = rc_sigmoid(gx[g0 + H] + gh[g0 + H]);
        const T g = tanh(gx[g0 + 2 * H] + gh[g0 + 2 * H]), o = rc_sigmoid(gx[g0 + 3 * H] + gh[g0 + 3 * H]);
        const T cn = f * c0[e] + i * g;
        c[e] = cn;
        h[e] = o * tanh(cn);
    }
}

template <typename T>
__device__ __forceinline__ void lstm_bwd_body(const T *gx, const T *gh, const T *c0, const T *dh, const T *dc, T *dg,
                                              T *dc0, int64_t n, int64_t H) {
    PLAST_GRID_LOOP(e, n * H) {
        const int64_t r = e / H, j = e % H, g0 = r * 4 * H + j;
        const T i = rc_sigmoid(gx[g0] + gh[g0]), f = rc_sigmoid(gx[g0 + H] + gh[g0 + H]);
        const T g = tanh(gx[g0 + 2 * H] + gh[g0 + 2 * H]), o = rc_sigmoid(gx[g0 + 3 * H] + gh[g0 + 3 * H]);
        const T cp = c0[e], tc = tanh(f * cp + i * g);
        const T dhv = dh != nullptr ? dh[e] : T(0);
        const T dct = (dc != nullptr ? dc[e] : T(0)) + dhv * o * (T(1) - tc * tc);
        dg[g0] = dct * g * i * (T(1) - i);
        dg[g0 + H] = dct * cp * f * (T(1) - f);
        dg[g0 + 2 * H] = dct * i * (T(1) - g * g);
        dg[g0 + 3 * H] = dhv * tc * o * (T(1) - o);
        dc0[e] = dct * f;
    }
}

// gx, gh (n, 3H: r, z, n); h = nn + z * (h0 - nn), nn = tanh(gx_n + r * gh_n)
template <typename T>
__device__ __forceinline__ void gru_fwd_body(const T *gx, const T *gh, const T *h0, T *h, int64_t n, int64_t H) {
    PLAST_GRID_LOOP(e, n * H) {
        const int64_t r = e / H, j = e % H, g0 = r * 3 * H + j;
        const T rg = rc_sigmoid(gx[g0] + gh[g0]), z = rc_sigmoid(gx[g0 + H] + gh[g0 + H]);
        const T nn = tanh(gx[g0 + 2 * H] + rg * gh[g0 + 2 * H]);
        h[e] = nn + z * (h0[e] - nn);
    }
}

template <typename T>
__device__ __forceinline__ void gru_bwd_body(const T *gx, const T *gh, const T *h0, const T *dh, T *dgx, T *dgh, T *dh0,
                                             int64_t n, int64_t H) {
    PLAST_GRID_LOOP(e, n * H) {
        const int64_t r = e / H, j = e % H, g0 = r * 3 * H + j;
        const T rg = rc_sigmoid(gx[g0] + gh[g0]), z = rc_sigmoid(gx[g0 + H] + gh[g0 + H]), hn = gh[g0 + 2 * H];
        const T nn = tanh(gx[g0 + 2 * H] + rg * hn), g = dh[e];
        const T dn = g * (T(1) - z) * (T(1) - nn * nn);
        const T dz = g * (h0[e] - nn) * z * (T(1) - z);
        const T dr = dn * hn * rg * (T(1) - rg);
        dgx[g0] = dr;
        dgh[g0] = dr;
        dgx[g0 + H] = dz;
        dgh[g0 + H] = dz;
        dgx[g0 + 2 * H] = dn;
        dgh[g0 + 2 * H] = dn * rg;
        dh0[e] = g * z;
    }
}

#define RNN_CELL(SUF, T)                                                                                               \
    extern "C" __global__ void lstm_cell_fwd_##SUF(const T *gx, const T *gh, const T *c0, T *h, T *c, int64_t n,       \
                                                   int64_t H) {                                                        \
        lstm_fwd_body<T>(gx, gh, c0, h, c, n, H);                                                                      \
    }                                                                                                                  \
    extern "C" __global__ void lstm_cell_bwd_##SUF(const T *gx, const T *gh, const T *c0, const T *dh, const T *dc,    \
                                                   T *dg, T *dc0, int64_t n, int64_t H) {                              \
        lstm_bwd_body<T>(gx, gh, c0, dh, dc, dg, dc0, n, H);                                                           \
    }                                                                                                                  \
    extern "C" __global__ void gru_cell_fwd_##SUF(const T *gx, const T *gh, const T *h0, T *h, int64_t n, int64_t H) { \
        gru_fwd_body<T>(gx, gh, h0, h, n, H);                                                                          \
    }                                                                                                                  \
    extern "C" __global__ void gru_cell_bwd_##SUF(const T *gx, const T *gh, const T *h0, const T *dh, T *dgx, T *dgh,  \
                                                  T *dh0, int64_t n, int64_t H) {                                      \
        gru_bwd_body<T>(gx, gh, h0, dh, dgx, dgh, dh0, n, H);                                                          \
    }

RNN_CELL(f32, float)
RNN_CELL(f64, double)
