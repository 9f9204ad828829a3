/* SPDX-License-Identifier: MIT */
/* tilewave tests: the CUDA border max-trees and attribute filters against their CPU twins. */
#include <stdbool.h>
#include <stdint.h>
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
#include "omp_kernels.h"
#include "twtest.h"
#include "twtest_maxtree.h"

/*
 * Every case: a random image, its canonical parent image (the CPU max-tree, or the CUDA one
 * for the large images), a sides mask; twi_cuda_maxtree_border_extract must give the same node
 * count and arrays as twi_maxtree_border_extract, and twi_cuda_maxtree_filter the same bytes as
 * twi_maxtree_filter_tile for TWI_MAXTREE_AREA (random threshold and vmin), TWI_MAXTREE_HEIGHT and
 * TWI_MAXTREE_AREA_MAP (TW_U32 or TW_U64), with a random res array for the border-tree nodes
 * (levels in range for AREA / HEIGHT; anything, saturating values included, for the map).
 * Levels and outputs have padded rows at random; output padding must stay untouched.
 * Suites: attr_filter_cuda/small_* are quick (the compute-sanitizer runs may select them),
 * attr_filter_cuda/random_* sweep 1,000+ images up to 256 x 256, attr_filter_cuda_large has
 * 1024 x 1024 and 3000 x 700 images.
 */

#define POISON 0xA5

typedef struct attr_bufs {
    void *lv, *par, *out, *res, *scr;
    size_t lv_bytes, out_bytes, res_bytes, scr_bytes;
} attr_bufs;

static void
bufs_init(attr_bufs *b, int32_t maxw, int32_t maxh, int maxpad)
{
    const size_t n = (size_t)maxw * (size_t)maxh;

    memset(b, 0, sizeof *b);
    b->lv_bytes = (size_t)(maxw + maxpad) * (size_t)maxh * 2 + 16;
    b->out_bytes = (size_t)(maxw + maxpad) * (size_t)maxh * 8 + 16;
    b->res_bytes = n * 8 + 8;
    b->scr_bytes = twi_cuda_maxtree_filter_scratch_size(maxw, maxh);
    cr_assert(gt(sz, b->scr_bytes, (size_t)0));
    cr_assert(eq(int, cudaMalloc(&b->lv, b->lv_bytes), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&b->par, n * 4 + 4), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&b->out, b->out_bytes), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&b->res, b->res_bytes), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&b->scr, b->scr_bytes), cudaSuccess));
}

static void
bufs_fini(attr_bufs *b)
{
    cudaFree(b->lv);
    cudaFree(b->par);
    cudaFree(b->out);
    cudaFree(b->res);
    cudaFree(b->scr);
}

/* One tile: the host image and parent image, and how it lies on the device. */
typedef struct attr_case {
    const void *img;
    const uint32_t *par;
    tw_sample_type type;
    int32_t w, h;
    int conn, mode, ipad, opad;
    unsigned sides;
} attr_case;

static size_t
ssize(tw_sample_type t)
{
    return tw_sample_size(t);
}

static void *
random_image(uint64_t *rng, tw_sample_type type, int32_t w, int32_t h, int mode)
{
    const size_t n = (size_t)w * (size_t)h;
    void *img = malloc((n ? n : 1) * ssize(type));

    cr_assert_not_null(img);
    twtest_maxtree_random_image(rng, img, type, w, h, mode);
    return img;
}

static uint32_t *
cpu_parent(const void *img, tw_sample_type type, int32_t w, int32_t h, int conn)
{
    const size_t n = (size_t)w * (size_t)h;
    uint32_t *par = malloc((n ? n : 1) * 4);
    tw_tile_view vin = {(void *)img, (int64_t)((size_t)w * ssize(type)), w, h, 1, type, 0, 0};
    tw_tile_view vout = {par, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};

    cr_assert_not_null(par);
    cr_assert(eq(int, twi_omp_maxtree(&vin, conn, &vout, 1), TW_OK));
    return par;
}

static tw_tile_view
dev_levels(const attr_bufs *b, const attr_case *c)
{
    const tw_tile_view v = {b->lv, (int64_t)((size_t)(c->w + c->ipad) * ssize(c->type)),
                            c->w, c->h, 1, c->type, 0, 0};

    return v;
}

static tw_tile_view
dev_parent(const attr_bufs *b, const attr_case *c)
{
    const tw_tile_view v = {b->par, (int64_t)c->w * 4, c->w, c->h, 1, TW_U32, 0, 0};

    return v;
}

/* Levels (with their padding) and, when c->par is set, the parent image to the device. */
static void
upload(attr_bufs *b, const attr_case *c)
{
    const size_t ss = ssize(c->type), n = (size_t)c->w * (size_t)c->h;
    const size_t stride = (size_t)(c->w + c->ipad) * ss;

    cr_assert(le(sz, stride * (size_t)c->h, b->lv_bytes));
    cr_assert(le(sz, twi_cuda_maxtree_filter_scratch_size(c->w, c->h), b->scr_bytes));
    cr_assert(eq(int, cudaMemset(b->lv, POISON, stride * (size_t)c->h), cudaSuccess));
    cr_assert(eq(int,
                 cudaMemcpy2D(b->lv, stride, c->img, (size_t)c->w * ss, (size_t)c->w * ss,
                              (size_t)c->h, cudaMemcpyHostToDevice),
                 cudaSuccess));
    if (c->par)
        cr_assert(eq(int, cudaMemcpy(b->par, c->par, n * 4, cudaMemcpyHostToDevice),
                     cudaSuccess));
}

static void
describe(char *buf, size_t len, const attr_case *c)
{
    snprintf(buf, len, "%dx%d %d-bit conn %d mode %d sides %u ipad %d opad %d", c->w, c->h,
             c->type == TW_U16 ? 16 : 8, c->conn, c->mode, c->sides, c->ipad, c->opad);
}

static void *
fetch(const void *d, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);

    cr_assert_not_null(h);
    if (bytes)
        cr_assert(eq(int, cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), cudaSuccess));
    return h;
}

/* The GPU border max-tree equals the CPU twin's; cb receives the CPU twin's (caller frees). */
static void
check_border(attr_bufs *b, const attr_case *c, twi_maxtree_border *cb)
{
    tw_tile_view lv = dev_levels(b, c), pv = dev_parent(b, c);
    const tw_tile_view hl = {(void *)c->img, (int64_t)((size_t)c->w * ssize(c->type)), c->w,
                             c->h, 1, c->type, 0, 0};
    const tw_tile_view hp = {(void *)c->par, (int64_t)c->w * 4, c->w, c->h, 1, TW_U32, 0, 0};
    twi_cuda_maxtree_border d;
    int64_t n = -1;
    char what[160];

    describe(what, sizeof what, c);
    cr_assert(eq(int, twi_maxtree_border_extract(&hl, &hp, c->sides, cb), TW_OK), "CPU twin: %s",
              what);
    cr_assert(eq(int,
                 twi_cuda_maxtree_border_extract(&lv, &pv, c->sides, b->scr,
                                                 twi_cuda_maxtree_filter_scratch_size(c->w, c->h),
                                                 &d, NULL),
                 TW_OK),
              "%s", what);
    cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess), "%s", what);
    cr_assert(eq(int, cudaMemcpy(&n, d.n, sizeof n, cudaMemcpyDeviceToHost), cudaSuccess));
    cr_assert(eq(i64, n, cb->n), "node count: %s", what);
    if (n > 0) {
        uint16_t *level = fetch(d.level, (size_t)n * 2), *maxv = fetch(d.maxv, (size_t)n * 2);
        uint32_t *lpar = fetch(d.lparent, (size_t)n * 4), *own = fetch(d.own, (size_t)n * 4);

        for (int64_t i = 0; i < n; i++) {
            if (level[i] != cb->level[i] || maxv[i] != cb->maxv[i] ||
                lpar[i] != cb->lparent[i] || own[i] != cb->own[i])
                cr_fatal("%s: node %lld: level %u maxv %u lparent %u own %u, want %u %u %u %u",
                         what, (long long)i, level[i], maxv[i], lpar[i], own[i], cb->level[i],
                         cb->maxv[i], cb->lparent[i], cb->own[i]);
        }
        free(level);
        free(maxv);
        free(lpar);
        free(own);
    }
    for (int s = 0; s < 4; s++) {
        const size_t len = (size_t)(s <= TWI_MAXTREE_BOTTOM ? c->w : c->h);

        if (!(c->sides & TWI_MAXTREE_SIDE(s))) {
            cr_assert_null(d.side[s], "%s: side %d not asked for", what, s);
            continue;
        }
        cr_assert_not_null(d.side[s]);
        uint32_t *g = fetch(d.side[s], len * 4);

        for (size_t k = 0; k < len; k++)
            if (g[k] != cb->side[s][k])
                cr_fatal("%s: side %d [%zu] = %u, want %u", what, s, k, g[k], cb->side[s][k]);
        free(g);
    }
}

/* Random answers for the border-tree nodes as twi_maxtree_merge could give them. */
static uint64_t *
random_res(uint64_t *rng, int64_t n, const attr_case *c, twi_maxtree_rule rule)
{
    const uint32_t maxv = c->type == TW_U16 ? 65535u : 255u;
    uint64_t *res = malloc((size_t)(n > 0 ? n : 1) * sizeof *res);

    cr_assert_not_null(res);
    for (int64_t i = 0; i < n; i++) {
        if (rule != TWI_MAXTREE_AREA_MAP)
            res[i] = twtest_rnd(rng, maxv + 1);
        else if (twtest_rnd(rng, 4) == 0)
            res[i] = (uint64_t)UINT32_MAX + twtest_rnd(rng, 3) * (1ull << 33) +
                     twtest_rnd(rng, 1000); /* saturates in TW_U32 */
        else
            res[i] = 1 + twtest_rnd(rng, (uint32_t)((size_t)c->w * (size_t)c->h));
    }
    return res;
}

/* The GPU filter equals the CPU twin's output byte for byte; padding stays untouched. */
static void
check_filter(attr_bufs *b, const attr_case *c, const twi_maxtree_filter *f, tw_sample_type otype,
             const uint64_t *res, int64_t nres)
{
    const size_t os = ssize(otype), row = (size_t)c->w * os;
    const size_t ostride = (size_t)(c->w + c->opad) * os, n = (size_t)c->w * (size_t)c->h;
    tw_tile_view lv = dev_levels(b, c), pv = dev_parent(b, c);
    const tw_tile_view hl = {(void *)c->img, (int64_t)((size_t)c->w * ssize(c->type)), c->w,
                             c->h, 1, c->type, 0, 0};
    const tw_tile_view hp = {(void *)c->par, (int64_t)c->w * 4, c->w, c->h, 1, TW_U32, 0, 0};
    unsigned char *want = malloc(n * os + 1), *got;
    tw_tile_view hout = {want, (int64_t)row, c->w, c->h, 1, otype, 0, 0};
    tw_tile_view dout = {b->out, (int64_t)ostride, c->w, c->h, 1, otype, 0, 0};
    char what[200];
    int len;

    cr_assert_not_null(want);
    len = snprintf(what, sizeof what, "rule %d threshold %llu vmin %u out %d: ", (int)f->rule,
                   (unsigned long long)f->threshold, f->vmin, (int)otype);
    describe(what + len, sizeof what - (size_t)len, c);
    cr_assert(le(sz, ostride * (size_t)c->h, b->out_bytes));
    cr_assert(eq(int, twi_maxtree_filter_tile(&hl, &hp, c->sides, c->sides ? res : NULL, f, &hout),
                 TW_OK),
              "CPU twin: %s", what);
    if (c->sides && nres > 0)
        cr_assert(eq(int, cudaMemcpy(b->res, res, (size_t)nres * 8, cudaMemcpyHostToDevice),
                     cudaSuccess));
    cr_assert(eq(int, cudaMemset(b->out, POISON, ostride * (size_t)c->h), cudaSuccess));
    cr_assert(eq(int,
                 twi_cuda_maxtree_filter(&lv, &pv, c->sides, c->sides ? b->res : NULL, f, &dout,
                                         b->scr,
                                         twi_cuda_maxtree_filter_scratch_size(c->w, c->h), NULL),
                 TW_OK),
              "%s", what);
    cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess), "%s", what);
    got = fetch(b->out, ostride * (size_t)c->h);
    for (int32_t y = 0; y < c->h; y++) {
        const unsigned char *g = got + (size_t)y * ostride, *r = want + (size_t)y * row;

        if (memcmp(g, r, row) != 0)
            for (int32_t x = 0; x < c->w; x++)
                if (memcmp(g + (size_t)x * os, r + (size_t)x * os, os) != 0) {
                    uint64_t gv = 0, rv = 0;

                    memcpy(&gv, g + (size_t)x * os, os);
                    memcpy(&rv, r + (size_t)x * os, os);
                    cr_fatal("%s: pixel (%d, %d) = %llu, want %llu", what, x, y,
                             (unsigned long long)gv, (unsigned long long)rv);
                }
        for (size_t k = row; k < ostride; k++)
            cr_assert(eq(u8, g[k], POISON), "%s: row padding written at y %d", what, y);
    }
    free(got);
    free(want);
}

/* The border tree, then AREA, HEIGHT and the area map (TW_U32 or TW_U64) of one tile. */
static void
check_case(attr_bufs *b, const attr_case *c, uint64_t *rng)
{
    const uint32_t maxv = c->type == TW_U16 ? 65535u : 255u;
    const uint64_t n = (uint64_t)c->w * (uint64_t)c->h;
    twi_maxtree_border cb;
    twi_maxtree_filter f;
    uint64_t *res;

    upload(b, c);
    check_border(b, c, &cb);

    memset(&f, 0, sizeof f);
    f.rule = TWI_MAXTREE_AREA;
    switch (twtest_rnd(rng, 6)) {
    case 0:
        f.threshold = 1;
        break;
    case 1:
        f.threshold = n + 1 + twtest_rnd(rng, 3); /* nothing but border nodes survive */
        break;
    case 2:
        f.threshold = twtest_rnd(rng, 2) ? 0 : UINT64_MAX;
        break;
    case 3:
        f.threshold = 2 + twtest_rnd(rng, 30);
        break;
    default:
        f.threshold = 1 + twtest_rnd(rng, (uint32_t)n);
        break;
    }
    f.vmin = (uint16_t)twtest_rnd(rng, maxv + 1);
    res = random_res(rng, cb.n, c, TWI_MAXTREE_AREA);
    check_filter(b, c, &f, c->type, res, cb.n);
    free(res);

    f.rule = TWI_MAXTREE_HEIGHT;
    f.threshold = twtest_rnd(rng, 2) ? twtest_rnd(rng, 20) : twtest_rnd(rng, maxv + 2);
    f.vmin = (uint16_t)twtest_rnd(rng, maxv + 1);
    res = random_res(rng, cb.n, c, TWI_MAXTREE_HEIGHT);
    check_filter(b, c, &f, c->type, res, cb.n);
    free(res);

    f.rule = TWI_MAXTREE_AREA_MAP;
    res = random_res(rng, cb.n, c, TWI_MAXTREE_AREA_MAP);
    check_filter(b, c, &f, twtest_rnd(rng, 2) ? TW_U32 : TW_U64, res, cb.n);
    free(res);
    twi_maxtree_border_free(&cb);
}

/* A random side: mostly anything up to max, sometimes 1-4 pixels. */
static int32_t
random_side(uint64_t *rng, int32_t max)
{
    return twtest_rnd(rng, 6) == 0 ? 1 + (int32_t)twtest_rnd(rng, 4)
                                   : 1 + (int32_t)twtest_rnd(rng, (uint32_t)max);
}

/* `count` random tiles of one type and connectivity, cycling the six modes and the 16 masks. */
static void
random_sweep(tw_sample_type type, int conn, int count, uint64_t seed)
{
    uint64_t rng = seed;
    attr_bufs b;

    twtest_need_gpu();
    bufs_init(&b, 256, 256, 5);
    for (int k = 0; k < count; k++) {
        attr_case c;

        memset(&c, 0, sizeof c);
        c.type = type;
        c.conn = conn;
        c.w = random_side(&rng, 256);
        c.h = random_side(&rng, 256);
        c.mode = k % 6;
        c.sides = (unsigned)(k * 7 + k / 16) % 16u;
        c.ipad = twtest_rnd(&rng, 4) ? 0 : 1 + (int)twtest_rnd(&rng, 5);
        c.opad = twtest_rnd(&rng, 4) ? 0 : 1 + (int)twtest_rnd(&rng, 5);
        c.img = random_image(&rng, type, c.w, c.h, c.mode);
        c.par = cpu_parent(c.img, type, c.w, c.h, conn);
        check_case(&b, &c, &rng);
        free((void *)c.img);
        free((void *)c.par);
    }
    bufs_fini(&b);
}

Test(attr_filter_cuda, random_u8_conn4)
{
    /* 264 random 8-bit tiles, 4-connected: border trees and the three filters == CPU twins. */
    random_sweep(TW_U8, 4, 264, 0x51ull);
}

Test(attr_filter_cuda, random_u8_conn8)
{
    /* 264 random 8-bit tiles, 8-connected. */
    random_sweep(TW_U8, 8, 264, 0x52ull);
}

Test(attr_filter_cuda, random_u16_conn4)
{
    /* 264 random 16-bit tiles, 4-connected (deep trees in the noise and many-level modes). */
    random_sweep(TW_U16, 4, 264, 0x53ull);
}

Test(attr_filter_cuda, random_u16_conn8)
{
    /* 264 random 16-bit tiles, 8-connected. */
    random_sweep(TW_U16, 8, 264, 0x54ull);
}

Test(attr_filter_cuda, small_shapes_every_sides_mask)
{
    /* Lines, columns, single pixels and chunk-sized tiles (4096 pixels per numbering chunk)
     * with all 16 sides masks, both types, both connectivities. */
    static const int32_t shapes[][2] = {{1, 1},   {1, 2},  {2, 1},   {1, 300}, {300, 1},
                                        {64, 64}, {64, 65}, {4096, 1}, {1, 4097}, {65, 63},
                                        {3, 200}, {200, 3}, {17, 16}};
    uint64_t rng = 0x61;
    attr_bufs b;

    twtest_need_gpu();
    bufs_init(&b, 4097, 300, 3);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (unsigned sides = 0; sides < 16; sides++) {
            attr_case c;

            memset(&c, 0, sizeof c);
            c.type = sides & 1 ? TW_U16 : TW_U8;
            c.conn = sides & 2 ? 8 : 4;
            c.w = shapes[s][0];
            c.h = shapes[s][1];
            c.mode = (int)(s + sides) % 6;
            c.sides = sides;
            c.ipad = (int)(sides % 3);
            c.opad = (int)(sides % 2);
            c.img = random_image(&rng, c.type, c.w, c.h, c.mode);
            c.par = cpu_parent(c.img, c.type, c.w, c.h, c.conn);
            check_case(&b, &c, &rng);
            free((void *)c.img);
            free((void *)c.par);
        }
    bufs_fini(&b);
}

Test(attr_filter_cuda, small_flat_and_ramp_tiles)
{
    /* A flat tile (one node: everything is the root), ramps (one chain as deep as the tile,
     * 16-bit: 1000 levels) and a checkerboard, every mask. */
    const int32_t w = 100, h = 10;
    uint16_t *img = malloc((size_t)w * h * 2);
    uint64_t rng = 0x62;
    attr_bufs b;

    twtest_need_gpu();
    cr_assert_not_null(img);
    bufs_init(&b, w, h, 1);
    for (int pat = 0; pat < 4; pat++) {
        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++)
                img[(size_t)y * w + x] = (uint16_t)(pat == 0   ? 7
                                                    : pat == 1 ? y * w + x
                                                    : pat == 2 ? 65535 - (y * w + x)
                                                               : 3 * ((x + y) & 1));
        for (unsigned sides = 0; sides < 16; sides++) {
            attr_case c = {img, NULL, TW_U16, w, h, sides & 1 ? 8 : 4, 100 + pat, 1, 0, sides};

            c.par = cpu_parent(img, TW_U16, w, h, c.conn);
            check_case(&b, &c, &rng);
            free((void *)c.par);
        }
    }
    free(img);
    bufs_fini(&b);
}

Test(attr_filter_cuda, small_empty_tiles)
{
    /* 0 x h and w x 0 tiles: the border launcher reports 0 nodes, the filter enqueues
     * nothing and returns TW_OK. */
    const size_t bytes = twi_cuda_maxtree_filter_scratch_size(0, 5);
    tw_tile_view lv = {NULL, 0, 0, 5, 1, TW_U8, 0, 0}, pv = {NULL, 0, 0, 5, 1, TW_U32, 0, 0};
    tw_tile_view ov = {NULL, 0, 0, 5, 1, TW_U8, 0, 0};
    twi_maxtree_filter f = {TWI_MAXTREE_AREA, 3, 0};
    twi_cuda_maxtree_border d;
    int64_t n = -1;
    void *scr;

    twtest_need_gpu();
    cr_assert(gt(sz, bytes, (size_t)0));
    cr_assert(eq(int, cudaMalloc(&scr, bytes), cudaSuccess));
    cr_assert(eq(int, twi_cuda_maxtree_border_extract(&lv, &pv, 15, scr, bytes, &d, NULL), TW_OK));
    cr_assert(eq(int, cudaMemcpy(&n, d.n, sizeof n, cudaMemcpyDeviceToHost), cudaSuccess));
    cr_assert(eq(i64, n, 0));
    cr_assert(eq(int, twi_cuda_maxtree_filter(&lv, &pv, 0, NULL, &f, &ov, NULL, 0, NULL), TW_OK));
    lv.w = pv.w = ov.w = 5;
    lv.h = pv.h = ov.h = 0;
    cr_assert(eq(int, twi_cuda_maxtree_filter(&lv, &pv, 3, (const uint64_t *)scr, &f, &ov, NULL, 0,
                                              NULL),
                 TW_OK));
    cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess));
    cudaFree(scr);
}

Test(attr_filter_cuda, small_rejects_invalid_arguments)
{
    /* Bad views, types, shapes, sides masks, rules, missing res and short scratch are
     * TW_E_INVALID with nothing enqueued. */
    const int32_t w = 16, h = 8;
    const size_t bytes = twi_cuda_maxtree_filter_scratch_size(w, h);
    void *d_lv, *d_par, *d_out, *scr;
    uint64_t *d_res;

    twtest_need_gpu();
    cr_assert(eq(sz, twi_cuda_maxtree_filter_scratch_size(70000, 70000), (size_t)0));
    cr_assert(eq(sz, twi_cuda_maxtree_filter_scratch_size(-1, 4), (size_t)0));
    cr_assert(ge(sz, twi_cuda_maxtree_filter_scratch_size(w, h), (size_t)(25 * w * h)));
    cr_assert(eq(int, cudaMalloc(&d_lv, w * h * 2), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&d_par, w * h * 4), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&d_out, w * h * 8), cudaSuccess));
    cr_assert(eq(int, cudaMalloc((void **)&d_res, w * h * 8), cudaSuccess));
    cr_assert(eq(int, cudaMalloc(&scr, bytes), cudaSuccess));
    {
        /* a valid tile first: a ramp and its parent image */
        uint8_t img[16 * 8];
        uint32_t *par;

        for (int i = 0; i < w * h; i++)
            img[i] = (uint8_t)(i % 13);
        par = cpu_parent(img, TW_U8, w, h, 4);
        cr_assert(eq(int, cudaMemcpy(d_lv, img, sizeof img, cudaMemcpyHostToDevice),
                     cudaSuccess));
        cr_assert(eq(int, cudaMemcpy(d_par, par, w * h * 4, cudaMemcpyHostToDevice),
                     cudaSuccess));
        free(par);
    }
    const tw_tile_view lv0 = {d_lv, w, w, h, 1, TW_U8, 0, 0};
    const tw_tile_view pv0 = {d_par, w * 4, w, h, 1, TW_U32, 0, 0};
    const tw_tile_view ov0 = {d_out, w, w, h, 1, TW_U8, 0, 0};
    const twi_maxtree_filter f0 = {TWI_MAXTREE_AREA, 5, 0};
    tw_tile_view lv = lv0, pv = pv0, ov = ov0;
    twi_maxtree_filter f = f0;
    twi_cuda_maxtree_border d;

    cr_assert(eq(int, twi_cuda_maxtree_border_extract(&lv, &pv, 15, scr, bytes, &d, NULL), TW_OK));
    cr_assert(eq(int, twi_cuda_maxtree_filter(&lv, &pv, 15, d_res, &f, &ov, scr, bytes, NULL),
                 TW_OK));
    cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess));

#define BAD_BORDER(...)                                                                        \
    cr_assert(eq(int, twi_cuda_maxtree_border_extract(__VA_ARGS__), TW_E_INVALID))
#define BAD_FILTER(...) cr_assert(eq(int, twi_cuda_maxtree_filter(__VA_ARGS__), TW_E_INVALID))
    BAD_BORDER(&lv, &pv, 15, scr, bytes, NULL, NULL);
    BAD_BORDER(NULL, &pv, 15, scr, bytes, &d, NULL);
    BAD_BORDER(&lv, NULL, 15, scr, bytes, &d, NULL);
    BAD_BORDER(&lv, &pv, 16, scr, bytes, &d, NULL);
    BAD_BORDER(&lv, &pv, 15, NULL, bytes, &d, NULL);
    BAD_BORDER(&lv, &pv, 15, scr, bytes - 1, &d, NULL);
    BAD_FILTER(&lv, &pv, 15, d_res, NULL, &ov, scr, bytes, NULL);
    BAD_FILTER(&lv, &pv, 15, d_res, &f, NULL, scr, bytes, NULL);
    BAD_FILTER(&lv, &pv, 15, NULL, &f, &ov, scr, bytes, NULL);
    BAD_FILTER(&lv, &pv, 16, d_res, &f, &ov, scr, bytes, NULL);
    BAD_FILTER(&lv, &pv, 15, d_res, &f, &ov, NULL, bytes, NULL);
    BAD_FILTER(&lv, &pv, 15, d_res, &f, &ov, scr, bytes - 1, NULL);
    f.rule = (twi_maxtree_rule)7;
    BAD_FILTER(&lv, &pv, 15, d_res, &f, &ov, scr, bytes, NULL);
    f.rule = TWI_MAXTREE_AREA_MAP; /* the map needs TW_U32 / TW_U64 out */
    BAD_FILTER(&lv, &pv, 15, d_res, &f, &ov, scr, bytes, NULL);
    f = f0;
    ov.type = TW_U16; /* AREA / HEIGHT: the levels' type */
    ov.stride = w * 2;
    BAD_FILTER(&lv, &pv, 15, d_res, &f, &ov, scr, bytes, NULL);
    ov = ov0;
    ov.w = w - 1;
    BAD_FILTER(&lv, &pv, 15, d_res, &f, &ov, scr, bytes, NULL);
    ov = ov0;
    ov.channels = 2;
    BAD_FILTER(&lv, &pv, 15, d_res, &f, &ov, scr, bytes, NULL);
    ov = ov0;
    ov.stride = w - 1;
    BAD_FILTER(&lv, &pv, 15, d_res, &f, &ov, scr, bytes, NULL);
    ov = ov0;
    /* levels: float, 3 channels, short stride, no data */
    lv.type = TW_F32;
    lv.stride = w * 4;
    BAD_BORDER(&lv, &pv, 15, scr, bytes, &d, NULL);
    BAD_FILTER(&lv, &pv, 15, d_res, &f, &ov, scr, bytes, NULL);
    lv = lv0;
    lv.channels = 3;
    lv.stride = w * 3;
    BAD_BORDER(&lv, &pv, 15, scr, bytes, &d, NULL);
    lv = lv0;
    lv.stride = w - 1;
    BAD_BORDER(&lv, &pv, 15, scr, bytes, &d, NULL);
    BAD_FILTER(&lv, &pv, 15, d_res, &f, &ov, scr, bytes, NULL);
    lv = lv0;
    lv.data = NULL;
    BAD_BORDER(&lv, &pv, 15, scr, bytes, &d, NULL);
    lv = lv0;
    /* parent: padded rows, TW_U64, another shape, misaligned */
    pv.stride = w * 4 + 4;
    BAD_BORDER(&lv, &pv, 15, scr, bytes, &d, NULL);
    BAD_FILTER(&lv, &pv, 15, d_res, &f, &ov, scr, bytes, NULL);
    pv = pv0;
    pv.type = TW_U64;
    pv.stride = w * 8;
    BAD_BORDER(&lv, &pv, 15, scr, bytes, &d, NULL);
    pv = pv0;
    pv.h = h - 1;
    BAD_BORDER(&lv, &pv, 15, scr, bytes, &d, NULL);
    pv = pv0;
    pv.data = (char *)d_par + 2;
    BAD_BORDER(&lv, &pv, 15, scr, bytes, &d, NULL);
    pv = pv0;
    /* more than UINT32_MAX pixels */
    lv.w = pv.w = ov.w = 70000;
    lv.h = pv.h = ov.h = 70000;
    lv.stride = ov.stride = 70000;
    pv.stride = 280000;
    BAD_BORDER(&lv, &pv, 15, scr, bytes, &d, NULL);
    BAD_FILTER(&lv, &pv, 15, d_res, &f, &ov, scr, bytes, NULL);
#undef BAD_BORDER
#undef BAD_FILTER
    cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess));
    cudaFree(d_lv);
    cudaFree(d_par);
    cudaFree(d_out);
    cudaFree(d_res);
    cudaFree(scr);
}

Test(attr_filter_cuda, small_deterministic_over_20_runs)
{
    /* 20 runs of each launcher on one tile with deep, contended trees (16-bit noise, 8-conn,
     * all sides) give the same bytes every time (scratch poisoned differently each run). */
    const int32_t w = 777, h = 555;
    const size_t n = (size_t)w * h;
    uint64_t rng = 0x63;
    attr_case c = {NULL, NULL, TW_U16, w, h, 8, 0, 0, 0, 15};
    twi_maxtree_filter f = {TWI_MAXTREE_HEIGHT, 300, 0};
    void *first_tree = NULL, *first_out = NULL;
    int64_t first_n = -1;
    twi_cuda_maxtree_border cb;
    attr_bufs b;

    twtest_need_gpu();
    c.img = random_image(&rng, TW_U16, w, h, 0);
    c.par = cpu_parent(c.img, TW_U16, w, h, 8);
    bufs_init(&b, w, h, 0);
    upload(&b, &c);
    tw_tile_view lv = dev_levels(&b, &c), pv = dev_parent(&b, &c);
    tw_tile_view ov = {b.out, w * 2, w, h, 1, TW_U16, 0, 0};

    for (int run = 0; run < 20; run++) {
        int64_t nn = -1;
        void *tree, *out;

        cr_assert(eq(int, cudaMemset(b.scr, run * 37, b.scr_bytes), cudaSuccess));
        cr_assert(eq(int, twi_cuda_maxtree_border_extract(&lv, &pv, 15, b.scr, b.scr_bytes, &cb,
                                                          NULL),
                     TW_OK));
        cr_assert(eq(int, cudaMemcpy(&nn, cb.n, 8, cudaMemcpyDeviceToHost), cudaSuccess));
        cr_assert(gt(i64, nn, 0));
        tree = malloc((size_t)nn * 12);
        cr_assert_not_null(tree);
        cr_assert(eq(int, cudaMemcpy(tree, cb.level, (size_t)nn * 2, cudaMemcpyDeviceToHost),
                     cudaSuccess));
        cr_assert(eq(int,
                     cudaMemcpy((char *)tree + nn * 2, cb.maxv, (size_t)nn * 2,
                                cudaMemcpyDeviceToHost),
                     cudaSuccess));
        cr_assert(eq(int,
                     cudaMemcpy((char *)tree + nn * 4, cb.own, (size_t)nn * 4,
                                cudaMemcpyDeviceToHost),
                     cudaSuccess));
        cr_assert(eq(int,
                     cudaMemcpy((char *)tree + nn * 8, cb.lparent, (size_t)nn * 4,
                                cudaMemcpyDeviceToHost),
                     cudaSuccess));
        if (run == 0) {
            /* answers for the filter: the border nodes' own levels */
            uint64_t *res = malloc((size_t)nn * 8);

            cr_assert_not_null(res);
            for (int64_t i = 0; i < nn; i++)
                res[i] = ((uint16_t *)tree)[i];
            cr_assert(eq(int, cudaMemcpy(b.res, res, (size_t)nn * 8, cudaMemcpyHostToDevice),
                         cudaSuccess));
            free(res);
        }
        cr_assert(eq(int, twi_cuda_maxtree_filter(&lv, &pv, 15, b.res, &f, &ov, b.scr, b.scr_bytes,
                                                  NULL),
                     TW_OK));
        out = fetch(b.out, n * 2);
        if (run == 0) {
            first_n = nn;
            first_tree = tree;
            first_out = out;
            continue;
        }
        cr_assert(eq(i64, nn, first_n), "run %d: node count differs", run);
        cr_assert(eq(int, memcmp(tree, first_tree, (size_t)nn * 12), 0), "run %d: tree", run);
        cr_assert(eq(int, memcmp(out, first_out, n * 2), 0), "run %d: filter", run);
        free(tree);
        free(out);
    }
    free(first_tree);
    free(first_out);
    free((void *)c.img);
    free((void *)c.par);
    bufs_fini(&b);
}

/* Smooth field plus noise (as tests/gpu/time_maxtree.cu), quantised to the type's range. */
static void *
smooth_image(uint64_t *rng, tw_sample_type type, int32_t w, int32_t h)
{
    const size_t n = (size_t)w * h;
    const double maxv = type == TW_U16 ? 65535.0 : 255.0, noise = type == TW_U16 ? 0.02 : 0.016;
    void *img = malloc(n * ssize(type));

    cr_assert_not_null(img);
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++) {
            double v = 0.5 + 0.2 * ((double)((x * 7 + y * 3) % 997) / 997.0) +
                       0.2 * ((double)((x / 37 + y / 53) % 5) / 5.0);

            v += noise * ((double)twtest_rnd(rng, 2001) / 1000.0 - 1.0);
            v = v < 0 ? 0 : v > 1 ? 1 : v;
            if (type == TW_U16)
                ((uint16_t *)img)[(size_t)y * w + x] = (uint16_t)(v * maxv + 0.5);
            else
                ((uint8_t *)img)[(size_t)y * w + x] = (uint8_t)(v * maxv + 0.5);
        }
    return img;
}

Test(attr_filter_cuda_large, large_tiles_on_gpu_trees, .timeout = TWTEST_TIMEOUT(600))
{
    /* 1024 x 1024 and 3000 x 700 tiles (smooth-plus-noise and random modes), both types and
     * connectivities, random masks: the parent image comes from twi_cuda_maxtree on the
     * device (checked equal to the CPU one), then both launchers against the CPU twins. */
    static const int32_t shapes[][2] = {{1024, 1024}, {3000, 700}};
    uint64_t rng = 0x64;
    attr_bufs b;
    void *tscr;
    size_t tbytes = twi_cuda_maxtree_scratch_size(3000, 1024, TW_U16, 8);

    twtest_need_gpu();
    bufs_init(&b, 3000, 1024, 2);
    cr_assert(eq(int, cudaMalloc(&tscr, tbytes), cudaSuccess));
    for (size_t s = 0; s < 2; s++)
        for (int k = 0; k < 8; k++) {
            attr_case c;
            uint32_t *cpar, *gpar;

            memset(&c, 0, sizeof c);
            c.type = k & 1 ? TW_U16 : TW_U8;
            c.conn = k & 2 ? 8 : 4;
            c.w = shapes[s][0];
            c.h = shapes[s][1];
            c.mode = k & 4 ? (int)twtest_rnd(&rng, 6) : 100;
            c.sides = k == 0 ? 15u : 1u + twtest_rnd(&rng, 15);
            c.ipad = (int)(k % 3);
            c.opad = (int)(k % 2);
            c.img = c.mode == 100 ? smooth_image(&rng, c.type, c.w, c.h)
                                  : random_image(&rng, c.type, c.w, c.h, c.mode);
            upload(&b, &c);
            {
                tw_tile_view lv = dev_levels(&b, &c), pv = dev_parent(&b, &c);

                cr_assert(eq(int, twi_cuda_maxtree(&lv, c.conn, &pv, tscr, tbytes, NULL),
                             TW_OK));
                cr_assert(eq(int, cudaDeviceSynchronize(), cudaSuccess));
            }
            cpar = cpu_parent(c.img, c.type, c.w, c.h, c.conn);
            gpar = fetch(b.par, (size_t)c.w * c.h * 4);
            cr_assert(eq(int, memcmp(cpar, gpar, (size_t)c.w * c.h * 4), 0));
            free(gpar);
            c.par = cpar; /* upload() is not called again: the device keeps the GPU tree */
            {
                twi_maxtree_border cb;
                twi_maxtree_filter f = {TWI_MAXTREE_AREA, 1 + twtest_rnd(&rng, 5000), 0};
                uint64_t *res;

                check_border(&b, &c, &cb);
                res = random_res(&rng, cb.n, &c, TWI_MAXTREE_AREA);
                check_filter(&b, &c, &f, c.type, res, cb.n);
                free(res);
                f.rule = TWI_MAXTREE_HEIGHT;
                f.threshold = 1 + twtest_rnd(&rng, c.type == TW_U16 ? 3000 : 40);
                res = random_res(&rng, cb.n, &c, TWI_MAXTREE_HEIGHT);
                check_filter(&b, &c, &f, c.type, res, cb.n);
                free(res);
                f.rule = TWI_MAXTREE_AREA_MAP;
                res = random_res(&rng, cb.n, &c, TWI_MAXTREE_AREA_MAP);
                check_filter(&b, &c, &f, k & 1 ? TW_U64 : TW_U32, res, cb.n);
                free(res);
                twi_maxtree_border_free(&cb);
            }
            free((void *)c.img);
            free(cpar);
        }
    cudaFree(tscr);
    bufs_fini(&b);
}

#else /* !TW_HAVE_CUDA */

Test(attr_filter_cuda, skipped_without_cuda)
{
    /* Built without CUDA: nothing to test here. */
    cr_skip_test("built without CUDA");
}

#endif
