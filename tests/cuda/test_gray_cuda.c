/* SPDX-License-Identifier: MIT */
/* tilewave tests: the CUDA gray kernel is bit-identical to the OpenMP one (skips without a GPU). */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#ifdef TW_HAVE_CUDA

#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"
#include "twtest.h"

static const int32_t sizes[][2] = {
    {1, 1}, {2, 1}, {1, 2}, {3, 5}, {7, 7}, {16, 16}, {31, 17}, {33, 9},
    {1, 200}, {300, 1}, {127, 129}, {256, 256}, {300, 200},
};
#define N_SIZES (sizeof sizes / sizeof sizes[0])

/* A host view of w x h pixels with `extra` samples of padding per row, random bytes. */
static tw_tile_view
host_view(int32_t w, int32_t h, int32_t ch, tw_sample_type t, int64_t extra, uint64_t *rng)
{
    size_t ss = tw_sample_size(t);
    tw_tile_view v = {NULL, 0, w, h, ch, t, 0, 0};
    size_t bytes;
    uint8_t *p;

    v.stride = (int64_t)((size_t)w * (size_t)ch * ss) + extra * (int64_t)ss;
    bytes = (size_t)v.stride * (size_t)h;
    p = malloc(bytes);
    cr_assert_not_null(p);
    for (size_t i = 0; i < bytes; i++)
        p[i] = (uint8_t)(twtest_xorshift(rng) >> 56);
    v.data = p;
    return v;
}

/* A device copy of a host view, same stride (the test allocates with cudart directly). */
static tw_tile_view
device_copy(const tw_tile_view *h)
{
    tw_tile_view d = *h;
    size_t bytes = (size_t)h->stride * (size_t)h->h;

    cr_assert(eq(int, cudaMalloc(&d.data, bytes), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(d.data, h->data, bytes, cudaMemcpyHostToDevice), cudaSuccess));
    return d;
}

/* Run both variants on the same input and output layout; outputs equal byte for byte,
 * padding included (both leave it as it was). */
static void
compare(int32_t w, int32_t h, int32_t ch, tw_sample_type t, int64_t in_extra, int64_t out_extra,
        int mode, cudaStream_t stream, uint64_t *rng)
{
    tw_tile_view hin = host_view(w, h, ch, t, in_extra, rng);
    tw_tile_view hout = host_view(w, h, 1, t, out_extra, rng);
    tw_tile_view din = device_copy(&hin);
    tw_tile_view dout = device_copy(&hout);
    size_t out_bytes = (size_t)hout.stride * (size_t)h;
    uint8_t *back = malloc(out_bytes);

    cr_assert_not_null(back);
    cr_assert(eq(int, twi_omp_gray(&hin, &hout, mode, 2), TW_OK));
    cr_assert(eq(int, twi_cuda_gray(&din, &dout, mode, stream), TW_OK));
    cr_assert(eq(int, cudaStreamSynchronize(stream), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(back, dout.data, out_bytes, cudaMemcpyDeviceToHost),
                 cudaSuccess));
    if (memcmp(back, hout.data, out_bytes) != 0) {
        for (size_t i = 0; i < out_bytes; i++)
            if (back[i] != ((uint8_t *)hout.data)[i])
                cr_fatal("%dx%d ch %d %s mode %d: byte %zu (row %zu) differs: cuda %u omp %u", w,
                         h, ch, tw_sample_type_name(t), mode, i, i / (size_t)hout.stride,
                         back[i], ((uint8_t *)hout.data)[i]);
    }
    cudaFree(din.data);
    cudaFree(dout.data);
    free(hin.data);
    free(hout.data);
    free(back);
}

Test(gray_cuda, rgb_bit_identical_to_omp)
{
    /* u8 and u16 RGB, every mode, 13 sizes from 1x1 to 300x200, tight and odd strides, on a
     * non-default stream: the CUDA output equals the OpenMP output byte for byte. */
    static const tw_sample_type types[] = {TW_U8, TW_U16};
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    cudaStream_t stream = NULL;

    twtest_need_gpu();
    cr_assert(eq(int, cudaStreamCreate(&stream), cudaSuccess));
    for (size_t t = 0; t < 2; t++)
        for (size_t s = 0; s < N_SIZES; s++)
            for (int extra = 0; extra < 2; extra++)
                for (int mode = 0; mode < 4; mode++)
                    compare(sizes[s][0], sizes[s][1], 3, types[t], extra ? 5 : 0,
                            extra ? 3 : 0, mode, stream, &rng);
    cudaStreamDestroy(stream);
}

Test(gray_cuda, one_channel_copy_bit_identical_to_omp)
{
    /* 1-channel u8, u16, u32 and f32 inputs are copied: CUDA equals OpenMP byte for byte. */
    static const tw_sample_type types[] = {TW_U8, TW_U16, TW_U32, TW_F32};
    uint64_t rng = 777;
    cudaStream_t stream = NULL;

    twtest_need_gpu();
    cr_assert(eq(int, cudaStreamCreate(&stream), cudaSuccess));
    for (size_t t = 0; t < 4; t++) {
        compare(1, 1, 1, types[t], 0, 0, 0, stream, &rng);
        compare(301, 77, 1, types[t], 3, 1, 2, stream, &rng);
    }
    cudaStreamDestroy(stream);
}

Test(gray_cuda, large_tile_on_default_stream)
{
    /* A 4096 x 1031 u8 tile on the legacy default stream (NULL) matches OpenMP. */
    uint64_t rng = 99;

    twtest_need_gpu();
    compare(4096, 1031, 3, TW_U8, 16, 0, 0, NULL, &rng);
}

Test(gray_cuda, empty_and_invalid_views)
{
    /* Empty views succeed without a launch; mismatched views give TW_E_INVALID before any
     * launch, so no device memory is touched (the pointers here are not even valid). */
    tw_tile_view in = {NULL, 0, 0, 4, 3, TW_U8, 0, 0};
    tw_tile_view out = {NULL, 0, 0, 4, 1, TW_U8, 0, 0};

    twtest_need_gpu();
    cr_assert(eq(int, twi_cuda_gray(&in, &out, 0, NULL), TW_OK));
    in.w = out.w = 4;
    in.data = out.data = (void *)(uintptr_t)0x1000;
    in.stride = 12;
    out.stride = 4;
    out.w = 3;
    cr_assert(eq(int, twi_cuda_gray(&in, &out, 0, NULL), TW_E_INVALID));
    out.w = 4;
    out.type = TW_U16;
    cr_assert(eq(int, twi_cuda_gray(&in, &out, 0, NULL), TW_E_INVALID));
    out.type = TW_U8;
    cr_assert(eq(int, twi_cuda_gray(&in, &out, 7, NULL), TW_E_INVALID));
    in.stride = 11;
    cr_assert(eq(int, twi_cuda_gray(&in, &out, 0, NULL), TW_E_INVALID));
}

#else /* !TW_HAVE_CUDA */

Test(gray_cuda, skipped_without_cuda)
{
    /* Built without CUDA: nothing to compare. */
    cr_skip_test("built without CUDA");
}

#endif /* TW_HAVE_CUDA */
