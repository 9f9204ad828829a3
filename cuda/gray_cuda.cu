/* SPDX-License-Identifier: MIT */
/* tilewave: gray kernel on CUDA: RGB to one channel (luminance, r, g, b, hematoxylin, eosin),
 * optionally thresholded, bit-identical to omp/gray_omp.c. */
#include <cstdint>

#include <cuda_runtime.h>

#include "cuda_common.cuh"
#include "cuda_kernels.h"
#include "gray.h" /* twi_gray_check: the contract both variants share (kern/) */

namespace {

/* Tuning (in policies, not kernels): one thread per pixel, 32 x 8 blocks so that a warp reads one
 * contiguous run of a row. The grid strides over the image, so any size fits the grid limits. */
struct GrayPolicy {
    static constexpr int BLOCK_X = 32;
    static constexpr int BLOCK_Y = 8;
    static constexpr int THREADS = BLOCK_X * BLOCK_Y;
    static constexpr unsigned MAX_GRID_Y = 65535u;
};
static_assert(GrayPolicy::THREADS <= 1024, "block too large");

/* The exact integer rule shared with omp/gray_omp.c: max 1000 * 65535 + 500 fits 32 bits. */
__device__ __forceinline__ uint32_t
luminance(uint32_t r, uint32_t g, uint32_t b)
{
    return (299u * r + 587u * g + 114u * b + 500u) / 1000u;
}

/* The parameters the kernel reads (twi_gray_params without what the host alone needs), passed
 * by value: about 1 KiB of kernel parameters, well inside the 4 KiB limit. */
struct GrayArgs {
    int32_t od[256];
    int64_t w[3];
    int64_t t;
    int mode;
    int threshold;
    int invert;
};

/* One stain concentration as 0..255: the integers of omp/gray_omp.c, in the same order. */
__device__ __forceinline__ uint32_t
stain(const int32_t *od, const GrayArgs &a, uint32_t r, uint32_t g, uint32_t b)
{
    int64_t c = (int64_t)od[r] * a.w[0] + (int64_t)od[g] * a.w[1] + (int64_t)od[b] * a.w[2];

    if (c <= 0)
        return 0;
    c = (c + ((int64_t)1 << 35)) >> 36;
    return (uint32_t)(c > 255 ? 255 : c);
}

template <typename T>
__global__ void __launch_bounds__(GrayPolicy::THREADS)
gray_rgb_kernel(const unsigned char *__restrict__ src, int64_t src_stride,
                unsigned char *__restrict__ dst, int64_t dst_stride, int32_t w, int32_t h,
                int channels, const GrayArgs a)
{
    __shared__ int32_t od[256];
    const int64_t x0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t y0 = (int64_t)blockIdx.y * blockDim.y + threadIdx.y;
    const int64_t sx = (int64_t)gridDim.x * blockDim.x;
    const int64_t sy = (int64_t)gridDim.y * blockDim.y;
    const T maxv = (T)~(T)0;

    static_assert(GrayPolicy::THREADS >= 256, "one thread per table entry");
    if (a.mode >= TWI_GRAY_HEMA) {
        const int i = threadIdx.y * blockDim.x + threadIdx.x;

        if (i < 256)
            od[i] = a.od[i];
        __syncthreads();
    }
    for (int64_t y = y0; y < h; y += sy) {
        const T *s = reinterpret_cast<const T *>(src + y * src_stride);
        T *d = reinterpret_cast<T *>(dst + y * dst_stride);

        for (int64_t x = x0; x < w; x += sx) {
            uint32_t g;

            if (channels == 1) {
                g = s[x];
            } else {
                const T *p = s + 3 * x;

                if (a.mode == TWI_GRAY_LUMINANCE)
                    g = luminance(p[0], p[1], p[2]);
                else if (a.mode >= TWI_GRAY_HEMA)
                    g = stain(od, a, p[0], p[1], p[2]);
                else
                    g = p[a.mode - TWI_GRAY_R];
            }
            if (a.threshold)
                g = (((int64_t)g > a.t) != (a.invert != 0)) ? maxv : 0;
            d[x] = (T)g;
        }
    }
}

tw_status
launch_gray(const tw_tile_view *in, tw_tile_view *out, const twi_gray_params *p,
            cudaStream_t stream)
{
    cudaError_t ce;

    if (in->channels == 1 && !p->threshold) {
        /* A copy: the copy engine does it best, still asynchronous on the stream. */
        ce = cudaMemcpy2DAsync(out->data, (size_t)out->stride, in->data, (size_t)in->stride,
                               (size_t)in->w * tw_sample_size(in->type), (size_t)in->h,
                               cudaMemcpyDefault, stream);
        if (ce != cudaSuccess) {
            (void)cudaGetLastError(); /* clear the (non-sticky) error for the next task */
            return TW_E_DEVICE;
        }
    } else {
        const unsigned gx = (unsigned)((in->w + GrayPolicy::BLOCK_X - 1) / GrayPolicy::BLOCK_X);
        unsigned gy = (unsigned)((in->h + GrayPolicy::BLOCK_Y - 1) / GrayPolicy::BLOCK_Y);
        const dim3 block(GrayPolicy::BLOCK_X, GrayPolicy::BLOCK_Y);
        GrayArgs a;

        if (gy > GrayPolicy::MAX_GRID_Y)
            gy = GrayPolicy::MAX_GRID_Y;
        const dim3 grid(gx, gy);
        const unsigned char *s = static_cast<const unsigned char *>(in->data);
        unsigned char *d = static_cast<unsigned char *>(out->data);

        for (int i = 0; i < 256; i++)
            a.od[i] = p->od[i];
        for (int i = 0; i < 3; i++)
            a.w[i] = p->w[i];
        a.t = p->t;
        a.mode = p->mode;
        a.threshold = p->threshold;
        a.invert = p->invert;
        if (in->type == TW_U8)
            gray_rgb_kernel<uint8_t><<<grid, block, 0, stream>>>(s, in->stride, d, out->stride,
                                                                 in->w, in->h, in->channels, a);
        else
            gray_rgb_kernel<uint16_t><<<grid, block, 0, stream>>>(s, in->stride, d, out->stride,
                                                                  in->w, in->h, in->channels, a);
    }
    return twi_cu::launched_finish(stream);
}

} // namespace

extern "C" tw_status
twi_cuda_gray_p(const tw_tile_view *in, tw_tile_view *out, const struct twi_gray_params *p,
                void *stream)
{
    try {
        tw_status st = twi_gray_check_p(in, out, p);

        if (st != TW_OK)
            return st;
        if (in->w == 0 || in->h == 0)
            return TW_OK;
        return launch_gray(in, out, p, static_cast<cudaStream_t>(stream));
    } catch (...) {
        return TW_E_DEVICE;
    }
}

extern "C" tw_status
twi_cuda_gray(const tw_tile_view *in, tw_tile_view *out, int mode, void *stream)
{
    twi_gray_params p;

    if (twi_gray_params_init(&p, mode, nullptr) != TW_OK)
        return TW_E_INVALID;
    return twi_cuda_gray_p(in, out, &p, stream);
}
