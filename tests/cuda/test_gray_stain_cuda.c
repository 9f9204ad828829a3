/* SPDX-License-Identifier: MIT */
/* tilewave tests: the CUDA gray kernel's stain modes and threshold are bit-identical to the
 * OpenMP ones (skips without a GPU). */
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

/* Both variants on the same w x h input (ch channels of t, `extra` padding samples a row):
 * the outputs, padding included, are equal byte for byte. */
static void
compare(const twi_gray_params *p, const uint8_t *src, int32_t w, int32_t h, int32_t ch,
        tw_sample_type t, int64_t extra)
{
    size_t ss = tw_sample_size(t);
    int64_t is = (int64_t)((size_t)w * ch * ss) + extra * (int64_t)ss;
    int64_t os = (int64_t)((size_t)w * ss) + extra * (int64_t)ss;
    size_t ib = (size_t)is * h, ob = (size_t)os * h;
    uint8_t *hout = malloc(ob), *back = malloc(ob);
    tw_tile_view hi = {(void *)src, is, w, h, ch, t, 0, 0};
    tw_tile_view ho = {hout, os, w, h, 1, t, 0, 0};
    tw_tile_view di = hi, dout = ho;

    cr_assert(hout && back);
    memset(hout, 0x5A, ob);
    cr_assert(eq(int, cudaMalloc(&di.data, ib), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&dout.data, ob), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(di.data, src, ib, cudaMemcpyHostToDevice), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(dout.data, hout, ob, cudaMemcpyHostToDevice), cudaSuccess));
    cr_assert(eq(int, twi_omp_gray_p(&hi, &ho, p, 2), TW_OK));
    cr_assert(eq(int, twi_cuda_gray_p(&di, &dout, p, NULL), TW_OK));
    cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(back, dout.data, ob, cudaMemcpyDeviceToHost), cudaSuccess));
    for (size_t i = 0; i < ob; i++)
        if (back[i] != hout[i])
            cr_fatal("mode %d threshold %d t %lld: %dx%d ch %d: byte %zu differs: cuda %u omp %u",
                     p->mode, p->threshold, (long long)p->t, w, h, ch, i, back[i], hout[i]);
    cudaFree(di.data);
    cudaFree(dout.data);
    free(hout);
    free(back);
}

Test(gray_stain_cuda, all_colours_bit_identical_to_omp)
{
    /* Every one of the 2^24 colours (a 4096x4096 image), hematoxylin and eosin, standard and
     * custom stain vectors: the same bytes on both devices. */
    static const double custom[9] = {0.644, 0.717, 0.267, 0.093, 0.954, 0.283, 0.0, 0.0, 0.0};
    double m[9];
    uint8_t *px = malloc((size_t)4096 * 4096 * 3);
    twi_gray_params p;

    twtest_need_gpu();
    cr_assert_not_null(px);
    for (size_t i = 0; i < (size_t)1 << 24; i++) {
        px[3 * i] = (uint8_t)(i & 255);
        px[3 * i + 1] = (uint8_t)((i >> 8) & 255);
        px[3 * i + 2] = (uint8_t)(i >> 16);
    }
    /* custom: H and E of Ruifrok's H&E table, residual = their cross product */
    memcpy(m, custom, sizeof m);
    m[6] = m[1] * m[5] - m[2] * m[4];
    m[7] = m[2] * m[3] - m[0] * m[5];
    m[8] = m[0] * m[4] - m[1] * m[3];
    for (int mode = 4; mode <= 5; mode++) {
        cr_assert(eq(int, twi_gray_params_init(&p, mode, NULL), TW_OK));
        compare(&p, px, 4096, 4096, 3, TW_U8, 0);
        cr_assert(eq(int, twi_gray_params_init(&p, mode, m), TW_OK));
        compare(&p, px, 4096, 4096, 3, TW_U8, 0);
    }
    free(px);
}

Test(gray_stain_cuda, thresholds_bit_identical_to_omp)
{
    /* Every mode with thresholds and invert, u8 and u16, RGB and one channel, odd sizes and
     * padded rows. */
    static const int32_t sizes[][2] = {{1, 1}, {7, 3}, {33, 9}, {300, 200}, {257, 129}};
    uint64_t rng = 3;
    uint8_t *px = malloc(300 * 200 * 3 * 2 + 4096);
    twi_gray_params p;

    twtest_need_gpu();
    cr_assert_not_null(px);
    for (size_t i = 0; i < 300 * 200 * 3 * 2 + 4096; i++)
        px[i] = (uint8_t)twtest_rnd(&rng, 256);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int mode = 0; mode <= 5; mode++)
            for (int ch = 1; ch <= 3; ch += 2)
                for (int t16 = 0; t16 < 2; t16++) {
                    tw_sample_type t = t16 ? TW_U16 : TW_U8;

                    if (mode >= 4 && (t16 || ch == 1))
                        continue;
                    cr_assert(eq(int, twi_gray_params_init(&p, ch == 1 ? 0 : mode, NULL),
                                 TW_OK));
                    p.threshold = 1;
                    p.t = t16 ? 30000 : 100;
                    p.invert = (int)(s & 1);
                    compare(&p, px, sizes[s][0], sizes[s][1], ch, t, (int64_t)(s % 3));
                }
    free(px);
}

#else /* !TW_HAVE_CUDA */

Test(gray_stain_cuda, skipped_without_cuda)
{
    /* Built without CUDA: nothing to compare. */
    cr_skip_test("built without CUDA");
}

#endif /* TW_HAVE_CUDA */
