/* SPDX-License-Identifier: MIT */
/* tilewave tests: the CUDA reconstruction kernel equals the CPU kernel and a naive reference. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#ifdef TW_HAVE_CUDA

#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "twtest.h"
#include "omp_kernels.h"

#define PAD_BYTE 0x5A

/* ---- images as plain uint32 arrays (w * h, tight) ------------------------------------------ */

typedef struct img {
    int32_t w, h;
    tw_sample_type type;
    uint32_t maxv;
    uint32_t *mrk, *msk;
} img;

static img
img_new(int32_t w, int32_t h, tw_sample_type t)
{
    img im = {w, h, t, t == TW_U8 ? 255u : 65535u, NULL, NULL};
    size_t n = (size_t)w * (size_t)h;

    im.mrk = calloc(n ? n : 1, sizeof(uint32_t));
    im.msk = calloc(n ? n : 1, sizeof(uint32_t));
    cr_assert(im.mrk && im.msk);
    return im;
}

static void
img_free(img *im)
{
    free(im->mrk);
    free(im->msk);
    im->mrk = im->msk = NULL;
}

/* ---- references ----------------------------------------------------------------------------- */

/*
 * Naive reconstruction: J(p) <- min(max{J(q), q in N[p]}, I(p)) over the whole tile until
 * nothing changes (in place, sweep direction alternating: only the number of sweeps depends
 * on it, the fixpoint is unique). No scans split into N+ / N-, no queue.
 */
static void
ref_naive(uint32_t *mk, const uint32_t *ms, int32_t w, int32_t h, int conn)
{
    const int64_t n = (int64_t)w * h;
    bool changed;
    int pass = 0;

    do {
        changed = false;
        for (int64_t k = 0; k < n; k++) {
            const int64_t p = (pass & 1) ? n - 1 - k : k;
            const int32_t y = (int32_t)(p / w), x = (int32_t)(p % w);
            uint32_t m = mk[p];

            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    if ((conn == 4 && dx && dy) || x + dx < 0 || x + dx >= w || y + dy < 0 ||
                        y + dy >= h)
                        continue;
                    if (mk[p + (int64_t)dy * w + dx] > m)
                        m = mk[p + (int64_t)dy * w + dx];
                }
            if (m > ms[p])
                m = ms[p];
            if (m != mk[p]) {
                mk[p] = m;
                changed = true;
            }
        }
        pass++;
    } while (changed);
}

/* Vincent's fast hybrid (raster, anti-raster, FIFO) for the large tiles, where sweeps would
 * take too long. */
static void
ref_hybrid(uint32_t *mk, const uint32_t *ms, int32_t w, int32_t h, int conn)
{
    const int64_t n = (int64_t)w * h;
    int64_t cap = 1 << 16, head = 0, count = 0;
    int64_t *fifo = malloc((size_t)cap * sizeof *fifo);

    cr_assert_not_null(fifo);
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t k = 0; k < n; k++) {
            const int64_t p = pass ? n - 1 - k : k;
            const int32_t y = (int32_t)(p / w), x = (int32_t)(p % w);
            const int s = pass ? 1 : -1; /* the half neighbourhood already visited */
            uint32_t m = mk[p];
            int64_t nb[4];
            int nn = 0;

            if (x + s >= 0 && x + s < w)
                nb[nn++] = p + s;
            if (y + s >= 0 && y + s < h) {
                for (int dx = -1; dx <= 1; dx++)
                    if (x + dx >= 0 && x + dx < w && (conn == 8 || dx == 0))
                        nb[nn++] = p + (int64_t)s * w + dx;
            }
            for (int i = 0; i < nn; i++)
                if (mk[nb[i]] > m)
                    m = mk[nb[i]];
            mk[p] = m < ms[p] ? m : ms[p];
            if (pass == 1) {
                for (int i = 0; i < nn; i++)
                    if (mk[nb[i]] < mk[p] && mk[nb[i]] < ms[nb[i]]) {
                        if (count == cap) {
                            int64_t *f = malloc((size_t)cap * 2 * sizeof *f);

                            cr_assert_not_null(f);
                            for (int64_t j = 0; j < count; j++)
                                f[j] = fifo[(head + j) % cap];
                            free(fifo);
                            fifo = f;
                            head = 0;
                            cap *= 2;
                        }
                        fifo[(head + count++) % cap] = p;
                        break;
                    }
            }
        }
    }
    while (count) {
        const int64_t p = fifo[head];
        const int32_t y = (int32_t)(p / w), x = (int32_t)(p % w);

        head = (head + 1) % cap;
        count--;
        for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++) {
                int64_t q;

                if ((!dx && !dy) || (conn == 4 && dx && dy) || x + dx < 0 || x + dx >= w ||
                    y + dy < 0 || y + dy >= h)
                    continue;
                q = p + (int64_t)dy * w + dx;
                if (mk[q] < mk[p] && mk[q] != ms[q]) {
                    mk[q] = mk[p] < ms[q] ? mk[p] : ms[q];
                    if (count == cap) {
                        int64_t *f = malloc((size_t)cap * 2 * sizeof *f);

                        cr_assert_not_null(f);
                        for (int64_t j = 0; j < count; j++)
                            f[j] = fifo[(head + j) % cap];
                        free(fifo);
                        fifo = f;
                        head = 0;
                        cap *= 2;
                    }
                    fifo[(head + count++) % cap] = q;
                }
            }
    }
    free(fifo);
}

/* ---- generators ----------------------------------------------------------------------------- */

enum {
    KIND_NOISE,    /* random mask, random marker below it */
    KIND_BINARY,   /* 0 / max blobs, a few marker points */
    KIND_PLATEAU,  /* a few flat levels, markers one level down */
    KIND_SMOOTH,   /* tissue-like: smooth mask, marker = mask - h */
    KIND_IDENTITY, /* marker == mask */
    KIND_ZERO,     /* marker 0 */
    KIND_MAZE,     /* 1-pixel serpentine corridor, one end marked */
    KIND_SPOT,     /* one marked pixel in a flat mask with holes */
    KIND_NEARMAX,  /* values at the top of the type */
    KIND_SPARSE,   /* smooth mask, 1% of pixels marked */
    N_KINDS
};

/* A smooth field in [0, 1): bilinear value noise, two octaves of spacing s and s / 4. */
static void
smooth_field(float *f, int32_t w, int32_t h, int32_t s, uint64_t *rng)
{
    for (int oct = 0; oct < 2; oct++) {
        const int32_t sp = oct ? (s / 4 > 1 ? s / 4 : 1) : s;
        const int32_t gw = w / sp + 2, gh = h / sp + 2;
        float *g = malloc((size_t)gw * (size_t)gh * sizeof *g);
        const float amp = oct ? 0.3f : 0.7f;

        cr_assert_not_null(g);
        for (int64_t i = 0; i < (int64_t)gw * gh; i++)
            g[i] = (float)twtest_rnd(rng, 1u << 16) / 65536.0f;
        for (int32_t y = 0; y < h; y++) {
            const int32_t gy = y / sp;
            const float fy = (float)(y % sp) / (float)sp;

            for (int32_t x = 0; x < w; x++) {
                const int32_t gx = x / sp;
                const float fx = (float)(x % sp) / (float)sp;
                const float *r0 = g + (int64_t)gy * gw + gx, *r1 = r0 + gw;
                const float v = (r0[0] * (1 - fx) + r0[1] * fx) * (1 - fy) +
                                (r1[0] * (1 - fx) + r1[1] * fx) * fy;

                f[(int64_t)y * w + x] = (oct ? f[(int64_t)y * w + x] : 0.0f) + amp * v;
            }
        }
        free(g);
    }
}

static void
generate(img *im, int kind, uint64_t *rng)
{
    const int32_t w = im->w, h = im->h;
    const int64_t n = (int64_t)w * h;
    const uint32_t maxv = im->maxv;
    float *f = NULL;

    if (kind == KIND_BINARY || kind == KIND_PLATEAU || kind == KIND_SMOOTH ||
        kind == KIND_SPARSE) {
        f = malloc((size_t)n * sizeof *f);
        cr_assert_not_null(f);
        smooth_field(f, w, h, 2 + (int32_t)twtest_rnd(rng, 30), rng);
    }
    switch (kind) {
    case KIND_NOISE:
        for (int64_t i = 0; i < n; i++) {
            im->msk[i] = twtest_rnd(rng, maxv + 1);
            im->mrk[i] = twtest_rnd(rng, im->msk[i] + 1);
        }
        break;
    case KIND_BINARY: {
        const float t = 0.3f + (float)twtest_rnd(rng, 40) / 100.0f;

        for (int64_t i = 0; i < n; i++) {
            im->msk[i] = f[i] > t ? maxv : 0;
            im->mrk[i] = 0;
        }
        for (uint32_t k = twtest_rnd(rng, 6) + 1; k > 0; k--) {
            const int64_t p = twtest_rnd(rng, (uint32_t)n);

            im->mrk[p] = im->msk[p];
        }
        break;
    }
    case KIND_PLATEAU: {
        const uint32_t levels = 2 + twtest_rnd(rng, 4), step = maxv / levels;

        for (int64_t i = 0; i < n; i++) {
            const uint32_t l = (uint32_t)(f[i] * (float)levels);

            im->msk[i] = l * step;
            im->mrk[i] = twtest_rnd(rng, 8) == 0 ? im->msk[i] : (l ? (l - 1) * step : 0);
        }
        break;
    }
    case KIND_SMOOTH: {
        const uint32_t hh = 1 + twtest_rnd(rng, maxv / 4);

        for (int64_t i = 0; i < n; i++) {
            uint32_t v = (uint32_t)(f[i] * (float)maxv) + twtest_rnd(rng, maxv / 32 + 1);

            im->msk[i] = v > maxv ? maxv : v;
            im->mrk[i] = im->msk[i] > hh ? im->msk[i] - hh : 0;
        }
        break;
    }
    case KIND_IDENTITY:
    case KIND_ZERO:
        for (int64_t i = 0; i < n; i++) {
            im->msk[i] = twtest_rnd(rng, maxv + 1);
            im->mrk[i] = kind == KIND_IDENTITY ? im->msk[i] : 0;
        }
        break;
    case KIND_MAZE: {
        /* Corridors on even rows, joined at alternating ends on odd rows; walls random low. */
        const uint32_t v = maxv - twtest_rnd(rng, maxv / 2);

        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++) {
                const int64_t i = (int64_t)y * w + x;
                const bool open = (y % 2 == 0) || (y % 4 == 1 && x == w - 1) ||
                                  (y % 4 == 3 && x == 0);

                im->msk[i] = open ? v : twtest_rnd(rng, v / 4 + 1);
                im->mrk[i] = twtest_rnd(rng, im->msk[i] / 8 + 1);
            }
        im->mrk[0] = im->msk[0];
        break;
    }
    case KIND_SPOT: {
        const int64_t p = twtest_rnd(rng, (uint32_t)n);

        for (int64_t i = 0; i < n; i++) {
            im->msk[i] = twtest_rnd(rng, 5) == 0 ? twtest_rnd(rng, maxv / 2 + 1) : maxv;
            im->mrk[i] = 0;
        }
        im->mrk[p] = im->msk[p];
        break;
    }
    case KIND_NEARMAX:
        for (int64_t i = 0; i < n; i++) {
            im->msk[i] = maxv - twtest_rnd(rng, 4);
            im->mrk[i] = im->msk[i] - twtest_rnd(rng, im->msk[i] < 3 ? im->msk[i] + 1 : 4);
        }
        break;
    case KIND_SPARSE:
        for (int64_t i = 0; i < n; i++) {
            im->msk[i] = (uint32_t)(f[i] * (float)maxv);
            im->mrk[i] = twtest_rnd(rng, 100) == 0 ? im->msk[i] : 0;
        }
        break;
    }
    free(f);
}

/* ---- running both kernels ------------------------------------------------------------------- */

/* A host view of the image's marker or mask with `pad` samples of padding per row, filled
 * with PAD_BYTE. */
static tw_tile_view
host_view(const img *im, const uint32_t *vals, int64_t pad)
{
    const size_t ss = tw_sample_size(im->type);
    tw_tile_view v = {NULL, 0, im->w, im->h, 1, im->type, 0, 0};
    size_t bytes;

    v.stride = ((int64_t)im->w + pad) * (int64_t)ss;
    bytes = (size_t)v.stride * (size_t)im->h;
    v.data = malloc(bytes ? bytes : 1);
    cr_assert_not_null(v.data);
    memset(v.data, PAD_BYTE, bytes);
    for (int32_t y = 0; y < im->h; y++)
        for (int32_t x = 0; x < im->w; x++) {
            const uint32_t val = vals[(int64_t)y * im->w + x];
            unsigned char *row = (unsigned char *)v.data + (int64_t)y * v.stride;

            if (im->type == TW_U8)
                row[x] = (uint8_t)val;
            else
                ((uint16_t *)row)[x] = (uint16_t)val;
        }
    return v;
}

static uint32_t
view_at(const tw_tile_view *v, int32_t x, int32_t y)
{
    const unsigned char *row = (const unsigned char *)v->data + (int64_t)y * v->stride;

    return v->type == TW_U8 ? row[x] : ((const uint16_t *)row)[x];
}

/* Device copy of a host view, `offset` samples into its allocation (an odd offset makes the
 * rows unaligned for vector loads). *alloc receives the allocation to free. */
static tw_tile_view
device_copy(const tw_tile_view *hv, int offset, void **alloc)
{
    const size_t ss = tw_sample_size(hv->type);
    const size_t bytes = (size_t)hv->stride * (size_t)hv->h;
    tw_tile_view d = *hv;

    cr_assert(eq(int, cudaMalloc(alloc, bytes + (size_t)offset * ss + 1), cudaSuccess));
    d.data = (unsigned char *)*alloc + (size_t)offset * ss;
    cr_assert(eq(int, cudaMemcpy(d.data, hv->data, bytes, cudaMemcpyHostToDevice),
                 cudaSuccess));
    return d;
}

typedef struct run_opts {
    int conn;
    const uint32_t *seeds; /* host; NULL: whole tile */
    int64_t n_seeds;
    int64_t cap;           /* queue capacity, 0 = default */
    int64_t pad;           /* samples of row padding */
    int offset;            /* samples between the allocation and the view */
    cudaStream_t stream;
    int64_t *stats;        /* optional: twi_cuda_mrecon_stats of the run (10 values) */
} run_opts;

/* Reconstruct on the GPU; returns the marker buffer as a host view (padding included). */
static tw_tile_view
run_gpu(const img *im, const run_opts *o)
{
    tw_tile_view hj = host_view(im, im->mrk, o->pad);
    tw_tile_view hi = host_view(im, im->msk, o->pad);
    void *aj = NULL, *ai = NULL, *scratch = NULL;
    uint32_t *d_seeds = NULL;
    tw_tile_view dj = device_copy(&hj, o->offset, &aj);
    tw_tile_view di = device_copy(&hi, o->offset, &ai);
    const size_t bytes = twi_cuda_mrecon_scratch_size(im->w, im->h, o->cap);

    cr_assert(gt(sz, bytes, 0));
    cr_assert(eq(int, cudaMalloc(&scratch, bytes), cudaSuccess));
    if (o->seeds) {
        const size_t sb = (size_t)(o->n_seeds ? o->n_seeds : 1) * sizeof(uint32_t);

        cr_assert(eq(int, cudaMalloc((void **)&d_seeds, sb), cudaSuccess));
        cr_assert(eq(int, cudaMemcpy(d_seeds, o->seeds, (size_t)o->n_seeds * sizeof(uint32_t),
                                     cudaMemcpyHostToDevice),
                     cudaSuccess));
    }
    cr_assert(eq(int,
                 twi_cuda_mrecon(&dj, &di, o->conn, d_seeds, o->n_seeds, scratch, bytes, o->cap,
                                 o->stream),
                 TW_OK));
    cr_assert(eq(int, cudaStreamSynchronize(o->stream), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(hj.data, dj.data, (size_t)hj.stride * (size_t)hj.h,
                                 cudaMemcpyDeviceToHost),
                 cudaSuccess));
    if (o->stats)
        cr_assert(eq(int, twi_cuda_mrecon_stats(scratch, o->stats), TW_OK));
    cudaFree(aj);
    cudaFree(ai);
    cudaFree(scratch);
    cudaFree(d_seeds);
    free(hi.data);
    return hj;
}

/* The CPU kernel on the same layout (padding included). */
static tw_tile_view
run_omp(const img *im, const run_opts *o, int nthreads)
{
    tw_tile_view hj = host_view(im, im->mrk, o->pad);
    tw_tile_view hi = host_view(im, im->msk, o->pad);

    cr_assert(eq(int, twi_omp_mrecon(&hj, &hi, o->conn, o->seeds, o->n_seeds, nthreads),
                 TW_OK));
    free(hi.data);
    return hj;
}

static const char *const kind_names[N_KINDS] = {
    "noise", "binary", "plateau", "smooth", "identity", "zero", "maze", "spot", "nearmax",
    "sparse",
};

/* GPU bytes == CPU kernel bytes (padding included) and pixels == expected values. */
static void
expect_same(const img *im, const run_opts *o, const uint32_t *expected, int kind,
            const char *what)
{
    tw_tile_view g = run_gpu(im, o);
    tw_tile_view c = run_omp(im, o, 1);
    const size_t bytes = (size_t)g.stride * (size_t)g.h;

    for (int32_t y = 0; y < im->h; y++)
        for (int32_t x = 0; x < im->w; x++) {
            const uint32_t got = view_at(&g, x, y), want = expected[(int64_t)y * im->w + x];

            if (got != want)
                cr_fatal("%s: %dx%d %s conn %d kind %s cap %lld seeds %lld pad %lld off %d: "
                         "pixel (%d,%d) cuda %u reference %u (mask %u, marker %u)",
                         what, im->w, im->h, tw_sample_type_name(im->type), o->conn,
                         kind_names[kind], (long long)o->cap, (long long)o->n_seeds,
                         (long long)o->pad, o->offset, x, y, got, want,
                         im->msk[(int64_t)y * im->w + x], im->mrk[(int64_t)y * im->w + x]);
        }
    if (memcmp(g.data, c.data, bytes) != 0)
        cr_fatal("%s: %dx%d %s conn %d kind %s: CUDA and OpenMP buffers differ (padding?)", what,
                 im->w, im->h, tw_sample_type_name(im->type), o->conn, kind_names[kind]);
    free(g.data);
    free(c.data);
}

/* One random whole-tile case of at most maxw x maxh. */
static void
random_case(uint64_t *rng, int32_t maxw, int32_t maxh, const int64_t *caps, int ncaps,
            cudaStream_t stream, const char *what)
{
    int32_t w = 1 + (int32_t)twtest_rnd(rng, (uint32_t)maxw), h = 1 + (int32_t)twtest_rnd(rng, (uint32_t)maxh);
    const tw_sample_type t = twtest_rnd(rng, 2) ? TW_U16 : TW_U8;
    const int kind = (int)twtest_rnd(rng, N_KINDS);
    run_opts o = {twtest_rnd(rng, 2) ? 8 : 4, NULL, 0, caps[twtest_rnd(rng, (uint32_t)ncaps)],
                  twtest_rnd(rng, 3) ? 0 : twtest_rnd(rng, 9), (int)twtest_rnd(rng, 2), stream, NULL};
    img im;
    uint32_t *want;

    /* Odd shapes: degenerate rows and columns, tiny tiles. */
    switch (twtest_rnd(rng, 8)) {
    case 0: w = 1; break;
    case 1: h = 1; break;
    case 2: w = 1 + (int32_t)twtest_rnd(rng, 4); h = 1 + (int32_t)twtest_rnd(rng, 4); break;
    default: break;
    }
    im = img_new(w, h, t);
    generate(&im, kind, rng);
    want = malloc((size_t)w * (size_t)h * sizeof *want);
    cr_assert_not_null(want);
    memcpy(want, im.mrk, (size_t)w * (size_t)h * sizeof *want);
    ref_naive(want, im.msk, w, h, o.conn);
    expect_same(&im, &o, want, kind, what);
    free(want);
    img_free(&im);
}

/* One seeded case: a stable tile, then random and border pixels raised (not above the mask);
 * the seeds list them (with duplicates and a few pixels that did not change). */
static void
seeded_case(uint64_t *rng, int32_t maxw, int32_t maxh, int64_t cap, cudaStream_t stream)
{
    const int32_t w = 1 + (int32_t)twtest_rnd(rng, (uint32_t)maxw);
    const int32_t h = 1 + (int32_t)twtest_rnd(rng, (uint32_t)maxh);
    const tw_sample_type t = twtest_rnd(rng, 2) ? TW_U16 : TW_U8;
    const int kind = (int)twtest_rnd(rng, N_KINDS);
    const int64_t n = (int64_t)w * h;
    run_opts o = {twtest_rnd(rng, 2) ? 8 : 4, NULL, 0, cap, twtest_rnd(rng, 2) ? 0 : 3, (int)twtest_rnd(rng, 2),
                  stream, NULL};
    img im = img_new(w, h, t);
    uint32_t *want = malloc((size_t)n * sizeof *want);
    uint32_t *seeds = malloc((size_t)(4 * n + 16) * sizeof *seeds);
    int64_t ns = 0;

    cr_assert(want && seeds);
    generate(&im, kind, rng);
    ref_naive(im.mrk, im.msk, w, h, o.conn); /* now stable */
    if (twtest_rnd(rng, 2)) {
        /* A border of the tile raised, as a neighbouring tile's propagation does. */
        const int side = (int)twtest_rnd(rng, 4);
        const int32_t len = side < 2 ? w : h;

        for (int32_t i = 0; i < len; i++) {
            const int32_t x = side < 2 ? i : (side == 2 ? 0 : w - 1);
            const int32_t y = side < 2 ? (side == 0 ? 0 : h - 1) : i;
            const int64_t p = (int64_t)y * w + x;

            if (twtest_rnd(rng, 3) == 0)
                continue;
            im.mrk[p] += twtest_rnd(rng, im.msk[p] - im.mrk[p] + 1);
            seeds[ns++] = (uint32_t)p;
        }
    }
    for (uint32_t k = twtest_rnd(rng, 12) + 1; k > 0; k--) {
        const int64_t p = twtest_rnd(rng, (uint32_t)n);

        im.mrk[p] += twtest_rnd(rng, im.msk[p] - im.mrk[p] + 1);
        seeds[ns++] = (uint32_t)p;
        if (twtest_rnd(rng, 3) == 0)
            seeds[ns++] = (uint32_t)p; /* duplicate */
    }
    seeds[ns++] = twtest_rnd(rng, (uint32_t)n); /* listed but not raised */
    memcpy(want, im.mrk, (size_t)n * sizeof *want);
    ref_naive(want, im.msk, w, h, o.conn);
    o.seeds = seeds;
    o.n_seeds = ns;
    expect_same(&im, &o, want, kind, "seeded");
    free(seeds);
    free(want);
    img_free(&im);
}

/* ---- tests ----------------------------------------------------------------------------------- */

Test(mrecon_cuda, small_cases_whole_and_seeded)
{
    /* 150 whole-tile and 100 seeded cases up to 40 x 40: every mask/marker kind, u8/u16,
     * conn 4/8, padded and unaligned rows, queue capacities from 1 up. Equal to the naive
     * reference and to twi_omp_mrecon byte for byte. Small enough for compute-sanitizer. */
    static const int64_t caps[] = {0, 0, 1, 7, 32, 1000};
    uint64_t rng = 0x5EED0001ull;

    twtest_need_gpu();
    for (int i = 0; i < 150; i++)
        random_case(&rng, 40, 40, caps, 6, NULL, "small");
    for (int i = 0; i < 100; i++)
        seeded_case(&rng, 40, 40, caps[twtest_rnd(&rng, 6)], NULL);
}

Test(mrecon_cuda, random_cases_match_reference)
{
    /* 2,000 whole-tile cases, 1x1 up to 300 x 200 (odd shapes, 1 x N and N x 1), every
     * kind, u8/u16, conn 4/8, on a non-default stream: the naive reference's values and the
     * CPU kernel's bytes. */
    static const int64_t caps[] = {0, 0, 0, 1000};
    uint64_t rng = 0x5EED0002ull;
    cudaStream_t stream = NULL;

    twtest_need_gpu();
    cr_assert(eq(int, cudaStreamCreate(&stream), cudaSuccess));
    for (int i = 0; i < 2000; i++)
        random_case(&rng, 300, 200, caps, 4, stream, "random");
    cudaStreamDestroy(stream);
}

Test(mrecon_cuda, seeded_raised_and_border_pixels)
{
    /* 400 stable tiles up to 300 x 200 whose random and border pixels were raised: seeded
     * propagation equals a full recompute (reference) and the CPU kernel's seeded run. */
    uint64_t rng = 0x5EED0003ull;

    twtest_need_gpu();
    for (int i = 0; i < 400; i++)
        seeded_case(&rng, 300, 200, 0, NULL);
}

Test(mrecon_cuda, tiny_queue_capacities_give_the_same_bytes)
{
    /* Capacities 1, 32 and 1000 force the queue to spill into the pending bitmap; the bytes
     * equal those of the default capacity and the reference, on 40 random cases up to
     * 300 x 200, seeded cases with more seeds than capacity, and a 1024 x 768 smooth tile. */
    static const int64_t caps[] = {1, 32, 1000};
    uint64_t rng = 0x5EED0004ull;

    twtest_need_gpu();
    for (int c = 0; c < 3; c++) {
        for (int i = 0; i < 40; i++)
            random_case(&rng, 300, 200, caps + c, 1, NULL, "tiny-capacity");
        for (int i = 0; i < 20; i++)
            seeded_case(&rng, 300, 200, caps[c], NULL);
    }
    for (int c = 1; c < 3; c++) {
        img im = img_new(1024, 768, TW_U8);
        const size_t n = (size_t)im.w * (size_t)im.h;
        uint32_t *want = malloc(n * sizeof *want);
        run_opts o = {8, NULL, 0, caps[c], 0, 0, NULL, NULL};

        cr_assert_not_null(want);
        generate(&im, KIND_SMOOTH, &rng);
        memcpy(want, im.mrk, n * sizeof *want);
        ref_hybrid(want, im.msk, im.w, im.h, 8);
        expect_same(&im, &o, want, KIND_SMOOTH, "tiny-capacity 1024x768");
        free(want);
        img_free(&im);
    }
}

/* A large case against Vincent's hybrid in the test and the CPU kernel with 8 threads. */
static void
large_case(int32_t w, int32_t h, tw_sample_type t, int conn, int kind, uint64_t seed)
{
    uint64_t rng = seed;
    img im = img_new(w, h, t);
    const size_t n = (size_t)w * (size_t)h;
    uint32_t *want = malloc(n * sizeof *want);
    run_opts o = {conn, NULL, 0, 0, 0, 0, NULL, NULL};
    tw_tile_view g, c;

    cr_assert_not_null(want);
    generate(&im, kind, &rng);
    memcpy(want, im.mrk, n * sizeof *want);
    ref_hybrid(want, im.msk, w, h, conn);
    g = run_gpu(&im, &o);
    /* The CPU kernel's micro-tiles make a serpentine slow with threads: serial there. */
    c = run_omp(&im, &o, kind == KIND_MAZE ? 1 : 4);
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++)
            if (view_at(&g, x, y) != want[(int64_t)y * w + x])
                cr_fatal("%dx%d %s conn %d kind %s: pixel (%d,%d) cuda %u reference %u", w, h,
                         tw_sample_type_name(t), conn, kind_names[kind], x, y, view_at(&g, x, y),
                         want[(int64_t)y * w + x]);
    cr_assert(eq(int, memcmp(g.data, c.data, (size_t)g.stride * (size_t)h), 0));
    free(g.data);
    free(c.data);
    free(want);
    img_free(&im);
}

Test(mrecon_cuda, large_tiles_match_cpu, .timeout = TWTEST_TIMEOUT(300))
{
    /* 4096 x 4096 u8 8-connected tissue-like, 3000 x 7000 u16 4-connected tissue-like, and a
     * 1023 x 511 one-pixel serpentine (a 260,000-pixel chain) in both connectivities. */
    twtest_need_gpu();
    large_case(4096, 4096, TW_U8, 8, KIND_SMOOTH, 11);
    large_case(3000, 7000, TW_U16, 4, KIND_SMOOTH, 12);
    large_case(1023, 511, TW_U8, 8, KIND_MAZE, 13);
    large_case(1023, 511, TW_U16, 4, KIND_MAZE, 14);
}

Test(mrecon_cuda, empty_tile_and_empty_seed_list_are_noops)
{
    /* Nothing is launched (the pointers are not even valid): an empty tile needs no scratch,
     * and a seed list of length 0 means nothing was raised. */
    tw_tile_view j = {NULL, 0, 0, 5, 1, TW_U8, 0, 0};
    tw_tile_view i = j;
    uint32_t fake_seed = 0;

    cr_assert(eq(sz, twi_cuda_mrecon_scratch_size(0, 5, 0), 0));
    cr_assert(eq(int, twi_cuda_mrecon(&j, &i, 8, NULL, 0, NULL, 0, 0, NULL), TW_OK));
    j.w = i.w = 4;
    j.data = i.data = (void *)(uintptr_t)0x1000;
    j.stride = i.stride = 4;
    cr_assert(eq(int, twi_cuda_mrecon(&j, &i, 8, &fake_seed, 0, NULL, 0, 0, NULL), TW_OK));
}

Test(mrecon_cuda, rejects_invalid_arguments)
{
    /* Every broken argument gives TW_E_INVALID before anything is enqueued (no device is
     * needed: the pointers are never dereferenced). */
    tw_tile_view j = {(void *)(uintptr_t)0x10000, 64, 60, 50, 1, TW_U8, 0, 0};
    tw_tile_view i = j;
    void *scratch = (void *)(uintptr_t)0x100000;
    const size_t bytes = twi_cuda_mrecon_scratch_size(60, 50, 0);
    tw_tile_view b;

    cr_assert(gt(sz, bytes, 0));
#define BAD(call) cr_assert(eq(int, (call), TW_E_INVALID), "%s", #call)
    BAD(twi_cuda_mrecon(NULL, &i, 8, NULL, 0, scratch, bytes, 0, NULL));
    BAD(twi_cuda_mrecon(&j, NULL, 8, NULL, 0, scratch, bytes, 0, NULL));
    BAD(twi_cuda_mrecon(&j, &i, 6, NULL, 0, scratch, bytes, 0, NULL));
    BAD(twi_cuda_mrecon(&j, &i, 0, NULL, 0, scratch, bytes, 0, NULL));
    BAD(twi_cuda_mrecon(&j, &i, 8, NULL, 0, NULL, bytes, 0, NULL));
    BAD(twi_cuda_mrecon(&j, &i, 8, NULL, 0, scratch, bytes - 1, 0, NULL));
    BAD(twi_cuda_mrecon(&j, &i, 8, NULL, 0, scratch, bytes, -1, NULL));
    BAD(twi_cuda_mrecon(&j, &i, 8, (const uint32_t *)scratch, -1, scratch, bytes, 0, NULL));
    /* A larger capacity needs more scratch than the default. */
    BAD(twi_cuda_mrecon(&j, &i, 8, NULL, 0, scratch, bytes, 1 << 20, NULL));
    b = i;
    b.w = 59;
    BAD(twi_cuda_mrecon(&j, &b, 8, NULL, 0, scratch, bytes, 0, NULL));
    b = i;
    b.h = 51;
    BAD(twi_cuda_mrecon(&j, &b, 8, NULL, 0, scratch, bytes, 0, NULL));
    b = i;
    b.type = TW_U16;
    b.stride = 128;
    BAD(twi_cuda_mrecon(&j, &b, 8, NULL, 0, scratch, bytes, 0, NULL));
    b = j;
    b.type = TW_U32;
    b.stride = 256;
    i.type = TW_U32;
    i.stride = 256;
    BAD(twi_cuda_mrecon(&b, &i, 8, NULL, 0, scratch, bytes, 0, NULL));
    i = j;
    b = i;
    b.channels = 3;
    BAD(twi_cuda_mrecon(&j, &b, 8, NULL, 0, scratch, bytes, 0, NULL));
    b = i;
    b.stride = 59; /* shorter than a row */
    BAD(twi_cuda_mrecon(&j, &b, 8, NULL, 0, scratch, bytes, 0, NULL));
    b = j;
    b.data = NULL;
    BAD(twi_cuda_mrecon(&b, &i, 8, NULL, 0, scratch, bytes, 0, NULL));
    b = j;
    b.type = TW_U16;
    b.stride = 121; /* odd stride for 16-bit samples */
    i.type = TW_U16;
    i.stride = 120;
    BAD(twi_cuda_mrecon(&b, &i, 8, NULL, 0, scratch, bytes * 2, 0, NULL));
    b.stride = 120;
    b.data = (void *)(uintptr_t)0x10001; /* misaligned for 16-bit samples */
    BAD(twi_cuda_mrecon(&b, &i, 8, NULL, 0, scratch, bytes * 2, 0, NULL));
    b = j;
    b.w = -1;
    BAD(twi_cuda_mrecon(&b, &b, 8, NULL, 0, scratch, bytes, 0, NULL));
    /* More than 2^32 pixels do not fit the 32-bit raster indices. */
    b = j;
    b.w = 70000;
    b.h = 70000;
    b.stride = 70000;
    BAD(twi_cuda_mrecon(&b, &b, 8, NULL, 0, scratch, SIZE_MAX, 0, NULL));
#undef BAD
}

Test(mrecon_cuda, scratch_size_is_pure_and_grows)
{
    /* The size query launches nothing and needs no device; it grows with the tile and the
     * capacity; invalid sizes give 0. */
    const size_t a = twi_cuda_mrecon_scratch_size(100, 100, 0);
    const size_t b = twi_cuda_mrecon_scratch_size(200, 100, 0);
    const size_t c = twi_cuda_mrecon_scratch_size(100, 100, 1 << 20);

    cr_assert(gt(sz, a, (size_t)100 * 100 * 4));
    cr_assert(gt(sz, b, a));
    cr_assert(gt(sz, c, a));
    cr_assert(eq(sz, twi_cuda_mrecon_scratch_size(1, 1, 0),
                 twi_cuda_mrecon_scratch_size(1, 1, 0)));
    cr_assert(eq(sz, twi_cuda_mrecon_scratch_size(-1, 5, 0), 0));
    cr_assert(eq(sz, twi_cuda_mrecon_scratch_size(5, 5, -3), 0));
    cr_assert(eq(sz, twi_cuda_mrecon_scratch_size(70000, 70000, 0), 0));
    cr_assert(gt(sz, twi_cuda_mrecon_scratch_size(65536, 65536, 0), (size_t)1 << 34));
}

/* ---- benchmark (TW_MRECON_BENCH=1) ----------------------------------------------------------- */

/* Tissue-like 8-bit mask: three octaves of smooth noise (256, 64, 16 pixels) plus noise. */
static void
tissue_u8(uint8_t *msk, uint8_t *mrk, int32_t n, uint64_t seed)
{
    static const int32_t sp[3] = {256, 64, 16};
    static const float amp[3] = {0.6f, 0.3f, 0.1f};
    uint64_t rng = seed;
    float *acc = calloc((size_t)n * (size_t)n, sizeof *acc);

    cr_assert_not_null(acc);
    for (int o = 0; o < 3; o++) {
        const int32_t gw = n / sp[o] + 2;
        float *g = malloc((size_t)gw * (size_t)gw * sizeof *g);

        cr_assert_not_null(g);
        for (int64_t i = 0; i < (int64_t)gw * gw; i++)
            g[i] = amp[o] * (float)twtest_rnd(&rng, 1u << 16) / 65536.0f;
        for (int32_t y = 0; y < n; y++) {
            const float fy = (float)(y % sp[o]) / (float)sp[o];
            const float *r0 = g + (int64_t)(y / sp[o]) * gw, *r1 = r0 + gw;
            float *a = acc + (int64_t)y * n;

            for (int32_t x = 0; x < n; x++) {
                const int32_t gx = x / sp[o];
                const float fx = (float)(x % sp[o]) / (float)sp[o];

                a[x] += (r0[gx] * (1 - fx) + r0[gx + 1] * fx) * (1 - fy) +
                        (r1[gx] * (1 - fx) + r1[gx + 1] * fx) * fy;
            }
        }
        free(g);
    }
    for (int64_t i = 0; i < (int64_t)n * n; i++) {
        int v = (int)(acc[i] * 255.0f) + (int)twtest_rnd(&rng, 13) - 6;

        msk[i] = (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));
        mrk[i] = (uint8_t)(msk[i] > 40 ? msk[i] - 40 : 0);
    }
    free(acc);
}

/* Time the kernel (best of 3 after a warm-up) and check its bytes against `want`. */
static float
bench_one(int32_t n, int conn, void *d_mrk0, tw_tile_view *dj, tw_tile_view *di, void *scratch,
          size_t sb, const uint8_t *want)
{
    const size_t bytes = (size_t)n * (size_t)n;
    cudaEvent_t e0, e1;
    float best = 1e30f, ms = 0;
    int64_t st[10], bst[10] = {0};
    uint8_t *g = malloc(bytes);

    cr_assert_not_null(g);
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int rep = 0; rep < 4; rep++) {
        cr_assert(eq(int, cudaMemcpy(dj->data, d_mrk0, bytes, cudaMemcpyDeviceToDevice),
                     cudaSuccess));
        cudaEventRecord(e0, NULL);
        cr_assert(eq(int, twi_cuda_mrecon(dj, di, conn, NULL, 0, scratch, sb, 0, NULL), TW_OK));
        cudaEventRecord(e1, NULL);
        cr_assert(eq(int, cudaEventSynchronize(e1), cudaSuccess));
        cudaEventElapsedTime(&ms, e0, e1);
        cr_assert(eq(int, twi_cuda_mrecon_stats(scratch, st), TW_OK));
        if (rep > 0 && ms < best) {
            best = ms;
            memcpy(bst, st, sizeof st);
        }
    }
    cr_assert(eq(int, cudaMemcpy(g, dj->data, bytes, cudaMemcpyDeviceToHost), cudaSuccess));
    cr_assert(eq(int, memcmp(g, want, bytes), 0), "%dx%d conn %d: GPU differs from the CPU", n,
              n, conn);
    fprintf(stderr,
            "mrecon_cuda bench %dx%d u8 conn %d: %.2f ms = %.2f GPix/s | "
            "raster %.2f ms (%lld rounds, %lld changes), initial front %.2f ms, wavefront %.2f "
            "ms, rest %.2f ms | rounds %lld, compactions %lld, initial %lld, processed %lld, "
            "local steps %lld | scratch %zu MB, identical to twi_omp_mrecon\n",
            n, n, conn, best,
            (double)bytes / (best * 1e-3) / 1e9, bst[5] / 1e6, (long long)bst[8],
            (long long)bst[9], bst[6] / 1e6, bst[7] / 1e6,
            best - (bst[5] + bst[6] + bst[7]) / 1e6, (long long)bst[0], (long long)bst[1],
            (long long)bst[3], (long long)bst[2], (long long)bst[4], sb >> 20);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    free(g);
    return best;
}

static void
bench_conn(int32_t n, int conn, const uint8_t *h_msk, const uint8_t *h_mrk)
{
    const size_t bytes = (size_t)n * (size_t)n;
    tw_tile_view dj = {NULL, n, n, n, 1, TW_U8, 0, 0}, di = dj;
    tw_tile_view hj = {NULL, n, n, n, 1, TW_U8, 0, 0};
    tw_tile_view hi = {(void *)h_msk, n, n, n, 1, TW_U8, 0, 0};
    void *d_mrk0 = NULL, *scratch = NULL;
    const size_t sb = twi_cuda_mrecon_scratch_size(n, n, 0);
    uint8_t *want = malloc(bytes);

    /* The CPU kernel's result, 16 threads. */
    cr_assert_not_null(want);
    memcpy(want, h_mrk, bytes);
    hj.data = want;
    cr_assert(eq(int, twi_omp_mrecon(&hj, &hi, conn, NULL, 0, 16), TW_OK));
    cr_assert(eq(int, cudaMalloc(&dj.data, bytes), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&di.data, bytes), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&d_mrk0, bytes), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&scratch, sb), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(di.data, h_msk, bytes, cudaMemcpyHostToDevice), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(d_mrk0, h_mrk, bytes, cudaMemcpyHostToDevice), cudaSuccess));
    bench_one(n, conn, d_mrk0, &dj, &di, scratch, sb, want);
    cudaFree(dj.data);
    cudaFree(di.data);
    cudaFree(d_mrk0);
    cudaFree(scratch);
    free(want);
}

Test(mrecon_cuda, bench_16k_tissue, .timeout = TWTEST_TIMEOUT(600))
{
    /* Benchmark, run only with TW_MRECON_BENCH=1: a 16384^2 tissue-like u8 tile (smooth
     * mask, marker = mask - 40) reconstructed in GPU memory: CUDA-event time of the launcher's
     * work, phases from the device timestamps, every result checked against the CPU kernel. */
    const int32_t n = 16384;
    uint8_t *msk, *mrk;

    if (!getenv("TW_MRECON_BENCH"))
        cr_skip_test("benchmark: set TW_MRECON_BENCH=1");
    twtest_need_gpu();
    msk = malloc((size_t)n * n);
    mrk = malloc((size_t)n * n);
    cr_assert(msk && mrk);
    tissue_u8(msk, mrk, n, 2024);
    bench_conn(n, 8, msk, mrk);
    bench_conn(n, 4, msk, mrk);
    free(msk);
    free(mrk);
}

#else /* !TW_HAVE_CUDA */

Test(mrecon_cuda, skipped_without_cuda)
{
    /* Built without CUDA: nothing to compare. */
    cr_skip_test("built without CUDA");
}

#endif /* TW_HAVE_CUDA */
