/* SPDX-License-Identifier: MIT */
/* tilewave tests: a single-process driver of the CUDA EDT kernels for compute-sanitizer. */
/*
 * Criterion runs each test in a child process, and compute-sanitizer's tracking of such
 * children cannot be relied on, so the sanitizer runs (tests/gpu/validate.sh) use this plain
 * program: random small cases of twi_cuda_edt and twi_cuda_edt_wavefront (bands with bounds,
 * every format, indices, padded strides, spacing, explicit m1/m2/m3), each checked against a
 * naive separable reference. Scratch is left uninitialised on purpose so that initcheck sees
 * any read of memory the kernels did not write. Usage: sanitize_edt [CASES]; exit 77 without a
 * device, 1 on a wrong result.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "cuda_kernels.h"
#define SANITIZE_SEED 0x1234567ull
#include "sanitize_common.h"

/* The reference d2 of rows [y0, y0 + h) of the hi-row image: per column the nearest
 * background row, then the minimum over columns. INFINITY without background. */
static void
reference(const unsigned char *im, int w, int hi, int y0, int h, double sx, double sy,
          double *ref)
{
    long long *g = malloc((size_t)w * sizeof *g);

    for (int y = y0; y < y0 + h; y++) {
        for (int x = 0; x < w; x++) {
            g[x] = -1;
            for (int yy = 0; yy < hi; yy++)
                if (!im[(size_t)yy * w + x] && (g[x] < 0 || llabs(yy - y) < g[x]))
                    g[x] = llabs(yy - y);
        }
        for (int x = 0; x < w; x++) {
            double b = INFINITY;
            for (int c = 0; c < w; c++) {
                if (g[c] < 0)
                    continue;
                double d = (sx * sx) * (double)((long long)(x - c) * (x - c)) +
                           (sy * sy) * (double)(g[c] * g[c]);
                if (d < b)
                    b = d;
            }
            ref[(size_t)(y - y0) * w + x] = b;
        }
    }
    free(g);
}

/* 0 when `got` is what format `format` makes of d2 (within rounding for spacing; at least
 * it for the wavefront). */
static int
wrong(double got, double d, int format, int wave, int aniso)
{
    double want = format == 0   ? (double)(float)sqrt(d)
                  : format == 1 ? fmin(65535.0, floor(sqrt(d) + 0.5))
                                : fmin(4294967295.0, d);

    if (wave)
        return !(got >= want * (1 - 1e-6));
    if (aniso)
        return !(got == want || fabs(got - want) <= 1e-5 * want + (format == 1));
    return got != want && !(isinf(got) && isinf(want));
}

static int
one_case(int k)
{
    static const unsigned fracs[] = {1, 10, 100, 500, 990};
    int w = 1 + (int)rnd(k % 10 == 9 ? 300 : 80), hi = 1 + (int)rnd(k % 10 == 9 ? 300 : 80);
    unsigned frac;
    int format, wave = k % 5 == 4, useidx, aniso, y0 = 0, y1, h, pad, bad = 0;
    double sx, sy;

    if (k % 7 == 1)
        w = 1 + (int)rnd(3);
    if (k % 7 == 2)
        hi = 1 + (int)rnd(3);
    frac = fracs[rnd(5)];
    unsigned char *im = malloc((size_t)w * (size_t)hi);
    for (size_t i = 0; i < (size_t)w * (size_t)hi; i++)
        im[i] = k % 11 == 3 ? 1 : rnd(1000) < frac ? 0 : 1;
    format = (int)rnd(3);
    useidx = (int)rnd(2);
    aniso = !wave && format != TWI_EDT_SQ32 && rnd(4) == 0;
    sx = aniso ? 0.5 + rnd(100) / 40.0 : 1.0;
    sy = aniso ? 0.5 + rnd(100) / 40.0 : 1.0;
    y1 = hi;
    if (!wave && rnd(2)) {
        y0 = (int)rnd((unsigned)hi);
        y1 = y0 + 1 + (int)rnd((unsigned)(hi - y0));
    }
    h = y1 - y0;
    int *above = malloc((size_t)w * sizeof(int)), *below = malloc((size_t)w * sizeof(int));
    for (int x = 0; x < w; x++) {
        above[x] = below[x] = TWI_EDT_NONE;
        for (int y = y0 - 1; y >= 0; y--)
            if (!im[(size_t)y * w + x]) {
                above[x] = y;
                break;
            }
        for (int y = y1; y < hi; y++)
            if (!im[(size_t)y * w + x]) {
                below[x] = y;
                break;
            }
    }
    double *ref = malloc((size_t)w * (size_t)h * sizeof *ref);
    reference(im, w, hi, y0, h, sx, sy, ref);

    pad = rnd(3) ? 0 : (int)rnd(5);
    size_t ss = format == TWI_EDT_U16 ? 2 : 4;
    int64_t bst = w + pad, ost = (int64_t)(w + pad) * (int64_t)ss, ist = (int64_t)(w + pad) * 8;
    void *din, *dout, *didx = NULL, *scr;
    int *dab = NULL, *dbe = NULL;
    CK(cudaMalloc(&din, (size_t)bst * (size_t)h + 1));
    unsigned char *hb = malloc((size_t)bst * (size_t)h);
    memset(hb, 7, (size_t)bst * (size_t)h);
    for (int y = 0; y < h; y++)
        memcpy(hb + (size_t)y * (size_t)bst, im + (size_t)(y + y0) * w, (size_t)w);
    CK(cudaMemcpy(din, hb, (size_t)bst * (size_t)h, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dout, (size_t)ost * (size_t)h));
    if (useidx)
        CK(cudaMalloc(&didx, (size_t)ist * (size_t)h));
    twi_edt_band b;
    memset(&b, 0, sizeof b);
    b.y0 = y0;
    b.sx = sx;
    b.sy = sy;
    b.format = format;
    b.m1 = rnd(3) ? 0 : 1 + (int)rnd((unsigned)h + 3);
    b.m2 = rnd(3) ? 0 : 1 + (int)rnd((unsigned)w + 3);
    b.m3 = rnd(3) ? 0 : 1 + (int)rnd((unsigned)w + 3);
    if (!wave && y0 > 0) {
        CK(cudaMalloc((void **)&dab, (size_t)w * 4));
        CK(cudaMemcpy(dab, above, (size_t)w * 4, cudaMemcpyHostToDevice));
        b.above = dab;
    }
    if (!wave && y1 < hi) {
        CK(cudaMalloc((void **)&dbe, (size_t)w * 4));
        CK(cudaMemcpy(dbe, below, (size_t)w * 4, cudaMemcpyHostToDevice));
        b.below = dbe;
    }
    size_t bytes = wave ? twi_cuda_edt_wavefront_scratch_size(w, h)
                        : twi_cuda_edt_scratch_size(w, h, &b);
    CK(cudaMalloc(&scr, bytes)); /* not initialised on purpose */
    tw_tile_view vb = {din, bst, w, h, 1, TW_U8, 0, y0};
    tw_tile_view vo = {dout, ost, w, h, 1, format == 0 ? TW_F32 : format == 1 ? TW_U16 : TW_U32,
                       0, y0};
    tw_tile_view vi = {didx, ist, w, h, 2, TW_U32, 0, y0};
    tw_status st = wave ? twi_cuda_edt_wavefront(&vb, &b, &vo, useidx ? &vi : NULL, scr, bytes,
                                                 NULL)
                        : twi_cuda_edt(&vb, &b, &vo, useidx ? &vi : NULL, scr, bytes, NULL);
    CK(cudaDeviceSynchronize());
    unsigned char *ho = malloc((size_t)ost * (size_t)h);
    /* pixels only: the row padding is never written */
    CK(cudaMemcpy2D(ho, (size_t)ost, dout, (size_t)ost, (size_t)w * ss, (size_t)h,
                    cudaMemcpyDeviceToHost));
    bad = st != TW_OK;
    for (int y = 0; y < h && !bad; y++) {
        const unsigned char *row = ho + (size_t)y * (size_t)ost;
        for (int x = 0; x < w && !bad; x++) {
            double got = format == 0   ? (double)((const float *)(const void *)row)[x]
                         : format == 1 ? ((const unsigned short *)(const void *)row)[x]
                                       : ((const unsigned *)(const void *)row)[x];
            double d = ref[(size_t)y * w + x];
            if ((bad = wrong(got, d, format, wave, aniso)))
                printf("case %d %dx%d (band %d..%d of %d) format %d wave %d spacing %g,%g m "
                       "%d/%d/%d: (%d, %d) got %.9g for d2 %.9g\n",
                       k, w, h, y0, y1, hi, format, wave, sx, sy, (int)b.m1, (int)b.m2,
                       (int)b.m3, x, y, got, d);
        }
    }
    cudaFree(din);
    cudaFree(dout);
    cudaFree(didx);
    cudaFree(scr);
    cudaFree(dab);
    cudaFree(dbe);
    free(im);
    free(above);
    free(below);
    free(ref);
    free(hb);
    free(ho);
    return bad;
}

int
main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100, fails = 0, devs = 0;

    if (cudaGetDeviceCount(&devs) != cudaSuccess || devs == 0) {
        printf("sanitize_edt: no CUDA device, skipped\n");
        return 77;
    }
    for (int k = 0; k < n; k++)
        fails += one_case(k);
    printf("sanitize_edt: %d cases, %d failed\n", n, fails);
    return fails != 0;
}
