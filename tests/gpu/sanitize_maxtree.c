/* SPDX-License-Identifier: MIT */
/* tilewave tests: a single-process driver of the CUDA max-tree for compute-sanitizer. */
/*
 * Criterion runs each test in a child process, and compute-sanitizer's tracking of such
 * children cannot be relied on, so the sanitizer runs (tests/gpu/validate.sh) use this plain
 * program: random small cases of twi_cuda_maxtree (8/16-bit, 4/8-connectivity, several tiles
 * in each direction, padded strides, the six image modes of twtest_maxtree_random_image), each
 * checked against the CPU twin twi_omp_maxtree; then, on the same tile, the border max-tree
 * (twi_cuda_maxtree_border_extract) and the three filters (twi_cuda_maxtree_filter) against
 * twi_maxtree_border_extract and twi_maxtree_filter_tile, with the sides mask cycling through
 * 0..15. Scratch is left uninitialised on purpose so that initcheck sees any read of memory the
 * kernels did not write. Usage: sanitize_maxtree [CASES]; exit 77 without a device, 1 on a
 * wrong result.
 * `sanitize_maxtree time [REPS] [MAXSIDE]` times instead (CUDA events, median of REPS runs
 * after a warm-up): the tree, the border max-tree and the filters on smooth-plus-noise 8- and
 * 16-bit tiles of 4096^2 and 8192^2 (up to MAXSIDE), and prints a table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"
#define SANITIZE_SEED 0x9E3779B97F4A7C15ull
#include "sanitize_common.h"

/* Image modes like twtest_maxtree_random_image: noise, few levels, plateaus, smooth, extremes. */
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

static void *
dmalloc(size_t bytes)
{
    void *p = NULL;

    CK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

static void *
hmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);

    if (!p) {
        printf("out of host memory\n");
        exit(2);
    }
    return p;
}

/*
 * The attribute launchers on one tile: dlv (device levels view, maybe padded) with the host
 * copy img (packed) and the CPU parent image par. Returns the number of mismatches (0 / 1).
 */
static int
attr_case(int k, const tw_tile_view *dlv, const void *img, const uint32_t *par, int conn)
{
    const int32_t w = dlv->w, h = dlv->h;
    const size_t n = (size_t)w * (size_t)h, ss = dlv->type == TW_U16 ? 2 : 1;
    const unsigned sides = (unsigned)k % 16u, maxv = ss == 2 ? 65535u : 255u;
    const size_t bytes = twi_cuda_maxtree_filter_scratch_size(w, h);
    void *dpar = dmalloc(n * 4), *scr = dmalloc(bytes), *dout = dmalloc(n * 8);
    uint64_t *dres = dmalloc(n * 8), *res = hmalloc(n * 8);
    unsigned char *got = hmalloc(n * 8), *want = hmalloc(n * 8);
    tw_tile_view hl = {(void *)img, (int64_t)(w * ss), w, h, 1, dlv->type, 0, 0};
    tw_tile_view hp = {(void *)par, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};
    tw_tile_view dp = {dpar, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};
    twi_maxtree_border cb;
    twi_cuda_maxtree_border gb;
    int64_t gn = -1;
    int bad = 0;

    CK(cudaMemcpy(dpar, par, n * 4, cudaMemcpyHostToDevice));
    if (twi_maxtree_border_extract(&hl, &hp, sides, &cb) != TW_OK) {
        printf("case %d: CPU border twin failed\n", k);
        exit(2);
    }
    if (twi_cuda_maxtree_border_extract(dlv, &dp, sides, scr, bytes, &gb, NULL) != TW_OK) {
        printf("case %d: twi_cuda_maxtree_border_extract failed\n", k);
        bad = 1;
        goto out;
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(&gn, gb.n, 8, cudaMemcpyDeviceToHost));
    if (gn != cb.n) {
        printf("case %d %dx%d sides %u: %lld border nodes, want %lld\n", k, w, h, sides,
               (long long)gn, (long long)cb.n);
        bad = 1;
        goto out;
    }
    if (gn > 0) {
        const size_t m = (size_t)gn;

        CK(cudaMemcpy(got, gb.level, m * 2, cudaMemcpyDeviceToHost));
        bad |= memcmp(got, cb.level, m * 2) != 0;
        CK(cudaMemcpy(got, gb.maxv, m * 2, cudaMemcpyDeviceToHost));
        bad |= memcmp(got, cb.maxv, m * 2) != 0;
        CK(cudaMemcpy(got, gb.lparent, m * 4, cudaMemcpyDeviceToHost));
        bad |= memcmp(got, cb.lparent, m * 4) != 0;
        CK(cudaMemcpy(got, gb.own, m * 4, cudaMemcpyDeviceToHost));
        bad |= memcmp(got, cb.own, m * 4) != 0;
    }
    for (int s = 0; s < 4; s++)
        if (sides & TWI_MAXTREE_SIDE(s)) {
            const size_t len = (size_t)(s <= TWI_MAXTREE_BOTTOM ? w : h);

            CK(cudaMemcpy(got, gb.side[s], len * 4, cudaMemcpyDeviceToHost));
            bad |= memcmp(got, cb.side[s], len * 4) != 0;
        }
    if (bad) {
        printf("case %d %dx%d sides %u: border tree differs\n", k, w, h, sides);
        goto out;
    }
    for (int rule = 0; rule < 3 && !bad; rule++) {
        const twi_maxtree_filter f = {(twi_maxtree_rule)rule,
                                 rule == 0 ? 1 + rnd((unsigned)n + 1) : rnd(rule == 1 ? 40 : 1),
                                 (uint16_t)rnd(maxv + 1)};
        const tw_sample_type ot = rule == 2 ? (k & 1 ? TW_U64 : TW_U32) : dlv->type;
        const size_t os = ot == TW_U64 ? 8 : ot == TW_U32 ? 4 : ss;
        tw_tile_view ho = {want, (int64_t)(w * os), w, h, 1, ot, 0, 0};
        tw_tile_view dov = {dout, (int64_t)(w * os), w, h, 1, ot, 0, 0};

        for (int64_t i = 0; i < cb.n; i++)
            res[i] = rule == 2 ? 1 + rnd(100000) + (rnd(4) ? 0 : 0x100000000ull) : rnd(maxv + 1);
        if (cb.n > 0)
            CK(cudaMemcpy(dres, res, (size_t)cb.n * 8, cudaMemcpyHostToDevice));
        if (twi_maxtree_filter_tile(&hl, &hp, sides, sides ? res : NULL, &f, &ho) != TW_OK) {
            printf("case %d: CPU filter twin failed\n", k);
            exit(2);
        }
        if (twi_cuda_maxtree_filter(dlv, &dp, sides, sides ? dres : NULL, &f, &dov, scr, bytes,
                                    NULL) != TW_OK) {
            printf("case %d: twi_cuda_maxtree_filter failed\n", k);
            bad = 1;
            break;
        }
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(got, dout, n * os, cudaMemcpyDeviceToHost));
        if (memcmp(got, want, n * os) != 0) {
            printf("case %d %dx%d %d-bit conn %d sides %u: filter rule %d differs\n", k, w, h,
                   ss == 2 ? 16 : 8, conn, sides, rule);
            bad = 1;
        }
    }
out:
    twi_maxtree_border_free(&cb);
    cudaFree(dpar);
    cudaFree(scr);
    cudaFree(dout);
    cudaFree(dres);
    free(res);
    free(got);
    free(want);
    return bad;
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
    if (!bad)
        bad = attr_case(k, &vin, img, want, conn);
    cudaFree(din);
    cudaFree(dout);
    cudaFree(scr);
    free(img);
    free(hin);
    free(got);
    free(want);
    return bad;
}

/* ---- timing mode ----------------------------------------------------------------------- */

static double
urand(void)
{
    return (double)rnd(1u << 30) / (double)(1u << 30);
}

/*
 * A smooth field (4 plane waves and 6 Gaussian blobs, as tests/gpu/time_maxtree.cu, computed
 * separably) plus uniform noise: 8-bit +-4 levels, 16-bit +-2 % of the range; kind 1: pure
 * 8-bit noise. Both types from one field.
 */
static void
field_images(int w, int h, int kind, uint8_t *i8, uint16_t *i16)
{
    double fx[4], fy[4], ph[4], bx[6], by[6], br[6];
    double *sx = hmalloc((size_t)w * 8 * 8), *sy = hmalloc((size_t)h * 8 * 8);
    double *gx = hmalloc((size_t)w * 6 * 8), *gy = hmalloc((size_t)h * 6 * 8);
    const double pi2 = 6.283185307179586;

    for (int i = 0; i < 4; i++) {
        fx[i] = (0.5 + 3 * urand()) * pi2 / w;
        fy[i] = (0.5 + 3 * urand()) * pi2 / h;
        ph[i] = pi2 * urand();
    }
    for (int i = 0; i < 6; i++) {
        bx[i] = urand() * w;
        by[i] = urand() * h;
        br[i] = (0.05 + 0.2 * urand()) * (w < h ? w : h);
    }
    for (int x = 0; x < w; x++) {
        for (int i = 0; i < 4; i++) {
            sx[(size_t)x * 8 + 2 * i] = sin(fx[i] * x);
            sx[(size_t)x * 8 + 2 * i + 1] = cos(fx[i] * x);
        }
        for (int i = 0; i < 6; i++)
            gx[(size_t)x * 6 + i] = exp(-((x - bx[i]) / br[i]) * ((x - bx[i]) / br[i]));
    }
    for (int y = 0; y < h; y++) {
        for (int i = 0; i < 4; i++) {
            sy[(size_t)y * 8 + 2 * i] = sin(fy[i] * y + ph[i]);
            sy[(size_t)y * 8 + 2 * i + 1] = cos(fy[i] * y + ph[i]);
        }
        for (int i = 0; i < 6; i++)
            gy[(size_t)y * 6 + i] = exp(-((y - by[i]) / br[i]) * ((y - by[i]) / br[i]));
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const size_t p = (size_t)y * w + x;
            double v = 0, a, b;

            for (int i = 0; i < 4; i++) /* sin(fx x + fy y + ph) */
                v += 0.12 * (sx[(size_t)x * 8 + 2 * i] * sy[(size_t)y * 8 + 2 * i + 1] +
                             sx[(size_t)x * 8 + 2 * i + 1] * sy[(size_t)y * 8 + 2 * i]);
            for (int i = 0; i < 6; i++)
                v += 0.3 * gx[(size_t)x * 6 + i] * gy[(size_t)y * 6 + i];
            v = 0.5 + 0.5 * v;
            if (kind == 1)
                v = urand();
            a = v + (kind == 1 ? 0 : (4.0 / 255) * (2 * urand() - 1));
            b = v + 0.02 * (2 * urand() - 1);
            a = a < 0 ? 0 : a > 1 ? 1 : a;
            b = b < 0 ? 0 : b > 1 ? 1 : b;
            i8[p] = (uint8_t)lround(a * 255);
            i16[p] = (uint16_t)lround(b * 65535);
        }
    free(sx);
    free(sy);
    free(gx);
    free(gy);
}

static int
cmp_f(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;

    return x < y ? -1 : x > y;
}

static float
median(float *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_f);
    return v[n / 2];
}

/* Node count and height (in nodes, the bottom-up sweep's critical path) of a parent image. */
static void
tree_stats(const uint32_t *par, const void *img, int wide, size_t n, int64_t *nodes,
           int64_t *height)
{
    int32_t *d = hmalloc(n * 4);
    uint32_t *stack = hmalloc(n * 4);
#define LVL(p) (wide ? ((const uint16_t *)img)[p] : ((const uint8_t *)img)[p])

    *nodes = 0;
    *height = 0;
    for (size_t p = 0; p < n; p++)
        d[p] = -1;
    for (size_t p = 0; p < n; p++) {
        size_t top = 0;
        uint32_t v = (uint32_t)p;
        int32_t base;

        if (par[p] != p && LVL(par[p]) == LVL(p))
            continue; /* not canonical */
        (*nodes)++;
        while (d[v] < 0 && par[v] != v) {
            stack[top++] = v;
            v = par[v];
        }
        if (d[v] < 0)
            d[v] = 1; /* the root */
        base = d[v];
        while (top > 0)
            d[stack[--top]] = ++base;
        if (d[p] > *height)
            *height = d[p];
    }
#undef LVL
    free(d);
    free(stack);
}

enum { T_TREE, T_BORDER, T_AREA, T_HEIGHT, T_AREA0, T_MAP, T_N };

static void
time_tile(const char *name, int w, int h, int wide, int conn, const void *img, int reps,
          int check)
{
    const size_t n = (size_t)w * h, ss = wide ? 2 : 1;
    const tw_sample_type type = wide ? TW_U16 : TW_U8;
    const size_t tb = twi_cuda_maxtree_scratch_size(w, h, type, conn);
    const size_t ab = twi_cuda_maxtree_filter_scratch_size(w, h);
    void *dl = dmalloc(n * ss), *dpar = dmalloc(n * 4), *ts = dmalloc(tb), *as = dmalloc(ab);
    void *dout = dmalloc(n * 8);
    uint64_t *dres = dmalloc(n * 8);
    const tw_tile_view lv = {dl, (int64_t)(w * ss), w, h, 1, type, 0, 0};
    tw_tile_view pv = {dpar, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};
    tw_tile_view ov = {dout, (int64_t)(w * ss), w, h, 1, type, 0, 0};
    tw_tile_view mv = {dout, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};
    const twi_maxtree_filter fa = {TWI_MAXTREE_AREA, 100, 0};
    const twi_maxtree_filter fh = {TWI_MAXTREE_HEIGHT, wide ? 2000u : 8u, 0};
    const twi_maxtree_filter fm = {TWI_MAXTREE_AREA_MAP, 0, 0};
    float *t[T_N];
    cudaEvent_t e[3];
    twi_cuda_maxtree_border gb;
    int64_t nb = 0, nodes, height;
    uint32_t *hpar = hmalloc(n * 4);

    for (int i = 0; i < T_N; i++)
        t[i] = hmalloc((size_t)reps * sizeof(float));
    for (int i = 0; i < 3; i++)
        CK(cudaEventCreate(&e[i]));
    CK(cudaMemcpy(dl, img, n * ss, cudaMemcpyHostToDevice));
    /* warm-up, and answers for the border nodes (their own levels) */
    if (twi_cuda_maxtree(&lv, conn, &pv, ts, tb, NULL) != TW_OK ||
        twi_cuda_maxtree_border_extract(&lv, &pv, 15, as, ab, &gb, NULL) != TW_OK) {
        printf("%s: launch failed\n", name);
        exit(1);
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(&nb, gb.n, 8, cudaMemcpyDeviceToHost));
    {
        uint16_t *lev = hmalloc((size_t)nb * 2);
        uint64_t *res = hmalloc((size_t)nb * 8);

        CK(cudaMemcpy(lev, gb.level, (size_t)nb * 2, cudaMemcpyDeviceToHost));
        for (int64_t i = 0; i < nb; i++)
            res[i] = lev[i];
        CK(cudaMemcpy(dres, res, (size_t)nb * 8, cudaMemcpyHostToDevice));
        free(lev);
        free(res);
    }
    CK(cudaMemcpy(hpar, dpar, n * 4, cudaMemcpyDeviceToHost));
    tree_stats(hpar, img, wide, n, &nodes, &height);
    if (check) {
        /* the border node count and one filter against the CPU twins */
        tw_tile_view hl = {(void *)img, (int64_t)(w * ss), w, h, 1, type, 0, 0};
        tw_tile_view hp = {hpar, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};
        unsigned char *want = hmalloc(n * ss), *got = hmalloc(n * ss);
        tw_tile_view ho = {want, (int64_t)(w * ss), w, h, 1, type, 0, 0};
        twi_maxtree_border cb;
        uint64_t *res;

        CK(cudaDeviceSynchronize());
        if (twi_maxtree_border_extract(&hl, &hp, 15, &cb) != TW_OK || cb.n != nb) {
            printf("%s: border nodes %lld, CPU twin %lld\n", name, (long long)nb,
                   (long long)cb.n);
            exit(1);
        }
        res = hmalloc((size_t)nb * 8);
        for (int64_t i = 0; i < nb; i++)
            res[i] = cb.level[i];
        if (twi_maxtree_filter_tile(&hl, &hp, 15, res, &fa, &ho) != TW_OK ||
            twi_cuda_maxtree_filter(&lv, &pv, 15, dres, &fa, &ov, as, ab, NULL) != TW_OK) {
            printf("%s: filter failed\n", name);
            exit(1);
        }
        CK(cudaMemcpy(got, dout, n * ss, cudaMemcpyDeviceToHost));
        if (memcmp(got, want, n * ss) != 0) {
            printf("%s: GPU area opening differs from the CPU twin\n", name);
            exit(1);
        }
        twi_maxtree_border_free(&cb);
        free(res);
        free(want);
        free(got);
    }
    for (int r = 0; r < reps; r++) {
        float a, b;

        CK(cudaEventRecord(e[0], NULL));
        twi_cuda_maxtree(&lv, conn, &pv, ts, tb, NULL);
        CK(cudaEventRecord(e[1], NULL));
        twi_cuda_maxtree_border_extract(&lv, &pv, 15, as, ab, &gb, NULL);
        CK(cudaEventRecord(e[2], NULL));
        CK(cudaEventSynchronize(e[2]));
        CK(cudaEventElapsedTime(&a, e[0], e[1]));
        CK(cudaEventElapsedTime(&b, e[1], e[2]));
        t[T_TREE][r] = a;
        t[T_BORDER][r] = b;
#define TIME_FILTER(slot, sides, res, f, out)                                                  \
    do {                                                                                       \
        CK(cudaEventRecord(e[1], NULL));                                                       \
        twi_cuda_maxtree_filter(&lv, &pv, sides, res, f, out, as, ab, NULL);                   \
        CK(cudaEventRecord(e[2], NULL));                                                       \
        CK(cudaEventSynchronize(e[2]));                                                        \
        CK(cudaEventElapsedTime(&b, e[1], e[2]));                                              \
        t[slot][r] = b;                                                                        \
    } while (0)
        TIME_FILTER(T_AREA, 15, dres, &fa, &ov);
        TIME_FILTER(T_HEIGHT, 15, dres, &fh, &ov);
        TIME_FILTER(T_AREA0, 0, NULL, &fa, &ov);
        TIME_FILTER(T_MAP, 15, dres, &fm, &mv);
#undef TIME_FILTER
    }
    CK(cudaGetLastError());
    {
        float m[T_N];
        const double gp = (double)n / 1e6; /* ms -> GPix/s: gp / ms */

        for (int i = 0; i < T_N; i++)
            m[i] = median(t[i], reps);
        printf("%-26s conn %d nodes %9lld height %6lld bnodes %7lld | tree %7.3f | border %7.3f "
               "(tree+border %7.3f = %6.2f GPix/s) | area %7.3f (tree+area %7.3f = %6.2f GPix/s)"
               " | height %7.3f | area,no sides %7.3f | map %7.3f ms\n",
               name, conn, (long long)nodes, (long long)height, (long long)nb, m[T_TREE],
               m[T_BORDER], m[T_TREE] + m[T_BORDER], gp / (m[T_TREE] + m[T_BORDER]),
               m[T_AREA], m[T_TREE] + m[T_AREA], gp / (m[T_TREE] + m[T_AREA]),
               m[T_HEIGHT], m[T_AREA0], m[T_MAP]);
        fflush(stdout);
    }
    for (int i = 0; i < T_N; i++)
        free(t[i]);
    for (int i = 0; i < 3; i++)
        cudaEventDestroy(e[i]);
    free(hpar);
    cudaFree(dl);
    cudaFree(dpar);
    cudaFree(ts);
    cudaFree(as);
    cudaFree(dout);
    cudaFree(dres);
}

static int
time_main(int reps, int maxside)
{
    static const int sides[] = {4096, 8192};

    for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
        const int s = sides[i];
        const size_t n = (size_t)s * s;
        uint8_t *i8 = hmalloc(n);
        uint16_t *i16 = hmalloc(n * 2);
        char name[64];

        if (s > maxside)
            break;
        field_images(s, s, 0, i8, i16);
        snprintf(name, sizeof name, "%dx%d 8-bit smooth", s, s);
        time_tile(name, s, s, 0, 4, i8, reps, s == 4096);
        if (s == 8192)
            time_tile(name, s, s, 0, 8, i8, reps, 0);
        snprintf(name, sizeof name, "%dx%d 16-bit smooth", s, s);
        time_tile(name, s, s, 1, 4, i16, reps, s == 4096);
        if (s == 4096) {
            field_images(s, s, 1, i8, i16);
            snprintf(name, sizeof name, "%dx%d 8-bit noise", s, s);
            time_tile(name, s, s, 0, 4, i8, reps, 0);
        }
        free(i8);
        free(i16);
    }
    return 0;
}

int
main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100, fails = 0, devs = 0;

    if (cudaGetDeviceCount(&devs) != cudaSuccess || devs == 0) {
        printf("sanitize_maxtree: no CUDA device, skipped\n");
        return 77;
    }
    if (argc > 1 && strcmp(argv[1], "time") == 0)
        return time_main(argc > 2 ? atoi(argv[2]) : 7, argc > 3 ? atoi(argv[3]) : 8192);
    for (int k = 0; k < n; k++)
        fails += one_case(k);
    printf("sanitize_maxtree: %d cases, %d failed\n", n, fails);
    return fails != 0;
}
