/* SPDX-License-Identifier: MIT */
/* tilewave tests: corrupt and unsupported slides give one-line errors, never a crash or a
 * huge allocation (issue 8). */
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_testutil.h"
#include "twtest_bad.h"

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
    twtest_tag rows[] = {{256, g}, {257, g}, {258, 8}, {259, 1}, {262, 1}, {277, 1},
                         {273, TWTEST_PIXELS_AT}, {278, 1}, {279, 16}};

    twtest_bad_image(p, g, g, 1, 8, 1, -1, TWTEST_PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "strip of 1000000000x1000000000 pixels in directory 0");
    twtest_bad_tiff(p, rows, sizeof rows / sizeof rows[0], 300);
    expect_bad(p, TW_READER_AUTO, "io.tiff: ");
    twtest_bad_image(p, g, g, 1, 8, 8, -1, TWTEST_PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "strip of 1000000000x1000000000 pixels in directory 0");
    expect_bad(p, TW_READER_AUTO, "is too large");
    twtest_bad_image(p, g, g, 3, 8, 8, 256, TWTEST_PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "claims 1000000000x1000000000 pixels in 256x256 tiles: "
                                  "15258789062500 tiles, more than a TIFF can number");
    expect_bad(p, TW_READER_OPENSLIDE, "15258789062500 tiles, more than a TIFF can number");
    free(p);
}

Test(bad_slides, bad_tile_sizes)
{
    /* Tiles of 0 and of 2^31 pixels a side, a 65536-pixel tile (16 GiB as ARGB), and an
     * uncompressed 16384-pixel tile stored in 16 bytes: TW_E_FORMAT from both readers. */
    char *p = twtest_path(tmp_dir, "tile.tif");

    twtest_bad_image(p, 100, 100, 1, 8, 1, 0, TWTEST_PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "zero number of tiles");
    expect_bad(p, TW_READER_OPENSLIDE, "zero number of tiles");
    twtest_bad_image(p, 100, 100, 1, 8, 8, (int64_t)1 << 31, TWTEST_PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "tile of 2147483648x2147483648 pixels");
    expect_bad(p, TW_READER_OPENSLIDE, "tile of 2147483648x2147483648 pixels");
    twtest_bad_image(p, 65536, 65536, 3, 8, 8, 65536, TWTEST_PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "is too large (more than 2048 MiB decoded)");
    expect_bad(p, TW_READER_OPENSLIDE, "is too large (more than 256 MiB decoded)");
    twtest_bad_image(p, 16384, 16384, 1, 8, 1, 16384, TWTEST_PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "tile 0 of level 0");
    expect_bad(p, TW_READER_AUTO, "has 16 bytes, uncompressed it needs 268435456");
    /* 256 MiB of gray is within what libtiff's reader decodes, 1 GiB of ARGB is not what
     * OpenSlide should allocate per tile (it aborts when g_malloc fails) */
    expect_bad(p, TW_READER_OPENSLIDE, "tile of 16384x16384 pixels in directory 0 of");
    expect_bad(p, TW_READER_OPENSLIDE, "is too large (more than 256 MiB decoded)");
    free(p);
}

Test(bad_slides, offsets_beyond_the_end)
{
    /* A strip and a tile whose offset lies past the end of the file: "is truncated", naming
     * where the data would end and the file's size. */
    char *p = twtest_path(tmp_dir, "eof.tif");

    twtest_bad_image(p, 16, 16, 1, 8, 1, -1, 1000000, 256);
    expect_bad(p, TW_READER_AUTO, "is truncated (strip 0 of level 0 ends at byte 1000256, the "
                                  "file has 812)");
    twtest_bad_image(p, 16, 16, 3, 8, 8, 16, 4000000000u, 10);
    expect_bad(p, TW_READER_AUTO, "is truncated (tile 0 of level 0 ends at byte 4000000010");
    free(p);
}

Test(bad_slides, unsupported_compression)
{
    /* An unknown Compression value and JPEG 2000 in TIFF (33003, Aperio's): TW_E_FORMAT
     * "unsupported compression N" from the libtiff reader; OpenSlide's own words when forced. */
    char *p = twtest_path(tmp_dir, "comp.tif");

    twtest_bad_image(p, 16, 16, 1, 8, 12345, 16, TWTEST_PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "io.tiff: unsupported compression 12345 in '");
    twtest_bad_image(p, 16, 16, 3, 8, 33003, 16, TWTEST_PIXELS_AT, 16);
    expect_bad(p, TW_READER_AUTO, "io.tiff: unsupported compression 33003 in '");
    expect_bad(p, TW_READER_OPENSLIDE, "Unsupported TIFF compression: 33003");
    free(p);
}

Test(bad_slides, unsupported_samples)
{
    /* 12 and 4 bits per sample, and 5 samples per pixel (striped and tiled): TW_E_FORMAT
     * naming the value. */
    char *p = twtest_path(tmp_dir, "spp.tif");

    twtest_bad_image(p, 16, 16, 1, 12, 1, -1, TWTEST_PIXELS_AT, 256);
    expect_bad(p, TW_READER_AUTO, "unsupported bits per sample 12 in '");
    twtest_bad_image(p, 16, 16, 1, 4, 1, -1, TWTEST_PIXELS_AT, 256);
    expect_bad(p, TW_READER_AUTO, "unsupported bits per sample 4 in '");
    twtest_bad_image(p, 16, 16, 5, 8, 1, -1, TWTEST_PIXELS_AT, 256);
    expect_bad(p, TW_READER_AUTO, "unsupported samples per pixel 5 for RGB in '");
    /* tiled, OpenSlide reads it as RGBA (the automatic choice falls back to it): forced
     * to libtiff it is refused */
    twtest_bad_image(p, 16, 16, 5, 8, 1, 16, TWTEST_PIXELS_AT, 16 * 16 * 5);
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

    twtest_bad_image(p, 16, 16, 1, 8, 1, -1, TWTEST_PIXELS_AT, 256);
    cr_assert_eq(tw_slide_open(p, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_read_region(s, 0, 0, 0, 16, 16, px, 16, &err), TW_OK, "%s",
                 err.message);
    cr_assert_eq(px[0], 0);
    tw_slide_close(s);
    free(p);
}

/* ---- every bad file through every reader */

/* What each reader must say about bad slide i of twtest_bad_slide(): the automatic choice,
 * libtiff and OpenSlide. */
static const char *const expected[TWTEST_N_BAD_SLIDES][3] = {
    {"(empty file)", "(empty file)", "(empty file)"},
    {"is truncated (directory 0 starts at byte", "is truncated (directory 0 starts at byte",
     "is truncated (directory 0 starts at byte"},
    {"is truncated (directory 0 starts at byte", "is truncated (directory 0 starts at byte",
     "is truncated (directory 0 starts at byte"},
    {"is truncated (directory 0 starts at byte", "is truncated (directory 0 starts at byte",
     "is truncated (directory 0 starts at byte"},
    /* libtiff's own words for what it cannot number */
    {"zero number of strips", "zero number of strips", "zero number of strips"},
    {"more than a TIFF can number", "more than a TIFF can number",
     "more than a TIFF can number"},
    {"zero number of tiles", "zero number of tiles", "zero number of tiles"},
    {"is too large (more than 2048 MiB decoded)", "is too large (more than 2048 MiB decoded)",
     "is too large (more than 256 MiB decoded)"},
    {"has 16 bytes, uncompressed it needs 50331648", "has 16 bytes, uncompressed it needs 50331648",
     "has 16 bytes, uncompressed it needs 50331648"},
    {"unsupported compression 12345", "unsupported compression 12345",
     "Unsupported TIFF compression: 12345"},
    {"unsupported compression 33003", "unsupported compression 33003",
     "Unsupported TIFF compression: 33003"},
    {"is not a TIFF or a slide OpenSlide can open", "is not a TIFF",
     "is not a slide OpenSlide can open"},
    {"is not a TIFF or a slide OpenSlide can open", "is not a TIFF",
     "is not a slide OpenSlide can open"},
    {"is not a TIFF or a slide OpenSlide can open", "is not a TIFF",
     "is not a slide OpenSlide can open"},
    {"is truncated (directory 0 starts at byte", "is truncated (directory 0 starts at byte",
     "is truncated (directory 0 starts at byte"},
};

Test(bad_slides, every_reader_refuses_every_bad_file, .timeout = TWTEST_TIMEOUT(60))
{
    /* Each bad file (zero size, truncated, absurd dimensions, tiles of 0 or far larger than
     * the image, unsupported compression, not a TIFF at all under a .tif name) opened with
     * the automatic choice, libtiff and OpenSlide: TW_E_FORMAT at open (never a crash, a hang
     * or a huge allocation), the out-parameter untouched, one line with an "io" domain naming
     * the file and the fault; and nothing printed to stderr (OpenSlide's libtiff would print
     * what the precheck does not catch first). */
    static const tw_reader_kind kinds[] = {TW_READER_AUTO, TW_READER_TIFF, TW_READER_OPENSLIDE};
    char *p = twtest_path(tmp_dir, "bad.tif");
    const char *what = NULL;
    char *errlog = twtest_path(tmp_dir, "stderr.txt");
    int i, saved = dup(2), fd;
    struct stat sb;

    /* stderr into a file for the test's length: nothing may reach it */
    fflush(stderr);
    fd = open(errlog, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(saved >= 0 && fd >= 0 && dup2(fd, 2) == 2);
    close(fd);
    for (i = 0; twtest_bad_slide(i, p, &what); i++) {
        cr_assert_lt((size_t)i, sizeof expected / sizeof expected[0]);
        for (size_t k = 0; k < 3; k++) {
            tw_slide *s = (tw_slide *)0x1;
            tw_error err = {0};

            cr_assert_eq(tw_slide_open(p, kinds[k], &s, &err), TW_E_FORMAT,
                         "%s, reader %zu: %s", what, k, err.message);
            cr_assert_eq(s, (tw_slide *)0x1, "%s: out-parameter touched on failure", what);
            cr_assert_eq(err.status, TW_E_FORMAT);
            cr_assert_eq(strncmp(err.message, "io", 2), 0, "%s: %s", what, err.message);
            TU_ASSERT_ONE_LINE(err);
            TU_ASSERT_MSG(err, p);
            TU_ASSERT_MSG(err, expected[i][k]);
        }
    }
    cr_assert_eq((size_t)i, sizeof expected / sizeof expected[0]);
    fflush(stderr);
    cr_assert_eq(dup2(saved, 2), 2);
    close(saved);
    cr_assert_eq(stat(errlog, &sb), 0);
    cr_assert_eq(sb.st_size, 0, "a reader printed %lld bytes to stderr (%s)",
                 (long long)sb.st_size, errlog);
    free(errlog);
    free(p);
}
