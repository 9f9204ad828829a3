/* SPDX-License-Identifier: MIT */
/* tilewave tests: a single-process driver of the whole-image CUDA labelling (compute-sanitizer). */
/*
 * As sanitize_maxtree.c (Criterion's child processes are not reliably followed by
 * compute-sanitizer): random small cases of twi_cuda_label_image (8/16-bit masks, 4/8
 * connectivity, sizes 1..300 a side with 1xN and Nx1, padded mask rows, noise of any density,
 * blobs, stripes, full and empty masks), each checked against the CPU twin twi_omp_label
 * (labels and count). Scratch and labels are left uninitialised on purpose so that initcheck
 * sees any read of memory the kernels did not write. Usage: sanitize_label [CASES]; exit 77
 * without a device, 1 on a wrong result.
 * `sanitize_label time [SIDE] [REPS]` times the kernel alone (CUDA events, device memory only,
 * median of REPS after a warm-up) on a SIDE x SIDE mask of random discs (about 40% foreground),
 * on noise and on a full mask, both connectivities, and prints one line each: what the label
 * job's GPU path adds to its two copies.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"
#define SANITIZE_SEED 0x6a09e667f3bcc909ull
#include "sanitize_common.h"

/* A 0/1 mask: 0 noise of density p%, 1 discs, 2 stripes, 3 full, 4 empty. */
static void
make_mask(uint8_t *m, int w, int h, int mode, unsigned p)
{
    memset(m, 0, (size_t)w * (size_t)h);
    switch (mode) {
    case 0:
        for (size_t i = 0; i < (size_t)w * (size_t)h; i++)
            m[i] = rnd(100) < p;
        break;
    case 1: {
        int n = 1 + (int)((size_t)w * (size_t)h / 60);

        for (int k = 0; k < n; k++) {
            int cx = (int)rnd((unsigned)w), cy = (int)rnd((unsigned)h), r = 1 + (int)rnd(6);

            for (int y = cy - r; y <= cy + r; y++)
                for (int x = cx - r; x <= cx + r; x++)
                    if (x >= 0 && y >= 0 && x < w && y < h &&
                        (x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r)
                        m[(size_t)y * (size_t)w + (size_t)x] = 1;
        }
        break;
    }
    case 2:
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                m[(size_t)y * (size_t)w + (size_t)x] = ((x + 2 * y) % 7 < 3) ^ (rnd(23) == 0);
        break;
    case 3: memset(m, 1, (size_t)w * (size_t)h); break;
    default: break;
    }
}

/* One case: labels and count of the GPU equal the CPU twin's. 0 when equal. */
static int
one_case(int w, int h, int conn, int mode, unsigned p, bool u16, int pad)
{
    size_t ss = u16 ? 2 : 1, ms = (size_t)w * ss + (size_t)pad * ss, px = (size_t)w * (size_t)h;
    size_t sb = twi_cuda_label_image_scratch_size(w, h);
    uint8_t *m = malloc(px), *hm = malloc(ms * (size_t)h);
    uint32_t *cpu = malloc(px * 4), *par = malloc(px * 4 + 4), *gpu = malloc(px * 4), n_gpu = 0;
    void *d_m, *d_l, *d_s, *d_n;
    tw_tile_view mv, lv, dm, dl;
    int64_t n_cpu = -1;
    int bad = 0;

    make_mask(m, w, h, mode, p);
    memset(hm, 0x77, ms * (size_t)h); /* padding: nonzero, never read as foreground */
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t v = m[(size_t)y * (size_t)w + (size_t)x];

            if (u16) {
                uint16_t s = (uint16_t)(v ? 1 + rnd(65535) : 0);

                memcpy(hm + (size_t)y * ms + 2 * (size_t)x, &s, 2);
            } else {
                hm[(size_t)y * ms + (size_t)x] = v ? (uint8_t)(1 + rnd(255)) : 0;
            }
        }
    mv = (tw_tile_view){hm, (int64_t)ms, w, h, 1, u16 ? TW_U16 : TW_U8, 0, 0};
    lv = (tw_tile_view){cpu, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};
    if (twi_omp_label(&mv, conn, &lv, par, &n_cpu, 1) != TW_OK) {
        printf("sanitize_label: the CPU twin failed on %dx%d\n", w, h);
        exit(2);
    }
    CK(cudaMalloc(&d_m, ms * (size_t)h));
    CK(cudaMalloc(&d_l, px * 4));
    CK(cudaMalloc(&d_s, sb));
    CK(cudaMalloc(&d_n, 4));
    CK(cudaMemcpy(d_m, hm, ms * (size_t)h, cudaMemcpyHostToDevice));
    dm = (tw_tile_view){d_m, (int64_t)ms, w, h, 1, mv.type, 0, 0};
    dl = (tw_tile_view){d_l, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};
    if (twi_cuda_label_image(&dm, conn, &dl, d_n, d_s, sb, NULL) != TW_OK) {
        printf("sanitize_label: twi_cuda_label_image failed on %dx%d\n", w, h);
        exit(2);
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(&n_gpu, d_n, 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gpu, d_l, px * 4, cudaMemcpyDeviceToHost));
    if ((int64_t)n_gpu != n_cpu) {
        printf("sanitize_label: %dx%d conn %d mode %d u16 %d: %u labels, the CPU %lld\n", w, h,
               conn, mode, u16, n_gpu, (long long)n_cpu);
        bad = 1;
    }
    for (size_t i = 0; !bad && i < px; i++)
        if (gpu[i] != cpu[i]) {
            printf("sanitize_label: %dx%d conn %d mode %d u16 %d: pixel %zu is %u, the CPU %u\n",
                   w, h, conn, mode, u16, i, gpu[i], cpu[i]);
            bad = 1;
        }
    CK(cudaFree(d_m));
    CK(cudaFree(d_l));
    CK(cudaFree(d_s));
    CK(cudaFree(d_n));
    free(m);
    free(hm);
    free(cpu);
    free(par);
    free(gpu);
    return bad;
}

static int
cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;

    return (x > y) - (x < y);
}

static int
time_main(int side, int reps)
{
    size_t px = (size_t)side * (size_t)side, sb = twi_cuda_label_image_scratch_size(side, side);
    uint8_t *m = malloc(px);
    float *t = calloc((size_t)reps, sizeof *t);
    void *d_m, *d_l, *d_s, *d_n;
    cudaEvent_t e0, e1;

    if (!m || !t || !sb)
        return 2;
    CK(cudaMalloc(&d_m, px));
    CK(cudaMalloc(&d_l, px * 4));
    CK(cudaMalloc(&d_s, sb));
    CK(cudaMalloc(&d_n, 4));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int mode = 0; mode < 3; mode++) {
        /* discs of radius 6..16 on a 32-pixel grid (bench_label's kind of mask), 50% noise, or
         * all foreground (one component: the longest paths a union-find can be given) */
        memset(m, mode == 2 ? 255 : 0, px);
        if (mode == 0) {
            for (int cy = 0; cy < side; cy += 32)
                for (int cx = 0; cx < side; cx += 32) {
                    int x0 = cx + (int)rnd(32), y0 = cy + (int)rnd(32), r = 6 + (int)rnd(11);

                    for (int y = y0 - r; y <= y0 + r; y++)
                        for (int x = x0 - r; x <= x0 + r; x++)
                            if (x >= 0 && y >= 0 && x < side && y < side &&
                                (x - x0) * (x - x0) + (y - y0) * (y - y0) <= r * r)
                                m[(size_t)y * (size_t)side + (size_t)x] = 255;
                }
        } else if (mode == 1) {
            for (size_t i = 0; i < px; i++)
                m[i] = rnd(2) ? 255 : 0;
        }
        CK(cudaMemcpy(d_m, m, px, cudaMemcpyHostToDevice));
        for (int conn = 4; conn <= 8; conn += 4) {
            tw_tile_view dm = {d_m, side, side, side, 1, TW_U8, 0, 0};
            tw_tile_view dl = {d_l, (int64_t)side * 4, side, side, 1, TW_U32, 0, 0};
            uint32_t n = 0;

            for (int r = -1; r < reps; r++) {
                CK(cudaEventRecord(e0, NULL));
                if (twi_cuda_label_image(&dm, conn, &dl, d_n, d_s, sb, NULL) != TW_OK)
                    return 2;
                CK(cudaEventRecord(e1, NULL));
                CK(cudaEventSynchronize(e1));
                if (r >= 0)
                    CK(cudaEventElapsedTime(&t[r], e0, e1));
            }
            CK(cudaMemcpy(&n, d_n, 4, cudaMemcpyDeviceToHost));
            qsort(t, (size_t)reps, sizeof *t, cmp_f);
            printf("label_image %dx%d %s conn %d: %.3f ms median of %d (best %.3f), %.2f GPix/s, "
                   "%u objects\n",
                   side, side, mode == 0 ? "discs" : mode == 1 ? "noise50" : "full", conn,
                   t[reps / 2], reps, t[0], (double)px / (t[reps / 2] * 1e-3) / 1e9, n);
        }
    }
    CK(cudaFree(d_m));
    CK(cudaFree(d_l));
    CK(cudaFree(d_s));
    CK(cudaFree(d_n));
    free(m);
    free(t);
    return 0;
}

int
main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100, fails = 0, devs = 0;

    if (cudaGetDeviceCount(&devs) != cudaSuccess || devs == 0) {
        printf("sanitize_label: no CUDA device\n");
        return 77;
    }
    if (argc > 1 && strcmp(argv[1], "time") == 0)
        return time_main(argc > 2 ? atoi(argv[2]) : 16384, argc > 3 ? atoi(argv[3]) : 9);
    for (int c = 0; c < n; c++) {
        int kind = (int)rnd(10);
        int w = kind == 0 ? 1 : 1 + (int)rnd(kind < 3 ? 40 : 300);
        int h = kind == 1 ? 1 : 1 + (int)rnd(kind < 3 ? 40 : 300);
        int mode = (int)rnd(5), conn = rnd(2) ? 8 : 4;

        fails += one_case(w, h, conn, mode, rnd(101), rnd(3) == 0, (int)rnd(3) * (int)rnd(5));
    }
    printf("sanitize_label: %d cases, %d wrong\n", n, fails);
    return fails ? 1 : 0;
}
