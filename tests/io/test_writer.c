/* SPDX-License-Identifier: MIT */
/* tilewave tests: the tiled BigTIFF writer: round trips, atomic output, option checks. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_testutil.h"
#include "tw_io.h"

typedef struct wcase {
    tw_sample_type type;
    int channels;
    tw_compression compression;
    int64_t w, h;
    int32_t tile_w, tile_h;
    int n_levels;
    int clevel;
} wcase;

ParameterizedTestParameters(writer, round_trip)
{
    static wcase cases[] = {
        {TW_U8, 1, TW_COMPRESS_DEFLATE, 300, 200, 64, 48, 3, 0},
        {TW_U8, 1, TW_COMPRESS_NONE, 77, 51, 16, 16, 4, 0},
        {TW_U16, 1, TW_COMPRESS_ZSTD, 257, 129, 32, 32, 4, 0},
        {TW_U16, 1, TW_COMPRESS_DEFLATE, 100, 100, 48, 64, 2, 9},
        {TW_U32, 1, TW_COMPRESS_NONE, 100, 70, 16, 32, 2, 0},
        {TW_U32, 1, TW_COMPRESS_ZSTD, 90, 33, 32, 16, 3, 19},
        {TW_F32, 1, TW_COMPRESS_DEFLATE, 333, 111, 64, 64, 3, 1},
        {TW_F32, 1, TW_COMPRESS_ZSTD, 1, 1, 16, 16, 1, 0},
        {TW_U8, 3, TW_COMPRESS_ZSTD, 200, 300, 48, 80, 3, 0},
        {TW_U8, 3, TW_COMPRESS_NONE, 64, 64, 64, 64, 1, 0},
        {TW_U16, 3, TW_COMPRESS_DEFLATE, 130, 90, 64, 32, 2, 0},
        {TW_U16, 3, TW_COMPRESS_ZSTD, 31, 250, 16, 48, 5, 0},
    };

    return cr_make_param_array(wcase, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(wcase *c, writer, round_trip)
{
    /* Each sample type, channel count and codec, with sizes that are not tile multiples and
     * several levels, reads back exactly, padding included, with libtiff alone and with
     * tw_slide (TW_READER_TIFF). */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "rt.tif");
    tw_writer_opts o;
    tw_error err = {0};
    tw_slide *s = NULL;
    int64_t lw, lh;
    int l;

    tw_writer_opts_init(&o);
    o.type = c->type;
    o.channels = c->channels;
    o.compression = c->compression;
    o.level_of_compression = c->clevel;
    o.w = c->w;
    o.h = c->h;
    o.tile_w = c->tile_w;
    o.tile_h = c->tile_h;
    o.n_levels = c->n_levels;
    cr_assert_eq(tu_write(path, &o, 42, &err), TW_OK, "%s", err.message);
    tu_check_with_libtiff(path, &o, 42);

    cr_assert_eq(tw_slide_open(path, TW_READER_TIFF, &s, &err), TW_OK, "%s", err.message);
    cr_assert_str_eq(tw_slide_get_format(s), "tiff");
    cr_assert_eq(tw_slide_get_reader(s), TW_READER_TIFF);
    cr_assert_eq(tw_slide_get_level_count(s), c->n_levels);
    cr_assert_eq(tw_slide_get_channels(s), c->channels);
    cr_assert_eq(tw_slide_get_sample_type(s), c->type);
    lw = c->w;
    lh = c->h;
    for (l = 0; l < c->n_levels; l++) {
        tw_level_info li;
        uint64_t seed = tu_level_seed(42, l);

        cr_assert_eq(tw_slide_get_level(s, l, &li), TW_OK);
        cr_assert_eq(li.w, lw);
        cr_assert_eq(li.h, lh);
        cr_assert_eq(li.tile_w, c->tile_w);
        cr_assert_eq(li.tile_h, c->tile_h);
        cr_assert_float_eq(li.downsample, (double)c->w / (double)lw, 1e-12);
        tu_check_region(s, l, 0, 0, lw, lh, seed);
        /* regions that start and end inside tiles and cross tile borders */
        tu_check_region(s, l, lw / 3, lh / 4, lw - lw / 3, (lh + 1) / 2, seed);
        tu_check_region(s, l, lw - 1, lh - 1, 1, 1, seed);
        if (lw > c->tile_w + 2 && lh > c->tile_h + 2)
            tu_check_region(s, l, c->tile_w - 1, c->tile_h - 1, 3, 3, seed);
        lw = (lw + 1) / 2;
        lh = (lh + 1) / 2;
    }
    tw_slide_close(s);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

typedef struct par_writer {
    tw_writer *wr;
    const tw_writer_opts *o;
    pthread_barrier_t *barrier;
    int id, n_threads;
    tw_status st;
} par_writer;

static void *
par_write_main(void *arg)
{
    par_writer *p = arg;
    const tw_writer_opts *o = p->o;
    const size_t stride = (size_t)o->tile_w * (size_t)o->channels * tw_sample_size(o->type);
    uint8_t *tile = malloc(stride * (size_t)o->tile_h);
    int64_t lw = o->w, lh = o->h, k;
    int l;

    for (l = 0; l < o->n_levels; l++) {
        const int64_t tx_n = (lw + o->tile_w - 1) / o->tile_w;
        const int64_t n = tx_n * ((lh + o->tile_h - 1) / o->tile_h);

        /* thread i takes tiles i, i + T, ... backwards, so appends come out of order */
        for (k = n - 1 - p->id; k >= 0; k -= p->n_threads) {
            const int64_t tx = k % tx_n, ty = k / tx_n;
            tw_error err;
            tw_status st;

            tu_fill(tile, stride, tx * o->tile_w, ty * o->tile_h, o->tile_w, o->tile_h,
                    o->channels, o->type, tu_level_seed(7, l), INT64_MAX, INT64_MAX);
            st = tw_writer_write_tile(p->wr, l, tx, ty, tile, stride, &err);
            if (st != TW_OK && p->st == TW_OK)
                p->st = st;
        }
        /* level k+1 only once every thread has written its share of level k */
        pthread_barrier_wait(p->barrier);
        lw = (lw + 1) / 2;
        lh = (lh + 1) / 2;
    }
    free(tile);
    return NULL;
}

/* Write every level of `o` into `path` from four threads, each taking tiles backwards (so
 * appends come out of order), through the writer thread when `thread`; close; the file holds
 * exactly the reference at every level. */
static void
write_from_four_threads(const char *path, const tw_writer_opts *o, bool thread)
{
    enum { T = 4 };
    pthread_t th[T];
    par_writer pw[T];
    pthread_barrier_t barrier;
    tw_writer *wr = NULL;
    tw_error err = {0};

    cr_assert_eq(tw_writer_open(path, o, &wr, &err), TW_OK, "%s", err.message);
    if (thread)
        cr_assert_eq(twi_writer_start_thread(wr, &err), TW_OK, "%s", err.message);
    pthread_barrier_init(&barrier, NULL, T);
    for (int i = 0; i < T; i++) {
        pw[i] = (par_writer){.wr = wr, .o = o, .barrier = &barrier, .id = i, .n_threads = T};
        pthread_create(&th[i], NULL, par_write_main, &pw[i]);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(pw[i].st, TW_OK);
    }
    pthread_barrier_destroy(&barrier);
    cr_assert_eq(tw_writer_close(wr, &err), TW_OK, "%s", err.message);
    tu_check_with_libtiff(path, o, 7);
}

Test(writer, concurrent_tiles_from_many_threads)
{
    /* Four threads write the tiles of each level concurrently, in reverse order; the file
     * holds exactly the reference at every level. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "par.tif");
    tw_writer_opts o;

    tw_writer_opts_init(&o);
    o.w = 517;
    o.h = 301;
    o.channels = 3;
    o.tile_w = 64;
    o.tile_h = 32;
    o.n_levels = 4;
    o.compression = TW_COMPRESS_ZSTD;
    write_from_four_threads(path, &o, false);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

static tw_writer *
open_small(const char *path, int n_levels)
{
    tw_writer_opts o;
    tw_writer *wr = NULL;
    tw_error err = {0};

    tw_writer_opts_init(&o);
    o.w = 40;
    o.h = 20;
    o.tile_w = o.tile_h = 16;
    o.n_levels = n_levels;
    cr_assert_eq(tw_writer_open(path, &o, &wr, &err), TW_OK, "%s", err.message);
    return wr;
}

static void
write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static bool
file_has(const char *path, const char *text)
{
    char buf[64] = {0};
    FILE *f = fopen(path, "r");
    size_t n;

    if (!f)
        return false;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    return n == strlen(text) && memcmp(buf, text, n) == 0;
}

Test(writer, abort_leaves_nothing)
{
    /* A writer abandoned after some tiles leaves no file at all: neither the output nor the
     * temporary file. While open, the file is nameless (O_TMPFILE), or, where the file system
     * lacks O_TMPFILE, hidden in the output's folder as ".a.tif.tw-XXXXXX". */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "a.tif");
    uint8_t tile[16 * 16] = {1};
    tw_writer *wr = open_small(path, 1);

    cr_assert_eq(tw_writer_write_tile(wr, 0, 0, 0, tile, 16, NULL), TW_OK);
    cr_assert(!twtest_exists(path), "the output exists before close");
    cr_assert_eq(twtest_count_entries(dir), twtest_count_prefixed(dir, ".a.tif.tw-"),
                 "a file other than the temporary one while writing");
    cr_assert_leq(twtest_count_entries(dir), 1, "more than one temporary file while writing");
    tw_writer_abort(wr);
    cr_assert_eq(twtest_count_entries(dir), 0, "abort left a file");
    tw_writer_abort(NULL);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(writer, close_with_missing_tile_fails_and_keeps_old_file)
{
    /* Closing with a tile never written fails with TW_E_INVALID naming the first missing
     * tile; the temporary file is removed and a file already at the output path is left as
     * it was. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "m.tif");
    uint8_t tile[16 * 16] = {0};
    tw_error err = {0};
    tw_writer *wr;
    int64_t tx, ty;

    write_file(path, "old");
    wr = open_small(path, 1);
    for (ty = 0; ty < 2; ty++)
        for (tx = 0; tx < 3; tx++)
            if (!(tx == 1 && ty == 1))
                cr_assert_eq(tw_writer_write_tile(wr, 0, tx, ty, tile, 16, &err), TW_OK);
    cr_assert_eq(tw_writer_close(wr, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "tile (1,1) of level 0 was never written");
    TU_ASSERT_MSG(err, "1 of 6 tiles");
    TU_ASSERT_ONE_LINE(err);
    cr_assert_eq(twtest_count_entries(dir), 1);
    cr_assert(file_has(path, "old"), "the old file was touched");
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(writer, close_with_missing_level_fails)
{
    /* A pyramid whose level 1 was never written is incomplete: close reports level 1. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "m2.tif");
    uint8_t tile[16 * 16] = {0};
    tw_error err = {0};
    tw_writer *wr = open_small(path, 2);
    int64_t tx, ty;

    for (ty = 0; ty < 2; ty++)
        for (tx = 0; tx < 3; tx++)
            cr_assert_eq(tw_writer_write_tile(wr, 0, tx, ty, tile, 16, &err), TW_OK);
    cr_assert_eq(tw_writer_close(wr, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "tile (0,0) of level 1 was never written");
    cr_assert_eq(twtest_count_entries(dir), 0);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(writer, success_replaces_existing_file_with_mode_0644)
{
    /* A complete write replaces a file already at the output path; the result is an
     * ordinary 0644 file and nothing else is left in the folder. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "r.tif");
    tw_writer_opts o;
    tw_error err = {0};
    struct stat sb;

    write_file(path, "old");
    tw_writer_opts_init(&o);
    o.w = 40;
    o.h = 20;
    o.tile_w = o.tile_h = 16;
    cr_assert_eq(tu_write(path, &o, 1, &err), TW_OK, "%s", err.message);
    cr_assert_eq(twtest_count_entries(dir), 1);
    cr_assert(!file_has(path, "old"));
    cr_assert_eq(stat(path, &sb), 0);
    cr_assert_eq(sb.st_mode & 0777, 0644);
    tu_check_with_libtiff(path, &o, 1);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(writer, rejects_tile_twice_and_outside_the_grid)
{
    /* A tile written twice (also one of a later level, kept aside until its level's turn) and
     * tiles outside the grid are TW_E_INVALID with a message; the writer stays usable. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "o.tif");
    uint8_t tile[16 * 16] = {0};
    tw_error err = {0};
    tw_writer *wr = open_small(path, 2);

    cr_assert_eq(tw_writer_write_tile(wr, 0, 0, 0, tile, 16, &err), TW_OK);
    cr_assert_eq(tw_writer_write_tile(wr, 0, 0, 0, tile, 16, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "tile (0,0) of level 0 is written twice");
    cr_assert_eq(tw_writer_write_tile(wr, 1, 0, 0, tile, 16, &err), TW_OK);
    cr_assert_eq(tw_writer_write_tile(wr, 1, 0, 0, tile, 16, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "tile (0,0) of level 1 is written twice");
    cr_assert_eq(tw_writer_write_tile(wr, 0, 3, 0, tile, 16, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "outside level 0");
    cr_assert_eq(tw_writer_write_tile(wr, 2, 0, 0, tile, 16, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "level 2 does not exist");
    cr_assert_eq(tw_writer_write_tile(wr, 0, 1, 0, tile, 8, &err), TW_E_INVALID);
    TU_ASSERT_MSG(err, "stride 8");
    cr_assert_eq(tw_writer_write_tile(wr, 0, 1, 0, tile, 16, &err), TW_OK);
    tw_writer_abort(wr);
    cr_assert_eq(twtest_count_entries(dir), 0);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

static tw_status
try_open(void (*edit)(tw_writer_opts *), tw_error *err)
{
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "v.tif");
    tw_writer_opts o;
    tw_writer *wr = NULL;
    tw_status st;

    tw_writer_opts_init(&o);
    o.w = 1000;
    o.h = 800;
    edit(&o);
    st = tw_writer_open(path, &o, &wr, err);
    if (st == TW_OK)
        tw_writer_abort(wr);
    cr_assert_eq(twtest_count_entries(dir), 0, "a rejected writer left a file");
    twtest_rmtree(dir);
    free(path);
    free(dir);
    return st;
}

static void edit_tile(tw_writer_opts *o) { o->tile_w = 100; }
static void edit_tile0(tw_writer_opts *o) { o->tile_h = 0; }
static void edit_channels(tw_writer_opts *o) { o->channels = 2; }
static void edit_rgb_f32(tw_writer_opts *o) { o->channels = 3; o->type = TW_F32; }
static void edit_rgb_u32(tw_writer_opts *o) { o->channels = 3; o->type = TW_U32; }
static void edit_type(tw_writer_opts *o) { o->type = (tw_sample_type)99; }
static void edit_size(tw_writer_opts *o) { o->w = 0; }
static void edit_levels(tw_writer_opts *o) { o->n_levels = 12; }
static void edit_levels0(tw_writer_opts *o) { o->n_levels = 0; }
static void edit_deflate(tw_writer_opts *o) { o->level_of_compression = 13; }
static void
edit_zstd(tw_writer_opts *o)
{
    o->compression = TW_COMPRESS_ZSTD;
    o->level_of_compression = 23;
}
static void edit_codec(tw_writer_opts *o) { o->compression = (tw_compression)7; }
static void edit_mpp(tw_writer_opts *o) { o->mpp_x = -1; }
static void edit_struct(tw_writer_opts *o) { o->struct_size = 0; }
static void edit_max_levels(tw_writer_opts *o) { o->n_levels = 11; }

Test(writer, validates_options)
{
    /* Each bad option is TW_E_INVALID with a one-line message naming it; the largest level
     * count the size allows is accepted. */
    static const struct {
        void (*edit)(tw_writer_opts *);
        const char *sub;
    } bad[] = {
        {edit_tile, "tile size 100x512 is invalid (multiples of 16"},
        {edit_tile0, "tile size 512x0"},
        {edit_channels, "2 channels"},
        {edit_rgb_f32, "need u8 or u16 samples, not f32"},
        {edit_rgb_u32, "not u32"},
        {edit_type, "unknown sample type 99"},
        {edit_size, "image size 0x800"},
        {edit_levels, "12 levels requested, a 1000x800 image allows 1..11"},
        {edit_levels0, "0 levels requested"},
        {edit_deflate, "deflate level 13 is out of range (1..12"},
        {edit_zstd, "zstd level 23"},
        {edit_codec, "unknown compression 7"},
        {edit_mpp, "mpp -1"},
        {edit_struct, "tw_writer_opts_init"},
    };
    tw_error err = {0};
    size_t i;

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        cr_assert_eq(try_open(bad[i].edit, &err), TW_E_INVALID, "case %zu", i);
        cr_assert_eq(err.status, TW_E_INVALID);
        TU_ASSERT_MSG(err, bad[i].sub);
        TU_ASSERT_MSG(err, "io.writer: ");
        TU_ASSERT_ONE_LINE(err);
    }
    cr_assert_eq(try_open(edit_max_levels, &err), TW_OK, "%s", err.message);
}

Test(writer, missing_folder_is_io_error)
{
    /* An output folder that does not exist: TW_E_IO naming the path and the system's
     * reason. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "nope/out.tif");
    tw_writer_opts o;
    tw_writer *wr = NULL;
    tw_error err = {0};

    tw_writer_opts_init(&o);
    o.w = o.h = 10;
    cr_assert_eq(tw_writer_open(path, &o, &wr, &err), TW_E_IO);
    cr_assert_null(wr);
    TU_ASSERT_MSG(err, path);
    TU_ASSERT_MSG(err, strerror(ENOENT));
    TU_ASSERT_ONE_LINE(err);
    /* an output path that is a folder, or a device: refused, saying what it is */
    cr_assert_eq(tw_writer_open(dir, &o, &wr, &err), TW_E_IO);
    TU_ASSERT_MSG(err, "is a directory, not a regular file");
    cr_assert_eq(tw_writer_open("/dev/null", &o, &wr, &err), TW_E_IO);
    TU_ASSERT_MSG(err, "'/dev/null' is a character device, not a regular file");
    TU_ASSERT_ONE_LINE(err);
    cr_assert_eq(twtest_count_entries(dir), 0);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(writer, mpp_description_software_round_trip)
{
    /* mpp becomes XResolution/YResolution in pixels per cm (scaled per level) and reads back
     * as the same mpp; ImageDescription and Software become properties. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "mpp.tif");
    tw_writer_opts o;
    tw_error err = {0};
    tw_slide *s = NULL;
    double mx = 0, my = 0;
    float xr = 0, xr1 = 0;
    uint16_t unit = 0;
    TIFF *tif;

    tw_writer_opts_init(&o);
    o.w = 64;
    o.h = 48;
    o.tile_w = o.tile_h = 32;
    o.n_levels = 2;
    o.mpp_x = 0.2527;
    o.mpp_y = 0.5;
    o.description = "tilewave test|MPP = 0.2527";
    o.software = "tilewave 0.1";
    cr_assert_eq(tu_write(path, &o, 3, &err), TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_open(path, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    tw_slide_get_mpp(s, &mx, &my);
    cr_assert_float_eq(mx, 0.2527, 1e-6);
    cr_assert_float_eq(my, 0.5, 1e-6);
    cr_assert_str_eq(tw_slide_get_property(s, "tiff.ImageDescription"),
                     "tilewave test|MPP = 0.2527");
    cr_assert_str_eq(tw_slide_get_property(s, "tiff.Software"), "tilewave 0.1");
    cr_assert_str_eq(tw_slide_get_property(s, "tiff.ResolutionUnit"), "centimeter");
    tw_slide_close(s);

    tif = TIFFOpen(path, "r");
    cr_assert_not_null(tif);
    cr_assert(TIFFGetField(tif, TIFFTAG_XRESOLUTION, &xr));
    cr_assert(TIFFGetField(tif, TIFFTAG_RESOLUTIONUNIT, &unit));
    cr_assert_eq(unit, RESUNIT_CENTIMETER);
    cr_assert(TIFFSetDirectory(tif, 1));
    cr_assert(TIFFGetField(tif, TIFFTAG_XRESOLUTION, &xr1));
    cr_assert_float_eq((double)xr1 * 2, (double)xr, 1e-2, "level 1 has half the resolution");
    TIFFClose(tif);

    /* The tags hold 32-bit floats (0.499 um reads back as 0.49899999...): with its own
     * description's MPP agreeing to that precision, a tilewave output reads back exactly what
     * was written, on both readers; a description that disagrees with the tags loses to them. */
    {
        static const struct {
            double tags, desc, want;
        } c[] = {{0.499, 0.499, 0.499}, {0.2527, 0.2527, 0.2527}, {0.499, 0.3, 0.0}};

        for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
            for (int rd = 0; rd < 2; rd++) {
                char desc[64];

                snprintf(desc, sizeof desc, "tilewave test|MPP = %.10g", c[i].desc);
                o.mpp_x = o.mpp_y = c[i].tags;
                o.description = desc;
                cr_assert_eq(tu_write(path, &o, 3, &err), TW_OK, "%s", err.message);
                cr_assert_eq(tw_slide_open(path, rd ? TW_READER_OPENSLIDE : TW_READER_TIFF, &s,
                                           &err),
                             TW_OK, "%s", err.message);
                tw_slide_get_mpp(s, &mx, &my);
                if (c[i].want > 0) {
                    cr_assert(mx == c[i].want && my == c[i].want, "case %zu reader %d: %.17g",
                              i, rd, mx);
                } else { /* the tags', to a float's precision */
                    cr_assert_float_eq(mx, c[i].tags, 1e-6);
                    cr_assert(mx != c[i].tags, "the float tags are not exact here");
                }
                tw_slide_close(s);
            }
    }

    /* no mpp: no resolution tags, mpp 0 */
    o.mpp_x = o.mpp_y = 0;
    o.description = o.software = NULL;
    cr_assert_eq(tu_write(path, &o, 3, &err), TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_open(path, TW_READER_TIFF, &s, &err), TW_OK, "%s", err.message);
    tw_slide_get_mpp(s, &mx, &my);
    cr_assert_eq(mx, 0.0);
    cr_assert_eq(my, 0.0);
    cr_assert_null(tw_slide_get_property(s, "tiff.XResolution"));
    cr_assert_null(tw_slide_get_property(s, "tiff.ImageDescription"));
    tw_slide_close(s);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(writer, compression_parse)
{
    /* The five codec names parse; anything else is TW_E_INVALID. */
    tw_compression c = TW_COMPRESS_NONE;

    cr_assert_eq(tw_compression_parse("deflate", &c), TW_OK);
    cr_assert_eq(c, TW_COMPRESS_DEFLATE);
    cr_assert_eq(tw_compression_parse("zstd", &c), TW_OK);
    cr_assert_eq(c, TW_COMPRESS_ZSTD);
    cr_assert_eq(tw_compression_parse("none", &c), TW_OK);
    cr_assert_eq(c, TW_COMPRESS_NONE);
    cr_assert_eq(tw_compression_parse("lzw", &c), TW_OK);
    cr_assert_eq(c, TW_COMPRESS_LZW);
    cr_assert_eq(tw_compression_parse("jpeg", &c), TW_OK);
    cr_assert_eq(c, TW_COMPRESS_JPEG);
    cr_assert_eq(tw_compression_parse("JPEG", &c), TW_E_INVALID);
    cr_assert_eq(tw_compression_parse("", &c), TW_E_INVALID);
    cr_assert_eq(tw_compression_parse(NULL, &c), TW_E_INVALID);
    cr_assert_eq(tw_compression_parse("zstd", NULL), TW_E_INVALID);
}

Test(writer, opts_init_defaults)
{
    /* The documented defaults: 512x512 tiles, deflate, one level, gray u8. */
    tw_writer_opts o;

    memset(&o, 0x5a, sizeof o);
    tw_writer_opts_init(&o);
    cr_assert_eq(o.struct_size, sizeof o);
    cr_assert_eq(o.tile_w, 512);
    cr_assert_eq(o.tile_h, 512);
    cr_assert_eq(o.compression, TW_COMPRESS_DEFLATE);
    cr_assert_eq(o.n_levels, 1);
    cr_assert_eq(o.channels, 1);
    cr_assert_eq(o.type, TW_U8);
    cr_assert_eq(o.level_of_compression, 0);
    cr_assert_null(o.description);
    cr_assert_null(o.software);
}

/* ---- deflate (libdeflate, zlib streams): every level keeps every pixel */

typedef struct dcase {
    tw_sample_type type;
    int channels;
} dcase;

ParameterizedTestParameters(writer, deflate_levels_keep_every_pixel)
{
    static dcase cases[] = {
        {TW_U8, 1}, {TW_U16, 1}, {TW_F32, 1}, {TW_U8, 3}, {TW_U16, 3},
    };

    return cr_make_param_array(dcase, cases, sizeof cases / sizeof cases[0]);
}

enum { DK_RANDOM, DK_FLAT, DK_GRADIENT, DK_MASK, DK_KINDS };

/* The bits of sample c of (x, y) in a tile of content `kind`: incompressible noise, one
 * value, a ramp, or a sparse 0/max mask (what thresholded operations write). */
static uint64_t
deflate_bits(int kind, int64_t x, int64_t y, int c)
{
    switch (kind) {
    case DK_RANDOM: return tu_sample_bits(77, x, y, c);
    case DK_FLAT: return 0x3c5a6b7d8e9fa1b2ULL;
    case DK_GRADIENT: return (uint64_t)(3 * x + 5 * y + 11 * c);
    default: return tu_sample_bits(78, x, y, 0) % 61 == 0 ? UINT64_MAX : 0;
    }
}

/* Tile (tx, ty) of content `kind`, zeros at and beyond (w, h) when those are given. */
static void
deflate_fill(uint8_t *tile, const tw_writer_opts *o, int64_t tx, int64_t ty, int kind,
             int64_t w, int64_t h)
{
    const size_t ss = tw_sample_size(o->type), px = ss * (size_t)o->channels;

    for (int64_t y = 0; y < o->tile_h; y++)
        for (int64_t x = 0; x < o->tile_w; x++)
            for (int c = 0; c < o->channels; c++) {
                const int64_t gx = tx * o->tile_w + x, gy = ty * o->tile_h + y;
                uint8_t *p = tile + (size_t)(y * o->tile_w + x) * px + (size_t)c * ss;

                if (gx >= w || gy >= h)
                    memset(p, 0, ss);
                else
                    tu_store(p, o->type, deflate_bits(kind, gx, gy, c));
            }
}

ParameterizedTest(dcase *c, writer, deflate_levels_keep_every_pixel)
{
    /* Deflate at the default level (0), the extremes (1 and 12: libdeflate's range) and
     * levels between, on tiles of noise, one value, a ramp and a sparse mask, edge tiles
     * padded: libtiff reads back every pixel exactly; the compression tag is 8 (Adobe
     * deflate) and every tile is a zlib stream (CM 8, header check), what every TIFF reader
     * decodes; a flat tile takes a small fraction of its raw size. */
    static const int levels[] = {0, 1, 2, 6, 9, 10, 12};
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "deflate.tif");
    tw_writer_opts o;
    tw_error err = {0};

    tw_writer_opts_init(&o);
    o.type = c->type;
    o.channels = c->channels;
    o.tile_w = 128;
    o.tile_h = 64;
    o.w = 4 * 128 - 13; /* the last column and row of tiles is partial */
    o.h = 2 * 64 - 5;
    o.compression = TW_COMPRESS_DEFLATE;
    for (size_t l = 0; l < sizeof levels / sizeof levels[0]; l++) {
        const size_t tbytes =
            (size_t)o.tile_w * (size_t)o.tile_h * (size_t)o.channels * tw_sample_size(o.type);
        uint8_t *tile = malloc(tbytes), *got = malloc(tbytes), *raw = malloc(2 * tbytes);
        tw_writer *wr = NULL;
        TIFF *tif;
        uint16_t comp = 0;

        cr_assert(tile && got && raw);
        o.level_of_compression = levels[l];
        cr_assert_eq(tw_writer_open(path, &o, &wr, &err), TW_OK, "%s", err.message);
        for (int64_t ty = 0; ty < 2; ty++)
            for (int64_t tx = 0; tx < 4; tx++) {
                /* beyond the image the content goes on: the writer pads with zeros */
                deflate_fill(tile, &o, tx, ty, (int)((tx + ty) % DK_KINDS), INT64_MAX,
                             INT64_MAX);
                cr_assert_eq(tw_writer_write_tile(wr, 0, tx, ty, tile,
                                                  tbytes / (size_t)o.tile_h, &err),
                             TW_OK, "%s", err.message);
            }
        cr_assert_eq(tw_writer_close(wr, &err), TW_OK, "level %d: %s", levels[l], err.message);

        cr_assert_not_null(tif = TIFFOpen(path, "r"));
        cr_assert(TIFFGetField(tif, TIFFTAG_COMPRESSION, &comp));
        cr_assert_eq(comp, COMPRESSION_ADOBE_DEFLATE);
        cr_assert_eq(comp, 8);
        for (int64_t ty = 0; ty < 2; ty++)
            for (int64_t tx = 0; tx < 4; tx++) {
                const int kind = (int)((tx + ty) % DK_KINDS);
                const uint32_t idx = (uint32_t)(ty * 4 + tx);
                tmsize_t n = TIFFReadRawTile(tif, idx, raw, (tmsize_t)(2 * tbytes));

                cr_assert_gt(n, 2);
                cr_assert_eq(raw[0] & 0x0f, 8, "level %d tile %u: not a zlib stream",
                             levels[l], idx);
                cr_assert_eq((raw[0] * 256 + raw[1]) % 31, 0);
                if (kind == DK_FLAT)
                    cr_assert_lt((size_t)n, tbytes / 50, "level %d: a flat tile of %zu "
                                 "bytes took %ld", levels[l], tbytes, (long)n);
                cr_assert_eq(TIFFReadEncodedTile(tif, idx, got, (tmsize_t)tbytes),
                             (tmsize_t)tbytes);
                deflate_fill(tile, &o, tx, ty, kind, o.w, o.h);
                cr_assert(memcmp(got, tile, tbytes) == 0,
                          "level %d: tile (%ld,%ld) differs (padding included)", levels[l],
                          (long)tx, (long)ty);
            }
        TIFFClose(tif);
        free(tile);
        free(got);
        free(raw);
    }
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(writer, deflate_from_many_threads)
{
    /* Four threads compress deflate tiles at once, directly and through the writer thread,
     * at the default level and at 12 (libdeflate's slowest, largest compressor): the writer's
     * compressor pool hands each thread its own, and the file holds exactly the reference at
     * every level. */
    static const int levels[] = {0, 12};

    for (size_t l = 0; l < 2 * (sizeof levels / sizeof levels[0]); l++) {
        char *dir = twtest_tmpdir();
        char *path = twtest_path(dir, "pd.tif");
        tw_writer_opts o;

        tw_writer_opts_init(&o);
        o.w = 517;
        o.h = 301;
        o.channels = 3;
        o.tile_w = 64;
        o.tile_h = 32;
        o.n_levels = 3;
        o.compression = TW_COMPRESS_DEFLATE;
        o.level_of_compression = levels[l / 2];
        write_from_four_threads(path, &o, l % 2 == 1);
        twtest_rmtree(dir);
        free(path);
        free(dir);
    }
}

/* ---- the writer thread (twi_writer_start_thread: the operations' outputs) */

Test(writer, writer_thread_holds_the_same_pixels)
{
    /* Four threads write every level in reverse order through the writer thread, uncompressed
     * (tiles that point at the caller's buffer, which the caller reuses at once), zstd and LZW
     * (encoded by libtiff on the writer thread): the file holds exactly the reference at every
     * level. */
    static const tw_compression codecs[] = {TW_COMPRESS_NONE, TW_COMPRESS_ZSTD,
                                            TW_COMPRESS_LZW};

    for (size_t c = 0; c < sizeof codecs / sizeof codecs[0]; c++) {
        char *dir = twtest_tmpdir();
        char *path = twtest_path(dir, "thr.tif");
        tw_writer_opts o;

        tw_writer_opts_init(&o);
        o.w = 517;
        o.h = 301;
        o.channels = 1;
        o.type = TW_U16;
        o.tile_w = 32;
        o.tile_h = 16;
        o.n_levels = 4;
        o.compression = codecs[c];
        write_from_four_threads(path, &o, true);
        twtest_rmtree(dir);
        free(path);
        free(dir);
    }
}

Test(writer, writer_thread_reports_a_failed_append_and_leaves_nothing)
{
    /* A file size limit (as on a full disk) makes the writer thread's appends fail: a later
     * write or the close reports TW_E_IO naming the tile and the file, and neither the output
     * nor the temporary file remains. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "full.tif");
    struct rlimit rl = {.rlim_cur = 256 * 1024, .rlim_max = RLIM_INFINITY};
    tw_writer_opts o;
    tw_writer *wr = NULL;
    tw_error err = {0};
    uint8_t *tile = malloc(256 * 256);
    tw_status st = TW_OK, cst;

    cr_assert_not_null(tile);
    signal(SIGXFSZ, SIG_IGN);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    tw_writer_opts_init(&o);
    o.w = o.h = 2048;
    o.tile_w = o.tile_h = 256;
    o.compression = TW_COMPRESS_NONE;
    cr_assert_eq(tw_writer_open(path, &o, &wr, &err), TW_OK, "%s", err.message);
    cr_assert_eq(twi_writer_start_thread(wr, &err), TW_OK, "%s", err.message);
    for (int64_t k = 0; k < 64 && st == TW_OK; k++) {
        memset(tile, (int)k, 256 * 256);
        st = tw_writer_write_tile(wr, 0, k % 8, k / 8, tile, 256, &err);
    }
    cst = tw_writer_close(wr, &err);
    cr_assert(st == TW_E_IO || cst == TW_E_IO, "write %d, close %d", (int)st, (int)cst);
    cr_assert_neq(cst, TW_OK);
    cr_assert(strstr(err.message, "full.tif") != NULL, "%s", err.message);
    cr_assert(strstr(err.message, "cannot write") != NULL, "%s", err.message);
    cr_assert_eq(twtest_count_entries(dir), 0, "a file was left behind");
    free(tile);
    twtest_rmtree(dir);
    free(path);
    free(dir);
}

Test(writer, writer_thread_abort_with_tiles_queued)
{
    /* Aborting while tiles wait for the writer thread stops it, frees them and leaves no
     * file. */
    char *dir = twtest_tmpdir();
    char *path = twtest_path(dir, "ab.tif");
    uint8_t tile[16 * 16] = {3};
    tw_writer *wr = open_small(path, 2);
    tw_error err = {0};

    cr_assert_eq(twi_writer_start_thread(wr, &err), TW_OK, "%s", err.message);
    for (int64_t ty = 0; ty < 2; ty++)
        for (int64_t tx = 0; tx < 3; tx++)
            cr_assert_eq(tw_writer_write_tile(wr, 0, tx, ty, tile, 16, &err), TW_OK, "%s",
                         err.message);
    cr_assert_eq(tw_writer_write_tile(wr, 1, 0, 0, tile, 16, &err), TW_OK, "%s", err.message);
    tw_writer_abort(wr);
    cr_assert_eq(twtest_count_entries(dir), 0, "abort left a file");
    twtest_rmtree(dir);
    free(path);
    free(dir);
}
