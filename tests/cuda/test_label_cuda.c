/* SPDX-License-Identifier: MIT */
/* tilewave tests: the CUDA labelling kernel equals the CPU kernel; the label job on GPU
 * workers equals the CPU-only job. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "tilewave.h"
#include "twtest.h"
#include "twtest_label.h"

#ifdef TW_HAVE_CUDA

#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"

static uint64_t rng = 0x853c49e6748fea9bull;

/* Label a packed 8-bit mask on the GPU (a row padding of `pad` samples on both views) and on
 * the CPU; both labels and counts must be equal, and equal to the flood fill's. */
static void
compare(const uint8_t *m, int w, int h, int conn, int pad)
{
    size_t ms = (size_t)(w + pad), ls = (size_t)(w + pad) * 4, sb = twi_cuda_label_scratch_size(w, h);
    uint32_t *cpu = malloc((size_t)(w * h) * 4 + 4), *par = malloc((size_t)(w * h) * 4 + 4);
    uint32_t *gpu = malloc(ls * (size_t)h + 4), n_gpu = 0;
    uint64_t *ref = malloc((size_t)(w * h) * 8 + 8), nr;
    void *d_m, *d_l, *d_s, *d_n;
    tw_tile_view mv = {(void *)m, w, w, h, 1, TW_U8, 0, 0}, lv = {cpu, (int64_t)w * 4, w, h, 1,
                                                                  TW_U32, 0, 0};
    tw_tile_view dm, dl;
    int64_t n_cpu = -1;

    cr_assert(eq(int, twi_omp_label(&mv, conn, &lv, par, &n_cpu, 2), TW_OK));
    nr = twtest_label_naive(m, w, h, conn, ref);
    cr_assert(eq(i64, n_cpu, (int64_t)nr));
    cr_assert(eq(int, cudaMalloc(&d_m, ms * (size_t)h + 1), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&d_l, ls * (size_t)h + 4), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&d_s, sb ? sb : 1), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&d_n, 4), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy2D(d_m, ms, m, (size_t)w, (size_t)w, (size_t)h,
                                   cudaMemcpyHostToDevice), cudaSuccess));
    dm = (tw_tile_view){d_m, (int64_t)ms, w, h, 1, TW_U8, 0, 0};
    dl = (tw_tile_view){d_l, (int64_t)ls, w, h, 1, TW_U32, 0, 0};
    cr_assert(eq(int, twi_cuda_label(&dm, conn, &dl, d_n, d_s, sb, NULL), TW_OK));
    cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(&n_gpu, d_n, 4, cudaMemcpyDeviceToHost), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(gpu, d_l, ls * (size_t)h, cudaMemcpyDeviceToHost), cudaSuccess));
    cr_assert(eq(u64, (uint64_t)n_gpu, (uint64_t)n_cpu), "%dx%d conn %d", w, h, conn);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            cr_assert(eq(u32, gpu[(size_t)y * (ls / 4) + (size_t)x], cpu[(size_t)y * w + x]),
                      "%dx%d conn %d pixel (%d, %d)", w, h, conn, x, y);
    /* pass 1's summary on the GPU: the naive one's words; the border labels made from it are
     * those the CPU takes from the labels */
    {
        size_t words = (size_t)n_cpu + 1 + 2 * (size_t)(w + h);
        uint32_t *got = malloc(words * 4), *want = malloc(words * 4);
        void *d_sum;
        twi_label_border a, b;
        char why[160] = "";

        cr_assert(eq(int, cudaMalloc(&d_sum, words * 4), cudaSuccess));
        cr_assert(eq(int, twi_cuda_label_summary(&dl, n_cpu, d_sum, NULL), TW_OK));
        cr_assert(eq(int, cudaMemcpy(got, d_sum, words * 4, cudaMemcpyDeviceToHost), cudaSuccess));
        twtest_label_summary(cpu, w, h, n_cpu, want);
        for (size_t i = 0; i < words; i++)
            cr_assert(eq(u32, got[i], want[i]), "%dx%d conn %d summary word %zu", w, h, conn, i);
        cr_assert(eq(int, twi_label_border_extract(&lv, n_cpu, 15, &a), TW_OK));
        cr_assert(eq(int, twi_label_border_from_first(w, h, n_cpu, 15, got, got + n_cpu + 1, &b),
                     TW_OK));
        cr_assert(eq(int, twtest_label_border_diff(&a, &b, why, sizeof why), 0), "%s", why);
        twi_label_border_free(&a);
        twi_label_border_free(&b);
        cudaFree(d_sum);
        free(got);
        free(want);
    }
    /* the relabelling: map l -> 3 l + 1 (0 stays), into 64-bit labels */
    {
        uint64_t *map = malloc((size_t)(n_cpu + 1) * 8), *out = malloc((size_t)(w * h) * 8 + 8);
        void *d_map, *d_o;
        tw_tile_view dov;

        map[0] = 0;
        for (int64_t l = 1; l <= n_cpu; l++)
            map[l] = 3 * (uint64_t)l + 1 + ((uint64_t)1 << 40);
        cr_assert(eq(int, cudaMalloc(&d_map, (size_t)(n_cpu + 1) * 8), cudaSuccess));
        cr_assert(eq(int, cudaMalloc(&d_o, (size_t)(w * h) * 8 + 8), cudaSuccess));
        cr_assert(eq(int, cudaMemcpy(d_map, map, (size_t)(n_cpu + 1) * 8, cudaMemcpyHostToDevice),
                     cudaSuccess));
        dov = (tw_tile_view){d_o, (int64_t)w * 8, w, h, 1, TW_U64, 0, 0};
        cr_assert(eq(int, twi_cuda_label_apply(&dl, d_map, &dov, NULL), TW_OK));
        cr_assert(eq(int, cudaMemcpy(out, d_o, (size_t)(w * h) * 8, cudaMemcpyDeviceToHost),
                     cudaSuccess));
        for (int64_t i = 0; i < (int64_t)w * h; i++)
            cr_assert(eq(u64, out[i], map[cpu[i]]));
        cudaFree(d_map);
        cudaFree(d_o);
        free(map);
        free(out);
    }
    cudaFree(d_m);
    cudaFree(d_l);
    cudaFree(d_s);
    cudaFree(d_n);
    free(cpu);
    free(par);
    free(gpu);
    free(ref);
}

/* Every mask kind, both connectivities, odd sizes, padded rows: the GPU's labels and count are
 * the CPU kernel's bytes (and the flood fill's). */
Test(label_cuda, equals_cpu_kernel)
{
    static const int sizes[][2] = {{1, 1}, {1, 77}, {77, 1}, {33, 17}, {256, 256}, {1000, 613},
                                   {4096, 300}};

    twtest_need_gpu();
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int mode = 0; mode < 5; mode++)
            for (int conn = 4; conn <= 8; conn += 4) {
                int w = sizes[s][0], h = sizes[s][1];
                uint8_t *m = malloc((size_t)(w * h));

                twtest_label_mask(m, w, h, mode, 40 + 5 * (int)s, &rng);
                compare(m, w, h, conn, (int)(s % 3) * 4);
                free(m);
            }
}

/* A run of the whole job: GPU workers only, and GPUs with CPU workers, equal the CPU-only job
 * for several tile sizes (the border merge and numbering on top of the GPU's tile labels; the
 * whole-image GPU path is off: tests/cuda/test_label_job.c checks that one). */
Test(label_cuda, job_on_gpu_equals_cpu_job)
{
    enum { W = 700, H = 500 };
    static uint8_t m[W * H];
    static uint32_t want[W * H], got[W * H];
    static const char *const mixes[][2] = {{"none", "2"}, {"all", "0"}, {"all", "2"}};
    static const int tiles[] = {64, 128, 1024};

    twtest_need_gpu();
    setenv("TILEWAVE_LABEL_GPU_WHOLE", "no", 1); /* read by twtest_runtime_with */
    twtest_label_mask(m, W, H, 1, 30, &rng);
    for (int conn = 4; conn <= 8; conn += 4)
        for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++)
            for (int k = 0; k < 3; k++) {
                tw_runtime *rt = twtest_runtime_with(mixes[k][0], mixes[k][1]);
                tw_label_opts o;
                tw_job *job = NULL;
                tw_error err;

                tw_label_opts_init(&o);
                o.image = (tw_host_image){m, W, H, 0, TW_U8};
                o.result = (tw_host_image){k == 0 ? want : got, W, H, 0, TW_U32};
                o.connectivity = conn;
                o.tile_w = o.tile_h = tiles[t];
                cr_assert(eq(int, tw_label_submit(rt, &o, &job, &err), TW_OK), "%s",
                          err.message);
                cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
                tw_job_destroy(job);
                tw_runtime_destroy(rt);
                if (k > 0)
                    cr_assert(memcmp(got, want, sizeof got) == 0,
                              "gpus %s cpu %s tile %d conn %d differ from the CPU job",
                              mixes[k][0], mixes[k][1], tiles[t], conn);
            }
}

#else

Test(label_cuda, skipped_without_cuda)
{
    cr_skip_test("built without CUDA");
}

#endif
