/* SPDX-License-Identifier: MIT */
/* tilewave tests: corrupt and unsupported slides give one-line errors, never a crash or a
 * huge allocation (issue 8). */
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_testutil.h"

static char *tmp_dir;

static void
setup(void)
{
    tmp_dir = twtest_tmpdir();
    cr_assert_not_null(tmp_dir);
}

static void
teardown(void)
{
    twtest_rmtree(tmp_dir);
    free(tmp_dir);
}

TestSuite(bad_slides, .init = setup, .fini = teardown);

/* One directory entry of a hand-made classic TIFF: a single SHORT or LONG value. */
typedef struct tag {
    uint16_t tag;
    uint32_t value;
} tag;

enum { PIXELS_AT = 512 };

/* A little-endian classic TIFF with one directory holding `tags` (sorted here) and `pad`
 * bytes of zeros from byte PIXELS_AT on, where the strip or tile offsets point by default. */
static void
write_tiff(const char *path, tag *tags, size_t n, size_t pad)
{
    size_t size = PIXELS_AT + pad, o = 10;
    uint8_t *b = calloc(1, size);
    FILE *f;

    cr_assert_not_null(b);
    for (size_t i = 1; i < n; i++) /* insertion sort: directories are sorted by tag */
        for (size_t j = i; j > 0 && tags[j - 1].tag > tags[j].tag; j--) {
            tag t = tags[j];

            tags[j] = tags[j - 1];
            tags[j - 1] = t;
        }
    memcpy(b, "II*\0", 4);
    b[4] = 8;
    b[8] = (uint8_t)n;
    for (size_t i = 0; i < n; i++, o += 12) {
        /* LONG for sizes and offsets, SHORT for the rest */
        bool is_long = tags[i].tag == 256 || tags[i].tag == 257 || tags[i].tag == 273 ||
                       tags[i].tag == 278 || tags[i].tag == 279 || tags[i].tag >= 322;

        b[o] = (uint8_t)(tags[i].tag & 0xff);
        b[o + 1] = (uint8_t)(tags[i].tag >> 8);
        b[o + 2] = is_long ? 4 : 3;
        b[o + 4] = 1;
        for (int k = 0; k < (is_long ? 4 : 2); k++)
            b[o + 8 + (size_t)k] = (uint8_t)(tags[i].value >> (8 * k));
    }
    f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(b, 1, size, f), size);
    fclose(f);
    free(b);
}

/* A one-image TIFF: w x h, `spp` samples of `bps` bits, `compression`; tiled with tile x tile
 * tiles when tile > 0 (tile < 0: no tile tags, striped), one tile or strip of `count` bytes
 * at `offset`. */
static void
write_image(const char *path, uint32_t w, uint32_t h, uint16_t spp, uint16_t bps,
            uint16_t compression, int64_t tile, uint32_t offset, uint32_t count)
{
    tag t[12] = {
        {256, w}, {257, h}, {258, bps}, {259, compression}, {262, spp >= 3 ? 2 : 1}, {277, spp},
    };
    size_t n = 6;

    if (tile >= 0) {
        t[n++] = (tag){322, (uint32_t)tile};
        t[n++] = (tag){323, (uint32_t)tile};
        t[n++] = (tag){324, offset};
        t[n++] = (tag){325, count};
    } else {
        t[n++] = (tag){273, offset};
        t[n++] = (tag){278, h};
        t[n++] = (tag){279, count};
    }
    write_tiff(path, t, n, 300);
}

/* Open with `kind`: it must fail with TW_E_FORMAT, leave `out` alone, and give one line naming
 * the file and containing `sub`. */
static void
expect_bad(const char *path, tw_reader_kind kind, const char *sub)
{
    tw_slide *s = (tw_slide *)0x1;
    tw_error err = {0};

    cr_assert_eq(tw_slide_open(path, kind, &s, &err), TW_E_FORMAT, "%s: %s", sub, err.message);
    cr_assert_eq(s, (tw_slide *)0x1, "out-parameter touched on failure");
    cr_assert_eq(err.status, TW_E_FORMAT);
    TU_ASSERT_ONE_LINE(err);
    TU_ASSERT_MSG(err, sub);
    TU_ASSERT_MSG(err, path);
}

Test(bad_slides, zero_size_and_truncated_sample)
{
    /* An empty file, and the sample slide cut to a third, to a few bytes and just after its
     * header: "empty file" / "is truncated" / "no BigTIFF header". */
    char *p = twtest_path(tmp_dir, "s.tif");
    tw_sample_opts o;
    tw_error err = {0};
    struct stat sb;

    {
        FILE *f = fopen(p, "wb");

        cr_assert_not_null(f);
        fclose(f);
    }
    expect_bad(p, TW_READER_AUTO, "(empty file)");

    tw_sample_opts_init(&o);
    o.w = 700;
    o.h = 600;
    cr_assert_eq(tw_sample_write(p, &o, &err), TW_OK, "%s", err.message);
    cr_assert_eq(stat(p, &sb), 0);
    cr_assert_eq(truncate(p, sb.st_size / 3), 0);
    expect_bad(p, TW_READER_AUTO, "is truncated");
    expect_bad(p, TW_READER_OPENSLIDE, "is truncated");
    cr_assert_eq(truncate(p, 10), 0);
    expect_bad(p, TW_READER_AUTO, "no BigTIFF header");
    free(p);
}

Test(bad_slides, absurd_dimensions)
{
    /* 10^9 x 10^9 pixels in a file of 812 bytes: one strip, uncompressed or deflate, would
     * decode to 10^18 bytes; 10^9 strips of one row are not in the file; tiled it has more
     * tiles than TIFF can number. Each is refused at open, before anything that size is
     * allocated. */
    char *p = twtest_path(tmp_dir, "huge.tif");
    const uint32_t g = 1000000000u;
    tag rows[] = {{256, g}, {257, g}, {258, 8}, {259, 1}, {262, 1}, {277, 1},
                  {273, PIXELS_AT}, {278, 1}, {279, 16}};

    write_image(p, g, g, 1, 8, 1, -1, PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "strip of 1000000000x1000000000 pixels in directory 0");
    write_tiff(p, rows, sizeof rows / sizeof rows[0], 300);
    expect_bad(p, TW_READER_AUTO, "io.tiff: ");
    write_image(p, g, g, 1, 8, 8, -1, PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "strip of 1000000000x1000000000 pixels in directory 0");
    expect_bad(p, TW_READER_AUTO, "is too large");
    write_image(p, g, g, 3, 8, 8, 256, PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "Integer overflow");
    expect_bad(p, TW_READER_OPENSLIDE, "Integer overflow");
    free(p);
}

Test(bad_slides, bad_tile_sizes)
{
    /* Tiles of 0 and of 2^31 pixels a side, a 65536-pixel tile (16 GiB as ARGB), and an
     * uncompressed 16384-pixel tile stored in 16 bytes: TW_E_FORMAT from both readers. */
    char *p = twtest_path(tmp_dir, "tile.tif");

    write_image(p, 100, 100, 1, 8, 1, 0, PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "zero number of tiles");
    expect_bad(p, TW_READER_OPENSLIDE, "zero number of tiles");
    write_image(p, 100, 100, 1, 8, 8, (int64_t)1 << 31, PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "tile of 2147483648x2147483648 pixels");
    expect_bad(p, TW_READER_OPENSLIDE, "tile of 2147483648x2147483648 pixels");
    write_image(p, 65536, 65536, 3, 8, 8, 65536, PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "is too large (more than 2048 MiB decoded)");
    expect_bad(p, TW_READER_OPENSLIDE, "is too large (more than 2048 MiB decoded)");
    write_image(p, 16384, 16384, 1, 8, 1, 16384, PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "tile 0 of level 0");
    expect_bad(p, TW_READER_AUTO, "has 16 bytes, uncompressed it needs 268435456");
    free(p);
}

Test(bad_slides, offsets_beyond_the_end)
{
    /* A strip and a tile whose offset lies past the end of the file: "is truncated", naming
     * where the data would end and the file's size. */
    char *p = twtest_path(tmp_dir, "eof.tif");

    write_image(p, 16, 16, 1, 8, 1, -1, 1000000, 256);
    expect_bad(p, TW_READER_AUTO, "is truncated (strip 0 of level 0 ends at byte 1000256, the "
                                  "file has 812)");
    write_image(p, 16, 16, 3, 8, 8, 16, 4000000000u, 10);
    expect_bad(p, TW_READER_AUTO, "is truncated (tile 0 of level 0 ends at byte 4000000010");
    free(p);
}

Test(bad_slides, unsupported_compression)
{
    /* An unknown Compression value and JPEG 2000 in TIFF (33003, Aperio's): TW_E_FORMAT
     * "unsupported compression N" from the libtiff reader; OpenSlide's own words when forced. */
    char *p = twtest_path(tmp_dir, "comp.tif");

    write_image(p, 16, 16, 1, 8, 12345, 16, PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "io.tiff: unsupported compression 12345 in '");
    write_image(p, 16, 16, 3, 8, 33003, 16, PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "io.tiff: unsupported compression 33003 in '");
    expect_bad(p, TW_READER_OPENSLIDE, "Unsupported TIFF compression: 33003");
    free(p);
}

Test(bad_slides, unsupported_samples)
{
    /* 12 and 4 bits per sample, and 5 samples per pixel (striped and tiled): TW_E_FORMAT
     * naming the value. */
    char *p = twtest_path(tmp_dir, "spp.tif");

    write_image(p, 16, 16, 1, 12, 1, -1, PIXELS_AT, 256);
    expect_bad(p, TW_READER_AUTO, "unsupported bits per sample 12 in '");
    write_image(p, 16, 16, 1, 4, 1, -1, PIXELS_AT, 256);
    expect_bad(p, TW_READER_AUTO, "unsupported bits per sample 4 in '");
    write_image(p, 16, 16, 5, 8, 1, -1, PIXELS_AT, 256);
    expect_bad(p, TW_READER_AUTO, "unsupported samples per pixel 5 for RGB in '");
    /* tiled, OpenSlide reads it as RGBA (the automatic choice falls back to it): forced
     * to libtiff it is refused */
    write_image(p, 16, 16, 5, 8, 1, 16, PIXELS_AT, 16 * 16 * 5);
    expect_bad(p, TW_READER_TIFF, "unsupported samples per pixel 5 for RGB in '");
    free(p);
}

Test(bad_slides, a_sound_hand_made_tiff_opens)
{
    /* The control: the same builder with sound values gives a slide that opens and reads
     * (so the failures above come from the corruption, not the builder). */
    char *p = twtest_path(tmp_dir, "ok.tif");
    tw_slide *s = NULL;
    tw_error err = {0};
    uint8_t px[16 * 16];

    write_image(p, 16, 16, 1, 8, 1, -1, PIXELS_AT, 256);
    cr_assert_eq(tw_slide_open(p, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_read_region(s, 0, 0, 0, 16, 16, px, 16, &err), TW_OK, "%s",
                 err.message);
    cr_assert_eq(px[0], 0);
    tw_slide_close(s);
    free(p);
}
