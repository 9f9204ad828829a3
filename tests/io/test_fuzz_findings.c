/* SPDX-License-Identifier: MIT */
/* tilewave tests: regressions for what the fuzz targets of tests/fuzz found (inputs kept in
 * tests/fuzz/regress/, findings listed in docs/reliability.md). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "tilewave.h"
#include "tw_io.h"

#define REGRESS TW_SOURCE_DIR "/tests/fuzz/regress/"

/* Read (x, y, w, h) of `level` (RGB u8) into a fresh buffer. */
static uint8_t *
read_rgb(tw_slide *s, int level, int64_t x, int64_t y, int64_t w, int64_t h)
{
    uint8_t *buf = malloc((size_t)(w * h * 3));
    tw_error err;

    cr_assert_not_null(buf);
    memset(buf, 0x77, (size_t)(w * h * 3));
    cr_assert_eq(tw_slide_read_region(s, level, x, y, w, h, buf, (size_t)w * 3, &err), TW_OK,
                 "%s", err.message);
    return buf;
}

Test(fuzz_findings, tiff_tile_decoded_short_gives_zeros_not_stale_bytes)
{
    /* fuzz_tiff finding: tile 0 of level 1 is a deflate stream that ends 63 bytes early, yet
     * libtiff 4.5 reports the whole tile read. The reader used to pass on what its scratch
     * buffer held from the previous tile, so the pixels depended on the order of reads. Now
     * they are zeros whatever was read before. */
    tw_slide *s = NULL;
    tw_error err;
    uint8_t *after1, *after2, *t;

    cr_assert_eq(tw_slide_open(REGRESS "tiff_deflate_ends_early.tif", TW_READER_TIFF, &s,
                               &err),
                 TW_OK, "%s", err.message);
    free(read_rgb(s, 1, 32, 0, 32, 32)); /* tile 1 into the scratch buffer */
    after1 = read_rgb(s, 1, 0, 0, 32, 32);
    free(read_rgb(s, 1, 0, 32, 32, 16)); /* tile 2 */
    after2 = read_rgb(s, 1, 0, 0, 32, 32);
    cr_assert(memcmp(after1, after2, 32 * 32 * 3) == 0, "tile 0 depends on the previous read");
    /* the 21 pixels libtiff leaves unwritten: row 31, x 11..31 */
    for (int i = 31 * 96 + 33; i < 32 * 96; i++)
        cr_assert_eq(after1[i], 0, "byte %d of tile 0 is %d, not 0", i, after1[i]);
    /* a region across tiles agrees with the tile read alone */
    t = read_rgb(s, 1, 0, 0, 64, 48);
    for (int r = 0; r < 32; r++)
        cr_assert(memcmp(t + r * 64 * 3, after1 + r * 32 * 3, 32 * 3) == 0, "row %d", r);
    free(t);
    free(after1);
    free(after2);
    tw_slide_close(s);
}

Test(fuzz_findings, tiff_tile_rows_do_not_depend_on_the_rows_not_read)
{
    /* fuzz_tiff finding (2026-11-27, a change that zeroed only the rows of the scratch buffer
     * a read copies out, reverted): in this deflate tile (2, 0) of level 0, what libtiff leaves
     * in row 15 depends on what rows 0..10 of the buffer held before the decode, so a region
     * read alone (rows 11..27) differed from the same pixels inside the whole level. The whole
     * buffer is zeroed before every decode again. */
    tw_slide *s = NULL;
    tw_error err;
    uint8_t *all, *part;

    cr_assert_eq(tw_slide_open(REGRESS "tiff_deflate_rows_depend_on_buffer.tif", TW_READER_TIFF,
                               &s, &err),
                 TW_OK, "%s", err.message);
    all = read_rgb(s, 0, 0, 0, 40, 34);
    part = read_rgb(s, 0, 13, 11, 20, 17);
    for (int r = 0; r < 17; r++)
        cr_assert(memcmp(part + r * 20 * 3, all + ((11 + r) * 40 + 13) * 3, 20 * 3) == 0,
                  "row %d of the region read alone differs", 11 + r);
    free(all);
    free(part);
    tw_slide_close(s);
}

Test(fuzz_findings, corrupt_jpeg_tiles_do_not_depend_on_the_tiles_decoded_before)
{
    /* fuzz_tiff finding T6 (2026-11-27): in this 32x32 YCbCr JPEG TIFF, tile 3's corrupt
     * stream redefines Huffman tables inside libtiff's decoder, and tile 0 (corrupt too:
     * "extraneous bytes before marker") decoded after it gave other pixels (511 of 768 bytes)
     * than decoded first. Since issue 26 a tile whose decode warns fails the read, naming
     * it; with io.on_bad_tile=fill it reads as zeros, whatever was decoded before, and the
     * next tile starts from a freshly selected directory. */
    tw_slide *s = NULL;
    tw_error err;
    uint8_t *all, *part, *first, buf[16 * 16 * 3];

    cr_assert_eq(tw_slide_open(REGRESS "tiff_jpeg_tables_redefined_by_corrupt_tile.tif",
                               TW_READER_TIFF, &s, &err),
                 TW_OK, "%s", err.message);
    cr_assert_eq(tw_slide_read_region(s, 0, 10, 10, 16, 16, buf, 16 * 3, &err), TW_E_FORMAT);
    cr_assert(strstr(err.message, "level 0 tile (0, 0) at x=0, y=0: corrupt data (JPEGLib: ") !=
                  NULL,
              "%s", err.message);
    twi_slide_set_bad_tiles(s, true);
    first = read_rgb(s, 0, 10, 10, 16, 16); /* tile 0 decoded first */
    all = read_rgb(s, 0, 0, 0, 32, 32);     /* tiles 0-3, tile 3 last */
    part = read_rgb(s, 0, 10, 10, 16, 16);  /* tile 0 again, after tile 3 */
    for (int r = 0; r < 16; r++) {
        cr_assert(memcmp(part + r * 16 * 3, all + ((10 + r) * 32 + 10) * 3, 16 * 3) == 0,
                  "row %d of the region read alone differs from the whole level's", 10 + r);
        cr_assert(memcmp(part + r * 16 * 3, first + r * 16 * 3, 16 * 3) == 0,
                  "row %d differs between the first read and a later one", 10 + r);
    }
    /* tile 0 is bad: zeros */
    for (int r = 0; r < 6; r++)
        for (int b = 0; b < 6 * 3; b++)
            cr_assert_eq(first[r * 16 * 3 + b], 0, "row %d byte %d", 10 + r, b);
    cr_assert(twi_slide_get_bad_tiles(s) >= 1);
    free(first);
    free(all);
    free(part);
    tw_slide_close(s);
}

Test(fuzz_findings, pyramid_levels_end_for_tiny_tiles_and_huge_sizes)
{
    /* fuzz_region findings: twi_io_pyramid_levels(w, h, 1, 1) never ended (a 1x1 level
     * covers a 1x1 tile, so halving went on until int n overflowed), and (w + 1) / 2
     * overflowed at w = INT64_MAX. Reference: halve (ceil) while above 1x1 and the next level
     * still covers a tile. */
    cr_assert_eq(twi_io_pyramid_levels(1, 1, 1, 1), 1);
    cr_assert_eq(twi_io_pyramid_levels(4, 4, 1, 1), 3);
    cr_assert_eq(twi_io_pyramid_levels(5, 3, 1, 1), 4); /* 5x3 3x2 2x1 1x1 */
    cr_assert_eq(twi_io_pyramid_levels(INT64_MAX, 1, 1, 1), 64);
    cr_assert_eq(twi_io_pyramid_levels(INT64_MAX, INT64_MAX, 1 << 30, 1 << 30), 34);
    cr_assert_eq(twi_io_max_levels(INT64_MAX, 1), 64);
    cr_assert_eq(twi_io_max_levels(INT64_MAX, INT64_MAX), 64);
    cr_assert_eq(twi_io_max_levels(5, 3), 4);
}

Test(fuzz_findings, levels_with_over_twice_the_tiles_are_refused_before_openslide)
{
    /* fuzz_tiff finding T4 (2026-11-27; three inputs, from the 64-core GPU machine host, this
     * VM and a later run here): Aperio-described TIFFs whose level 1 has more than twice as
     * many tiles across or down as level 0 made OpenSlide 3.4.1 divide by zero inside
     * openslide_open (it maps a level's missing tiles onto the next level's grid dividing by
     * round(tiles across / the next's tiles across), and the same down): SIGFPE. Refused now
     * before OpenSlide, through the automatic reader and OpenSlide alike; the libtiff reader
     * still opens such a file (its level 1 is a plain reduced level there). */
    static const struct {
        const char *file, *message;
    } cases[] = {
        {REGRESS "openslide_level_more_tiles_across_than_twice.tif",
         "has 8x1 tiles, more than twice as many across or down as directory 0 (3x16)"},
        {REGRESS "openslide_level_more_tiles_across_than_twice_2.tif",
         "has 3x1 tiles, more than twice as many across or down as directory 0 (1x16)"},
        {REGRESS "openslide_level_more_tiles_down_than_twice.tif",
         "has 2x120 tiles, more than twice as many across or down as directory 0 (3x44)"},
    };

    for (size_t f = 0; f < sizeof cases / sizeof cases[0]; f++) {
        for (int k = 0; k < 2; k++) {
            tw_reader_kind kind = k ? TW_READER_OPENSLIDE : TW_READER_AUTO;
            tw_slide *s = NULL;
            tw_error err = {0};

            cr_assert_eq(tw_slide_open(cases[f].file, kind, &s, &err), TW_E_FORMAT, "%s: %s",
                         cases[f].file, err.message);
            cr_assert_null(s);
            cr_assert(strstr(err.message, "directory 1 of") != NULL, "%s", err.message);
            cr_assert(strstr(err.message, cases[f].message) != NULL, "%s", err.message);
            cr_assert(strchr(err.message, '\n') == NULL);
        }
    }
    {
        tw_slide *s = NULL;
        tw_error err = {0};

        cr_assert_eq(tw_slide_open(cases[0].file, TW_READER_TIFF, &s, &err), TW_OK, "%s",
                     err.message);
        cr_assert_eq(tw_slide_get_level_count(s), 2);
        tw_slide_close(s);
    }
}

Test(fuzz_findings, pyramid_level_larger_than_its_base_is_refused_before_openslide)
{
    /* fuzz_tiff finding T3 (on the 64-core GPU machine): an Aperio-described BigTIFF whose
     * reduced-resolution directory is taller than directory 0 (20x14865 under 40x34, and
     * 20x8209 under 808x1) made OpenSlide 3.4.1 divide by zero inside openslide_open: SIGFPE,
     * `tilewave info` killed. The check before OpenSlide now refuses it with a message, through
     * the automatic reader and OpenSlide alike; the libtiff reader, which reads directory 0
     * only as the base, is not involved in auto mode (the file claims a vendor). */
    static const char *const files[] = {REGRESS "openslide_level_taller_than_base.tif",
                                        REGRESS "openslide_level_taller_than_base_2.tif"};

    for (int f = 0; f < 2; f++)
        for (int k = 0; k < 2; k++) {
            tw_reader_kind kind = k ? TW_READER_OPENSLIDE : TW_READER_AUTO;
            tw_slide *s = NULL;
            tw_error err = {0};

            cr_assert_eq(tw_slide_open(files[f], kind, &s, &err), TW_E_FORMAT, "%s: %s",
                         files[f], err.message);
            cr_assert_null(s);
            cr_assert(strstr(err.message, "is larger than the base image") != NULL, "%s",
                      err.message);
            cr_assert(strchr(err.message, '\n') == NULL);
        }
}
