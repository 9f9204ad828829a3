/* SPDX-License-Identifier: MIT */
/* tilewave tests: a single-process driver of the CUDA max-tree for compute-sanitizer. */
/*
 * Criterion runs each test in a child process, and compute-sanitizer's tracking of such
 * children cannot be relied on, so the sanitizer runs (tests/gpu/validate.sh) use this plain
 * program: random small cases of twi_cuda_maxtree (8/16-bit, 4/8-connectivity, several tiles
 * in each direction, padded strides, the six image modes of twtest_mt_random_image), each
 * checked against the CPU twin twi_omp_maxtree. Scratch is left uninitialised on purpose so
 * that initcheck sees any read of memory the kernels did not write. Usage:
 * sanitize_maxtree [CASES]; exit 77 without a device, 1 on a wrong result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"

static uint64_t rs = 0x9E3779B97F4A7C15ull;

static unsigned
rnd(unsigned n)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return n ? (unsigned)((rs >> 11) % n) : 0;
}

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            printf("CUDA %s at line %d\n", cudaGetErrorString(e_), __LINE__);                  \
            exit(2);                                                                           \
        }                                                                                      \
    } while (0)

/* Image modes like twtest_mt_random_image: noise, few levels, plateaus, smooth, extremes. */
static unsigned
level(int mode, int x, int y, unsigned maxv)
{
    switch (mode) {
    case 0:
        return rnd(maxv + 1);
    case 1:
        return rnd(4);
    case 2:
        return (unsigned)((x / 7 + y / 5) % 3) + (rnd(9) == 0);
    case 3:
        return (unsigned)((x * 5 + y * 3) / 4) % (maxv > 255 ? 3000u : 60u) + rnd(4);
    default:
        return rnd(2) ? maxv : 0;
    }
}

static int
one_case(int k)
{
    const int big = k % 4 == 3;
    const int w = 1 + (int)rnd(big ? 200 : 70), h = 1 + (int)rnd(big ? 200 : 70);
    const int wide = (int)rnd(2), conn = rnd(2) ? 8 : 4, mode = k % 5;
    const int ipad = rnd(3) ? 0 : 1 + (int)rnd(4), opad = rnd(3) ? 0 : 1 + (int)rnd(4);
    const size_t ss = wide ? 2 : 1, n = (size_t)w * (size_t)h;
    const unsigned maxv = wide ? 65535u : 255u;
    const int64_t istride = (int64_t)((size_t)(w + ipad) * ss), ostride = (int64_t)(w + opad) * 4;
    unsigned char *img = malloc(n * ss), *hin = calloc((size_t)istride * (size_t)h, 1);
    unsigned *got = malloc((size_t)ostride * (size_t)h), *want = malloc(n * 4);
    void *din, *dout, *scr;
    int bad = 0;

    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const unsigned v = level(mode, x, y, maxv);

            if (wide)
                ((unsigned short *)(void *)img)[(size_t)y * w + x] = (unsigned short)v;
            else
                img[(size_t)y * w + x] = (unsigned char)v;
        }
    for (int y = 0; y < h; y++)
        memcpy(hin + (size_t)y * (size_t)istride, img + (size_t)y * w * ss, (size_t)w * ss);
    const tw_sample_type type = wide ? TW_U16 : TW_U8;
    tw_tile_view cin = {img, (int64_t)((size_t)w * ss), w, h, 1, type, 0, 0};
    tw_tile_view cout = {want, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};
    if (twi_omp_maxtree(&cin, conn, &cout, 1) != TW_OK) {
        printf("case %d: CPU twin failed\n", k);
        exit(2);
    }
    const size_t bytes = twi_cuda_maxtree_scratch_size(w, h, type, conn);
    CK(cudaMalloc(&din, (size_t)istride * (size_t)h));
    CK(cudaMalloc(&dout, (size_t)ostride * (size_t)h));
    CK(cudaMalloc(&scr, bytes)); /* not initialised on purpose */
    CK(cudaMemcpy(din, hin, (size_t)istride * (size_t)h, cudaMemcpyHostToDevice));
    tw_tile_view vin = {din, istride, w, h, 1, type, 0, 0};
    tw_tile_view vout = {dout, ostride, w, h, 1, TW_U32, 0, 0};
    const tw_status st = twi_cuda_maxtree(&vin, conn, &vout, scr, bytes, NULL);
    CK(cudaDeviceSynchronize());
    /* pixels only: the row padding is never written */
    CK(cudaMemcpy2D(got, (size_t)ostride, dout, (size_t)ostride, (size_t)w * 4, (size_t)h,
                    cudaMemcpyDeviceToHost));
    bad = st != TW_OK;
    for (int y = 0; y < h && !bad; y++)
        for (int x = 0; x < w && !bad; x++) {
            const unsigned g = got[(size_t)y * (size_t)(w + opad) + x], r = want[(size_t)y * w + x];

            if ((bad = g != r))
                printf("case %d %dx%d %d-bit conn %d mode %d: parent(%d, %d) = %u, want %u\n", k,
                       w, h, wide ? 16 : 8, conn, mode, x, y, g, r);
        }
    cudaFree(din);
    cudaFree(dout);
    cudaFree(scr);
    free(img);
    free(hin);
    free(got);
    free(want);
    return bad;
}

int
main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100, fails = 0, devs = 0;

    if (cudaGetDeviceCount(&devs) != cudaSuccess || devs == 0) {
        printf("sanitize_maxtree: no CUDA device, skipped\n");
        return 77;
    }
    for (int k = 0; k < n; k++)
        fails += one_case(k);
    printf("sanitize_maxtree: %d cases, %d failed\n", n, fails);
    return fails != 0;
}
