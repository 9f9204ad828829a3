/* SPDX-License-Identifier: MIT */
/* tilewave tests: multi-channel images (qptiff pages, gray samples) and --channel; the input
 * and output checks of issue 27 item 7 (colour without a threshold, output names, old-style
 * JPEG). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>
#include <unistd.h>

#include "tilewave.h"
#include "twtest_cli.h"

TWTEST_CLI_SUITE(cli_channels, .timeout = 180);

#define W 200
#define H 150

/* Sample c of pixel (x, y) of the files written here. */
static uint8_t
px(int c, int x, int y)
{
    return (uint8_t)(c * 60 + x * 3 + y * 7);
}

static const char *const names[3] = {"DAPI", "FITC", "Cy3"};

/* A qptiff-like file: one striped LZW page per channel (8-bit gray, a PerkinElmer description
 * naming it), then an RGB thumbnail of another size, as Vectra writes them. */
static char *
write_qptiff(const char *name)
{
    char *path = twtest_path(dir, name);
    TIFF *t = TIFFOpen(path, "w");
    uint8_t row[W * 3];

    cr_assert(t != NULL);
    for (int c = 0; c < 4; c++) {
        char desc[512];
        int w = c < 3 ? W : W / 4, h = c < 3 ? H : H / 4, spp = c < 3 ? 1 : 3;

        snprintf(desc, sizeof desc,
                 "<?xml version=\"1.0\" encoding=\"utf-16\"?>\r\n"
                 "<PerkinElmer-QPI-ImageDescription>\r\n  <ImageType>%s</ImageType>\r\n"
                 "  <Name>%s</Name>\r\n  <Responsivity><Filter><Name>x</Name></Filter>"
                 "</Responsivity>\r\n</PerkinElmer-QPI-ImageDescription>",
                 c < 3 ? "FullResolution" : "Thumbnail", c < 3 ? names[c] : "none");
        TIFFSetField(t, TIFFTAG_IMAGEWIDTH, w);
        TIFFSetField(t, TIFFTAG_IMAGELENGTH, h);
        TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 8);
        TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, spp);
        TIFFSetField(t, TIFFTAG_PHOTOMETRIC, spp == 1 ? PHOTOMETRIC_MINISBLACK : PHOTOMETRIC_RGB);
        TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
        TIFFSetField(t, TIFFTAG_COMPRESSION, COMPRESSION_LZW);
        TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 16);
        TIFFSetField(t, TIFFTAG_IMAGEDESCRIPTION, desc);
        for (int y = 0; y < h; y++) {
            for (int x = 0; x < w * spp; x++)
                row[x] = c < 3 ? px(c, x, y) : (uint8_t)x;
            cr_assert(TIFFWriteScanline(t, row, (uint32_t)y, 0) == 1);
        }
        cr_assert(TIFFWriteDirectory(t) == 1);
    }
    TIFFClose(t);
    return path;
}

/* A gray image of `spp` samples per pixel (min-is-black, contiguous, uncompressed, strips). */
static char *
write_samples(const char *name, int spp)
{
    char *path = twtest_path(dir, name);
    TIFF *t = TIFFOpen(path, "w");
    uint8_t row[W * 4];

    cr_assert(t != NULL);
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, W);
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, H);
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 8);
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, spp);
    TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 8);
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++)
            for (int c = 0; c < spp; c++)
                row[x * spp + c] = px(c, x, y);
        cr_assert(TIFFWriteScanline(t, row, (uint32_t)y, 0) == 1);
    }
    TIFFClose(t);
    return path;
}

/* Level 0 of `path` is 1 channel of u8 equal to channel c of the files written here. */
static void
expect_channel(const char *path, int c)
{
    int64_t w, h;
    int ch;
    tw_sample_type type;
    uint8_t *got = twtest_read_image(path, &w, &h, &ch, &type);

    cr_assert(got != NULL, "cannot read %s", path);
    cr_assert(w == W && h == H && ch == 1 && type == TW_U8);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            cr_assert(eq(u8, got[y * W + x], px(c, x, y)), "channel %d at (%d, %d)", c, x, y);
    free(got);
}

Test(cli_channels, info_lists_the_pages_of_a_qptiff_by_name)
{
    /* The three gray pages of one size are channels 0..2 named by their descriptions; the
     * thumbnail is no level and no channel. */
    char *q = write_qptiff("q.qptiff");
    twtest_run r = RUN("info", q);

    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "pixels:   3 channels, u8 each") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "channel 0: DAPI\n    channel 1: FITC\n    channel 2: Cy3\n") != NULL,
              "%s", r.out);
    cr_assert(strstr(r.out, "levels:   1\n") != NULL, "%s", r.out);
    twtest_run_free(&r);
    free(q);
}

Test(cli_channels, several_channels_without_a_choice_are_an_error)
{
    /* gray, convert, edt and area-open refuse a multi-channel image without --channel, naming
     * the channels, and write nothing. */
    char *q = write_qptiff("q.qptiff"), *o = twtest_path(dir, "o.tif");
    const char *want = "has 3 channels (0 DAPI, 1 FITC, 2 Cy3): choose one with --channel";

    ERR_RUN(("gray", q, "-o", o), 1, want, o);
    ERR_RUN(("convert", q, "-o", o), 1, want, o);
    ERR_RUN(("edt", q, "-o", o), 1, want, o);
    ERR_RUN(("area-open", q, "--area", "10", "-o", o), 1, want, o);
    ERR_RUN(("convert", q, "-o", o, "--channel", "GFP"), 1,
            "has no channel 'GFP'; its channels are 0 DAPI, 1 FITC, 2 Cy3", o);
    ERR_RUN(("convert", q, "-o", o, "--channel", "3"), 1, "has no channel '3'", o);
    free(q);
    free(o);
}

Test(cli_channels, channel_by_index_or_name_reads_that_page)
{
    /* --channel N and --channel NAME read exactly that page, through convert and gray. */
    char *q = write_qptiff("q.qptiff"), *o = twtest_path(dir, "o.tif");

    for (int c = 0; c < 3; c++) {
        char idx[4];

        snprintf(idx, sizeof idx, "%d", c);
        OK_RUN("convert", q, "-o", o, "--channel", idx, "--quiet");
        expect_channel(o, c);
        OK_RUN("gray", q, "-o", o, "--channel", names[c], "--tile", "64x48", "--quiet");
        expect_channel(o, c);
    }
    free(q);
    free(o);
}

Test(cli_channels, gray_samples_are_channels)
{
    /* A min-is-black image of 3 or 4 samples per pixel has that many unnamed channels; each
     * reads as its sample. 2 samples of 8 bits too (only u32 pairs are EDT indices). */
    char *f3 = write_samples("s3.tif", 3), *f2 = write_samples("s2.tif", 2);
    char *o = twtest_path(dir, "o.tif");
    twtest_run r = RUN("info", f3);

    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "3 channels, u8 each") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "channel 2: (no name)") != NULL, "%s", r.out);
    twtest_run_free(&r);
    ERR_RUN(("gray", f3, "-o", o), 1, "has 3 channels (0, 1, 2)", o);
    for (int c = 0; c < 3; c++) {
        char idx[4];

        snprintf(idx, sizeof idx, "%d", c);
        OK_RUN("convert", f3, "-o", o, "--channel", idx, "--tile", "32x32", "--quiet");
        expect_channel(o, c);
    }
    OK_RUN("gray", f2, "-o", o, "--channel", "1", "--quiet");
    expect_channel(o, 1);
    free(f3);
    free(f2);
    free(o);
}

Test(cli_channels, channel_on_an_image_without_channels_is_an_error)
{
    /* --channel on RGB or plain gray is refused (RGB has --gray r|g|b). */
    char *s = twtest_path(dir, "s.tif"), *o = twtest_path(dir, "o.tif");

    OK_RUN("sample", s, "--size", "300x200", "--quiet");
    ERR_RUN(("gray", s, "-o", o, "--channel", "0"), 1,
            "has no channels to choose from (one RGB colour channel)", o);
    ERR_RUN(("gray", s, "-o", o, "--channel", ""), 2, "--channel: empty channel", o);
    free(s);
    free(o);
}

Test(cli_channels, real_qptiff_channels_are_its_pages)
{
    /* ../shared/data/slides/small_vectra.qptiff (PerkinElmer Vectra, 3 LZW pages): info names
     * DAPI, FITC and Cy3; --channel NAME gives the page as libtiff reads it. */
    char *q = NULL, *o = twtest_path(dir, "o.tif");
    int64_t w, h;
    int ch;
    tw_sample_type type;
    TIFF *t;

    cr_assert(asprintf(&q, "%s/../shared/data/slides/small_vectra.qptiff", TW_SOURCE_DIR) > 0);
    if (access(q, R_OK) != 0) {
        free(q);
        free(o);
        cr_skip_test("../shared/data/slides/small_vectra.qptiff is not there");
    }
    twtest_run r = RUN("info", q);
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "channel 0: DAPI\n    channel 1: FITC\n    channel 2: Cy3\n") != NULL,
              "%s", r.out);
    twtest_run_free(&r);
    t = TIFFOpen(q, "r");
    cr_assert(t != NULL);
    for (int c = 0; c < 3; c++) {
        uint8_t *got, *row;

        OK_RUN("convert", q, "-o", o, "--channel", names[c], "--quiet");
        got = twtest_read_image(o, &w, &h, &ch, &type);
        cr_assert(got && w == 1920 && h == 1440 && ch == 1 && type == TW_U8);
        cr_assert(TIFFSetDirectory(t, (tdir_t)c) == 1);
        row = malloc((size_t)TIFFScanlineSize(t));
        for (uint32_t y = 0; y < 1440; y++) {
            cr_assert(TIFFReadScanline(t, row, y, 0) == 1);
            cr_assert(memcmp(row, got + (size_t)y * 1920, 1920) == 0, "channel %d row %u", c,
                      (unsigned)y);
        }
        free(row);
        free(got);
    }
    TIFFClose(t);
    free(q);
    free(o);
}

Test(cli_channels, mask_operations_refuse_colour_without_a_threshold)
{
    /* edt, fill-holes and label on an RGB slide without --threshold: one line suggesting
     * --threshold otsu --invert, nothing written; with it they run. */
    char *s = twtest_path(dir, "s.tif"), *o = twtest_path(dir, "o.tif");

    OK_RUN("sample", s, "--size", "300x200", "--quiet");
    ERR_RUN(("edt", s, "-o", o), 1, "is a colour (RGB) image, not a mask: give a threshold, e.g. "
            "--threshold otsu --invert", o);
    ERR_RUN(("fill-holes", s, "-o", o), 1, "--threshold otsu --invert", o);
    ERR_RUN(("label", s, "-o", o), 1, "--threshold otsu --invert", o);
    OK_RUN("edt", s, "-o", o, "--threshold", "otsu", "--invert", "--quiet");
    OK_RUN("label", s, "-o", o, "--threshold", "otsu", "--invert", "--quiet");
    OK_RUN("fill-holes", s, "-o", o, "--threshold", "otsu", "--invert", "--quiet");
    free(s);
    free(o);
}

Test(cli_channels, image_outputs_must_be_named_as_tiff)
{
    /* -o x.png, --overlay x.jpg, --indices x and `sample x.jpeg` are refused (exit 2) before
     * anything is written; .tif, .TIFF, .btf and .ome.tif are taken. */
    char *s = twtest_path(dir, "s.tif"), *png = twtest_path(dir, "x.png");
    char *jpg = twtest_path(dir, "x.jpg"), *bare = twtest_path(dir, "x");

    OK_RUN("sample", s, "--size", "300x200", "--quiet");
    ERR_RUN(("gray", s, "-o", png), 2, "-o: '", png);
    ERR_RUN(("gray", s, "-o", png), 2, "is not named as a TIFF (.tif, .tiff, .btf or .ome.tif)",
            png);
    ERR_RUN(("area-open", s, "--area", "5", "-o", bare), 2, "is not named as a TIFF", bare);
    {
        char *ok = twtest_path(dir, "o.tif");

        ERR_RUN(("gray", s, "-o", ok, "--overlay", jpg), 2, "--overlay: '", jpg);
        ERR_RUN(("edt", s, "-o", ok, "--threshold", "otsu", "--indices", bare), 2,
                "--indices: '", bare);
        cr_assert(eq(int, twtest_exists(ok), 0));
        free(ok);
    }
    ERR_RUN(("sample", jpg, "--size", "300x200"), 2, "OUT: '", jpg);
    {
        static const char *const good[] = {"a.tif", "b.TIFF", "c.btf", "d.ome.tif"};

        for (int i = 0; i < 4; i++) {
            char *p = twtest_path(dir, good[i]);

            OK_RUN("gray", s, "-o", p, "--quiet");
            cr_assert(eq(int, twtest_exists(p), 1));
            free(p);
        }
    }
    free(s);
    free(png);
    free(jpg);
    free(bare);
}

/* Set the inline SHORT value of `tag` in the first directory of a little-endian classic TIFF. */
static void
patch_short(const char *path, uint16_t tag, uint16_t value)
{
    FILE *f = fopen(path, "r+b");
    uint8_t b[12];
    uint32_t off;
    uint16_t n;

    cr_assert(f != NULL);
    cr_assert(fseek(f, 4, SEEK_SET) == 0 && fread(b, 1, 4, f) == 4);
    off = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    cr_assert(fseek(f, off, SEEK_SET) == 0 && fread(b, 1, 2, f) == 2);
    n = (uint16_t)(b[0] | b[1] << 8);
    for (uint16_t i = 0; i < n; i++) {
        cr_assert(fread(b, 1, 12, f) == 12);
        if ((uint16_t)(b[0] | b[1] << 8) == tag) {
            cr_assert(fseek(f, -4, SEEK_CUR) == 0);
            fputc(value & 0xff, f);
            fputc(value >> 8, f);
            fclose(f);
            return;
        }
    }
    fclose(f);
    cr_fail("tag %u not found", (unsigned)tag);
}

Test(cli_channels, old_style_jpeg_is_named_as_such)
{
    /* A TIFF with compression 6 (old-style JPEG, YCbCr) is refused as that, not as "ycbcr
     * without JPEG", by info and by an operation. */
    char *f = write_samples("ojpeg.tif", 3), *o = twtest_path(dir, "o.tif");

    patch_short(f, TIFFTAG_COMPRESSION, COMPRESSION_OJPEG);
    patch_short(f, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_YCBCR);
    ERR_RUN(("info", f), 1, "old-style JPEG (compression 6) is not supported", NULL);
    ERR_RUN(("gray", f, "-o", o), 1, "old-style JPEG (compression 6) is not supported", o);
    free(f);
    free(o);
}
