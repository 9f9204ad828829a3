/* SPDX-License-Identifier: MIT */
/* tilewave tests: the synthetic sample slide (determinism, TIFF layout, OpenSlide, pixels). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <openslide.h>
#include <tiffio.h>

#include "sample_internal.h"
#include "tilewave.h"
#include "twtest.h"

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

static char *dir;

static void
setup(void)
{
    dir = twtest_tmpdir();
    cr_assert(dir != NULL);
    TIFFSetWarningHandler(NULL);
}

static void
teardown(void)
{
    twtest_rmtree(dir);
    free(dir);
}

TestSuite(sample, .init = setup, .fini = teardown);

/* Write a sample w x h with `seed` and `tile` into dir/name; returns the malloc'd path. */
static char *
write_sample(const char *name, int64_t w, int64_t h, uint64_t seed, int32_t tile)
{
    char *path = twtest_path(dir, name);
    tw_sample_opts o;
    tw_error err = {TW_OK, ""};
    tw_status st;

    tw_sample_opts_init(&o);
    o.w = w;
    o.h = h;
    o.seed = seed;
    o.tile = tile;
    st = tw_sample_write(path, &o, &err);
    cr_assert(eq(int, st, TW_OK), "tw_sample_write: %s", err.message);
    return path;
}

static uint8_t *
read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long sz;

    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)sz + 1);
    cr_assert_not_null(buf);
    cr_assert(fread(buf, 1, (size_t)sz, f) == (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return buf;
}

/* The whole of directory `level` of a tiled 8-bit RGB TIFF as packed RGB (w * 3 per row). */
static uint8_t *
read_tiff_level(const char *path, int level, uint32_t *w_out, uint32_t *h_out)
{
    TIFF *tif = TIFFOpen(path, "r");
    uint32_t w = 0, h = 0, tw = 0, th = 0;
    uint8_t *img, *tile;

    cr_assert_not_null(tif);
    cr_assert(TIFFSetDirectory(tif, (tdir_t)level));
    TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w);
    TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h);
    TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw);
    TIFFGetField(tif, TIFFTAG_TILELENGTH, &th);
    img = malloc((size_t)w * h * 3);
    tile = malloc((size_t)tw * th * 3);
    cr_assert(img && tile);
    for (uint32_t y = 0; y < h; y += th) {
        for (uint32_t x = 0; x < w; x += tw) {
            tmsize_t got = TIFFReadEncodedTile(tif, TIFFComputeTile(tif, x, y, 0, 0), tile,
                                               (tmsize_t)tw * th * 3);

            cr_assert(eq(i64, (int64_t)got, (int64_t)tw * th * 3), "tile (%u, %u)", x, y);
            for (uint32_t j = 0; j < th && y + j < h; j++) {
                uint32_t n = x + tw <= w ? tw : w - x;

                memcpy(img + ((size_t)(y + j) * w + x) * 3, tile + (size_t)j * tw * 3,
                       (size_t)n * 3);
            }
        }
    }
    free(tile);
    TIFFClose(tif);
    *w_out = w;
    *h_out = h;
    return img;
}

Test(sample, same_options_give_identical_bytes)
{
    /* Two writes with the same options give byte-identical files, even when the second one
     * renders with a single thread: the content depends on nothing but the options. */
    char *a = write_sample("a.tif", 1000, 700, 7, 256), *b;
    uint8_t *fa, *fb;
    size_t na, nb;

    omp_set_num_threads(1);
    b = write_sample("b.tif", 1000, 700, 7, 256);
    fa = read_file(a, &na);
    fb = read_file(b, &nb);
    cr_assert(eq(sz, na, nb));
    cr_assert(eq(int, memcmp(fa, fb, na), 0), "files differ");
    free(fa);
    free(fb);
    free(a);
    free(b);
}

Test(sample, bytes_do_not_depend_on_the_thread_count)
{
    /* 1, 2 and 5 OpenMP threads write byte-identical files for a slide of 64-pixel tiles
     * with five levels, glass tiles and tissue (so later levels reach the writer while level
     * 0 streams, and tiles are made out of order by the threads). */
    static const int threads[] = {1, 2, 5};
    uint8_t *ref = NULL;
    size_t nref = 0;

    for (int i = 0; i < 3; i++) {
        char name[16];
        char *path;
        uint8_t *f;
        size_t n;

        omp_set_num_threads(threads[i]);
        snprintf(name, sizeof name, "t%d.tif", threads[i]);
        path = write_sample(name, 1600, 1200, 11, 64);
        f = read_file(path, &n);
        if (!ref) {
            ref = f;
            nref = n;
        } else {
            cr_assert(eq(sz, n, nref), "%d threads", threads[i]);
            cr_assert(eq(int, memcmp(f, ref, n), 0), "%d threads: files differ", threads[i]);
            free(f);
        }
        free(path);
    }
    cr_assert(eq(int, twi_sample_level_count(1600, 1200, 64), 5));
    free(ref);
}

Test(sample, different_seeds_differ)
{
    /* Seeds 1 and 2 give different level-0 pixels. */
    char *a = write_sample("s1.tif", 600, 500, 1, 256);
    char *b = write_sample("s2.tif", 600, 500, 2, 256);
    uint32_t w1, h1, w2, h2;
    uint8_t *p1 = read_tiff_level(a, 0, &w1, &h1), *p2 = read_tiff_level(b, 0, &w2, &h2);
    size_t differ = 0;

    cr_assert(w1 == w2 && h1 == h2);
    for (size_t i = 0; i < (size_t)w1 * h1 * 3; i++)
        differ += p1[i] != p2[i];
    cr_assert(gt(sz, differ, (size_t)w1 * h1 / 4), "only %zu samples differ", differ);
    free(p1);
    free(p2);
    free(a);
    free(b);
}

Test(sample, tiff_directories_form_a_tiled_rgb_pyramid)
{
    /* 1000 x 700 with 256-pixel tiles: three tiled 8-bit RGB directories of 1000x700, 500x350
     * and 250x175 (the last fits one tile), the first carrying the description and software. */
    static const uint32_t want[3][2] = {{1000, 700}, {500, 350}, {250, 175}};
    char *path = write_sample("p.tif", 1000, 700, 1, 256);
    TIFF *tif = TIFFOpen(path, "r");
    int n = 0;

    cr_assert_not_null(tif);
    do {
        uint32_t w = 0, h = 0, tw = 0, th = 0;
        uint16_t spp = 0, bps = 0, photo = 0, planar = 0;

        cr_assert(lt(int, n, 3), "more than 3 directories");
        cr_assert(TIFFIsTiled(tif), "directory %d is not tiled", n);
        TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w);
        TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h);
        TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw);
        TIFFGetField(tif, TIFFTAG_TILELENGTH, &th);
        TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
        TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bps);
        TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
        TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photo);
        cr_assert(eq(u32, w, want[n][0]), "directory %d", n);
        cr_assert(eq(u32, h, want[n][1]), "directory %d", n);
        cr_assert(eq(u32, tw, 256));
        cr_assert(eq(u32, th, 256));
        cr_assert(eq(u16, spp, 3));
        cr_assert(eq(u16, bps, 8));
        cr_assert(eq(u16, photo, PHOTOMETRIC_RGB));
        cr_assert(eq(u16, planar, PLANARCONFIG_CONTIG));
        if (n == 0) {
            const char *desc = NULL, *soft = NULL;

            cr_assert(TIFFGetField(tif, TIFFTAG_IMAGEDESCRIPTION, &desc));
            cr_assert(eq(str, (char *)desc, "tilewave sample 1000x700 seed 1"));
            cr_assert(TIFFGetField(tif, TIFFTAG_SOFTWARE, &soft));
            cr_assert(eq(str, (char *)soft, "tilewave " TW_VERSION_STRING));
        }
        n++;
    } while (TIFFReadDirectory(tif));
    cr_assert(eq(int, n, 2));
    TIFFClose(tif);
    free(path);
}

Test(sample, openslide_opens_it_as_generic_tiff)
{
    /* OpenSlide reports vendor generic-tiff, 2 levels with the pyramid's dimensions, and reads
     * level-1 pixels equal to what libtiff decodes. */
    static const int64_t want[2][2] = {{1000, 700}, {500, 350}};
    char *path = write_sample("o.tif", 1000, 700, 1, 256);
    openslide_t *osr = openslide_open(path);
    const char *vendor;
    uint32_t *argb;
    uint8_t *rgb;
    uint32_t w, h;

    cr_assert_not_null(osr, "openslide_open failed");
    cr_assert_null(openslide_get_error(osr), "%s", openslide_get_error(osr));
    vendor = openslide_get_property_value(osr, OPENSLIDE_PROPERTY_NAME_VENDOR);
    cr_assert_not_null(vendor);
    cr_assert(eq(str, (char *)vendor, "generic-tiff"));
    cr_assert(eq(int, openslide_get_level_count(osr), 2));
    for (int k = 0; k < 2; k++) {
        int64_t lw = 0, lh = 0;

        openslide_get_level_dimensions(osr, k, &lw, &lh);
        cr_assert(eq(i64, lw, want[k][0]), "level %d", k);
        cr_assert(eq(i64, lh, want[k][1]), "level %d", k);
    }
    /* OpenSlide takes level-0 coordinates; (200, 100) is (100, 50) in level 1 */
    argb = malloc(64 * 48 * 4);
    cr_assert_not_null(argb);
    openslide_read_region(osr, argb, 200, 100, 1, 64, 48);
    cr_assert_null(openslide_get_error(osr));
    rgb = read_tiff_level(path, 1, &w, &h);
    for (int j = 0; j < 48; j++) {
        for (int i = 0; i < 64; i++) {
            uint32_t p = argb[j * 64 + i];
            const uint8_t *q = rgb + ((size_t)(50 + j) * w + 100 + i) * 3;

            cr_assert(eq(u32, p >> 24, 255));
            cr_assert(eq(u32, (p >> 16) & 255, q[0]), "pixel (%d, %d)", i, j);
            cr_assert(eq(u32, (p >> 8) & 255, q[1]), "pixel (%d, %d)", i, j);
            cr_assert(eq(u32, p & 255, q[2]), "pixel (%d, %d)", i, j);
        }
    }
    openslide_close(osr);
    free(argb);
    free(rgb);
    free(path);
}

Test(sample, pixels_show_glass_and_tissue)
{
    /* Level 0 has a 256-pixel tile that is mostly glass (> 90 % of pixels above 220 in every
     * channel), tissue covers 25-60 % of the slide, and some pixels are dark nuclei. */
    char *path = write_sample("g.tif", 1000, 700, 1, 256);
    uint32_t w, h;
    uint8_t *img = read_tiff_level(path, 0, &w, &h);
    size_t dark = 0, bright = 0;
    bool glass_tile = false;

    for (uint32_t ty = 0; ty + 256 <= h; ty += 256) {
        for (uint32_t tx = 0; tx + 256 <= w; tx += 256) {
            size_t n = 0;

            for (uint32_t j = 0; j < 256; j++)
                for (uint32_t i = 0; i < 256; i++) {
                    const uint8_t *p = img + ((size_t)(ty + j) * w + tx + i) * 3;

                    n += p[0] > 220 && p[1] > 220 && p[2] > 220;
                }
            glass_tile |= n > 256 * 256 * 9 / 10;
        }
    }
    for (size_t i = 0; i < (size_t)w * h; i++) {
        const uint8_t *p = img + i * 3;

        bright += p[0] > 220 && p[1] > 220 && p[2] > 220;
        dark += p[0] < 140 && p[1] < 110;
    }
    cr_assert(glass_tile, "no background tile");
    cr_assert(gt(sz, dark, (size_t)1000), "only %zu dark pixels", dark);
    cr_assert(gt(sz, bright, (size_t)w * h * 40 / 100), "glass %zu of %u", bright, w * h);
    cr_assert(lt(sz, bright, (size_t)w * h * 75 / 100), "glass %zu of %u", bright, w * h);
    free(img);
    free(path);
}

Test(sample, level1_is_the_2x2_mean_of_level0)
{
    /* Every pixel of level 1 in the file is the mean, rounded half up, of the (up to) 2 x 2
     * pixels of level 0 above it, computed here naively from level 0 as read back by libtiff
     * (odd width and height: the last column and row average 2 pixels, the corner 1). */
    char *path = write_sample("r.tif", 1001, 701, 3, 256);
    uint32_t w0, h0, w1, h1;
    uint8_t *l0 = read_tiff_level(path, 0, &w0, &h0), *l1 = read_tiff_level(path, 1, &w1, &h1);

    cr_assert(eq(u32, w0, 1001));
    cr_assert(eq(u32, h0, 701));
    cr_assert(eq(u32, w1, 501));
    cr_assert(eq(u32, h1, 351));
    for (uint32_t y = 0; y < h1; y++)
        for (uint32_t x = 0; x < w1; x++)
            for (int c = 0; c < 3; c++) {
                unsigned sum = 0, n = 0;

                for (uint32_t yy = 2 * y; yy < 2 * y + 2 && yy < h0; yy++)
                    for (uint32_t xx = 2 * x; xx < 2 * x + 2 && xx < w0; xx++) {
                        sum += l0[((size_t)yy * w0 + xx) * 3 + (size_t)c];
                        n++;
                    }
                cr_assert(eq(u8, l1[((size_t)y * w1 + x) * 3 + (size_t)c],
                             (uint8_t)((sum + n / 2) / n)),
                          "level 1 (%u, %u) channel %d", x, y, c);
            }
    free(l0);
    free(l1);
    free(path);
}

Test(sample, render_does_not_depend_on_the_rectangle)
{
    /* A 300 x 200 region of levels 0 and 2 rendered in one call equals the same region
     * assembled from odd-sized pieces and single pixels. */
    twi_sample_scene sc;
    tw_sample_opts o;
    static const int32_t cuts[] = {0, 1, 37, 130, 299, 300};
    size_t stride = 300 * 3;
    uint8_t *whole = malloc(stride * 200), *parts = malloc(stride * 200);

    cr_assert(whole && parts);
    tw_sample_opts_init(&o);
    o.w = 3000;
    o.h = 2000;
    cr_assert(eq(int, twi_sample_scene_init(&sc, &o, NULL), TW_OK));
    for (int k = 0; k <= 2; k += 2) {
        int64_t x0 = k ? 100 : 1100, y0 = k ? 150 : 700;

        memset(parts, 0, stride * 200);
        cr_assert(eq(int, twi_sample_render(&sc, k, x0, y0, 300, 200, whole, stride), TW_OK));
        for (size_t a = 0; a + 1 < sizeof cuts / sizeof cuts[0]; a++) {
            int32_t x = cuts[a], w = cuts[a + 1] - cuts[a];

            cr_assert(eq(int, twi_sample_render(&sc, k, x0 + x, y0, w, 77, parts + 3 * x,
                                                stride), TW_OK));
            cr_assert(eq(int, twi_sample_render(&sc, k, x0 + x, y0 + 77, w, 123,
                                                parts + 77 * stride + 3 * x, stride), TW_OK));
        }
        cr_assert(eq(int, memcmp(whole, parts, stride * 200), 0), "level %d", k);
        for (int j = 0; j < 200; j += 41) {
            for (int i = 0; i < 300; i += 13) {
                uint8_t px[3];

                cr_assert(eq(int, twi_sample_render(&sc, k, x0 + i, y0 + j, 1, 1, px, 3), TW_OK));
                cr_assert(eq(int, memcmp(px, whole + j * stride + i * 3, 3), 0),
                          "level %d pixel (%d, %d)", k, i, j);
            }
        }
    }
    free(whole);
    free(parts);
}

Test(sample, level_count_halves_until_one_tile)
{
    /* Levels halve while the next one still covers a whole tile both ways (OpenSlide 3.4.1
     * misreads smaller levels): the default 8192 x 6144 with 256-pixel tiles has 5 levels
     * (512 x 384 last); a slide of one tile or less has 1; odd sizes round up. */
    cr_assert(eq(int, twi_sample_level_count(8192, 6144, 256), 5));
    cr_assert(eq(int, twi_sample_level_count(256, 256, 256), 1));
    cr_assert(eq(int, twi_sample_level_count(1, 1, 16), 1));
    cr_assert(eq(int, twi_sample_level_count(257, 1, 256), 1));
    cr_assert(eq(int, twi_sample_level_count(1000, 700, 256), 2));
    cr_assert(eq(int, twi_sample_level_count(1023, 1023, 256), 3));
    cr_assert(eq(int, twi_sample_level_count((int64_t)1 << 20, (int64_t)1 << 20, 256), 13));
}

Test(sample, tiny_and_odd_sizes_write)
{
    /* 1 x 1, 17 x 3 with 16-pixel tiles (several levels) and a 16-pixel-tile slide are valid
     * and OpenSlide opens them. */
    static const int64_t sizes[][3] = {{1, 1, 16}, {17, 3, 16}, {333, 97, 32}};

    for (size_t i = 0; i < 3; i++) {
        char name[32];
        char *path;
        openslide_t *osr;

        snprintf(name, sizeof name, "t%zu.tif", i);
        path = write_sample(name, sizes[i][0], sizes[i][1], 5, (int32_t)sizes[i][2]);
        osr = openslide_open(path);
        cr_assert_not_null(osr, "%s", name);
        cr_assert_null(openslide_get_error(osr), "%s: %s", name, openslide_get_error(osr));
        cr_assert(eq(int, openslide_get_level_count(osr),
                     twi_sample_level_count(sizes[i][0], sizes[i][1], (int32_t)sizes[i][2])));
        openslide_close(osr);
        free(path);
    }
}

Test(sample, bad_options_are_invalid)
{
    /* Sizes outside 1..2^31, tiles not a multiple of 16 or below 16, an unknown compression,
     * uninitialised options and missing arguments give TW_E_INVALID with a "sample:" message,
     * and leave no file behind. */
    char *path = twtest_path(dir, "bad.tif");
    tw_sample_opts o;
    tw_error err;
    struct {
        int64_t w, h;
        int32_t tile;
        int compression;
    } bad[] = {
        {0, 10, 256, TW_COMPRESS_DEFLATE},
        {10, 0, 256, TW_COMPRESS_DEFLATE},
        {-5, 10, 256, TW_COMPRESS_DEFLATE},
        {((int64_t)1 << 31) + 1, 10, 256, TW_COMPRESS_DEFLATE},
        {10, ((int64_t)1 << 31) + 1, 256, TW_COMPRESS_DEFLATE},
        {100, 100, 0, TW_COMPRESS_DEFLATE},
        {100, 100, 8, TW_COMPRESS_DEFLATE},
        {100, 100, 100, TW_COMPRESS_DEFLATE},
        {100, 100, -16, TW_COMPRESS_DEFLATE},
        {100, 100, 256, 42},
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tw_sample_opts_init(&o);
        o.w = bad[i].w;
        o.h = bad[i].h;
        o.tile = bad[i].tile;
        o.compression = (tw_compression)bad[i].compression;
        memset(&err, 0, sizeof err);
        cr_assert(eq(int, tw_sample_write(path, &o, &err), TW_E_INVALID), "case %zu", i);
        cr_assert(eq(int, err.status, TW_E_INVALID), "case %zu", i);
        cr_assert(eq(int, strncmp(err.message, "sample: ", 8), 0), "case %zu: %s", i,
                  err.message);
        cr_assert(not(twtest_exists(path)), "case %zu left a file", i);
    }
    tw_sample_opts_init(&o);
    o.struct_size = 0;
    cr_assert(eq(int, tw_sample_write(path, &o, &err), TW_E_INVALID));
    tw_sample_opts_init(&o);
    cr_assert(eq(int, tw_sample_write(NULL, &o, &err), TW_E_INVALID));
    cr_assert(eq(int, tw_sample_write(path, NULL, &err), TW_E_INVALID));
    cr_assert(eq(int, tw_sample_write(path, NULL, NULL), TW_E_INVALID));
    cr_assert(not(twtest_exists(path)));
    cr_assert(eq(int, twtest_count_entries(dir), 0));
    free(path);
}

Test(sample, io_errors_propagate)
{
    /* An output folder that does not exist gives TW_E_IO with the writer's message. */
    char *path = twtest_path(dir, "missing/x.tif");
    tw_sample_opts o;
    tw_error err;

    tw_sample_opts_init(&o);
    o.w = 100;
    o.h = 100;
    memset(&err, 0, sizeof err);
    cr_assert(eq(int, tw_sample_write(path, &o, &err), TW_E_IO));
    cr_assert(ne(int, (int)strlen(err.message), 0));
    cr_assert(not(twtest_exists(path)));
    free(path);
}

Test(sample, zstd_and_uncompressed_hold_the_same_pixels)
{
    /* The compression changes the file, never the pixels: zstd, none and deflate decode to
     * the same level 0. */
    static const tw_compression comp[] = {TW_COMPRESS_DEFLATE, TW_COMPRESS_ZSTD,
                                          TW_COMPRESS_NONE};
    uint8_t *ref = NULL;

    for (int i = 0; i < 3; i++) {
        char name[16];
        char *path;
        tw_sample_opts o;
        tw_error err = {TW_OK, ""};
        uint32_t w, h;
        uint8_t *img;

        snprintf(name, sizeof name, "c%d.tif", i);
        path = twtest_path(dir, name);
        tw_sample_opts_init(&o);
        o.w = 400;
        o.h = 300;
        o.compression = comp[i];
        cr_assert(eq(int, tw_sample_write(path, &o, &err), TW_OK), "%s", err.message);
        img = read_tiff_level(path, 0, &w, &h);
        if (!ref)
            ref = img;
        else {
            cr_assert(eq(int, memcmp(ref, img, (size_t)w * h * 3), 0), "compression %d", i);
            free(img);
        }
        free(path);
    }
    free(ref);
}
