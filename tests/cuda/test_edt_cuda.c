/* SPDX-License-Identifier: MIT */
/* tilewave tests: the CUDA distance transforms against references and the CPU twin. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#ifdef TW_HAVE_CUDA

#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "twtest.h"
#include "omp_kernels.h"

/*
 * Suites: edt_cuda/small_* are the quick cases (the compute-sanitizer runs select them with
 * --filter 'edt_cuda/small*'); edt_cuda_large holds the big images (4097 x 3001, 47000^2: 64-bit
 * offsets, about 40 GB of GPU memory); edt_cuda_bench runs only with TW_EDT_BENCH=1.
 */

#define PAD_BYTE 0x5A
#define D2_NONE INT64_MAX

/* ---- images (w * h bytes, tight, 0 = background) ------------------------------------------ */

enum {
    PAT_RANDOM,   /* i.i.d. background with probability num / 1000 */
    PAT_ONE,      /* one background pixel */
    PAT_NONE,     /* no background */
    PAT_ALL,      /* all background */
    PAT_CORNER,   /* one background pixel in a random corner */
    PAT_ROW,      /* one background row */
    PAT_COLUMN,   /* one background column */
    PAT_LINES,    /* a few random lines and dots */
    PAT_CHECKER,  /* checkerboard */
    PAT_CIRCLE,   /* background on a circle (many collinear / cocircular sites) */
    N_PATS
};

static uint8_t *
make_image(int32_t w, int32_t h, int pat, uint32_t num, uint64_t *rng)
{
    const size_t n = (size_t)w * (size_t)h;
    uint8_t *im = malloc(n ? n : 1);

    cr_assert_not_null(im);
    memset(im, 1, n);
    switch (pat) {
    case PAT_RANDOM:
        for (size_t i = 0; i < n; i++)
            im[i] = twtest_rnd(rng, 1000) < num ? 0 : (uint8_t)(1 + twtest_rnd(rng, 255));
        break;
    case PAT_ONE:
        if (n)
            im[twtest_rnd(rng, (uint32_t)n)] = 0;
        break;
    case PAT_NONE:
        break;
    case PAT_ALL:
        memset(im, 0, n);
        break;
    case PAT_CORNER: {
        const uint32_t c = twtest_rnd(rng, 4);
        const int32_t x = c & 1 ? w - 1 : 0, y = c & 2 ? h - 1 : 0;

        im[(size_t)y * (size_t)w + (size_t)x] = 0;
        break;
    }
    case PAT_ROW: {
        const int32_t y = (int32_t)twtest_rnd(rng, (uint32_t)h);

        memset(im + (size_t)y * (size_t)w, 0, (size_t)w);
        break;
    }
    case PAT_COLUMN: {
        const int32_t x = (int32_t)twtest_rnd(rng, (uint32_t)w);

        for (int32_t y = 0; y < h; y++)
            im[(size_t)y * (size_t)w + (size_t)x] = 0;
        break;
    }
    case PAT_LINES:
        for (uint32_t k = twtest_rnd(rng, 4) + 1; k > 0; k--) {
            const int32_t x0 = (int32_t)twtest_rnd(rng, (uint32_t)w), y0 = (int32_t)twtest_rnd(rng, (uint32_t)h);
            const int32_t dx = (int32_t)twtest_rnd(rng, 3) - 1, dy = (int32_t)twtest_rnd(rng, 3) - 1;

            for (int32_t x = x0, y = y0; x >= 0 && x < w && y >= 0 && y < h; x += dx, y += dy) {
                im[(size_t)y * (size_t)w + (size_t)x] = 0;
                if (dx == 0 && dy == 0)
                    break;
            }
        }
        break;
    case PAT_CHECKER:
        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++)
                im[(size_t)y * (size_t)w + (size_t)x] = (uint8_t)((x + y) & 1);
        break;
    case PAT_CIRCLE: {
        const double cx = (w - 1) / 2.0, cy = (h - 1) / 2.0;
        const double r = (w < h ? w : h) / 2.5 + 0.5;

        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++) {
                const double d = sqrt((x - cx) * (x - cx) + (y - cy) * (y - cy));

                if (fabs(d - r) < 0.5)
                    im[(size_t)y * (size_t)w + (size_t)x] = 0;
            }
        break;
    }
    }
    return im;
}

/* ---- references --------------------------------------------------------------------------- */

/* Squared distance with spacing, in the order of the contract. */
static double
d2_sp(int64_t dx, int64_t dy, double sx, double sy)
{
    return (sx * sx) * (double)(dx * dx) + (sy * sy) * (double)(dy * dy);
}

/* Every pixel against every background pixel (tiny images only), isotropic, int64. */
static int64_t *
ref_brute(const uint8_t *im, int32_t w, int32_t h)
{
    const size_t n = (size_t)w * (size_t)h;
    int64_t *d = malloc((n ? n : 1) * sizeof *d);

    cr_assert_not_null(d);
    for (size_t p = 0; p < n; p++) {
        const int64_t px = (int64_t)(p % (size_t)w), py = (int64_t)(p / (size_t)w);
        int64_t best = D2_NONE;

        for (size_t q = 0; q < n; q++) {
            if (im[q] != 0)
                continue;
            const int64_t dx = px - (int64_t)(q % (size_t)w), dy = py - (int64_t)(q / (size_t)w);

            if (dx * dx + dy * dy < best)
                best = dx * dx + dy * dy;
        }
        d[p] = best;
    }
    return d;
}

/*
 * Naive separable reference: G(x, y) = distance to the nearest background row of column x
 * (a scan of the column), then d2(x, y) = min over columns x' of (x - x')^2 + G(x', y)^2, with
 * no envelope: O(w^2 h). Isotropic into d2i (D2_NONE: no background), with spacing into d2d
 * (+inf); either may be NULL.
 */
static void
ref_separable(const uint8_t *im, int32_t w, int32_t h, double sx, double sy, int64_t *d2i,
              double *d2d)
{
    const size_t n = (size_t)w * (size_t)h;
    int64_t *g = malloc((n ? n : 1) * sizeof *g);

    cr_assert_not_null(g);
    for (int32_t x = 0; x < w; x++) {
        int64_t last = -1;

        for (int32_t y = 0; y < h; y++) {
            if (im[(size_t)y * (size_t)w + (size_t)x] == 0)
                last = y;
            g[(size_t)y * (size_t)w + (size_t)x] = last < 0 ? -1 : y - last;
        }
        last = -1;
        for (int32_t y = h - 1; y >= 0; y--) {
            int64_t *gp = &g[(size_t)y * (size_t)w + (size_t)x];

            if (im[(size_t)y * (size_t)w + (size_t)x] == 0)
                last = y;
            if (last >= 0 && (*gp < 0 || last - y < *gp))
                *gp = last - y;
        }
    }
    for (int32_t y = 0; y < h; y++) {
        const int64_t *gr = g + (size_t)y * (size_t)w;

        for (int32_t x = 0; x < w; x++) {
            int64_t bi = D2_NONE;
            double bd = INFINITY;

            for (int32_t c = 0; c < w; c++) {
                if (gr[c] < 0)
                    continue;
                if (d2i) {
                    const int64_t v = (int64_t)(x - c) * (x - c) + gr[c] * gr[c];

                    bi = v < bi ? v : bi;
                }
                if (d2d) {
                    const double v = d2_sp(x - c, gr[c], sx, sy);

                    bd = v < bd ? v : bd;
                }
            }
            if (d2i)
                d2i[(size_t)y * (size_t)w + (size_t)x] = bi;
            if (d2d)
                d2d[(size_t)y * (size_t)w + (size_t)x] = bd;
        }
    }
    free(g);
}

static int64_t *
ref_iso(const uint8_t *im, int32_t w, int32_t h)
{
    int64_t *d = malloc(((size_t)w * (size_t)h + 1) * sizeof *d);

    cr_assert_not_null(d);
    ref_separable(im, w, h, 1.0, 1.0, d, NULL);
    return d;
}

/* The output sample of a squared distance (+inf: none), as the format comments define it. */
static uint32_t
expect_sample(double d2, int format)
{
    if (format == TWI_EDT_F32) {
        const float f = (float)sqrt(d2);
        uint32_t u;

        memcpy(&u, &f, sizeof u);
        return u;
    }
    if (format == TWI_EDT_U16) {
        const double r = sqrt(d2) + 0.5;

        return r >= 65535.0 ? 65535u : (uint32_t)floor(r);
    }
    return d2 >= 4294967295.0 ? UINT32_MAX : (uint32_t)d2;
}

static double
d2_of(int64_t d)
{
    return d == D2_NONE ? INFINITY : (double)d;
}

/* ---- running the kernels ------------------------------------------------------------------ */

static size_t
format_size(int format)
{
    return format == TWI_EDT_U16 ? 2 : 4;
}

static tw_sample_type
format_type(int format)
{
    return format == TWI_EDT_F32 ? TW_F32 : format == TWI_EDT_U16 ? TW_U16 : TW_U32;
}

typedef struct run_opts {
    int format;
    bool idx;
    double sx, sy;
    int32_t m1, m2, m3;
    int64_t y0;               /* band */
    const int32_t *above;     /* host arrays [w] or NULL */
    const int32_t *below;
    int32_t pad;              /* samples of padding per row of every view */
    cudaStream_t stream;
    bool wavefront;
} run_opts;

static run_opts
opts_default(int format)
{
    run_opts o;

    memset(&o, 0, sizeof o);
    o.format = format;
    o.sx = o.sy = 1.0;
    return o;
}

/* Host buffers of one run, with the padding the views had. */
typedef struct result {
    int32_t w, h;
    uint8_t *out;
    int64_t ostride;
    uint32_t *idx;  /* NULL without indices */
    int64_t istride; /* bytes */
} result;

static void
result_free(result *r)
{
    free(r->out);
    free(r->idx);
    r->out = NULL;
    r->idx = NULL;
}

static uint32_t
out_at(const result *r, int format, int32_t x, int32_t y)
{
    const uint8_t *row = r->out + (int64_t)y * r->ostride;

    if (format == TWI_EDT_U16)
        return ((const uint16_t *)(const void *)row)[x];
    return ((const uint32_t *)(const void *)row)[x];
}

static const uint32_t *
idx_at(const result *r, int32_t x, int32_t y)
{
    return (const uint32_t *)(const void *)((const uint8_t *)r->idx + (int64_t)y * r->istride) +
           2 * (size_t)x;
}

static twi_edt_band
band_of(const run_opts *o, const int32_t *d_above, const int32_t *d_below)
{
    twi_edt_band b;

    memset(&b, 0, sizeof b);
    b.y0 = o->y0;
    b.above = d_above;
    b.below = d_below;
    b.sx = o->sx;
    b.sy = o->sy;
    b.format = o->format;
    b.m1 = o->m1;
    b.m2 = o->m2;
    b.m3 = o->m3;
    return b;
}

static int32_t *
device_ints(const int32_t *h, int32_t n)
{
    int32_t *d = NULL;

    if (!h)
        return NULL;
    cr_assert(eq(int, cudaMalloc((void **)&d, (size_t)(n ? n : 1) * sizeof *d), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(d, h, (size_t)n * sizeof *d, cudaMemcpyHostToDevice),
                 cudaSuccess));
    return d;
}

/* The CUDA kernel on device copies (padded rows, padding filled with PAD_BYTE); returns the
 * host copies of the outputs. */
static result
run_gpu(const uint8_t *im, int32_t w, int32_t h, const run_opts *o)
{
    const size_t ss = format_size(o->format);
    const int64_t bstride = (int64_t)w + o->pad;
    result r = {w, h, NULL, ((int64_t)w + o->pad) * (int64_t)ss, NULL,
                ((int64_t)w + o->pad) * 8};
    tw_tile_view bin = {NULL, bstride, w, h, 1, TW_U8, 0, o->y0};
    tw_tile_view out = {NULL, r.ostride, w, h, 1, format_type(o->format), 0, o->y0};
    tw_tile_view idx = {NULL, r.istride, w, h, 2, TW_U32, 0, o->y0};
    int32_t *d_above = device_ints(o->above, w), *d_below = device_ints(o->below, w);
    const twi_edt_band band = band_of(o, d_above, d_below);
    const size_t obytes = (size_t)r.ostride * (size_t)h, ibytes = (size_t)r.istride * (size_t)h;
    const size_t bytes = o->wavefront ? twi_cuda_edt_wavefront_scratch_size(w, h)
                                      : twi_cuda_edt_scratch_size(w, h, &band);
    void *scratch = NULL;
    uint8_t *hb = malloc((size_t)bstride * (size_t)h + 1);

    cr_assert_not_null(hb);
    memset(hb, 0x77, (size_t)bstride * (size_t)h);
    for (int32_t y = 0; y < h; y++)
        memcpy(hb + (size_t)y * (size_t)bstride, im + (size_t)y * (size_t)w, (size_t)w);
    cr_assert(eq(int, cudaMalloc(&bin.data, (size_t)bstride * (size_t)h + 1), cudaSuccess));
    cr_assert(eq(int, cudaMemcpy(bin.data, hb, (size_t)bstride * (size_t)h,
                                 cudaMemcpyHostToDevice),
                 cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&out.data, obytes + 4), cudaSuccess));
    cr_assert(eq(int, cudaMemset(out.data, PAD_BYTE, obytes), cudaSuccess));
    if (o->idx) {
        cr_assert(eq(int, cudaMalloc(&idx.data, ibytes + 8), cudaSuccess));
        cr_assert(eq(int, cudaMemset(idx.data, PAD_BYTE, ibytes), cudaSuccess));
    }
    cr_assert(gt(sz, bytes, 0));
    cr_assert(eq(int, cudaMalloc(&scratch, bytes), cudaSuccess));
    /* Garbage in the scratch: the kernels must not depend on its contents. The memsets run on
     * the legacy stream, which a non-blocking stream does not wait for: finish them first. */
    cr_assert(eq(int, cudaMemset(scratch, 0xC3, bytes), cudaSuccess));
    cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess));
    if (o->wavefront)
        cr_assert(eq(int, twi_cuda_edt_wavefront(&bin, &band, &out, o->idx ? &idx : NULL,
                                                 scratch, bytes, o->stream),
                     TW_OK));
    else
        cr_assert(eq(int, twi_cuda_edt(&bin, &band, &out, o->idx ? &idx : NULL, scratch, bytes,
                                       o->stream),
                     TW_OK));
    cr_assert(eq(int, cudaStreamSynchronize(o->stream), cudaSuccess));
    r.out = malloc(obytes + 1);
    cr_assert_not_null(r.out);
    cr_assert(eq(int, cudaMemcpy(r.out, out.data, obytes, cudaMemcpyDeviceToHost), cudaSuccess));
    if (o->idx) {
        r.idx = malloc(ibytes + 1);
        cr_assert_not_null(r.idx);
        cr_assert(eq(int, cudaMemcpy(r.idx, idx.data, ibytes, cudaMemcpyDeviceToHost),
                     cudaSuccess));
    }
    cudaFree(bin.data);
    cudaFree(out.data);
    cudaFree(idx.data);
    cudaFree(scratch);
    cudaFree(d_above);
    cudaFree(d_below);
    free(hb);
    return r;
}

/* The CPU twin on the same layout. */
static result
run_cpu(const uint8_t *im, int32_t w, int32_t h, const run_opts *o)
{
    const size_t ss = format_size(o->format);
    result r = {w, h, NULL, ((int64_t)w + o->pad) * (int64_t)ss, NULL,
                ((int64_t)w + o->pad) * 8};
    tw_tile_view bin = {(void *)im, w, w, h, 1, TW_U8, 0, o->y0};
    tw_tile_view out = {NULL, r.ostride, w, h, 1, format_type(o->format), 0, o->y0};
    tw_tile_view idx = {NULL, r.istride, w, h, 2, TW_U32, 0, o->y0};
    const twi_edt_band band = band_of(o, o->above, o->below);
    const size_t obytes = (size_t)r.ostride * (size_t)h, ibytes = (size_t)r.istride * (size_t)h;

    r.out = malloc(obytes + 1);
    cr_assert_not_null(r.out);
    memset(r.out, PAD_BYTE, obytes);
    out.data = r.out;
    if (o->idx) {
        r.idx = malloc(ibytes + 1);
        cr_assert_not_null(r.idx);
        memset(r.idx, PAD_BYTE, ibytes);
        idx.data = r.idx;
    }
    if (o->wavefront)
        cr_assert(eq(int, twi_omp_edt_wavefront(&bin, &band, &out, o->idx ? &idx : NULL, 2),
                     TW_OK));
    else
        cr_assert(eq(int, twi_omp_edt(&bin, &band, &out, o->idx ? &idx : NULL, 2), TW_OK));
    return r;
}

static const char *
fmt_name(int format)
{
    return format == TWI_EDT_F32 ? "f32" : format == TWI_EDT_U16 ? "u16" : "sq32";
}

/* The padding bytes of every row are untouched. */
static void
expect_padding(const result *r, const run_opts *o, const char *what)
{
    const size_t ss = format_size(o->format);

    for (int32_t y = 0; y < r->h; y++) {
        const uint8_t *row = r->out + (int64_t)y * r->ostride;

        for (size_t b = (size_t)r->w * ss; b < (size_t)r->ostride; b++)
            if (row[b] != PAD_BYTE)
                cr_fatal("%s: %dx%d %s: output padding byte %zu of row %d written", what, r->w,
                         r->h, fmt_name(o->format), b, y);
        if (r->idx) {
            const uint8_t *irow = (const uint8_t *)r->idx + (int64_t)y * r->istride;

            for (size_t b = (size_t)r->w * 8; b < (size_t)r->istride; b++)
                if (irow[b] != PAD_BYTE)
                    cr_fatal("%s: %dx%d: index padding byte %zu of row %d written", what, r->w,
                             r->h, b, y);
        }
    }
}

/*
 * Pixel (x, y) of the result (band row y, image row o->y0 + y) has the sample of d2 (isotropic;
 * the reference row of band row 0 is d2_row0 of the wi-wide array d2) and, with indices, names
 * a background pixel of the whole image `img` (wi x hi, image frame) at exactly that squared
 * distance, or (2^32 - 1, 2^32 - 1) when there is none.
 */
static void
expect_iso(const result *r, const run_opts *o, const int64_t *d2, int64_t d2_row0,
           const uint8_t *img, int32_t wi, int32_t hi, const char *what)
{
    for (int32_t y = 0; y < r->h; y++)
        for (int32_t x = 0; x < r->w; x++) {
            const int64_t want = d2[(size_t)(d2_row0 + y) * (size_t)wi + (size_t)x];
            const uint32_t got = out_at(r, o->format, x, y);
            const uint32_t exp = expect_sample(d2_of(want), o->format);

            if (got != exp)
                cr_fatal("%s: %dx%d (band y0 %lld of %dx%d) %s m %d/%d/%d pad %d: pixel (%d,%d) "
                         "got 0x%x want 0x%x (d2 %lld)",
                         what, r->w, r->h, (long long)o->y0, wi, hi, fmt_name(o->format), o->m1,
                         o->m2, o->m3, o->pad, x, y, got, exp, (long long)want);
            if (!r->idx)
                continue;
            const uint32_t *ix = idx_at(r, x, y);

            if (want == D2_NONE) {
                if (ix[0] != UINT32_MAX || ix[1] != UINT32_MAX)
                    cr_fatal("%s: %dx%d: pixel (%d,%d) index (%u,%u), want none", what, r->w, r->h,
                             x, y, ix[0], ix[1]);
                continue;
            }
            if (ix[0] >= (uint32_t)hi || ix[1] >= (uint32_t)wi ||
                img[(size_t)ix[0] * (size_t)wi + ix[1]] != 0)
                cr_fatal("%s: %dx%d: pixel (%d,%d) index (%u,%u) is not a background pixel", what,
                         r->w, r->h, x, y, ix[0], ix[1]);
            const int64_t dy = (int64_t)ix[0] - (o->y0 + y), dx = (int64_t)ix[1] - x;

            if (dx * dx + dy * dy != want)
                cr_fatal("%s: %dx%d: pixel (%d,%d) index (%u,%u) at d2 %lld, want %lld", what,
                         r->w, r->h, x, y, ix[0], ix[1], (long long)(dx * dx + dy * dy),
                         (long long)want);
        }
    expect_padding(r, o, what);
}

/* GPU and CPU buffers are the same bytes (outputs; padding included). */
static void
expect_same_bytes(const result *g, const result *c, const run_opts *o, const char *what)
{
    const size_t obytes = (size_t)g->ostride * (size_t)g->h;

    if (memcmp(g->out, c->out, obytes) == 0)
        return;
    for (int32_t y = 0; y < g->h; y++)
        for (int32_t x = 0; x < g->w; x++)
            if (out_at(g, o->format, x, y) != out_at(c, o->format, x, y))
                cr_fatal("%s: %dx%d %s: CUDA 0x%x, CPU twin 0x%x at (%d,%d)", what, g->w, g->h,
                         fmt_name(o->format), out_at(g, o->format, x, y),
                         out_at(c, o->format, x, y), x, y);
    cr_fatal("%s: %dx%d: CUDA and CPU buffers differ in the padding", what, g->w, g->h);
}

/* One isotropic case: GPU against the reference d2, and against the CPU twin's bytes. */
static void
check_iso(const uint8_t *im, int32_t w, int32_t h, const int64_t *d2, const run_opts *o,
          const char *what)
{
    result g = run_gpu(im, w, h, o);
    result c = run_cpu(im, w, h, o);

    expect_iso(&g, o, d2, 0, im, w, h, what);
    expect_same_bytes(&g, &c, o, what);
    result_free(&g);
    result_free(&c);
}

static int32_t
rand_m(uint64_t *rng, int32_t side)
{
    switch (twtest_rnd(rng, 5)) {
    case 0:
    case 1:
        return 0;
    case 2:
        return 1 + (int32_t)twtest_rnd(rng, 8);
    case 3:
        return 1 + (int32_t)twtest_rnd(rng, (uint32_t)side + 1);
    default:
        return 1 + (int32_t)twtest_rnd(rng, 5000);
    }
}

static void
random_case(uint64_t *rng, int32_t maxw, int32_t maxh, cudaStream_t stream, const char *what)
{
    static const uint32_t fracs[] = {1, 10, 50, 200, 500, 900, 990};
    int32_t w = 1 + (int32_t)twtest_rnd(rng, (uint32_t)maxw), h = 1 + (int32_t)twtest_rnd(rng, (uint32_t)maxh);
    const int pat = twtest_rnd(rng, 3) ? PAT_RANDOM : (int)twtest_rnd(rng, N_PATS);
    run_opts o = opts_default((int)twtest_rnd(rng, 3));
    uint8_t *im;
    int64_t *d2;

    switch (twtest_rnd(rng, 8)) {
    case 0: w = 1; break;
    case 1: h = 1; break;
    case 2: w = 1 + (int32_t)twtest_rnd(rng, 4); break;
    case 3: h = 1 + (int32_t)twtest_rnd(rng, 4); break;
    default: break;
    }
    o.idx = twtest_rnd(rng, 2);
    o.m1 = rand_m(rng, h);
    o.m2 = rand_m(rng, w);
    o.m3 = rand_m(rng, w);
    o.pad = twtest_rnd(rng, 3) ? 0 : (int32_t)twtest_rnd(rng, 9);
    o.stream = stream;
    im = make_image(w, h, pat, fracs[twtest_rnd(rng, 7)], rng);
    d2 = ref_iso(im, w, h);
    check_iso(im, w, h, d2, &o, what);
    free(d2);
    free(im);
}

/* ---- exact, isotropic --------------------------------------------------------------------- */

Test(edt_cuda, small_tiny_images_match_brute_force)
{
    /* Every image up to 6 x 6 with a few random patterns each, every format, indices: the GPU
     * equals brute force (every pixel against every background pixel) and the CPU twin. */
    uint64_t rng = 0x5eed0001;

    twtest_need_gpu();
    for (int32_t w = 1; w <= 6; w++)
        for (int32_t h = 1; h <= 6; h++)
            for (int k = 0; k < 3; k++) {
                uint8_t *im = make_image(w, h, PAT_RANDOM, 100 + 300 * (uint32_t)k, &rng);
                int64_t *d2 = ref_brute(im, w, h);
                run_opts o = opts_default(k);

                o.idx = true;
                check_iso(im, w, h, d2, &o, "tiny");
                free(d2);
                free(im);
            }
}

Test(edt_cuda, small_separable_reference_matches_brute_force)
{
    /* The naive separable reference the other tests use equals brute force (so that they
     * rest on the definition, not on separability taken on trust). */
    uint64_t rng = 0x5eed0002;

    for (int k = 0; k < 40; k++) {
        const int32_t w = 1 + (int32_t)twtest_rnd(&rng, 40), h = 1 + (int32_t)twtest_rnd(&rng, 40);
        uint8_t *im = make_image(w, h, (int)twtest_rnd(&rng, N_PATS), 1 + twtest_rnd(&rng, 999), &rng);
        int64_t *a = ref_brute(im, w, h), *b = ref_iso(im, w, h);

        cr_assert(eq(int, memcmp(a, b, (size_t)w * (size_t)h * sizeof *a), 0),
                  "separable reference differs from brute force on %dx%d", w, h);
        free(a);
        free(b);
        free(im);
    }
}

Test(edt_cuda, small_random_images_match_reference_and_cpu)
{
    /* Random images from 1 x 1 to 300 x 300 (and 1 x N, N x 1, 2-4 wide), background from one
     * pixel to 99 %, random formats, indices, padding and m1 / m2 / m3 (automatic, small,
     * up to the side, far beyond it), on a non-default stream. */
    uint64_t rng = 0x5eed0003;
    cudaStream_t s;

    twtest_need_gpu();
    cr_assert(eq(int, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess));
    for (int k = 0; k < 160; k++)
        random_case(&rng, 64, 64, s, "random small");
    for (int k = 0; k < 30; k++)
        random_case(&rng, 300, 300, s, "random");
    cudaStreamDestroy(s);
}

Test(edt_cuda, small_odd_shapes)
{
    /* 1 x 1, single rows and columns, 1000 x 3, 3 x 1000 and sizes around multiples of 32,
     * with several background fractions and every format. */
    static const int32_t shapes[][2] = {{1, 1},    {2, 1},   {1, 2},   {1, 300}, {300, 1},
                                        {1, 1000}, {1000, 1}, {1000, 3}, {3, 1000}, {31, 33},
                                        {32, 32},  {33, 31}, {63, 65}, {64, 64}, {65, 97},
                                        {97, 2},   {2, 97},  {129, 7}, {7, 129}};
    static const uint32_t fracs[] = {2, 50, 500, 990};
    uint64_t rng = 0x5eed0004;

    twtest_need_gpu();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t f = 0; f < sizeof fracs / sizeof fracs[0]; f++) {
            const int32_t w = shapes[s][0], h = shapes[s][1];
            uint8_t *im = make_image(w, h, PAT_RANDOM, fracs[f], &rng);
            int64_t *d2 = ref_iso(im, w, h);
            run_opts o = opts_default((int)((s + f) % 3));

            o.idx = (s + f) % 2 == 0;
            check_iso(im, w, h, d2, &o, "odd shape");
            free(d2);
            free(im);
        }
}

Test(edt_cuda, small_special_images)
{
    /* No background (+inf / 65535 / 2^32 - 1, indices none), all background (0, index =
     * itself), one pixel in a corner (the largest distances), a background row, a column,
     * lines, a checkerboard, a circle (cocircular sites: ties in the envelope). */
    static const int32_t shapes[][2] = {{1, 1}, {5, 3}, {77, 41}, {200, 150}, {1, 257}, {301, 1}};
    uint64_t rng = 0x5eed0005;

    twtest_need_gpu();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int pat = PAT_ONE; pat < N_PATS; pat++)
            for (int format = 0; format < 3; format++) {
                const int32_t w = shapes[s][0], h = shapes[s][1];
                uint8_t *im = make_image(w, h, pat, 0, &rng);
                int64_t *d2 = ref_iso(im, w, h);
                run_opts o = opts_default(format);

                o.idx = true;
                o.pad = format;
                check_iso(im, w, h, d2, &o, "special");
                free(d2);
                free(im);
            }
}

Test(edt_cuda, small_no_background_gives_inf_and_none)
{
    /* The documented values when no background pixel exists anywhere. */
    static const uint32_t want[3] = {0x7f800000u, 65535u, UINT32_MAX};
    uint8_t *im = make_image(45, 37, PAT_NONE, 0, NULL);

    twtest_need_gpu();
    for (int format = 0; format < 3; format++) {
        run_opts o = opts_default(format);
        result g;

        o.idx = true;
        g = run_gpu(im, 45, 37, &o);
        for (int32_t y = 0; y < 37; y++)
            for (int32_t x = 0; x < 45; x++) {
                cr_assert(eq(u32, out_at(&g, format, x, y), want[format]));
                cr_assert(eq(u32, idx_at(&g, x, y)[0], UINT32_MAX));
                cr_assert(eq(u32, idx_at(&g, x, y)[1], UINT32_MAX));
            }
        result_free(&g);
    }
    free(im);
}

Test(edt_cuda, small_band_parameters_do_not_change_the_result)
{
    /* m1, m2, m3 from 1 to far beyond the size, dividing it or not: the same bytes. */
    static const int32_t ms[] = {0, 1, 2, 3, 5, 7, 13, 64, 100, 1000, 1 << 20};
    static const int32_t shapes[][2] = {{150, 97}, {97, 150}, {333, 40}, {40, 333}};
    uint64_t rng = 0x5eed0006;
    const int n = (int)(sizeof ms / sizeof ms[0]);

    twtest_need_gpu();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int32_t w = shapes[s][0], h = shapes[s][1];
        uint8_t *im = make_image(w, h, PAT_RANDOM, s % 2 ? 5 : 300, &rng);
        int64_t *d2 = ref_iso(im, w, h);

        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++) {
                run_opts o = opts_default(TWI_EDT_SQ32);
                result g;

                o.m1 = ms[a];
                o.m2 = ms[b];
                o.m3 = ms[(a * 3 + b) % n];
                o.idx = a % 2 == 0;
                if ((a + b) % 3 != 0)
                    continue;
                g = run_gpu(im, w, h, &o);
                expect_iso(&g, &o, d2, 0, im, w, h, "band parameters");
                result_free(&g);
            }
        free(d2);
        free(im);
    }
}

/* Per column, the nearest background row above image row y0 and at or below y1 (-1: none). */
static void
naive_bounds(const uint8_t *im, int32_t w, int32_t y0, int32_t y1, int32_t hi, int32_t *above,
             int32_t *below)
{
    for (int32_t x = 0; x < w; x++) {
        above[x] = below[x] = -1;
        for (int32_t y = y0 - 1; y >= 0; y--)
            if (im[(size_t)y * (size_t)w + (size_t)x] == 0) {
                above[x] = y;
                break;
            }
        for (int32_t y = y1; y < hi; y++)
            if (im[(size_t)y * (size_t)w + (size_t)x] == 0) {
                below[x] = y;
                break;
            }
    }
}

/* Band rows [y0, y1) of the image `im` (w x hi) through both kernels with o's above / below:
 * equal to the reference `d2` (of image rows [ya, ...)) and to each other. */
static void
check_band(const uint8_t *im, int32_t w, int32_t hi, int32_t y1, const int64_t *d2, int32_t ya,
           const run_opts *o, const char *what)
{
    const int32_t y0 = (int32_t)o->y0;
    result g = run_gpu(im + (size_t)y0 * (size_t)w, w, y1 - y0, o);
    result c = run_cpu(im + (size_t)y0 * (size_t)w, w, y1 - y0, o);

    expect_iso(&g, o, d2, y0 - ya, im, w, hi, what);
    expect_same_bytes(&g, &c, o, what);
    result_free(&g);
    result_free(&c);
}

Test(edt_cuda, small_bands_with_above_below_equal_whole_image)
{
    /* A random image cut into bands of random heights: each band, given its rows, y0 and the
     * naive above / below rows, gives exactly the whole image's rows (indices in the image
     * frame), and the CPU twin's bytes. Sparse images make most distances cross bands. A
     * band given no `above` (or `below`) equals the image cut at its top (bottom) edge. */
    uint64_t rng = 0x5eed0007;

    twtest_need_gpu();
    for (int k = 0; k < 12; k++) {
        const int32_t w = 1 + (int32_t)twtest_rnd(&rng, 150), hi = 2 + (int32_t)twtest_rnd(&rng, 200);
        uint8_t *im = make_image(w, hi, k % 4 == 3 ? (int)twtest_rnd(&rng, N_PATS) : PAT_RANDOM,
                                 k % 2 ? 3 : 100, &rng);
        int64_t *d2 = ref_iso(im, w, hi);
        int32_t *above = malloc((size_t)w * sizeof *above);
        int32_t *below = malloc((size_t)w * sizeof *below);

        cr_assert(above && below);
        for (int32_t y0 = 0; y0 < hi;) {
            const int32_t hb = 1 + (int32_t)twtest_rnd(&rng, (uint32_t)(k % 3 == 0 ? 8 : hi / 2 + 1));
            const int32_t y1 = y0 + hb < hi ? y0 + hb : hi;
            run_opts o = opts_default((int)twtest_rnd(&rng, 3));

            naive_bounds(im, w, y0, y1, hi, above, below);
            o.idx = true;
            o.y0 = y0;
            o.above = twtest_rnd(&rng, 8) ? above : NULL;
            o.below = twtest_rnd(&rng, 8) ? below : NULL;
            o.m1 = rand_m(&rng, y1 - y0);
            o.m2 = rand_m(&rng, w);
            o.m3 = rand_m(&rng, w);
            if (o.above && o.below) {
                check_band(im, w, hi, y1, d2, 0, &o, "band");
            } else {
                const int32_t ya = o.above ? 0 : y0, yb = o.below ? hi : y1;
                int64_t *sd = ref_iso(im + (size_t)ya * (size_t)w, w, yb - ya);

                check_band(im, w, hi, y1, sd, ya, &o, "band (a side missing)");
                free(sd);
            }
            y0 = y1;
        }
        free(above);
        free(below);
        free(d2);
        free(im);
    }
}

Test(edt_cuda, small_band_with_only_outside_background)
{
    /* A band with no background of its own: every distance comes from above / below. */
    const int32_t w = 70, hi = 90, y0 = 30, y1 = 61;
    uint8_t *im = make_image(w, hi, PAT_NONE, 0, NULL);
    int32_t above[70], below[70];
    int64_t *d2;

    twtest_need_gpu();
    im[(size_t)3 * w + 5] = 0;
    im[(size_t)20 * w + 60] = 0;
    im[(size_t)80 * w + 33] = 0;
    d2 = ref_iso(im, w, hi);
    naive_bounds(im, w, y0, y1, hi, above, below);
    for (int format = 0; format < 3; format++) {
        run_opts o = opts_default(format);

        o.idx = true;
        o.y0 = y0;
        o.above = above;
        o.below = below;
        check_band(im, w, hi, y1, d2, 0, &o, "outside background");
    }
    free(d2);
    free(im);
}

/* ---- anisotropic spacing ------------------------------------------------------------------ */

Test(edt_cuda, small_spacing_matches_reference)
{
    /* Random spacings: F32 within float rounding of the reference minimum of
     * (sx sx) dx^2 + (sy sy) dy^2, U16 within 1, indices a background pixel at that distance
     * up to rounding; the CPU twin within the same bounds. Integer spacings (1, 2), (3, 1)
     * keep every value exact in double: there the bytes equal the reference exactly. */
    static const double fixed[][2] = {{1.0, 2.0}, {3.0, 1.0}, {2.0, 2.0}};
    uint64_t rng = 0x5eed0008;

    twtest_need_gpu();
    for (int k = 0; k < 40; k++) {
        const int32_t w = 1 + (int32_t)twtest_rnd(&rng, 120), h = 1 + (int32_t)twtest_rnd(&rng, 120);
        uint8_t *im = make_image(w, h, k % 5 == 4 ? (int)twtest_rnd(&rng, N_PATS) : PAT_RANDOM,
                                 1 + twtest_rnd(&rng, 400), &rng);
        double *d2 = malloc(((size_t)w * (size_t)h + 1) * sizeof *d2);
        const bool exact = k < 3;
        run_opts o = opts_default(k % 2 ? TWI_EDT_U16 : TWI_EDT_F32);
        result g, c;

        cr_assert_not_null(d2);
        o.sx = exact ? fixed[k][0] : 0.2 + twtest_rnd(&rng, 1000) / 250.0;
        o.sy = exact ? fixed[k][1] : 0.2 + twtest_rnd(&rng, 1000) / 250.0;
        o.idx = true;
        o.m1 = rand_m(&rng, h);
        o.m2 = rand_m(&rng, w);
        o.m3 = rand_m(&rng, w);
        ref_separable(im, w, h, o.sx, o.sy, NULL, d2);
        g = run_gpu(im, w, h, &o);
        c = run_cpu(im, w, h, &o);
        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++) {
                const double want = d2[(size_t)y * (size_t)w + (size_t)x];
                const uint32_t *ix = idx_at(&g, x, y);
                const uint32_t got = out_at(&g, o.format, x, y), cpu = out_at(&c, o.format, x, y);
                const uint32_t exp = expect_sample(want, o.format);
                double dg;

                if (isinf(want)) {
                    cr_assert(eq(u32, got, exp));
                    cr_assert(eq(u32, ix[0], UINT32_MAX));
                    continue;
                }
                cr_assert(lt(u32, ix[0], (uint32_t)h));
                cr_assert(lt(u32, ix[1], (uint32_t)w));
                cr_assert(eq(u8, im[(size_t)ix[0] * (size_t)w + ix[1]], 0));
                dg = d2_sp((int64_t)ix[1] - x, (int64_t)ix[0] - y, o.sx, o.sy);
                if (exact) {
                    cr_assert(eq(u32, got, exp), "spacing %g,%g at (%d,%d)", o.sx, o.sy, x, y);
                    cr_assert(eq(u32, got, cpu), "spacing %g,%g at (%d,%d)", o.sx, o.sy, x, y);
                    cr_assert(eq(dbl, dg, want));
                    continue;
                }
                cr_assert(dg <= want * (1 + 1e-12) + 1e-300, "index of (%d,%d) not nearest", x, y);
                if (o.format == TWI_EDT_F32) {
                    float fg, fc, fe;

                    memcpy(&fg, &got, sizeof fg);
                    memcpy(&fc, &cpu, sizeof fc);
                    memcpy(&fe, &exp, sizeof fe);
                    cr_assert(fabsf(fg - fe) <= 1e-6f * fe, "(%d,%d): %.9g vs %.9g", x, y, fg, fe);
                    cr_assert(fabsf(fc - fe) <= 1e-6f * fe, "(%d,%d): cpu %.9g vs %.9g", x, y, fc,
                              fe);
                } else {
                    cr_assert(got + 1 >= exp && got <= exp + 1, "(%d,%d): %u vs %u", x, y, got,
                              exp);
                }
            }
        result_free(&g);
        result_free(&c);
        free(d2);
        free(im);
    }
}

/* ---- arguments ------------------------------------------------------------------------------ */

Test(edt_cuda, small_rejects_invalid_arguments)
{
    /* The shared check (twi_edt_check) plus the scratch: nothing is enqueued. */
    uint8_t *d_in = NULL;
    float *d_out = NULL;
    uint32_t *d_idx = NULL;
    void *scr = NULL;
    tw_tile_view bin = {NULL, 16, 16, 8, 1, TW_U8, 0, 0};
    tw_tile_view out = {NULL, 64, 16, 8, 1, TW_F32, 0, 0};
    tw_tile_view idx = {NULL, 128, 16, 8, 2, TW_U32, 0, 0};
    twi_edt_band b;
    size_t bytes;

    twtest_need_gpu();
    memset(&b, 0, sizeof b);
    b.sx = b.sy = 1.0;
    bytes = twi_cuda_edt_scratch_size(16, 8, &b);
    cr_assert(eq(int, cudaMalloc((void **)&d_in, 16 * 8), cudaSuccess));
    cr_assert(eq(int, cudaMalloc((void **)&d_out, 16 * 8 * 4), cudaSuccess));
    cr_assert(eq(int, cudaMalloc((void **)&d_idx, 16 * 8 * 8), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&scr, bytes), cudaSuccess));
    cr_assert(eq(int, cudaMemset(d_in, 1, 16 * 8), cudaSuccess));
    bin.data = d_in;
    out.data = d_out;
    idx.data = d_idx;
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, &idx, scr, bytes, NULL), TW_OK));
    cr_assert(eq(int, twi_cuda_edt(NULL, &b, &out, NULL, scr, bytes, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_cuda_edt(&bin, NULL, &out, NULL, scr, bytes, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, NULL, NULL, scr, bytes, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, NULL, NULL, bytes, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, NULL, scr, bytes - 1, NULL), TW_E_INVALID));
    b.format = 7;
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, NULL, scr, bytes, NULL), TW_E_INVALID));
    b.format = TWI_EDT_U16; /* out is F32 */
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, NULL, scr, bytes, NULL), TW_E_INVALID));
    b.format = TWI_EDT_SQ32;
    out.type = TW_U32;
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, NULL, scr, bytes, NULL), TW_OK));
    b.sy = 2.0; /* sq32 is isotropic only */
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, NULL, scr, bytes, NULL), TW_E_INVALID));
    b.format = TWI_EDT_F32;
    out.type = TW_F32;
    b.sy = 0.0;
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, NULL, scr, bytes, NULL), TW_E_INVALID));
    b.sy = NAN;
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, NULL, scr, bytes, NULL), TW_E_INVALID));
    b.sy = 1.0;
    b.y0 = -1;
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, NULL, scr, bytes, NULL), TW_E_INVALID));
    b.y0 = TWI_EDT_MAX_SIDE - 7; /* band ends beyond the largest image */
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, NULL, scr, bytes, NULL), TW_E_INVALID));
    b.y0 = 0;
    idx.channels = 1;
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, &idx, scr, bytes, NULL), TW_E_INVALID));
    idx.channels = 2;
    out.h = 7;
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, NULL, scr, bytes, NULL), TW_E_INVALID));
    out.h = 8;
    bin.type = TW_U16;
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, NULL, scr, bytes, NULL), TW_E_INVALID));
    bin.type = TW_U8;
    /* The wavefront takes whole images only. */
    {
        const size_t wb = twi_cuda_edt_wavefront_scratch_size(16, 8);
        void *ws = NULL;

        cr_assert(eq(int, cudaMalloc(&ws, wb), cudaSuccess));
        cr_assert(eq(int, twi_cuda_edt_wavefront(&bin, &b, &out, &idx, ws, wb, NULL), TW_OK));
        cr_assert(eq(int, twi_cuda_edt_wavefront(&bin, &b, &out, NULL, ws, wb - 1, NULL),
                     TW_E_INVALID));
        b.y0 = 3;
        cr_assert(eq(int, twi_cuda_edt_wavefront(&bin, &b, &out, NULL, ws, wb, NULL),
                     TW_E_INVALID));
        b.y0 = 0;
        b.above = (const int32_t *)d_idx;
        cr_assert(eq(int, twi_cuda_edt_wavefront(&bin, &b, &out, NULL, ws, wb, NULL),
                     TW_E_INVALID));
        b.above = NULL;
        cudaFree(ws);
    }
    cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess));
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFree(d_idx);
    cudaFree(scr);
}

Test(edt_cuda, small_empty_views_are_noops)
{
    /* w or h = 0: TW_OK, nothing enqueued, no scratch needed. */
    tw_tile_view bin = {NULL, 0, 0, 5, 1, TW_U8, 0, 0};
    tw_tile_view out = {NULL, 0, 0, 5, 1, TW_F32, 0, 0};
    twi_edt_band b;

    twtest_need_gpu();
    memset(&b, 0, sizeof b);
    b.sx = b.sy = 1.0;
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, NULL, NULL, 0, NULL), TW_OK));
    cr_assert(eq(int, twi_cuda_edt_wavefront(&bin, &b, &out, NULL, NULL, 0, NULL), TW_OK));
    bin.w = out.w = 5;
    bin.h = out.h = 0;
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, NULL, NULL, 0, NULL), TW_OK));
}

Test(edt_cuda, small_scratch_size_is_pure_and_grows)
{
    /* The size query needs no device: same answer twice, larger for larger images, about 12
     * bytes a pixel, 0 beyond the largest side. */
    twi_edt_band b;
    size_t s1, s2, s3;

    memset(&b, 0, sizeof b);
    b.sx = b.sy = 1.0;
    s1 = twi_cuda_edt_scratch_size(1000, 1000, &b);
    s2 = twi_cuda_edt_scratch_size(1000, 1000, &b);
    s3 = twi_cuda_edt_scratch_size(2000, 1000, &b);
    cr_assert(eq(sz, s1, s2));
    cr_assert(gt(sz, s3, s1));
    cr_assert(ge(sz, s1, (size_t)12 * 1000 * 1000));
    cr_assert(le(sz, s1, (size_t)14 * 1000 * 1000));
    cr_assert(eq(sz, twi_cuda_edt_scratch_size(1000, 1000, NULL), s1));
    cr_assert(eq(sz, twi_cuda_edt_scratch_size(TWI_EDT_MAX_SIDE + 1, 4, &b), 0));
    cr_assert(eq(sz, twi_cuda_edt_scratch_size(-1, 4, &b), 0));
    cr_assert(gt(sz, twi_cuda_edt_wavefront_scratch_size(100, 100), (size_t)100 * 100 * 16));
    cr_assert(eq(sz, twi_cuda_edt_wavefront_scratch_size(TWI_EDT_MAX_SIDE + 1, 4), 0));
}

/* ---- wavefront ------------------------------------------------------------------------------ */

/* The wavefront result in every format: never below the exact distance, indices naming a
 * background pixel, the output the conversion of that pixel's distance. Returns the pixels
 * above exact (SQ32 run). */
static int64_t
check_wavefront(const uint8_t *im, int32_t w, int32_t h, const int64_t *exact, cudaStream_t s,
                const char *what)
{
    int64_t above = 0;

    for (int format = 0; format < 3; format++) {
        run_opts o = opts_default(format);
        result g;

        o.wavefront = true;
        o.idx = true;
        o.stream = s;
        g = run_gpu(im, w, h, &o);
        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++) {
                const int64_t want = exact[(size_t)y * (size_t)w + (size_t)x];
                const uint32_t *ix = idx_at(&g, x, y);
                int64_t d;

                if (want == D2_NONE) {
                    cr_assert(eq(u32, ix[0], UINT32_MAX), "%s: (%d,%d)", what, x, y);
                    cr_assert(eq(u32, ix[1], UINT32_MAX), "%s: (%d,%d)", what, x, y);
                    cr_assert(eq(u32, out_at(&g, format, x, y), expect_sample(INFINITY, format)));
                    continue;
                }
                cr_assert(lt(u32, ix[0], (uint32_t)h), "%s: (%d,%d)", what, x, y);
                cr_assert(lt(u32, ix[1], (uint32_t)w), "%s: (%d,%d)", what, x, y);
                cr_assert(eq(u8, im[(size_t)ix[0] * (size_t)w + ix[1]], 0), "%s: (%d,%d)", what,
                          x, y);
                d = ((int64_t)ix[0] - y) * ((int64_t)ix[0] - y) +
                    ((int64_t)ix[1] - x) * ((int64_t)ix[1] - x);
                cr_assert(ge(i64, d, want), "%s: (%d,%d) wavefront %lld below exact %lld", what,
                          x, y, (long long)d, (long long)want);
                cr_assert(eq(u32, out_at(&g, format, x, y), expect_sample((double)d, format)),
                          "%s: %s (%d,%d)", what, fmt_name(format), x, y);
                if (format == TWI_EDT_SQ32)
                    above += d > want;
            }
        expect_padding(&g, &o, what);
        result_free(&g);
    }
    return above;
}

Test(edt_cuda, small_wavefront_never_below_exact)
{
    /* Random images: the IWPP wavefront is approximate, but never nearer than the exact
     * distance, and its indices are background pixels at the reported distance. */
    uint64_t rng = 0x5eed0009;
    int64_t above = 0, total = 0;

    twtest_need_gpu();
    for (int k = 0; k < 30; k++) {
        const int32_t w = 1 + (int32_t)twtest_rnd(&rng, 150), h = 1 + (int32_t)twtest_rnd(&rng, 150);
        uint8_t *im = make_image(w, h, k % 3 == 2 ? (int)twtest_rnd(&rng, N_PATS) : PAT_RANDOM,
                                 1 + twtest_rnd(&rng, 300), &rng);
        int64_t *d2 = ref_iso(im, w, h);

        above += check_wavefront(im, w, h, d2, NULL, "wavefront");
        total += (int64_t)w * h;
        free(d2);
        free(im);
    }
    cr_log_info("wavefront: %lld of %lld pixels above the exact distance", (long long)above,
                (long long)total);
}

Test(edt_cuda, small_wavefront_exact_on_simple_images)
{
    /* One background pixel, all background, none, a background row: exact. */
    static const int pats[] = {PAT_ONE, PAT_CORNER, PAT_ALL, PAT_NONE, PAT_ROW};
    uint64_t rng = 0x5eed000a;

    twtest_need_gpu();
    for (size_t p = 0; p < sizeof pats / sizeof pats[0]; p++) {
        const int32_t w = 1 + (int32_t)twtest_rnd(&rng, 120), h = 1 + (int32_t)twtest_rnd(&rng, 120);
        uint8_t *im = make_image(w, h, pats[p], 0, &rng);
        int64_t *d2 = ref_iso(im, w, h);

        cr_assert(eq(i64, check_wavefront(im, w, h, d2, NULL, "wavefront simple"), 0),
                  "pattern %d %dx%d", pats[p], w, h);
        free(d2);
        free(im);
    }
}

/* ---- large images --------------------------------------------------------------------------- */

/* Exact d2 of sampled rows by the naive separable rule (column scans of the whole image). */
static void
sampled_rows_reference(const uint8_t *im, int32_t w, int32_t h, const int32_t *rows, int nrows,
                       int64_t *d2)
{
    int64_t *g = malloc((size_t)w * sizeof *g);

    cr_assert_not_null(g);
    for (int k = 0; k < nrows; k++) {
        const int32_t y = rows[k];

        for (int32_t x = 0; x < w; x++) {
            int64_t best = -1;

            for (int32_t yy = 0; yy < h; yy++)
                if (im[(size_t)yy * (size_t)w + (size_t)x] == 0 &&
                    (best < 0 || llabs((int64_t)yy - y) < best))
                    best = llabs((int64_t)yy - y);
            g[x] = best;
        }
        for (int32_t x = 0; x < w; x++) {
            int64_t bi = D2_NONE;

            for (int32_t c = 0; c < w; c++)
                if (g[c] >= 0 && (int64_t)(x - c) * (x - c) + g[c] * g[c] < bi)
                    bi = (int64_t)(x - c) * (x - c) + g[c] * g[c];
            d2[(size_t)k * (size_t)w + (size_t)x] = bi;
        }
    }
    free(g);
}

Test(edt_cuda_large, image_4097x3001_matches_cpu, .timeout = TWTEST_TIMEOUT(600))
{
    /* 4097 x 3001 (no size a multiple of anything), 0.05 %, 1 % and 30 % background: the
     * same bytes as the CPU twin in every format, valid indices, and sampled rows equal to a
     * naive reference. */
    static const uint32_t per100k[] = {50, 1000, 30000};
    const int32_t w = 4097, h = 3001;
    uint64_t rng = 0x5eed000b;

    twtest_need_gpu();
    for (int f = 0; f < 3; f++) {
        const size_t n = (size_t)w * (size_t)h;
        uint8_t *im = malloc(n);
        int32_t rows[6] = {0, 1, 1500, 2999, 3000, 0};
        int64_t *d2 = malloc(6 * (size_t)w * sizeof *d2);

        cr_assert(im && d2);
        for (size_t i = 0; i < n; i++)
            im[i] = (twtest_xorshift(&rng) >> 33) % 100000 < per100k[f] ? 0 : 1;
        rows[5] = (int32_t)twtest_rnd(&rng, (uint32_t)h);
        sampled_rows_reference(im, w, h, rows, 6, d2);
        for (int format = 0; format < 3; format++) {
            run_opts o = opts_default(format);
            result g, c;

            o.idx = format == f;
            g = run_gpu(im, w, h, &o);
            c = run_cpu(im, w, h, &o);
            expect_same_bytes(&g, &c, &o, "4097x3001");
            for (int k = 0; k < 6; k++)
                for (int32_t x = 0; x < w; x++)
                    cr_assert(eq(u32, out_at(&g, format, x, rows[k]),
                                 expect_sample(d2_of(d2[(size_t)k * w + x]), format)),
                              "row %d column %d", rows[k], x);
            if (o.idx) {
                for (int32_t y = 0; y < h; y += 7)
                    for (int32_t x = 0; x < w; x++) {
                        const uint32_t *ix = idx_at(&g, x, y);
                        const int64_t dy = (int64_t)ix[0] - y, dx = (int64_t)ix[1] - x;
                        const uint32_t want = out_at(&c, format, x, y);

                        cr_assert(lt(u32, ix[0], (uint32_t)h));
                        cr_assert(lt(u32, ix[1], (uint32_t)w));
                        cr_assert(eq(u8, im[(size_t)ix[0] * w + ix[1]], 0));
                        cr_assert(eq(u32, expect_sample((double)(dx * dx + dy * dy), format),
                                     want));
                    }
            }
            result_free(&g);
            result_free(&c);
        }
        free(d2);
        free(im);
    }
}

Test(edt_cuda_large, wide_and_tall_bands_match_cpu, .timeout = TWTEST_TIMEOUT(600))
{
    /* The shapes ops/edt.c sends (whole slide width, a few hundred rows) and their
     * transposes, with above / below: the CPU twin's bytes. */
    static const int32_t shapes[][2] = {{20011, 300}, {300, 20011}, {65536, 33}, {5, 70000}};
    uint64_t rng = 0x5eed000c;

    twtest_need_gpu();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int32_t w = shapes[s][0], h = shapes[s][1];
        const size_t n = (size_t)w * (size_t)h;
        uint8_t *im = malloc(n);
        int32_t *above = malloc((size_t)w * sizeof *above);
        int32_t *below = malloc((size_t)w * sizeof *below);
        run_opts o = opts_default((int)(s % 3));

        cr_assert(im && above && below);
        for (size_t i = 0; i < n; i++)
            im[i] = twtest_rnd(&rng, 5000) == 0 ? 0 : 1;
        for (int32_t x = 0; x < w; x++) {
            above[x] = twtest_rnd(&rng, 3) ? (int32_t)twtest_rnd(&rng, 1000) : -1;
            below[x] = twtest_rnd(&rng, 3) ? 1000 + h + (int32_t)twtest_rnd(&rng, 1000) : -1;
        }
        o.y0 = 1000;
        o.above = above;
        o.below = below;
        o.idx = s % 2 == 0;
        {
            result g = run_gpu(im, w, h, &o), c = run_cpu(im, w, h, &o);

            expect_same_bytes(&g, &c, &o, "band shapes");
            result_free(&g);
            result_free(&c);
        }
        free(im);
        free(above);
        free(below);
    }
}

/* One 47000^2 run (int32 offsets overflow beyond 46340^2): background pixels given as (x, y)
 * pairs, F32 output; sampled rows compared against the exact minimum over those pixels. */
static void
huge_case(const int32_t *pts, int npts, bool with_idx)
{
    const int32_t n = 47000;
    const size_t npix = (size_t)n * (size_t)n;
    twi_edt_band b;
    size_t bytes, free_b = 0, total_b = 0, need;
    void *d_in = NULL, *d_out = NULL, *d_idx = NULL, *scr = NULL;
    tw_tile_view bin = {NULL, n, n, n, 1, TW_U8, 0, 0};
    tw_tile_view out = {NULL, (int64_t)n * 4, n, n, 1, TW_F32, 0, 0};
    tw_tile_view idx = {NULL, (int64_t)n * 8, n, n, 2, TW_U32, 0, 0};
    float *row = malloc((size_t)n * sizeof *row);
    uint32_t *irow = malloc((size_t)n * 8);
    uint64_t rng = 0x5eed000d;
    int32_t rows[40];

    cr_assert(row && irow);
    memset(&b, 0, sizeof b);
    b.sx = b.sy = 1.0;
    bytes = twi_cuda_edt_scratch_size(n, n, &b);
    need = bytes + npix * 5 + (with_idx ? npix * 8 : 0);
    cr_assert(eq(int, cudaMemGetInfo(&free_b, &total_b), cudaSuccess));
    if (free_b < need + ((size_t)1 << 30)) {
        free(row);
        free(irow);
        cr_skip_test("47000^2 needs %zu MB of GPU memory, %zu free", need >> 20, free_b >> 20);
    }
    cr_assert(eq(int, cudaMalloc(&d_in, npix), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&d_out, npix * 4), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&scr, bytes), cudaSuccess));
    if (with_idx)
        cr_assert(eq(int, cudaMalloc(&d_idx, npix * 8), cudaSuccess));
    cr_assert(eq(int, cudaMemset(d_in, 1, npix), cudaSuccess));
    for (int k = 0; k < npts; k++)
        cr_assert(eq(int, cudaMemset((uint8_t *)d_in + (size_t)pts[2 * k + 1] * n + pts[2 * k], 0,
                                     1),
                     cudaSuccess));
    bin.data = d_in;
    out.data = d_out;
    idx.data = d_idx;
    cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, with_idx ? &idx : NULL, scr, bytes, NULL),
                 TW_OK));
    cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess));
    rows[0] = 0;
    rows[1] = 1;
    rows[2] = 46339;
    rows[3] = 46341;
    rows[4] = n - 2;
    rows[5] = n - 1;
    for (int k = 6; k < 40; k++)
        rows[k] = (int32_t)twtest_rnd(&rng, (uint32_t)n);
    for (int k = 0; k < 40; k++) {
        const int32_t y = rows[k];

        cr_assert(eq(int, cudaMemcpy(row, (uint8_t *)d_out + (size_t)y * n * 4, (size_t)n * 4,
                                     cudaMemcpyDeviceToHost),
                     cudaSuccess));
        if (with_idx)
            cr_assert(eq(int, cudaMemcpy(irow, (uint8_t *)d_idx + (size_t)y * n * 8,
                                         (size_t)n * 8, cudaMemcpyDeviceToHost),
                         cudaSuccess));
        for (int32_t x = 0; x < n; x++) {
            int64_t best = D2_NONE;
            float want;

            for (int p = 0; p < npts; p++) {
                const int64_t dx = x - pts[2 * p], dy = y - pts[2 * p + 1];

                if (dx * dx + dy * dy < best)
                    best = dx * dx + dy * dy;
            }
            want = (float)sqrt((double)best);
            if (memcmp(&row[x], &want, sizeof want) != 0)
                cr_fatal("47000^2: pixel (%d,%d) got %.9g want %.9g (d2 %lld)", x, y, row[x],
                         want, (long long)best);
            if (with_idx) {
                const int64_t dy = (int64_t)irow[2 * x] - y, dx = (int64_t)irow[2 * x + 1] - x;

                cr_assert(eq(i64, dx * dx + dy * dy, best), "index of (%d,%d)", x, y);
            }
        }
    }
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFree(d_idx);
    cudaFree(scr);
    free(row);
    free(irow);
}

Test(edt_cuda_large, side_47000_single_corner_pixel, .timeout = TWTEST_TIMEOUT(600))
{
    /* 47000 x 47000 (2.2 G pixels: every offset beyond int32), one background pixel in the
     * corner: d2 = x^2 + y^2 on sampled rows, then five scattered pixels. */
    static const int32_t corner[] = {0, 0};
    static const int32_t five[] = {46999, 46999, 12, 40000, 23456, 23456, 46000, 3, 1, 46998};

    twtest_need_gpu();
    huge_case(corner, 1, false);
    huge_case(five, 5, true);
}

/* ---- benchmark ------------------------------------------------------------------------------ */

static double
time_edt(const tw_tile_view *bin, const twi_edt_band *b, tw_tile_view *out, void *scr,
         size_t bytes, int reps, double *median)
{
    cudaEvent_t e0, e1;
    double t[16], best = 1e30;

    cr_assert(le(int, reps, 16));
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cr_assert(eq(int, twi_cuda_edt(bin, b, out, NULL, scr, bytes, NULL), TW_OK)); /* warm-up */
    for (int r = 0; r < reps; r++) {
        float ms = 0;

        cudaEventRecord(e0, NULL);
        cr_assert(eq(int, twi_cuda_edt(bin, b, out, NULL, scr, bytes, NULL), TW_OK));
        cudaEventRecord(e1, NULL);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
        t[r] = ms;
        best = ms < best ? ms : best;
    }
    for (int i = 1; i < reps; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            const double x = t[j];

            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    *median = t[reps / 2];
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return best;
}

Test(edt_cuda_bench, pba_8k_16k, .timeout = TWTEST_TIMEOUT(600))
{
    /* Benchmark, run only with TW_EDT_BENCH=1: 8192^2 and 16384^2 (and 1024 x 16384,
     * 16384 x 1024), 1 % and 50 % i.i.d. background, F32 out in GPU memory, CUDA-event time
     * of the launcher's work (min and median of 7 after a warm-up), automatic and a few
     * explicit m1 / m2 / m3. With TW_EDT_BENCH_DIR, the images are written there as raw
     * bytes (n_w_h_pct.u8) for the CuPy comparison. Results also checked against the CPU twin
     * at 8192^2. */
    static const int32_t sizes[][2] = {{8192, 8192}, {16384, 16384}, {1024, 16384}, {16384, 1024}};
    static const int pcts[] = {1, 50};
    /* Explicit parameters as (rows per phase-1 band, columns per phase-2 band, columns per
     * phase-3 segment), 0 = automatic. */
    static const int32_t sweep[][3] = {{0, 0, 0},   {0, 32, 0}, {0, 64, 0},  {0, 256, 0},
                                       {0, 128, 32}, {64, 0, 0}, {128, 0, 0}};
    const char *dir = getenv("TW_EDT_BENCH_DIR");
    const bool quick = getenv("TW_EDT_BENCH_QUICK") != NULL;
    uint64_t rng = 0xbe4c4;

    if (!getenv("TW_EDT_BENCH"))
        cr_skip_test("benchmark: set TW_EDT_BENCH=1");
    twtest_need_gpu();
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t p = 0; p < sizeof pcts / sizeof pcts[0]; p++) {
            const int32_t w = sizes[s][0], h = sizes[s][1];
            const size_t n = (size_t)w * (size_t)h;
            const size_t nconf = quick ? 1 : sizeof sweep / sizeof sweep[0];
            uint8_t *im;
            void *d_in = NULL, *d_out = NULL, *scr = NULL;
            tw_tile_view bin = {NULL, w, w, h, 1, TW_U8, 0, 0};
            tw_tile_view out = {NULL, (int64_t)w * 4, w, h, 1, TW_F32, 0, 0};
            twi_edt_band b;
            size_t bytes = 0;

            if (quick && !(w == 16384 && h == 16384))
                continue;
            im = malloc(n);
            cr_assert_not_null(im);
            for (size_t i = 0; i < n; i += 8) {
                uint64_t r = twtest_xorshift(&rng);

                for (size_t j = 0; j < 8 && i + j < n; j++, r >>= 8)
                    im[i + j] = (uint8_t)((r & 0xff) * 100 < (uint64_t)pcts[p] * 256 ? 0 : 1);
            }
            if (dir) {
                char path[512];
                FILE *f;

                snprintf(path, sizeof path, "%s/%d_%d_%d.u8", dir, w, h, pcts[p]);
                f = fopen(path, "wb");
                cr_assert_not_null(f);
                cr_assert(eq(sz, fwrite(im, 1, n, f), n));
                fclose(f);
            }
            memset(&b, 0, sizeof b);
            b.sx = b.sy = 1.0;
            for (size_t c = 0; c < nconf; c++) {
                b.m1 = sweep[c][0] ? h / sweep[c][0] : 0;
                b.m2 = sweep[c][1] ? w / sweep[c][1] : 0;
                b.m3 = sweep[c][2] ? w / sweep[c][2] : 0;
                if (twi_cuda_edt_scratch_size(w, h, &b) > bytes)
                    bytes = twi_cuda_edt_scratch_size(w, h, &b);
            }
            cr_assert(eq(int, cudaMalloc(&d_in, n), cudaSuccess));
            cr_assert(eq(int, cudaMalloc(&d_out, n * 4), cudaSuccess));
            cr_assert(eq(int, cudaMalloc(&scr, bytes), cudaSuccess));
            cr_assert(eq(int, cudaMemcpy(d_in, im, n, cudaMemcpyHostToDevice), cudaSuccess));
            bin.data = d_in;
            out.data = d_out;
            for (size_t c = 0; c < nconf; c++) {
                double med, best;

                b.m1 = sweep[c][0] ? h / sweep[c][0] : 0;
                b.m2 = sweep[c][1] ? w / sweep[c][1] : 0;
                b.m3 = sweep[c][2] ? w / sweep[c][2] : 0;
                best = time_edt(&bin, &b, &out, scr, bytes, quick ? 2 : 7, &med);
                printf("BENCH pba %dx%d %d%% band rows/cols/segment %d/%d/%d: min %.3f ms "
                       "median %.3f ms (%.1f GPix/s)\n",
                       w, h, pcts[p], sweep[c][0], sweep[c][1], sweep[c][2], best, med,
                       (double)n / best / 1e6);
                fflush(stdout);
            }
            if (quick) {
                cudaFree(d_in);
                cudaFree(d_out);
                cudaFree(scr);
                free(im);
                continue;
            }
            if (w == 8192 && h == 8192) {
                float *go = malloc(n * 4), *co = malloc(n * 4);
                tw_tile_view hb = {im, w, w, h, 1, TW_U8, 0, 0};
                tw_tile_view ho = {co, (int64_t)w * 4, w, h, 1, TW_F32, 0, 0};

                cr_assert(go && co);
                b.m1 = b.m2 = b.m3 = 0;
                cr_assert(eq(int, twi_cuda_edt(&bin, &b, &out, NULL, scr, bytes, NULL), TW_OK));
                cr_assert(eq(int, cudaMemcpy(go, d_out, n * 4, cudaMemcpyDeviceToHost),
                             cudaSuccess));
                cr_assert(eq(int, twi_omp_edt(&hb, &b, &ho, NULL, 16), TW_OK));
                cr_assert(eq(int, memcmp(go, co, n * 4), 0), "8192^2 %d%%: CUDA != CPU twin",
                          pcts[p]);
                printf("BENCH pba %dx%d %d%%: equal to the CPU twin\n", w, h, pcts[p]);
                if (dir) {
                    char path[512];
                    FILE *f;

                    snprintf(path, sizeof path, "%s/%d_%d_%d.f32", dir, w, h, pcts[p]);
                    f = fopen(path, "wb");
                    cr_assert_not_null(f);
                    cr_assert(eq(sz, fwrite(go, 4, n, f), n));
                    fclose(f);
                }
                free(go);
                free(co);
            }
            if (w == 8192 && h == 8192) {
                /* The wavefront, for comparison (approximate). */
                const size_t wb = twi_cuda_edt_wavefront_scratch_size(w, h);
                void *ws = NULL;
                cudaEvent_t e0, e1;
                float ms = 0;

                cr_assert(eq(int, cudaMalloc(&ws, wb), cudaSuccess));
                cudaEventCreate(&e0);
                cudaEventCreate(&e1);
                b.m1 = b.m2 = b.m3 = 0;
                cr_assert(eq(int, twi_cuda_edt_wavefront(&bin, &b, &out, NULL, ws, wb, NULL),
                             TW_OK));
                cudaEventRecord(e0, NULL);
                cr_assert(eq(int, twi_cuda_edt_wavefront(&bin, &b, &out, NULL, ws, wb, NULL),
                             TW_OK));
                cudaEventRecord(e1, NULL);
                cudaEventSynchronize(e1);
                cudaEventElapsedTime(&ms, e0, e1);
                printf("BENCH wavefront %dx%d %d%%: %.3f ms\n", w, h, pcts[p], ms);
                cudaEventDestroy(e0);
                cudaEventDestroy(e1);
                cudaFree(ws);
            }
            cudaFree(d_in);
            cudaFree(d_out);
            cudaFree(scr);
            free(im);
        }
}

#else /* !TW_HAVE_CUDA */

Test(edt_cuda, skipped_without_cuda)
{
    /* Built without CUDA: nothing to compare. */
    cr_skip_test("built without CUDA");
}

#endif /* TW_HAVE_CUDA */
