/* SPDX-License-Identifier: MIT */
/* tilewave tests: the watershed's CUDA tile kernels equal the CPU kernels byte for byte; the
 * job on GPU workers only and on GPUs with CPU workers equals the CPU-only job. */
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

#ifdef TW_HAVE_CUDA

#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "omp_kernels.h"

/* One stream of the tests' generator (twtest_rnd.h) for the whole file. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t
rnd(void)
{
    return twtest_xorshift(&rng_state);
}

/* Levels of a w x h tile: 0 u8 noise, 1 u16 smooth ramp with noise, 2 f32-like (any u32),
 * 3 few levels, 4 one plateau with a few bumps. */
static void
gen_levels(uint32_t *lev, int w, int h, int mode)
{
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t *o = lev + (size_t)y * w + x;

            switch (mode) {
            case 0: *o = (uint32_t)(rnd() % 256); break;
            case 1: *o = (uint32_t)((x * 37 + y * 91) % 50000 + rnd() % 300); break;
            case 2: *o = (uint32_t)rnd(); break;
            case 3: *o = (uint32_t)(rnd() % 3); break;
            default: *o = rnd() % 97 == 0 ? 1000u + (uint32_t)(rnd() % 3) : 1000u; break;
            }
        }
}

/* A host tile (its own arrays), with markers set as the load does. */
typedef struct htile {
    twi_watershed_tile t;
    uint64_t *key;
    uint32_t *lev, *lab;
    uint8_t *in, *pred;
} htile;

static void
htile_init(htile *k, int w, int h, int mode, bool masked)
{
    size_t n = (size_t)w * (size_t)h;

    k->key = malloc(n * 8 + 8);
    k->lev = malloc(n * 4 + 4);
    k->lab = malloc(n * 4 + 4);
    k->in = malloc(n + 1);
    k->pred = calloc(n + 1, 1);
    gen_levels(k->lev, w, h, mode);
    for (size_t i = 0; i < n; i++) {
        uint32_t l = 0;

        k->in[i] = !masked || rnd() % 8 != 0;
        if (rnd() % 40 == 0)
            l = 1 + (uint32_t)(rnd() % 20);
        if (l && k->in[i]) {
            k->lab[i] = l;
            k->key[i] = (uint64_t)k->lev[i] << 32;
        } else {
            k->lab[i] = TWI_WATERSHED_LINF;
            k->key[i] = TWI_WATERSHED_KINF;
        }
    }
    k->t = (twi_watershed_tile){w, h, k->lev, k->in, k->key, k->lab, k->pred};
}

static void
htile_copy(htile *d, const htile *s)
{
    size_t n = (size_t)s->t.w * (size_t)s->t.h;

    d->key = malloc(n * 8 + 8);
    d->lev = malloc(n * 4 + 4);
    d->lab = malloc(n * 4 + 4);
    d->in = malloc(n + 1);
    d->pred = malloc(n + 1);
    memcpy(d->key, s->key, n * 8);
    memcpy(d->lev, s->lev, n * 4);
    memcpy(d->lab, s->lab, n * 4);
    memcpy(d->in, s->in, n);
    memcpy(d->pred, s->pred, n);
    d->t = (twi_watershed_tile){s->t.w, s->t.h, d->lev, d->in, d->key, d->lab, d->pred};
}

static void
htile_fini(htile *k)
{
    free(k->key);
    free(k->lev);
    free(k->lab);
    free(k->in);
    free(k->pred);
}

/* The tile on the device: one scratch buffer holding every array. */
typedef struct dtile {
    twi_watershed_tile d;
    uint64_t *ring;
    void *scratch;
    size_t bytes;
} dtile;

static void
dtile_up(dtile *g, const htile *k, const uint64_t *ring)
{
    int w = k->t.w, h = k->t.h;
    size_t n = (size_t)w * (size_t)h, rl = 2 * ((size_t)w + 2) + 2 * (size_t)h;

    g->bytes = twi_cuda_watershed_scratch_size(w, h);
    cr_assert(eq(int, cudaMalloc(&g->scratch, g->bytes), cudaSuccess));
    cr_assert(eq(int, twi_cuda_watershed_layout(g->scratch, w, h, &g->d, &g->ring), TW_OK));
    cr_assert(eq(int, cudaMemcpy(g->d.key, k->key, n * 8, cudaMemcpyHostToDevice), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy((void *)g->d.lev, k->lev, n * 4, cudaMemcpyHostToDevice),
                 cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(g->d.lab, k->lab, n * 4, cudaMemcpyHostToDevice), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy((void *)g->d.in, k->in, n, cudaMemcpyHostToDevice), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(g->d.pred, k->pred, n, cudaMemcpyHostToDevice), cudaSuccess));
    if (ring)
        cr_assert(eq(int, cudaMemcpy(g->ring, ring, rl * 8, cudaMemcpyHostToDevice),
                     cudaSuccess));
}

static void
dtile_down(const dtile *g, htile *k)
{
    size_t n = (size_t)k->t.w * (size_t)k->t.h;

    cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(k->key, g->d.key, n * 8, cudaMemcpyDeviceToHost), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(k->lab, g->d.lab, n * 4, cudaMemcpyDeviceToHost), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(k->pred, g->d.pred, n, cudaMemcpyDeviceToHost), cudaSuccess));
}

static void
same(const htile *a, const htile *b, const char *what, int w, int h, int mode, int conn)
{
    size_t n = (size_t)w * (size_t)h;

    /* plain comparisons first (millions of pixels), the assertions at the first difference */
    for (size_t i = 0; i < n; i++) {
        if (a->key[i] == b->key[i] && a->lab[i] == b->lab[i] && a->pred[i] == b->pred[i])
            continue;
        cr_assert(eq(u64, a->key[i], b->key[i]), "%s %dx%d mode %d conn %d: key of pixel %zu",
                  what, w, h, mode, conn, i);
        cr_assert(eq(u32, a->lab[i], b->lab[i]), "%s %dx%d mode %d conn %d: label of pixel %zu",
                  what, w, h, mode, conn, i);
        cr_assert(eq(u8, a->pred[i], b->pred[i]), "%s %dx%d mode %d conn %d: preds of pixel %zu",
                  what, w, h, mode, conn, i);
    }
}

/* Lower some pixels' keys as a BP would (a step from a key outside the tile); the seeds. */
static int64_t
lower_keys(htile *k, uint32_t *seeds)
{
    int w = k->t.w, h = k->t.h;
    int64_t ns = 0;

    for (int64_t i = 0; i < (int64_t)w * h; i++) {
        uint64_t out, c;

        if (!k->in[i] || rnd() % 23 != 0)
            continue;
        out = ((uint64_t)k->lev[(size_t)rnd() % ((size_t)w * h)] << 32) | (rnd() % 6);
        if ((c = twi_watershed_step(out, k->lev[i])) < k->key[i]) {
            k->key[i] = c;
            seeds[ns++] = (uint32_t)i;
        }
    }
    return ns;
}

/* Lower some labels of pixels with predecessors, as the label BP would; the seeds. */
static int64_t
lower_labels(htile *k, uint32_t *seeds)
{
    int64_t ns = 0;

    for (int64_t i = 0; i < (int64_t)k->t.w * k->t.h; i++) {
        uint32_t l;

        if (!k->pred[i] || rnd() % 17 != 0)
            continue;
        l = (uint32_t)(rnd() % 20);
        if (l < k->lab[i]) {
            k->lab[i] = l;
            seeds[ns++] = (uint32_t)i;
        }
    }
    return ns;
}

/* Random ring keys: unreached, or keys at the tile's levels with few steps (ties happen). */
static void
random_ring(const htile *k, uint64_t *ring, size_t rl)
{
    size_t n = (size_t)k->t.w * (size_t)k->t.h;

    for (size_t r = 0; r < rl; r++)
        ring[r] = rnd() % 4 == 0 ? TWI_WATERSHED_KINF
                                 : ((uint64_t)k->lev[(size_t)rnd() % n] << 32) | (rnd() % 4);
}

static void
kernels_case(int w, int h, int mode, int conn, bool masked)
{
    size_t n = (size_t)w * (size_t)h, rl = 2 * ((size_t)w + 2) + 2 * (size_t)h;
    uint64_t *ring = malloc(rl * 8);
    uint32_t *seeds = malloc(n * 4 + 4);
    twi_watershed_ring hr = {ring, NULL};
    htile cpu, gpu;
    dtile g;
    int64_t ns;

    htile_init(&cpu, w, h, mode, masked);
    htile_copy(&gpu, &cpu);
    random_ring(&cpu, ring, rl);

    /* full flood */
    dtile_up(&g, &cpu, ring);
    cr_assert(eq(int, twi_omp_watershed_flood(&cpu.t, conn, NULL, 0, NULL), TW_OK));
    cr_assert(eq(int, twi_cuda_watershed_flood(&g.d, conn, g.scratch, g.bytes, NULL), TW_OK));
    dtile_down(&g, &gpu);
    same(&cpu, &gpu, "full flood", w, h, mode, conn);
    cudaFree(g.scratch);

    /* seeded flood: keys lowered from outside at a few pixels */
    ns = lower_keys(&cpu, seeds);
    memcpy(gpu.key, cpu.key, n * 8);
    dtile_up(&g, &cpu, ring);
    cr_assert(eq(int, twi_omp_watershed_flood(&cpu.t, conn, seeds, ns, NULL), TW_OK));
    cr_assert(eq(int, twi_cuda_watershed_flood(&g.d, conn, g.scratch, g.bytes, NULL), TW_OK));
    dtile_down(&g, &gpu);
    same(&cpu, &gpu, "seeded flood", w, h, mode, conn);

    /* best predecessors and a full label run (keys and ring already on the device) */
    twi_omp_watershed_preds(&cpu.t, conn, &hr);
    cr_assert(eq(int, twi_omp_watershed_label(&cpu.t, conn, NULL, 0, NULL), TW_OK));
    cr_assert(eq(int, twi_cuda_watershed_preds(&g.d, conn, g.ring, NULL), TW_OK));
    cr_assert(eq(int, twi_cuda_watershed_label(&g.d, conn, g.scratch, g.bytes, NULL), TW_OK));
    dtile_down(&g, &gpu);
    same(&cpu, &gpu, "full label", w, h, mode, conn);
    cudaFree(g.scratch);

    /* seeded label: labels lowered from outside at a few pixels */
    ns = lower_labels(&cpu, seeds);
    memcpy(gpu.lab, cpu.lab, n * 4);
    dtile_up(&g, &cpu, ring);
    cr_assert(eq(int, twi_omp_watershed_label(&cpu.t, conn, seeds, ns, NULL), TW_OK));
    cr_assert(eq(int, twi_cuda_watershed_label(&g.d, conn, g.scratch, g.bytes, NULL), TW_OK));
    dtile_down(&g, &gpu);
    same(&cpu, &gpu, "seeded label", w, h, mode, conn);
    cudaFree(g.scratch);

    htile_fini(&cpu);
    htile_fini(&gpu);
    free(ring);
    free(seeds);
}

static void
kernels_sweep(const int (*sizes)[2], size_t n_sizes)
{
    for (size_t s = 0; s < n_sizes; s++)
        for (int mode = 0; mode < 5; mode++)
            for (int conn = 4; conn <= 8; conn += 4)
                kernels_case(sizes[s][0], sizes[s][1], mode, conn, (mode + s) % 2 == 0);
}

/* Random tiles of every level kind (u8, u16, f32-like, few levels, one plateau), with and
 * without a mask, 4- and 8-connected, small sizes from 1x1 to 100x37 (one patch and several):
 * the GPU's keys (full and seeded floods), best-predecessor bits and labels (full and seeded)
 * are the CPU kernels' bytes. (The sanitizers of tests/gpu/validate.sh run this one.) */
Test(watershed_cuda, small_kernels_equal_cpu_kernels, .timeout = TWTEST_TIMEOUT(300))
{
    static const int sizes[][2] = {{1, 1}, {1, 40}, {40, 1}, {3, 5}, {31, 33}, {64, 64},
                                   {100, 37}};

    twtest_need_gpu();
    kernels_sweep(sizes, sizeof sizes / sizeof sizes[0]);
}

/* The same on larger tiles (many patches, grid-strided when they outnumber the blocks). */
Test(watershed_cuda, large_kernels_equal_cpu_kernels, .timeout = TWTEST_TIMEOUT(600))
{
    static const int sizes[][2] = {{257, 190}, {1024, 700}, {2000, 1500}};

    twtest_need_gpu();
    kernels_sweep(sizes, sizeof sizes / sizeof sizes[0]);
}

/* ---- the whole job */

typedef struct job_in {
    int w, h;
    tw_sample_type type;
    void *img;
    uint32_t *markers;
    uint8_t *mask;
} job_in;

static void
job_in_make(job_in *in, int w, int h, tw_sample_type type, int mode)
{
    size_t n = (size_t)w * (size_t)h;
    uint32_t *lev = malloc(n * 4);

    in->w = w;
    in->h = h;
    in->type = type;
    in->img = malloc(n * 4);
    in->markers = calloc(n, 4);
    in->mask = malloc(n);
    gen_levels(lev, w, h, mode);
    for (size_t i = 0; i < n; i++) {
        if (type == TW_U8)
            ((uint8_t *)in->img)[i] = (uint8_t)lev[i];
        else if (type == TW_U16)
            ((uint16_t *)in->img)[i] = (uint16_t)lev[i];
        else
            ((float *)in->img)[i] = (float)(lev[i] % 100000u) * 0.37f - 900.0f;
        in->mask[i] = rnd() % 9 != 0;
        if (rnd() % 150 == 0)
            in->markers[i] = 1 + (uint32_t)(rnd() % 30);
    }
    /* a marker rectangle crossing tiles */
    for (int y = h / 3; y < h / 3 + 4 && y < h; y++)
        for (int x = w / 2; x < w / 2 + 5 && x < w; x++)
            in->markers[(size_t)y * w + x] = 77;
    free(lev);
}

static void
job_in_free(job_in *in)
{
    free(in->img);
    free(in->markers);
    free(in->mask);
}

static void
run_job(tw_runtime *rt, const job_in *in, int conn, bool lines, bool masked, bool negate,
        int32_t tile, uint32_t *out)
{
    tw_watershed_opts o;
    tw_job *job = NULL;
    tw_error err;

    tw_watershed_opts_init(&o);
    o.image = (tw_host_image){in->img, in->w, in->h, 0, in->type};
    o.markers_image = (tw_host_image){in->markers, in->w, in->h, 0, TW_U32};
    if (masked)
        o.mask_image = (tw_host_image){in->mask, in->w, in->h, 0, TW_U8};
    o.result = (tw_host_image){out, in->w, in->h, 0, TW_U32};
    o.conn = conn;
    o.lines = lines;
    o.negate = negate;
    o.tile_w = tile;
    o.tile_h = tile == 3 ? 5 : tile; /* 3x5 tiles */
    cr_assert(eq(int, tw_watershed_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
}

/* Failed CUDA runs of rt's GPU workers so far (each retried on a CPU variant), and the bytes
 * they copied back. */
static void
gpu_counts(tw_runtime *rt, uint64_t *retried, uint64_t *from_gpu)
{
    *retried = 0;
    *from_gpu = 0;
    for (int i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        tw_worker_info wi;

        cr_assert(eq(int, tw_runtime_get_worker(rt, i, &wi), TW_OK));
        if (wi.type == TW_DEVICE_CUDA) {
            *retried += wi.tasks_retried;
            *from_gpu += wi.bytes_from_gpu;
        }
    }
}

/* Jobs on GPU workers only and on GPUs with CPU workers give the CPU-only job's bytes, for
 * 8-, 16-bit and float images, with and without mask and lines, 4 and 8 connectivity, tiles
 * from 1x1 and 3x5 up to one tile; the GPU-only runs ran their tile tasks on the GPU (no CUDA
 * run failed and fell back to the CPU). */
Test(watershed_cuda, job_on_gpu_equals_cpu_job, .timeout = TWTEST_TIMEOUT(900))
{
    static const int32_t tiles[] = {1, 3, 16, 64, 1024};
    static const tw_sample_type types[] = {TW_U8, TW_U16, TW_F32};
    tw_runtime *cpu, *gpu, *mix;

    twtest_need_gpu();
    cpu = twtest_runtime_with("none", "2");
    gpu = twtest_runtime_with("all", "0");
    mix = twtest_runtime_with("all", "2");
    for (int c = 0; c < 20; c++) {
        int32_t tile = tiles[c % 5];
        int w = tile == 1 ? 13 : tile == 3 ? 40 : 60 + (int)(rnd() % 300);
        int h = tile == 1 ? 9 : tile == 3 ? 31 : 50 + (int)(rnd() % 200);
        int conn = (c / 5) % 2 ? 4 : 8, mode = c % 5;
        bool lines = c % 3 == 0, masked = c % 4 != 1, negate = c % 7 == 3;
        size_t n = (size_t)w * (size_t)h;
        uint32_t *want = malloc(n * 4), *got = malloc(n * 4);
        uint64_t retried0, retried, from0, from;
        job_in in;

        job_in_make(&in, w, h, types[c % 3], mode == 2 ? 1 : mode);
        run_job(cpu, &in, conn, lines, masked, negate, tile, want);
        gpu_counts(gpu, &retried0, &from0);
        run_job(gpu, &in, conn, lines, masked, negate, tile, got);
        gpu_counts(gpu, &retried, &from);
        cr_assert(eq(u64, retried, retried0), "case %d: a GPU run failed and was retried", c);
        cr_assert(from > from0, "case %d: nothing came back from the GPU", c);
        cr_assert(memcmp(got, want, n * 4) == 0,
                  "case %d (%dx%d tile %d conn %d lines %d mask %d): GPU-only differs from "
                  "CPU-only", c, w, h, tile, conn, lines, masked);
        run_job(mix, &in, conn, lines, masked, negate, tile, got);
        cr_assert(memcmp(got, want, n * 4) == 0,
                  "case %d (%dx%d tile %d conn %d lines %d mask %d): CPU+GPU differs from "
                  "CPU-only", c, w, h, tile, conn, lines, masked);
        job_in_free(&in);
        free(want);
        free(got);
    }
    tw_runtime_destroy(cpu);
    tw_runtime_destroy(gpu);
    tw_runtime_destroy(mix);
}

/* A larger float relief (1500x1100, plateaus included) in 256 and 1024 tiles: GPU-only equals
 * CPU-only, lines on. */
Test(watershed_cuda, large_tiles_on_gpu_equal_cpu, .timeout = TWTEST_TIMEOUT(600))
{
    int w = 1500, h = 1100;
    size_t n = (size_t)w * (size_t)h;
    tw_runtime *cpu, *gpu;
    uint32_t *want, *got;
    job_in in;

    twtest_need_gpu();
    cpu = twtest_runtime_with("none", "2");
    gpu = twtest_runtime_with("all", "0");
    want = malloc(n * 4);
    got = malloc(n * 4);
    job_in_make(&in, w, h, TW_F32, 4);
    for (size_t i = 0; i < n; i++)
        if ((i / (size_t)w) % 200 > 120)
            ((float *)in.img)[i] = (float)((i % (size_t)w) / 50 + (i / (size_t)w) / 70);
    for (int t = 0; t < 2; t++) {
        int32_t tile = t ? 1024 : 256;

        run_job(cpu, &in, 8, true, true, false, tile, want);
        run_job(gpu, &in, 8, true, true, false, tile, got);
        cr_assert(memcmp(got, want, n * 4) == 0, "tile %d: GPU-only differs from CPU-only",
                  tile);
    }
    job_in_free(&in);
    free(want);
    free(got);
    tw_runtime_destroy(cpu);
    tw_runtime_destroy(gpu);
}

#else

Test(watershed_cuda, skipped_without_cuda)
{
    cr_skip_test("built without CUDA");
}

#endif
