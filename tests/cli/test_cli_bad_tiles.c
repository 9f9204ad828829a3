/* SPDX-License-Identifier: MIT */
/* tilewave tests: corrupt tiles, broken directory chains and oversized tiles (issue 26). */

/*
 * Each input is a clean tiled TIFF written here with libtiff (256 x 256 gray 8-bit, 64 x 64
 * tiles, a smooth pattern), then patched: bytes in the middle of one tile's data, its byte
 * count, its offset, or the next-directory offset. Before issue 26 the corrupt and short
 * tiles gave exit 0 and wrong pixels. Now the run fails with exit 1 and one line naming the
 * level and tile, and `--on-bad-tile fill` gives exactly the clean pixels with the bad tile
 * zero, plus one warning line with the count. The references come from libtiff directly.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <tiffio.h>
#include <unistd.h>

#include "tilewave.h"
#include "twtest_cli.h"

#pragma GCC diagnostic ignored "-Wconversion"

#define SIDE 256
#define TILE 64
#define BAD_TX 1
#define BAD_TY 2
#define BAD_IDX (BAD_TY * (SIDE / TILE) + BAD_TX)

TWTEST_CLI_SUITE(cli_bad_tiles, .timeout = TWTEST_TIMEOUT(240));

static uint8_t
pattern(int x, int y)
{
    return (uint8_t)((x * 3 + y * 5) / 4 + ((x / 16 + y / 16) % 2) * 40);
}

/* A clean w x h gray tiled TIFF (`bps` 8 or 16) in tile x tile tiles, `compression`;
 * BigTIFF when big; `dirs` copies of the image as directories (a second one smaller). */
static void
write_clean(const char *path, uint32_t w, uint32_t h, uint32_t tile, uint16_t bps,
            uint16_t compression, bool big, int dirs)
{
    TIFF *t = TIFFOpen(path, big ? "w8" : "w");
    size_t px = bps / 8, n = (size_t)tile * tile * px;
    uint8_t *buf = malloc(n);

    cr_assert(t != NULL && buf != NULL);
    for (int d = 0; d < dirs; d++) {
        uint32_t dw = d ? w / 2 : w, dh = d ? h / 2 : h;

        TIFFSetField(t, TIFFTAG_IMAGEWIDTH, dw);
        TIFFSetField(t, TIFFTAG_IMAGELENGTH, dh);
        TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, bps);
        TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 1);
        TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
        TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
        TIFFSetField(t, TIFFTAG_COMPRESSION, compression);
        TIFFSetField(t, TIFFTAG_TILEWIDTH, tile);
        TIFFSetField(t, TIFFTAG_TILELENGTH, tile);
        if (compression == COMPRESSION_JPEG)
            TIFFSetField(t, TIFFTAG_JPEGQUALITY, 90);
        for (uint32_t ty = 0; ty < dh; ty += tile)
            for (uint32_t tx = 0; tx < dw; tx += tile) {
                for (uint32_t y = 0; y < tile; y++)
                    for (uint32_t x = 0; x < tile; x++) {
                        uint8_t v = pattern((int)(tx + x), (int)(ty + y));

                        if (px == 1)
                            buf[(size_t)y * tile + x] = v;
                        else
                            ((uint16_t *)buf)[(size_t)y * tile + x] = (uint16_t)(v * 257);
                    }
                cr_assert(TIFFWriteEncodedTile(t, TIFFComputeTile(t, tx, ty, 0, 0), buf,
                                               (tmsize_t)n) >= 0);
            }
        cr_assert(TIFFWriteDirectory(t));
    }
    TIFFClose(t);
    free(buf);
}

/* ---- patching the first directory of a little-endian TIFF or BigTIFF by hand */

static uint64_t
rd(FILE *f, uint64_t off, int n)
{
    uint8_t b[8] = {0};
    uint64_t v = 0;

    cr_assert(fseek(f, (long)off, SEEK_SET) == 0 && fread(b, 1, (size_t)n, f) == (size_t)n);
    for (int i = 0; i < n; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static void
wr(FILE *f, uint64_t off, int n, uint64_t v)
{
    uint8_t b[8];

    for (int i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    cr_assert(fseek(f, (long)off, SEEK_SET) == 0 && fwrite(b, 1, (size_t)n, f) == (size_t)n);
}

typedef struct tiff_dir {
    bool big;
    uint64_t first;     /* offset of directory 0 */
    uint64_t next_at;   /* where directory 0's next-directory offset is stored */
} tiff_dir;

static tiff_dir
dir0(FILE *f)
{
    tiff_dir d = {0};
    uint64_t count;

    cr_assert(rd(f, 0, 2) == 0x4949, "test files are little-endian");
    d.big = rd(f, 2, 2) == 43;
    d.first = d.big ? rd(f, 8, 8) : rd(f, 4, 4);
    count = rd(f, d.first, d.big ? 8 : 2);
    d.next_at = d.first + (d.big ? 8 : 2) + count * (d.big ? 20 : 12);
    return d;
}

/* Where element `i` of tag `tag`'s array is, and its size in bytes. */
static uint64_t
element_at(FILE *f, uint16_t tag, uint32_t i, int *size)
{
    tiff_dir d = dir0(f);
    uint64_t count = rd(f, d.first, d.big ? 8 : 2);
    uint64_t e = d.first + (d.big ? 8 : 2);

    for (uint64_t k = 0; k < count; k++, e += d.big ? 20 : 12) {
        uint16_t type;
        uint64_t n, data;

        if (rd(f, e, 2) != tag)
            continue;
        type = (uint16_t)rd(f, e + 2, 2);
        n = rd(f, e + 4, d.big ? 8 : 4);
        *size = type == 3 ? 2 : type == 4 ? 4 : 8;
        cr_assert(i < n);
        data = e + (d.big ? 12 : 8);
        if ((uint64_t)*size * n > (d.big ? 8u : 4u))
            data = rd(f, data, d.big ? 8 : 4);
        return data + (uint64_t)i * (uint64_t)*size;
    }
    cr_assert(0, "tag %u not found", (unsigned)tag);
    return 0;
}

static uint64_t
get_elem(const char *path, uint16_t tag, uint32_t i)
{
    FILE *f = fopen(path, "rb");
    int size = 0;
    uint64_t v, at;

    cr_assert(f != NULL);
    at = element_at(f, tag, i, &size); /* sets size: not in rd's argument list */
    v = rd(f, at, size);
    fclose(f);
    return v;
}

static void
set_elem(const char *path, uint16_t tag, uint32_t i, uint64_t v)
{
    FILE *f = fopen(path, "r+b");
    int size = 0;
    uint64_t at;

    cr_assert(f != NULL);
    at = element_at(f, tag, i, &size);
    wr(f, at, size, v);
    fclose(f);
}

/* Overwrite `n` bytes of tile idx's data from byte `at` (-1: a third into it) with a fixed
 * noise. */
static void
scribble_tile(const char *path, uint32_t idx, int64_t at, uint64_t n)
{
    uint64_t off = get_elem(path, TIFFTAG_TILEOFFSETS, idx);
    uint64_t cnt = get_elem(path, TIFFTAG_TILEBYTECOUNTS, idx);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    FILE *f = fopen(path, "r+b");

    cr_assert(f != NULL && cnt > n + 8, "tile %u: %llu bytes at %llu", (unsigned)idx,
              (unsigned long long)cnt, (unsigned long long)off);
    for (uint64_t k = 0; k < n; k++)
        wr(f, off + (at < 0 ? cnt / 3 : (uint64_t)at) + k, 1, twtest_xorshift(&s) & 0xff);
    fclose(f);
}

/* ---- references */

/* Level 0 of `path` decoded by libtiff alone, each tile that fails to decode cleanly (an error
 * or a warning) zero. *bad counts those. */
static uint8_t *
libtiff_pixels(const char *path, int *bad)
{
    TIFF *t;
    uint8_t *img = calloc(SIDE * SIDE, 1), *buf = malloc(TILE * TILE);

    TIFFSetWarningHandler(NULL);
    TIFFSetErrorHandler(NULL);
    t = TIFFOpen(path, "r");
    cr_assert(t != NULL && img != NULL && buf != NULL);
    *bad = 0;
    for (uint32_t ty = 0; ty < SIDE; ty += TILE)
        for (uint32_t tx = 0; tx < SIDE; tx += TILE) {
            uint32_t idx = TIFFComputeTile(t, tx, ty, 0, 0);

            if (idx == BAD_IDX) {
                (*bad)++;
                continue;
            }
            cr_assert(TIFFReadEncodedTile(t, idx, buf, TILE * TILE) == TILE * TILE);
            for (uint32_t y = 0; y < TILE; y++)
                memcpy(img + (size_t)(ty + y) * SIDE + tx, buf + (size_t)y * TILE, TILE);
        }
    TIFFClose(t);
    free(buf);
    return img;
}

/* Run convert on `in` and expect exit 1 with one line naming level 0 tile (BAD_TX, BAD_TY)
 * and `what`, no output; then with --on-bad-tile fill expect exit 0, one warning line, and
 * the clean file's pixels with the bad tile zero. */
static void
expect_bad_tile(const char *in, const char *clean, const char *what)
{
    char *out = twtest_path(dir, "out.tif");
    char want[128];
    twtest_run r;
    int bad = 0;
    uint8_t *ref, *got;
    int64_t w, h;
    int ch;
    tw_sample_type type;

    snprintf(want, sizeof want, "level 0 tile (%d, %d) at x=%d, y=%d: ", BAD_TX, BAD_TY,
             BAD_TX * TILE, BAD_TY * TILE);
    r = RUN("convert", in, "-o", out, "--quiet");
    cr_assert(strstr(r.err, what) != NULL, "stderr '%s' lacks '%s'", r.err, what);
    expect_error(&r, 1, want, out);
    /* the same through the config key */
    r = RUN("convert", in, "-o", out, "--quiet", "--set", "io.on_bad_tile=fail");
    expect_error(&r, 1, want, out);

    r = RUN("convert", in, "-o", out, "--on-bad-tile", "fill", "--quiet");
    cr_assert(eq(int, r.status, 0), "exit %d; stderr: %s", r.status, r.err);
    cr_assert(eq(int, twtest_lines(r.err), 1), "want one warning line, got: %s", r.err);
    cr_assert(strstr(r.err, "1 bad input tile filled with 0") != NULL, "stderr: %s", r.err);
    twtest_run_free(&r);
    ref = libtiff_pixels(clean, &bad);
    cr_assert(eq(int, bad, 1));
    got = twtest_read_image(out, &w, &h, &ch, &type);
    cr_assert(got != NULL && w == SIDE && h == SIDE && ch == 1 && type == TW_U8);
    for (int i = 0; i < SIDE * SIDE; i++)
        cr_assert(eq(u8, got[i], ref[i]), "pixel (%d, %d)", i % SIDE, i / SIDE);
    free(ref);
    free(got);

    /* --summary carries the count */
    r = RUN("convert", in, "-o", out, "--on-bad-tile", "fill", "--summary");
    cr_assert(eq(int, r.status, 0), "exit %d; stderr: %s", r.status, r.err);
    cr_assert(strstr(r.err, "1 bad filled with 0") != NULL, "summary lacks the count: %s", r.err);
    twtest_run_free(&r);
    free(out);
}

static char *
clean_copy(const char *clean, const char *name)
{
    char *p = twtest_path(dir, name);
    char cmd[4096];

    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", clean, p);
    cr_assert(system(cmd) == 0);
    return p;
}

Test(cli_bad_tiles, corrupt_zstd_tile_fails)
{
    char *clean = twtest_path(dir, "clean.tif"), *bad;

    if (!TIFFIsCODECConfigured(COMPRESSION_ZSTD))
        cr_skip_test("libtiff without zstd");
    write_clean(clean, SIDE, SIDE, TILE, 8, COMPRESSION_ZSTD, false, 1);
    bad = clean_copy(clean, "bad.tif");
    /* the frame and block headers after the magic number: libtiff's frames carry no checksum,
     * so noise in literal bytes further in decodes to other pixels with no error (see
     * docs/reliability.md); a broken header is what zstd can tell */
    scribble_tile(bad, BAD_IDX, 4, 8);
    expect_bad_tile(bad, clean, "corrupt data (ZSTDDecode: Error in ZSTD_decompressStream()");
    free(clean);
    free(bad);
}

Test(cli_bad_tiles, corrupt_jpeg_tile_fails)
{
    char *clean = twtest_path(dir, "clean.tif"), *bad;

    write_clean(clean, SIDE, SIDE, TILE, 8, COMPRESSION_JPEG, false, 1);
    bad = clean_copy(clean, "bad.tif");
    scribble_tile(bad, BAD_IDX, -1, 24);
    expect_bad_tile(bad, clean, "corrupt data (JPEGLib: ");
    free(clean);
    free(bad);
}

Test(cli_bad_tiles, jpeg_tile_with_half_its_bytes_fails)
{
    char *clean = twtest_path(dir, "clean.tif"), *bad;
    uint64_t n;

    write_clean(clean, SIDE, SIDE, TILE, 8, COMPRESSION_JPEG, false, 1);
    bad = clean_copy(clean, "bad.tif");
    n = get_elem(bad, TIFFTAG_TILEBYTECOUNTS, BAD_IDX);
    set_elem(bad, TIFFTAG_TILEBYTECOUNTS, BAD_IDX, n / 2);
    expect_bad_tile(bad, clean, "corrupt data (JPEGLib: Premature end of JPEG file)");
    free(clean);
    free(bad);
}

Test(cli_bad_tiles, tile_without_offset_fails)
{
    char *clean = twtest_path(dir, "clean.tif"), *bad;

    write_clean(clean, SIDE, SIDE, TILE, 8, COMPRESSION_ADOBE_DEFLATE, false, 1);
    bad = clean_copy(clean, "bad.tif");
    set_elem(bad, TIFFTAG_TILEOFFSETS, BAD_IDX, 0);
    expect_bad_tile(bad, clean, "no offset");
    /* a value --on-bad-tile does not know: a usage error naming the key's values */
    ERR_RUN(("convert", bad, "-o", clean, "--on-bad-tile", "skip"), 2, "--on-bad-tile", NULL);
    free(clean);
    free(bad);
}

Test(cli_bad_tiles, bigtiff_offset_near_2_64_is_reported_as_such)
{
    /* offset 2^64 - 1 plus the byte count wrapped: "ends at byte 255" before issue 26 */
    char *p = twtest_path(dir, "big.tif"), *out = twtest_path(dir, "out.tif");
    twtest_run r;

    write_clean(p, SIDE, SIDE, TILE, 8, COMPRESSION_ADOBE_DEFLATE, true, 1);
    set_elem(p, TIFFTAG_TILEOFFSETS, BAD_IDX, UINT64_MAX);
    r = RUN("info", p);
    expect_error(&r, 1, "starts at byte 18446744073709551615", NULL);
    r = RUN("convert", p, "-o", out, "--quiet");
    expect_error(&r, 1, "tile 9 of level 0 starts at byte 18446744073709551615", out);
    free(p);
    free(out);
}

Test(cli_bad_tiles, directory_loop_is_named)
{
    /* directory 1's next offset points back at directory 0 */
    char *p = twtest_path(dir, "loop.tif");
    twtest_run r;
    FILE *f;
    tiff_dir d;
    uint64_t second, count;

    write_clean(p, SIDE, SIDE, TILE, 8, COMPRESSION_ADOBE_DEFLATE, false, 2);
    f = fopen(p, "r+b");
    cr_assert(f != NULL);
    d = dir0(f);
    second = rd(f, d.next_at, 4);
    cr_assert(second != 0);
    count = rd(f, second, 2);
    wr(f, second + 2 + count * 12, 4, d.first);
    fclose(f);
    r = RUN("info", p);
    expect_error(&r, 1, "directory 1 of", NULL);
    r = RUN("info", p);
    cr_assert(strstr(r.err, "points back to directory 0 (a loop)") != NULL, "stderr: %s", r.err);
    cr_assert(strstr(r.err, "no message from libtiff") == NULL, "stderr: %s", r.err);
    twtest_run_free(&r);
    free(p);
}

Test(cli_bad_tiles, openslide_path_prints_nothing_of_libtiff)
{
    /* OpenSlide's libtiff printed its warnings to stderr ("TIFFReadDirectory: Warning, Unknown
     * field with tag ...", up to 32 lines a slide): a clean tiled TIFF whose PlanarConfig tag
     * is renumbered 65001 (unknown, and the directory out of order) opened through OpenSlide
     * prints nothing; at log.level=debug the warnings come through tilewave's log. */
    char *p = twtest_path(dir, "odd.tif"), *out = twtest_path(dir, "out.tif");
    twtest_run r;
    FILE *f;
    tiff_dir d;
    uint64_t count, e;
    bool done = false;

    write_clean(p, SIDE, SIDE, TILE, 8, COMPRESSION_ADOBE_DEFLATE, false, 1);
    f = fopen(p, "r+b");
    cr_assert(f != NULL);
    d = dir0(f);
    count = rd(f, d.first, 2);
    for (e = d.first + 2; e < d.first + 2 + count * 12; e += 12)
        if (rd(f, e, 2) == TIFFTAG_PLANARCONFIG) {
            wr(f, e, 2, 65001);
            done = true;
        }
    fclose(f);
    cr_assert(done);
    r = RUN("info", p, "--reader", "openslide");
    cr_assert(eq(int, r.status, 0), "exit %d; stderr: %s", r.status, r.err);
    cr_assert(eq(str, r.err, ""), "stderr: %s", r.err);
    twtest_run_free(&r);
    r = RUN("convert", p, "-o", out, "--reader", "openslide", "--quiet");
    cr_assert(eq(int, r.status, 0), "exit %d; stderr: %s", r.status, r.err);
    cr_assert(eq(str, r.err, ""), "stderr: %s", r.err);
    twtest_run_free(&r);
    r = RUN("convert", p, "-o", out, "--reader", "openslide", "--set", "log.level=debug");
    cr_assert(eq(int, r.status, 0), "exit %d; stderr: %s", r.status, r.err);
    cr_assert(strstr(r.err, "io.openslide: libtiff warning: TIFFReadDirectory: Unknown field "
                            "with tag 65001") != NULL,
              "stderr: %s", r.err);
    twtest_run_free(&r);
    free(p);
    free(out);
}
