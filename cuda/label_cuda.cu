/* SPDX-License-Identifier: MIT */
/* tilewave: connected-component labelling of a tile on CUDA, the twin of twi_omp_label (the
 * same labels: 1..n in raster order of each component's first pixel), and the relabelling. */
/*
 * A union-find over raster indices whose roots are always the smallest index of their set
 * (a link always goes from the larger root to the smaller, by atomicMin, as the GPU max-tree's
 * CONNECT merges with atomic updates; Playne and Hawick 2018): every pixel unites with its
 * earlier foreground neighbours concurrently, then points at its root; the roots are the
 * components' first pixels, and an exclusive scan of "is a root" over the raster order numbers
 * them as the CPU kernel does. Each kernel strides over the tile, so any size fits the grid.
 */
#include <cstdint>

#include <cub/device/device_scan.cuh>
#include <cuda_runtime.h>

#include "cuda_common.cuh"
#include "cuda_kernels.h"
#include "label.h" /* twi_label_check: the contract both variants share (kern/) */

namespace {

/* Tuning (in policies, not kernels): one thread per pixel, 256 a block, a grid of at most 65535
 * blocks striding over the tile. */
struct LabelPolicy {
    static constexpr int THREADS = 256;
    static constexpr unsigned MAX_GRID = 65535u;
};
static_assert(LabelPolicy::THREADS <= 1024, "block too large");

template <typename T>
__device__ __forceinline__ bool
is_fg(const unsigned char *m, int64_t stride, uint32_t x, uint32_t y)
{
    return reinterpret_cast<const T *>(m + (int64_t)y * stride)[x] != 0;
}

__device__ __forceinline__ uint32_t
find_root(const uint32_t *par, uint32_t p)
{
    const volatile uint32_t *v = par;
    uint32_t q = v[p];

    while (q != p) {
        p = q;
        q = v[p];
    }
    return p;
}

/* Join the sets of a and b: the larger root goes under the smaller, retried when another
 * thread linked it meanwhile (atomicMin returns what it found). */
__device__ __forceinline__ void
unite(uint32_t *par, uint32_t a, uint32_t b)
{
    for (;;) {
        a = find_root(par, a);
        b = find_root(par, b);
        if (a == b)
            return;
        if (a < b) {
            uint32_t old = atomicMin(&par[b], a);

            if (old == b)
                return;
            b = old;
        } else {
            uint32_t old = atomicMin(&par[a], b);

            if (old == a)
                return;
            a = old;
        }
    }
}

__global__ void __launch_bounds__(LabelPolicy::THREADS)
init_kernel(uint32_t *par, uint32_t n)
{
    for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x)
        par[p] = p;
}

template <typename T>
__global__ void __launch_bounds__(LabelPolicy::THREADS)
merge_kernel(const unsigned char *m, int64_t stride, uint32_t w, uint32_t h, int conn,
             uint32_t *par)
{
    const uint32_t n = w * h;

    for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x) {
        uint32_t x = p % w, y = p / w;

        if (!is_fg<T>(m, stride, x, y))
            continue;
        if (x > 0 && is_fg<T>(m, stride, x - 1, y))
            unite(par, p, p - 1);
        if (y == 0)
            continue;
        if (is_fg<T>(m, stride, x, y - 1))
            unite(par, p, p - w);
        if (conn == 8 && x > 0 && is_fg<T>(m, stride, x - 1, y - 1))
            unite(par, p, p - w - 1);
        if (conn == 8 && x + 1 < w && is_fg<T>(m, stride, x + 1, y - 1))
            unite(par, p, p - w + 1);
    }
}

/* Every foreground pixel points at its root; flags[p] = 1 for the roots (flags[n] = 0). */
template <typename T>
__global__ void __launch_bounds__(LabelPolicy::THREADS)
flatten_kernel(const unsigned char *m, int64_t stride, uint32_t w, uint32_t h, uint32_t *par,
               uint32_t *flags)
{
    const uint32_t n = w * h;

    for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p <= n; p += gridDim.x * blockDim.x) {
        if (p == n || !is_fg<T>(m, stride, p % w, p / w)) {
            flags[p] = 0;
            continue;
        }
        uint32_t r = find_root(par, p);

        par[p] = r;
        flags[p] = r == p;
    }
}

/* labels = the root's rank + 1, 0 on background; *d_n = the count. */
template <typename T>
__global__ void __launch_bounds__(LabelPolicy::THREADS)
number_kernel(const unsigned char *m, int64_t stride, uint32_t w, uint32_t h,
              const uint32_t *par, const uint32_t *rank, unsigned char *lab, int64_t lstride,
              uint32_t *d_n)
{
    const uint32_t n = w * h;

    for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x) {
        uint32_t x = p % w, y = p / w;

        reinterpret_cast<uint32_t *>(lab + (int64_t)y * lstride)[x] =
            is_fg<T>(m, stride, x, y) ? rank[par[p]] + 1 : 0;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *d_n = rank[n];
}

template <typename O>
__global__ void __launch_bounds__(LabelPolicy::THREADS)
apply_kernel(const unsigned char *lab, int64_t lstride, const uint64_t *map, unsigned char *out,
             int64_t ostride, uint32_t w, uint32_t h)
{
    const uint32_t n = w * h;

    for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x) {
        uint32_t x = p % w, y = p / w;
        uint32_t l = reinterpret_cast<const uint32_t *>(lab + (int64_t)y * lstride)[x];

        reinterpret_cast<O *>(out + (int64_t)y * ostride)[x] = (O)map[l];
    }
}

/* Pass 1's border summary (twi_cuda_label_summary): first[l] = the smallest tile raster index
 * of label l, by atomicMin from the pixels that could be first (no left neighbour of the same
 * label: a pixel after one of its own label in the row is never its component's first). A
 * label above n marks first[0] = 0 (first[0] is UINT32_MAX otherwise). */
__global__ void __launch_bounds__(LabelPolicy::THREADS)
first_init_kernel(uint32_t *first, uint32_t n)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i <= n; i += gridDim.x * blockDim.x)
        first[i] = UINT32_MAX;
}

__global__ void __launch_bounds__(LabelPolicy::THREADS)
first_kernel(const unsigned char *lab, int64_t lstride, uint32_t w, uint32_t h, uint32_t n,
             uint32_t *first)
{
    const uint32_t px = w * h;

    for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < px; p += gridDim.x * blockDim.x) {
        uint32_t x = p % w, y = p / w;
        const uint32_t *row = reinterpret_cast<const uint32_t *>(lab + (int64_t)y * lstride);
        uint32_t l = row[x];

        if (l == 0 || (x > 0 && row[x - 1] == l))
            continue;
        if (l > n)
            atomicExch(&first[0], 0u);
        else
            atomicMin(&first[l], p);
    }
}

/* The labels of the tile's four sides, in order top (w), bottom (w), left (h), right (h). */
__global__ void __launch_bounds__(LabelPolicy::THREADS)
sides_kernel(const unsigned char *lab, int64_t lstride, uint32_t w, uint32_t h, uint32_t *out)
{
    const uint32_t total = 2 * w + 2 * h;

    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < total;
         k += gridDim.x * blockDim.x) {
        uint32_t x, y;

        if (k < w) {
            x = k, y = 0;
        } else if (k < 2 * w) {
            x = k - w, y = h - 1;
        } else if (k < 2 * w + h) {
            x = 0, y = k - 2 * w;
        } else {
            x = w - 1, y = k - 2 * w - h;
        }
        out[k] = reinterpret_cast<const uint32_t *>(lab + (int64_t)y * lstride)[x];
    }
}

unsigned
grid_for(uint64_t n)
{
    uint64_t g = (n + LabelPolicy::THREADS - 1) / LabelPolicy::THREADS;

    return (unsigned)(g < 1 ? 1 : g > LabelPolicy::MAX_GRID ? LabelPolicy::MAX_GRID : g);
}

/* The scan's temporary storage for n + 1 items (a host-side size query, no device work). */
size_t
scan_bytes(uint32_t n)
{
    size_t bytes = 0;

    cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<const uint32_t *>(nullptr),
                                  static_cast<uint32_t *>(nullptr), (int)n + 1);
    return bytes;
}

using twi_cu::align_up;

template <typename T>
tw_status
launch_label(const tw_tile_view *mask, int conn, tw_tile_view *labels, uint32_t *d_n,
             unsigned char *scratch, size_t scratch_bytes, cudaStream_t stream)
{
    const uint32_t w = (uint32_t)mask->w, h = (uint32_t)mask->h, n = w * h;
    uint32_t *par = reinterpret_cast<uint32_t *>(scratch);
    uint32_t *flags = reinterpret_cast<uint32_t *>(scratch + align_up((size_t)n * 4));
    uint32_t *rank = reinterpret_cast<uint32_t *>(scratch + 2 * align_up(((size_t)n + 1) * 4));
    unsigned char *tmp = scratch + 3 * align_up(((size_t)n + 1) * 4);
    size_t tmp_bytes = scan_bytes(n);
    const unsigned char *m = static_cast<const unsigned char *>(mask->data);
    const unsigned g = grid_for((uint64_t)n + 1);

    if (scratch_bytes < twi_cuda_label_scratch_size(mask->w, mask->h))
        return TW_E_INVALID;
    init_kernel<<<g, LabelPolicy::THREADS, 0, stream>>>(par, n);
    merge_kernel<T><<<g, LabelPolicy::THREADS, 0, stream>>>(m, mask->stride, w, h, conn, par);
    flatten_kernel<T><<<g, LabelPolicy::THREADS, 0, stream>>>(m, mask->stride, w, h, par, flags);
    if (cub::DeviceScan::ExclusiveSum(tmp, tmp_bytes, flags, rank, (int)n + 1, stream) !=
        cudaSuccess)
        return TW_E_DEVICE;
    number_kernel<T><<<g, LabelPolicy::THREADS, 0, stream>>>(
        m, mask->stride, w, h, par, rank, static_cast<unsigned char *>(labels->data),
        labels->stride, d_n);
    return twi_cu::launched_finish(stream);
}


/* ---- The whole image at once (twi_cuda_label_image): the same union-find, with the labels
 * buffer as the parents, short paths and fewer atomic unions.
 *
 * Init makes each 32-pixel segment of a row's runs (one warp: a ballot of the foreground) point
 * straight at the run's first pixel in the segment, the run's root: no atomics, one hop. The
 * merge then unites each foreground pixel with its earlier neighbours, skipping those another
 * pixel's unions already join it to (the decision-tree scans' reductions, [Wu09]): the left
 * one only across a segment boundary (inside, init did it); with 8-connectivity, when the left
 * is foreground the upper-left and upper neighbours are joined through it, and the upper-right
 * one only needs a union when the upper is background; when the left is background, the upper
 * neighbour joins both upper corners. With 4-connectivity the upper neighbour needs no union
 * when the left and upper-left are foreground. Links always go from the larger root to the
 * smaller (atomicMin), so a set's root is its smallest raster index: the component's first
 * pixel, itself a run's first pixel. Resolving is two passes: the runs' roots follow their
 * paths to the root, then every pixel takes its run root's root (two hops), so no pixel walks
 * a path as long as the image (what linking every pixel to the one above would cost a solid
 * region). The background's parent is NONE (no index reaches it: the image has fewer than
 * 2^32 - 1 pixels). */
constexpr uint32_t NONE = UINT32_MAX;

struct WholePolicy {
    static constexpr int BX = 32;  /* the 2-D passes: 32 x 8 pixels a block, a warp a segment */
    static constexpr int BY = 8;
    static constexpr unsigned MAX_GRID_Y = 65535u;
    static constexpr int THREADS = 256; /* the 1-D passes: one thread a pixel */
};
static_assert(WholePolicy::BX == 32, "init takes one warp for one row segment");
static_assert(WholePolicy::BX * WholePolicy::BY <= 1024, "block too large");

template <typename T>
__device__ __forceinline__ bool
fg_at(const unsigned char *m, int64_t ms, uint32_t x, uint64_t y)
{
    return reinterpret_cast<const T *>(m + (int64_t)y * ms)[x] != 0;
}

/* Is (x, y), foreground, the first pixel of its run in its 32-pixel segment? */
template <typename T>
__device__ __forceinline__ bool
run_start(const unsigned char *m, int64_t ms, uint32_t x, uint64_t y)
{
    return x % WholePolicy::BX == 0 || !fg_at<T>(m, ms, x - 1, y);
}

/* Each warp is one segment of one row (blockDim.x = 32, rows uniform in a warp). */
template <typename T>
__global__ void __launch_bounds__(WholePolicy::BX * WholePolicy::BY)
whole_init_kernel(const unsigned char *m, int64_t ms, uint32_t w, uint32_t h, uint32_t *par)
{
    const uint32_t lane = threadIdx.x, x = blockIdx.x * WholePolicy::BX + lane;

    for (uint64_t y = (uint64_t)blockIdx.y * WholePolicy::BY + threadIdx.y; y < h;
         y += (uint64_t)gridDim.y * WholePolicy::BY) {
        const bool f = x < w && fg_at<T>(m, ms, x, y);
        const unsigned bits = __ballot_sync(0xffffffffu, f);

        if (x < w) {
            const uint32_t p = (uint32_t)(y * w + x);
            /* background lanes below this one; the run starts after the highest */
            const unsigned below = ~bits & ((1u << lane) - 1u);
            const uint32_t start = below ? 32u - (uint32_t)__clz(below) : 0u;

            par[p] = f ? p - (lane - start) : NONE;
        }
    }
}

/* The unions init left (see above). */
template <typename T>
__global__ void __launch_bounds__(WholePolicy::BX * WholePolicy::BY)
whole_merge_kernel(const unsigned char *m, int64_t ms, uint32_t w, uint32_t h, int conn,
                   uint32_t *par)
{
    const uint32_t x = blockIdx.x * WholePolicy::BX + threadIdx.x;

    if (x >= w)
        return;
    for (uint64_t y = (uint64_t)blockIdx.y * WholePolicy::BY + threadIdx.y; y < h;
         y += (uint64_t)gridDim.y * WholePolicy::BY) {
        const uint32_t p = (uint32_t)(y * w + x);

        if (!fg_at<T>(m, ms, x, y))
            continue;
        const bool l = x > 0 && fg_at<T>(m, ms, x - 1, y);
        const bool u = y > 0 && fg_at<T>(m, ms, x, y - 1);

        if (l && x % WholePolicy::BX == 0)
            unite(par, p, p - 1);
        if (conn == 4) {
            if (u && !(l && fg_at<T>(m, ms, x - 1, y - 1)))
                unite(par, p, p - w);
            continue;
        }
        const bool ur = y > 0 && x + 1 < w && fg_at<T>(m, ms, x + 1, y - 1);

        if (l) {
            if (!u && ur)
                unite(par, p, p - w + 1);
        } else if (u) {
            unite(par, p, p - w);
        } else {
            if (y > 0 && x > 0 && fg_at<T>(m, ms, x - 1, y - 1))
                unite(par, p, p - w - 1);
            if (ur)
                unite(par, p, p - w + 1);
        }
    }
}

/* The runs' roots point at their set's root; flags[p] = 1 for the sets' roots, else 0 (every
 * p < n; the caller zeroes flags[n]). */
template <typename T>
__global__ void __launch_bounds__(WholePolicy::BX * WholePolicy::BY)
whole_roots_kernel(const unsigned char *m, int64_t ms, uint32_t w, uint32_t h, uint32_t *par,
                   uint32_t *flags)
{
    const uint32_t x = blockIdx.x * WholePolicy::BX + threadIdx.x;

    if (x >= w)
        return;
    for (uint64_t y = (uint64_t)blockIdx.y * WholePolicy::BY + threadIdx.y; y < h;
         y += (uint64_t)gridDim.y * WholePolicy::BY) {
        const uint32_t p = (uint32_t)(y * w + x);
        uint32_t f = 0;

        if (fg_at<T>(m, ms, x, y) && run_start<T>(m, ms, x, y)) {
            const uint32_t r = find_root(par, p);

            par[p] = r;
            f = r == p;
        }
        flags[p] = f;
    }
}

/* Every foreground pixel takes its run root's root: par[p] is its run's first pixel (or, for
 * that pixel, already the root), whose parent is the root since whole_roots_kernel. Run roots
 * are rewritten with the value they hold, so concurrent readers see it either way. */
__global__ void __launch_bounds__(WholePolicy::THREADS)
whole_resolve_kernel(uint32_t *par, uint32_t n)
{
    const uint64_t p = (uint64_t)blockIdx.x * WholePolicy::THREADS + threadIdx.x;

    if (p >= n)
        return;
    const uint32_t q = par[p];

    if (q != NONE)
        par[p] = par[q];
}

/* labels (the parents, in place) = the root's rank + 1, 0 on background. */
__global__ void __launch_bounds__(WholePolicy::THREADS)
whole_number_kernel(uint32_t *lab, const uint32_t *rank, uint32_t n)
{
    const uint64_t p = (uint64_t)blockIdx.x * WholePolicy::THREADS + threadIdx.x;

    if (p >= n)
        return;
    const uint32_t r = lab[p];

    lab[p] = r == NONE ? 0u : rank[r] + 1u;
}

/* The in-place scan's temporary storage for n + 1 items. */
size_t
whole_scan_bytes(uint32_t n)
{
    size_t bytes = 0;

    cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<uint32_t *>(nullptr),
                                  (uint64_t)n + 1);
    return bytes;
}

template <typename T>
tw_status
launch_label_image(const tw_tile_view *mask, int conn, tw_tile_view *labels, uint32_t *d_n,
                   unsigned char *scratch, size_t scratch_bytes, cudaStream_t stream)
{
    const uint32_t w = (uint32_t)mask->w, h = (uint32_t)mask->h, n = w * h;
    unsigned char *base = twi_cu::aligned_base(scratch);
    uint32_t *rank = reinterpret_cast<uint32_t *>(base);
    unsigned char *tmp = base + align_up(((size_t)n + 1) * 4);
    size_t tmp_bytes = whole_scan_bytes(n);
    const unsigned char *m = static_cast<const unsigned char *>(mask->data);
    uint32_t *par = static_cast<uint32_t *>(labels->data);
    const uint64_t gy = twi_cu::ceil_div(h, WholePolicy::BY);
    const dim3 block(WholePolicy::BX, WholePolicy::BY);
    const dim3 grid((unsigned)twi_cu::ceil_div(w, WholePolicy::BX),
                    (unsigned)(gy < WholePolicy::MAX_GRID_Y ? gy : WholePolicy::MAX_GRID_Y));
    const unsigned g1 = (unsigned)twi_cu::ceil_div((int64_t)n + 1, WholePolicy::THREADS);

    if (scratch_bytes < twi_cuda_label_image_scratch_size(mask->w, mask->h))
        return TW_E_INVALID;
    whole_init_kernel<T><<<grid, block, 0, stream>>>(m, mask->stride, w, h, par);
    whole_merge_kernel<T><<<grid, block, 0, stream>>>(m, mask->stride, w, h, conn, par);
    whole_roots_kernel<T><<<grid, block, 0, stream>>>(m, mask->stride, w, h, par, rank);
    whole_resolve_kernel<<<g1, WholePolicy::THREADS, 0, stream>>>(par, n);
    if (cudaMemsetAsync(rank + n, 0, 4, stream) != cudaSuccess)
        return TW_E_DEVICE;
    if (cub::DeviceScan::ExclusiveSum(tmp, tmp_bytes, rank, (uint64_t)n + 1, stream) !=
        cudaSuccess)
        return TW_E_DEVICE;
    whole_number_kernel<<<g1, WholePolicy::THREADS, 0, stream>>>(par, rank, n);
    if (cudaMemcpyAsync(d_n, rank + n, 4, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
        return TW_E_DEVICE;
    return twi_cu::launched_finish(stream);
}

/* The entry checks of the two labellings (a tile; a whole image, whose labels must be packed
 * rows) and the dispatch on the mask's sample type: run(T{}, scratch) labels a non-empty mask
 * of samples T; an empty one counts 0 objects. */
template <class Run>
tw_status
label_entry(const tw_tile_view *mask, int conn, tw_tile_view *labels, uint32_t *d_n,
            void *d_scratch, bool packed, cudaStream_t s, Run run)
{
    if (twi_label_check(mask, conn, labels) != TW_OK || !d_n)
        return TW_E_INVALID;
    if (mask->w == 0 || mask->h == 0)
        return cudaMemsetAsync(d_n, 0, 4, s) == cudaSuccess ? TW_OK : TW_E_DEVICE;
    if (!d_scratch || (packed && labels->stride != (int64_t)labels->w * 4))
        return TW_E_INVALID;
    unsigned char *sc = static_cast<unsigned char *>(d_scratch);

    return mask->type == TW_U8 ? run(uint8_t{}, sc) : run(uint16_t{}, sc);
}

} // namespace

extern "C" size_t
twi_cuda_label_scratch_size(int32_t w, int32_t h)
{
    try {
        uint32_t n = (uint32_t)((w > 0 ? w : 0) * (uint64_t)(h > 0 ? h : 0));

        return 3 * align_up(((size_t)n + 1) * 4) + align_up(scan_bytes(n));
    } catch (...) {
        return 0;
    }
}

extern "C" tw_status
twi_cuda_label(const tw_tile_view *mask, int conn, tw_tile_view *labels, uint32_t *d_n,
               void *d_scratch, size_t scratch_bytes, void *stream)
{
    try {
        cudaStream_t s = static_cast<cudaStream_t>(stream);

        return label_entry(mask, conn, labels, d_n, d_scratch, false, s,
                           [&](auto t, unsigned char *sc) {
                               return launch_label<decltype(t)>(mask, conn, labels, d_n, sc,
                                                                scratch_bytes, s);
                           });
    } catch (...) {
        return TW_E_DEVICE;
    }
}

extern "C" tw_status
twi_cuda_label_summary(const tw_tile_view *labels, int64_t n, uint32_t *d_out, void *stream)
{
    try {
        cudaStream_t s = static_cast<cudaStream_t>(stream);

        if (!labels || !d_out || labels->type != TW_U32 || labels->channels != 1 || n < 0 ||
            n >= (int64_t)UINT32_MAX || labels->w <= 0 || labels->h <= 0 ||
            (uint64_t)labels->w * (uint64_t)labels->h > UINT32_MAX || !labels->data ||
            labels->stride < (int64_t)labels->w * 4)
            return TW_E_INVALID;
        const uint32_t w = (uint32_t)labels->w, h = (uint32_t)labels->h;
        const unsigned char *l = static_cast<const unsigned char *>(labels->data);
        uint32_t *sides = d_out + n + 1;

        first_init_kernel<<<grid_for((uint64_t)n + 1), LabelPolicy::THREADS, 0, s>>>(
            d_out, (uint32_t)n);
        first_kernel<<<grid_for((uint64_t)w * h), LabelPolicy::THREADS, 0, s>>>(
            l, labels->stride, w, h, (uint32_t)n, d_out);
        sides_kernel<<<grid_for(2 * ((uint64_t)w + h)), LabelPolicy::THREADS, 0, s>>>(
            l, labels->stride, w, h, sides);
        return twi_cu::launched_finish(s);
    } catch (...) {
        return TW_E_DEVICE;
    }
}

extern "C" tw_status
twi_cuda_label_apply(const tw_tile_view *labels, const uint64_t *d_map, tw_tile_view *out,
                     void *stream)
{
    try {
        cudaStream_t s = static_cast<cudaStream_t>(stream);

        if (twi_label_apply_check(labels, d_map, out) != TW_OK)
            return TW_E_INVALID;
        if (labels->w == 0 || labels->h == 0)
            return TW_OK;
        const uint32_t w = (uint32_t)labels->w, h = (uint32_t)labels->h;
        const unsigned g = grid_for((uint64_t)w * h);
        const unsigned char *l = static_cast<const unsigned char *>(labels->data);
        unsigned char *o = static_cast<unsigned char *>(out->data);

        if (out->type == TW_U32)
            apply_kernel<uint32_t><<<g, LabelPolicy::THREADS, 0, s>>>(l, labels->stride, d_map, o,
                                                                      out->stride, w, h);
        else
            apply_kernel<uint64_t><<<g, LabelPolicy::THREADS, 0, s>>>(l, labels->stride, d_map, o,
                                                                      out->stride, w, h);
        return twi_cu::launched_finish(s);
    } catch (...) {
        return TW_E_DEVICE;
    }
}

extern "C" size_t
twi_cuda_label_image_scratch_size(int32_t w, int32_t h)
{
    try {
        uint64_t n = (uint64_t)(w > 0 ? w : 0) * (uint64_t)(h > 0 ? h : 0);

        if (n >= UINT32_MAX)
            return 0;
        return twi_cu::ALIGN + align_up((n + 1) * 4) + align_up(whole_scan_bytes((uint32_t)n));
    } catch (...) {
        return 0;
    }
}

extern "C" tw_status
twi_cuda_label_image(const tw_tile_view *mask, int conn, tw_tile_view *labels, uint32_t *d_n,
                     void *d_scratch, size_t scratch_bytes, void *stream)
{
    try {
        cudaStream_t s = static_cast<cudaStream_t>(stream);

        /* the labels are the parents: raster index p at element p (packed rows) */
        return label_entry(mask, conn, labels, d_n, d_scratch, true, s,
                           [&](auto t, unsigned char *sc) {
                               return launch_label_image<decltype(t)>(mask, conn, labels, d_n, sc,
                                                                      scratch_bytes, s);
                           });
    } catch (...) {
        return TW_E_DEVICE;
    }
}
