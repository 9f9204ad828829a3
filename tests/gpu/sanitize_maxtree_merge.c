/* SPDX-License-Identifier: MIT */
/* tilewave tests: a single-process driver of the GPU border max-tree merge (sanitizer, timing). */
/*
 * Criterion runs each test in a child process, and compute-sanitizer's tracking of such
 * children cannot be relied on, so the sanitizer runs use this plain program: random small
 * tiled images (8/16-bit, 4/8-connectivity, one-pixel tiles, 1 x N and N x 1 grids), each
 * tile's tree by twi_omp_maxtree and border tree by twi_maxtree_border_extract, then
 * twi_maxtree_merge on the CPU against twi_maxtree_pack_build + twi_cuda_maxtree_merge for the
 * three rules. Scratch is left uninitialised on purpose so that initcheck sees any read of memory
 * the kernels did not write. Usage:
 *   sanitize_maxtree_merge [CASES]                     exit 77 without a device, 1 on a mismatch
 *   sanitize_maxtree_merge --time SIDE TILE [BITS] [REPS]
 *       a SIDE x SIDE natural-like image (smooth waves and blobs plus noise) in TILE x TILE
 *       tiles, 4- and 8-connected: CPU twi_maxtree_merge against the GPU merge including the
 *       upload of the pack and the download of the answers (medians of REPS runs after a
 *       warm-up, CUDA events), answers compared.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"
#define SANITIZE_SEED 0x9E3779B97F4A7C15ull
#include "sanitize_common.h"

#define NEED(x)                                                                                \
    do {                                                                                       \
        if (!(x)) {                                                                            \
            printf("failed: %s at line %d\n", #x, __LINE__);                                   \
            exit(2);                                                                           \
        }                                                                                      \
    } while (0)

static double
now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* Small-case images: noise, few levels, plateaus, smooth, extremes. */
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

/* Cut positions of a side of len pixels (c[0] = 0 ... c[*k] = len); t > 0: regular tiles. */
static int *
cuts(int len, int t, int *k)
{
    int *c = malloc(((size_t)len + 1) * sizeof *c), m = 0, scheme = t > 0 ? 0 : (int)rnd(4);

    NEED(c);
    c[m++] = 0;
    if (scheme == 0 && t <= 0)
        t = 1 + (int)rnd((unsigned)len);
    for (int x = 1; x < len; x++)
        if ((scheme == 0 && x % t == 0) || (scheme == 1 && rnd(3) == 0) || scheme == 2)
            c[m++] = x;
    c[m] = len;
    *k = m;
    return c;
}

typedef struct grid {
    int tx, ty;
    twi_maxtree_border *bt;
    twi_maxtree_border **bp;
} grid;

/* The border trees of img (W x H, packed 8- or 16-bit) cut into tiles (tile > 0: regular). */
static grid
make_grid(const void *img, int W, int H, int wide, int conn, int tile)
{
    const size_t ss = wide ? 2 : 1;
    int kx, ky, *cx = cuts(W, tile, &kx), *cy = cuts(H, tile, &ky);
    grid g = {kx, ky, calloc((size_t)kx * (size_t)ky, sizeof(twi_maxtree_border)),
              calloc((size_t)kx * (size_t)ky, sizeof(twi_maxtree_border *))};
    int fail = 0;

    NEED(g.bt && g.bp);
#pragma omp parallel for schedule(dynamic) reduction(| : fail)
    for (int t = 0; t < kx * ky; t++) {
        const int i = t % kx, j = t / kx, x0 = cx[i], y0 = cy[j], w = cx[i + 1] - x0,
                  h = cy[j + 1] - y0;
        unsigned char *px = malloc((size_t)w * (size_t)h * ss);
        uint32_t *par = malloc((size_t)w * (size_t)h * 4);
        unsigned sides = (j > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_TOP) : 0) |
                         (j + 1 < ky ? TWI_MAXTREE_SIDE(TWI_MAXTREE_BOTTOM) : 0) |
                         (i > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_LEFT) : 0) |
                         (i + 1 < kx ? TWI_MAXTREE_SIDE(TWI_MAXTREE_RIGHT) : 0);

        if (!px || !par) {
            fail = 1;
        } else {
            const unsigned char *src = img;

            for (int y = 0; y < h; y++)
                memcpy(px + (size_t)y * (size_t)w * ss,
                       src + ((size_t)(y0 + y) * (size_t)W + (size_t)x0) * ss, (size_t)w * ss);
            tw_tile_view in = {px, (int64_t)((size_t)w * ss), w, h, 1, wide ? TW_U16 : TW_U8, 0, 0};
            tw_tile_view pv = {par, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};

            if (kx * ky == 1)
                sides = TWI_MAXTREE_SIDE(TWI_MAXTREE_TOP);
            fail |= twi_omp_maxtree(&in, conn, &pv, 1) != TW_OK ||
                    twi_maxtree_border_extract(&in, &pv, sides, &g.bt[t]) != TW_OK;
        }
        g.bp[t] = &g.bt[t];
        free(px);
        free(par);
    }
    NEED(!fail);
    free(cx);
    free(cy);
    return g;
}

static void
grid_free(grid *g)
{
    for (int t = 0; t < g->tx * g->ty; t++)
        twi_maxtree_border_free(&g->bt[t]);
    free(g->bt);
    free(g->bp);
}

static int
one_case(int k)
{
    const int big = k % 4 == 3, wide = (int)rnd(2), conn = rnd(2) ? 8 : 4, mode = k % 5;
    const int W = 1 + (int)rnd(big ? 120 : 40), H = 1 + (int)rnd(big ? 120 : 40);
    const unsigned maxv = wide ? 65535u : 255u;
    unsigned char *img = malloc((size_t)W * (size_t)H * 2);
    twi_maxtree_pack l;
    void *buf = NULL, *d_pack, *d_scr;
    uint64_t *d_res, *got;
    int64_t *d_links, links;
    int bad = 0;

    NEED(img);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            const unsigned v = level(mode, x, y, maxv);

            if (wide)
                ((uint16_t *)(void *)img)[(size_t)y * W + x] = (uint16_t)v;
            else
                img[(size_t)y * W + x] = (unsigned char)v;
        }
    grid g = make_grid(img, W, H, wide, conn, 0);
    NEED(twi_maxtree_pack_build(g.bp, g.tx, g.ty, &l, &buf) == TW_OK);
    const size_t scr = twi_cuda_maxtree_merge_scratch_size(&l, conn);
    NEED(scr > 0 && (got = malloc((size_t)l.n * 8)));
    CK(cudaMalloc(&d_pack, l.bytes));
    CK(cudaMalloc((void **)&d_res, (size_t)l.n * 8));
    CK(cudaMalloc((void **)&d_links, 8));
    CK(cudaMalloc(&d_scr, scr)); /* not initialised on purpose */
    CK(cudaMemcpy(d_pack, buf, l.bytes, cudaMemcpyHostToDevice));
    for (int rule = 0; rule < 3 && !bad; rule++) {
        twi_maxtree_filter f;
        uint64_t *res = NULL;
        int64_t *off = NULL, edges = -1;

        f.rule = (twi_maxtree_rule)rule;
        f.threshold = rule == TWI_MAXTREE_HEIGHT ? rnd(rnd(3) ? 10 : maxv + 2)
                                            : rnd(rnd(3) ? 30 : (unsigned)(W * H) + 2);
        f.vmin = (uint16_t)rnd(maxv + 1);
        NEED(twi_maxtree_merge(g.bp, g.tx, g.ty, conn, &f, &res, &off, &edges) == TW_OK);
        NEED(twi_cuda_maxtree_merge(d_pack, &l, conn, &f, d_res, d_links, d_scr, scr,
                                    NULL) == TW_OK);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(got, d_res, (size_t)l.n * 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&links, d_links, 8, cudaMemcpyDeviceToHost));
        for (int64_t v = 0; v < l.n && !bad; v++)
            if ((bad = got[v] != res[v]))
                printf("case %d %dx%d in %dx%d tiles %d-bit conn %d rule %d: res[%lld] = %llu, "
                       "want %llu\n",
                       k, W, H, g.tx, g.ty, wide ? 16 : 8, conn, rule, (long long)v,
                       (unsigned long long)got[v], (unsigned long long)res[v]);
        if (!bad && (bad = links != edges))
            printf("case %d: %lld links, want %lld\n", k, (long long)links, (long long)edges);
        free(res);
        free(off);
    }
    cudaFree(d_pack);
    cudaFree(d_res);
    cudaFree(d_links);
    cudaFree(d_scr);
    free(got);
    free(buf);
    free(img);
    grid_free(&g);
    return bad;
}

/* ---- timing ---------------------------------------------------------------------------- */

static int
cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Smooth waves and blobs in [0, 1] plus uniform noise of +-3 %, quantised to maxv. */
static void *
natural_image(int side, int wide)
{
    const unsigned maxv = wide ? 65535u : 255u;
    unsigned char *img = malloc((size_t)side * (size_t)side * (wide ? 2 : 1));
    double bx[24], by[24], br[24], ba[24];

    NEED(img);
    for (int b = 0; b < 24; b++) {
        bx[b] = rnd((unsigned)side);
        by[b] = rnd((unsigned)side);
        br[b] = side / 40.0 + rnd((unsigned)side / 8 + 1);
        ba[b] = (rnd(2) ? 1 : -1) * (0.1 + rnd(100) / 400.0);
    }
#pragma omp parallel for schedule(static)
    for (int y = 0; y < side; y++) {
        uint64_t s = twtest_rnd_stream((uint64_t)y);

        for (int x = 0; x < side; x++) {
            double v = 0.5 + 0.18 * sin(x * 0.0021 + 0.3) * cos(y * 0.0017) +
                       0.08 * sin((x + 2 * y) * 0.013) + 0.05 * cos((3 * x - y) * 0.041);

            for (int b = 0; b < 24; b++) {
                const double dx = (x - bx[b]) / br[b], dy = (y - by[b]) / br[b];
                const double d2 = dx * dx + dy * dy;

                if (d2 < 9)
                    v += ba[b] * exp(-d2);
            }
            v += (twtest_rnd_unit(&s) - 0.5) * 0.06;
            v = v < 0 ? 0 : v > 1 ? 1 : v;
            if (wide)
                ((uint16_t *)(void *)img)[(size_t)y * side + x] = (uint16_t)(v * maxv + 0.5);
            else
                img[(size_t)y * side + x] = (unsigned char)(v * maxv + 0.5);
        }
    }
    return img;
}

static int
time_case(const void *img, int side, int tile, int wide, int conn, int reps)
{
    const twi_maxtree_filter f = {TWI_MAXTREE_AREA, 5000, 0};
    double t0 = now_ms(), t_trees, *cpu = calloc((size_t)reps, sizeof(double));
    double *up = calloc((size_t)reps, sizeof(double)), *ker = calloc((size_t)reps, sizeof(double));
    double *down = calloc((size_t)reps, sizeof(double));
    double *tot = calloc((size_t)reps, sizeof(double));
    double *pk = calloc((size_t)reps, sizeof(double));
    grid g = make_grid(img, side, side, wide, conn, tile);
    twi_maxtree_pack l;
    void *buf = NULL, *d_pack, *d_scr;
    uint64_t *d_res, *got, *res = NULL;
    int64_t *d_links, *off = NULL, edges = 0, links = 0;
    cudaEvent_t e[4];
    int bad = 0;

    NEED(cpu && up && ker && down && tot && pk);
    t_trees = now_ms() - t0;
    for (int r = 0; r < reps; r++) {
        free(res);
        free(off);
        t0 = now_ms();
        NEED(twi_maxtree_merge(g.bp, g.tx, g.ty, conn, &f, &res, &off, &edges) == TW_OK);
        cpu[r] = now_ms() - t0;
    }
    for (int r = 0; r < reps; r++) {
        free(buf);
        t0 = now_ms();
        NEED(twi_maxtree_pack_build(g.bp, g.tx, g.ty, &l, &buf) == TW_OK);
        pk[r] = now_ms() - t0;
    }
    const size_t scr = twi_cuda_maxtree_merge_scratch_size(&l, conn);
    NEED(scr > 0 && (got = malloc((size_t)l.n * 8)));
    CK(cudaMalloc(&d_pack, l.bytes));
    CK(cudaMalloc((void **)&d_res, (size_t)l.n * 8));
    CK(cudaMalloc((void **)&d_links, 8));
    CK(cudaMalloc(&d_scr, scr));
    for (int i = 0; i < 4; i++)
        CK(cudaEventCreate(&e[i]));
    /* pageable host buffers, as the BP task has them; run 0 warms up */
    for (int r = -1; r < reps; r++) {
        t0 = now_ms();
        CK(cudaEventRecord(e[0], NULL));
        CK(cudaMemcpyAsync(d_pack, buf, l.bytes, cudaMemcpyHostToDevice, NULL));
        CK(cudaEventRecord(e[1], NULL));
        NEED(twi_cuda_maxtree_merge(d_pack, &l, conn, &f, d_res, d_links, d_scr, scr,
                                    NULL) == TW_OK);
        CK(cudaEventRecord(e[2], NULL));
        CK(cudaMemcpyAsync(got, d_res, (size_t)l.n * 8, cudaMemcpyDeviceToHost, NULL));
        CK(cudaEventRecord(e[3], NULL));
        CK(cudaEventSynchronize(e[3]));
        if (r >= 0) {
            float a, b, c;

            tot[r] = now_ms() - t0;
            CK(cudaEventElapsedTime(&a, e[0], e[1]));
            CK(cudaEventElapsedTime(&b, e[1], e[2]));
            CK(cudaEventElapsedTime(&c, e[2], e[3]));
            up[r] = a;
            ker[r] = b;
            down[r] = c;
        }
    }
    CK(cudaMemcpy(&links, d_links, 8, cudaMemcpyDeviceToHost));
    for (int64_t v = 0; v < l.n && !bad; v++)
        if ((bad = got[v] != res[v]))
            printf("MISMATCH res[%lld] = %llu, want %llu\n", (long long)v,
                   (unsigned long long)got[v], (unsigned long long)res[v]);
    bad |= links != edges;
    {
        const double c = median(cpu, reps), u = median(up, reps), k = median(ker, reps),
                     d = median(down, reps), t = median(tot, reps), p = median(pk, reps);

        printf("%6d^2 %2d-bit conn %d tiles %5d^2 (%3dx%-3d): nodes %9lld links %9lld "
               "pack %.1f MB | CPU merge %8.2f ms | pack %6.2f ms, up %6.2f, kernels %6.2f, "
               "down %5.2f, wall %7.2f ms | CPU/GPU(up+kern+down) %.1fx %s\n",
               side, wide ? 16 : 8, conn, tile, g.tx, g.ty, (long long)l.n, (long long)links,
               (double)l.bytes / 1e6, c, p, u, k, d, t, c / (u + k + d), bad ? "MISMATCH" : "ok");
        printf("        (trees and border trees built in %.0f ms)\n", t_trees);
    }
    for (int i = 0; i < 4; i++)
        cudaEventDestroy(e[i]);
    cudaFree(d_pack);
    cudaFree(d_res);
    cudaFree(d_links);
    cudaFree(d_scr);
    free(got);
    free(res);
    free(off);
    free(buf);
    free(cpu);
    free(up);
    free(ker);
    free(down);
    free(tot);
    free(pk);
    grid_free(&g);
    return bad;
}

int
main(int argc, char **argv)
{
    int devs = 0, fails = 0;

    if (cudaGetDeviceCount(&devs) != cudaSuccess || devs == 0) {
        printf("sanitize_maxtree_merge: no CUDA device, skipped\n");
        return 77;
    }
    if (argc > 3 && strcmp(argv[1], "--time") == 0) {
        const int side = atoi(argv[2]), tile = atoi(argv[3]);
        const int wide = argc > 4 && atoi(argv[4]) == 16, reps = argc > 5 ? atoi(argv[5]) : 5;
        void *img;

        NEED(side > 0 && tile > 0 && reps > 0);
        img = natural_image(side, wide);
        for (int conn = 4; conn <= 8; conn += 4)
            fails += time_case(img, side, tile, wide, conn, reps);
        free(img);
        return fails != 0;
    }
    const int n = argc > 1 ? atoi(argv[1]) : 100;

    for (int k = 0; k < n; k++)
        fails += one_case(k);
    printf("sanitize_maxtree_merge: %d cases, %d failed\n", n, fails);
    return fails != 0;
}
