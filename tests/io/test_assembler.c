/* SPDX-License-Identifier: MIT */
/* tilewave tests: the tile assembler: operation tiles of any size into the writer's tiles. */
#include <pthread.h>

#include "io_testutil.h"
#include "tw_io.h"

typedef struct acase {
    int32_t sw, sh;          /* operation (source) tile size */
    int32_t tw, th;          /* output tile size */
    int64_t w, h;            /* level-0 size */
    int channels;
    tw_sample_type type;
    int n_levels;
    bool scratch;            /* partial tiles in a scratch file (twi_assembler_set_scratch) */
} acase;

typedef struct rect {
    int64_t x, y, w, h;
} rect;

typedef struct put_thread {
    twi_assembler *a;
    const rect *rects;
    size_t n_rects;
    int id, n_threads;
    int channels;
    tw_sample_type type;
    uint64_t seed;
    int failures;
    char why[TW_ERROR_MAX];
} put_thread;

static void *
put_main(void *arg)
{
    put_thread *t = arg;
    size_t i;

    for (i = (size_t)t->id; i < t->n_rects; i += (size_t)t->n_threads) {
        const rect *r = &t->rects[i];
        /* a stride with slack, as a real tile buffer may have */
        const size_t stride = (size_t)r->w * (size_t)t->channels * tw_sample_size(t->type) + 5;
        uint8_t *buf = malloc(stride * (size_t)r->h);
        tw_tile_view v = {.data = buf, .stride = (int64_t)stride, .w = (int32_t)r->w,
                          .h = (int32_t)r->h, .channels = t->channels, .type = t->type,
                          .x0 = r->x, .y0 = r->y};
        tw_error err = {0};

        if (!buf) {
            t->failures++;
            continue;
        }
        tu_fill(buf, stride, r->x, r->y, r->w, r->h, t->channels, t->type, t->seed, INT64_MAX,
                INT64_MAX);
        /* no cr_assert off the test's thread: count, report after the join */
        if (twi_assembler_put(t->a, r->x, r->y, &v, &err) != TW_OK) {
            t->failures++;
            memcpy(t->why, err.message, sizeof t->why);
        }
        free(buf);
    }
    return NULL;
}

/* The source tiles covering a w x h level, shuffled (deterministically). */
static rect *
make_rects(int64_t w, int64_t h, int32_t sw, int32_t sh, size_t *n)
{
    size_t cap = (size_t)(((w + sw - 1) / sw) * ((h + sh - 1) / sh)), k = 0, i;
    rect *r = malloc(cap * sizeof *r);
    uint64_t seed = 12345;
    int64_t x, y;

    cr_assert_not_null(r);
    for (y = 0; y < h; y += sh)
        for (x = 0; x < w; x += sw)
            r[k++] = (rect){x, y, w - x < sw ? w - x : sw, h - y < sh ? h - y : sh};
    for (i = k; i > 1; i--) {
        size_t j = twtest_rnd(&seed, (uint32_t)i);
        rect tmp = r[i - 1];

        r[i - 1] = r[j];
        r[j] = tmp;
    }
    *n = k;
    return r;
}

/* Decoded tiles of two files, compared byte for byte, directory by directory. */
static void
assert_same_pixels(const char *a, const char *b)
{
    TIFF *ta = TIFFOpen(a, "r"), *tb = TIFFOpen(b, "r");
    tdir_t d;

    cr_assert(ta && tb);
    cr_assert_eq(TIFFNumberOfDirectories(ta), TIFFNumberOfDirectories(tb));
    for (d = 0; d < TIFFNumberOfDirectories(ta); d++) {
        uint32_t i, n;
        tmsize_t sz;
        uint8_t *ba, *bb;

        cr_assert(TIFFSetDirectory(ta, d) && TIFFSetDirectory(tb, d));
        n = TIFFNumberOfTiles(ta);
        cr_assert_eq(n, TIFFNumberOfTiles(tb));
        sz = TIFFTileSize(ta);
        cr_assert_eq(sz, TIFFTileSize(tb));
        ba = malloc((size_t)sz);
        bb = malloc((size_t)sz);
        for (i = 0; i < n; i++) {
            cr_assert_eq(TIFFReadEncodedTile(ta, i, ba, sz), sz);
            cr_assert_eq(TIFFReadEncodedTile(tb, i, bb, sz), sz);
            cr_assert(memcmp(ba, bb, (size_t)sz) == 0, "tile %u of directory %u differs", i,
                      (unsigned)d);
        }
        free(ba);
        free(bb);
    }
    TIFFClose(ta);
    TIFFClose(tb);
}

ParameterizedTestParameters(assembler, same_file_as_direct_write)
{
    static acase cases[] = {
        {1, 1, 32, 16, 70, 45, 1, TW_U8, 1, false},
        {7, 5, 48, 32, 150, 110, 3, TW_U8, 2, false},
        {16, 16, 16, 16, 150, 110, 1, TW_U16, 1, false},
        {100, 37, 32, 48, 150, 110, 1, TW_F32, 2, false},
        {64, 48, 64, 48, 200, 130, 3, TW_U16, 2, false},
        {128, 96, 64, 48, 200, 130, 1, TW_U8, 3, false},
        {500, 500, 32, 32, 150, 110, 1, TW_U32, 2, false},
        {33, 17, 16, 32, 97, 71, 3, TW_U8, 3, false},
        {7, 5, 48, 32, 150, 110, 3, TW_U8, 2, true},
        {100, 37, 32, 48, 150, 110, 1, TW_F32, 2, true},
        {33, 17, 16, 32, 97, 71, 3, TW_U16, 3, true},
    };

    return cr_make_param_array(acase, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(acase *c, assembler, same_file_as_direct_write)
{
    /* Operation tiles of sizes 1x1, 7x5, 16x16, 100x37, equal to the output tile, a multiple
     * of it, larger than the image, put from four threads in shuffled order level after
     * level, give a file with the same pixels as tiles written directly; also with the
     * partial tiles kept in a scratch file. */
    enum { T = 4 };
    char *dir = twtest_tmpdir();
    char *direct = twtest_path(dir, "direct.tif"), *assembled = twtest_path(dir, "asm.tif");
    tw_writer_opts o;
    tw_writer *wr = NULL;
    tw_error err = {0};
    int64_t lw, lh;
    int l, i;

    tw_writer_opts_init(&o);
    o.w = c->w;
    o.h = c->h;
    o.tile_w = c->tw;
    o.tile_h = c->th;
    o.channels = c->channels;
    o.type = c->type;
    o.n_levels = c->n_levels;
    o.compression = TW_COMPRESS_ZSTD;
    cr_assert_eq(tu_write(direct, &o, 77, &err), TW_OK, "%s", err.message);

    cr_assert_eq(tw_writer_open(assembled, &o, &wr, &err), TW_OK, "%s", err.message);
    lw = c->w;
    lh = c->h;
    for (l = 0; l < c->n_levels; l++) {
        twi_assembler *a = NULL;
        pthread_t th[T];
        put_thread pt[T];
        size_t n;
        rect *rects = make_rects(lw, lh, c->sw, c->sh, &n);

        cr_assert_eq(twi_assembler_create(wr, l, lw, lh, c->tw, c->th, c->channels, c->type, &a),
                     TW_OK);
        if (c->scratch)
            cr_assert_eq(twi_assembler_set_scratch(a, dir, &err), TW_OK, "%s", err.message);
        for (i = 0; i < T; i++) {
            pt[i] = (put_thread){.a = a, .rects = rects, .n_rects = n, .id = i, .n_threads = T,
                                 .channels = c->channels, .type = c->type,
                                 .seed = tu_level_seed(77, l)};
            pthread_create(&th[i], NULL, put_main, &pt[i]);
        }
        for (i = 0; i < T; i++) {
            pthread_join(th[i], NULL);
            cr_assert_eq(pt[i].failures, 0, "level %d thread %d: %s", l, i, pt[i].why);
        }
        twi_assembler_destroy(a);
        free(rects);
        lw = (lw + 1) / 2;
        lh = (lh + 1) / 2;
    }
    cr_assert_eq(tw_writer_close(wr, &err), TW_OK, "%s", err.message);
    assert_same_pixels(direct, assembled);
    tu_check_with_libtiff(assembled, &o, 77);
    twtest_rmtree(dir);
    free(direct);
    free(assembled);
    free(dir);
}

static tw_writer *
small_writer(const char *path, tw_sample_type type)
{
    tw_writer_opts o;
    tw_writer *wr = NULL;
    tw_error err = {0};

    tw_writer_opts_init(&o);
    o.w = 150;
    o.h = 40;
    o.tile_w = o.tile_h = 32;
    o.type = type;
    cr_assert_eq(tw_writer_open(path, &o, &wr, &err), TW_OK, "%s", err.message);
    return wr;
}

Test(assembler, rejects_bad_puts)
{
    /* Pixels put twice (through a partial tile or a whole one), a tile outside the level, a
     * tile of another type or too short a stride: TW_E_INVALID with a message. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "bad.tif");
    tw_writer *wr = small_writer(path, TW_U8);
    twi_assembler *a = NULL;
    uint8_t buf[32 * 32] = {0};
    tw_tile_view v = {.data = buf, .stride = 32, .w = 10, .h = 10, .channels = 1, .type = TW_U8};
    tw_error err = {0};

    cr_assert_eq(twi_assembler_create(wr, 0, 150, 40, 32, 32, 1, TW_U8, &a), TW_OK);
    /* detected once the count passes the tile's area (a partial overlap that does not is
     * the caller's bug, caught by close as a missing tile or by the writer as a tile
     * written twice) */
    cr_assert_eq(twi_assembler_put(a, 0, 0, &v, &err), TW_OK);
    v.w = v.h = 32;
    cr_assert_eq(twi_assembler_put(a, 0, 0, &v, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "io.assembler: pixels of output tile (0,0) of level 0 put twice");
    cr_assert_eq(twi_assembler_put(a, 32, 0, &v, &err), TW_OK);
    cr_assert_eq(twi_assembler_put(a, 32, 0, &v, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "output tile (1,0) of level 0 put twice");
    v.w = 30;
    cr_assert_eq(twi_assembler_put(a, 64, 0, &v, &err), TW_OK);
    cr_assert_eq(twi_assembler_put(a, 64, 0, &v, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "output tile (2,0) of level 0 put twice");
    v.w = 20;
    cr_assert_eq(twi_assembler_put(a, 140, 0, &v, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "tile 140,0,20x32 is outside level 0 (150x40)");
    cr_assert_eq(twi_assembler_put(a, -1, 0, &v, &err), TW_E_INVALID);
    v.type = TW_U16;
    cr_assert_eq(twi_assembler_put(a, 64, 0, &v, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "u16");
    v.type = TW_U8;
    v.stride = 8;
    cr_assert_eq(twi_assembler_put(a, 64, 0, &v, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "stride 8");
    cr_assert_eq(twi_assembler_put(a, 64, 0, NULL, &err), TW_E_INVALID);
    twi_assembler_destroy(a);
    twi_assembler_destroy(NULL);
    tw_writer_abort(wr);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(assembler, create_checks_the_writer)
{
    /* An assembler must match its writer: level, level size, tile size, channels, type. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "c.tif");
    tw_writer *wr = small_writer(path, TW_U16);
    twi_assembler *a = NULL;

    cr_assert_eq(twi_assembler_create(wr, 1, 75, 20, 32, 32, 1, TW_U16, &a), TW_E_INVALID);
    cr_assert_eq(twi_assembler_create(wr, 0, 151, 40, 32, 32, 1, TW_U16, &a), TW_E_INVALID);
    cr_assert_eq(twi_assembler_create(wr, 0, 150, 40, 16, 32, 1, TW_U16, &a), TW_E_INVALID);
    cr_assert_eq(twi_assembler_create(wr, 0, 150, 40, 32, 32, 3, TW_U16, &a), TW_E_INVALID);
    cr_assert_eq(twi_assembler_create(wr, 0, 150, 40, 32, 32, 1, TW_U8, &a), TW_E_INVALID);
    cr_assert_null(a);
    cr_assert_eq(twi_assembler_create(wr, 0, 150, 40, 32, 32, 1, TW_U16, &a), TW_OK);
    twi_assembler_destroy(a);
    tw_writer_abort(wr);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(assembler, partial_tiles_are_freed_and_reported_missing)
{
    /* Tiles left partly covered are freed by destroy (nothing is written for them) and the
     * writer's close then names the first of them; no file is left. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "p.tif");
    tw_writer *wr = small_writer(path, TW_U8);
    twi_assembler *a = NULL;
    uint8_t buf[150 * 40] = {0};
    tw_tile_view v = {.data = buf, .stride = 150, .w = 150, .h = 39, .channels = 1,
                      .type = TW_U8};
    tw_error err = {0};

    cr_assert_eq(twi_assembler_create(wr, 0, 150, 40, 32, 32, 1, TW_U8, &a), TW_OK);
    /* all but the last row: the first tile row is complete, the second is partial */
    cr_assert_eq(twi_assembler_put(a, 0, 0, &v, &err), TW_OK, "%s", err.message);
    twi_assembler_destroy(a);
    cr_assert_eq(tw_writer_close(wr, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "tile (0,1) of level 0 was never written (5 of 10 tiles");
    cr_assert_eq(twtest_count_entries(dir), 0);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(assembler, output_tile_and_level_helpers)
{
    /* twi_io_out_tile lines output tiles up with operation tiles where it can;
     * twi_io_max_levels halves until 1x1. */
    cr_assert_eq(twi_io_out_tile(512), 512);
    cr_assert_eq(twi_io_out_tile(256), 256);
    cr_assert_eq(twi_io_out_tile(1024), 1024);
    cr_assert_eq(twi_io_out_tile(64), 256);
    cr_assert_eq(twi_io_out_tile(100), 400);
    cr_assert_eq(twi_io_out_tile(7), 336);
    cr_assert_eq(twi_io_out_tile(1), 256);
    cr_assert_eq(twi_io_out_tile(4096), 1024);
    cr_assert_eq(twi_io_out_tile(1536), 768);
    cr_assert_eq(twi_io_out_tile(3000), 512);
    cr_assert_eq(twi_io_out_tile(1000), 512);
    cr_assert_eq(twi_io_out_tile(0), 512);
    cr_assert_eq(twi_io_out_tile(-5), 512);
    cr_assert_eq(twi_io_max_levels(1, 1), 1);
    cr_assert_eq(twi_io_max_levels(2, 1), 2);
    cr_assert_eq(twi_io_max_levels(1000, 800), 11);
    cr_assert_eq(twi_io_max_levels(1024, 1024), 11);
    cr_assert_eq(twi_io_max_levels(1025, 1), 12);
    cr_assert_eq(twi_io_max_levels(0, 5), 0);
}
