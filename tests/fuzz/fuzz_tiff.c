/* SPDX-License-Identifier: MIT */
/* tilewave fuzz target: bytes as a TIFF/slide, opened with the TIFF and AUTO readers. */
#include "fuzz_common.h"

/* Per-read pixel cap: regions stay small so an iteration stays fast whatever sizes the
 * header claims. */
#define FZ_MAX_SIDE 96

static int64_t
fz_min(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Read a few bounded regions of one level and check the reader's contract on them. */
static void
fz_level(tw_slide *s, int level, const tw_level_info *li, size_t px)
{
    int64_t w = fz_min(li->w, FZ_MAX_SIDE), h = fz_min(li->h, FZ_MAX_SIDE);
    int64_t x0[2] = {0, li->w - w}, y0[2] = {0, li->h - h};
    size_t stride = (size_t)w * px;
    uint8_t *a = malloc(stride * (size_t)h), *b = malloc(stride * (size_t)h);
    tw_error err;
    tw_status st, st2;

    FZ_CHECK(a && b);
    /* two corners (top-left, bottom-right) of the level */
    for (int k = 0; k < 2; k++) {
        memset(a, 0xA5, stride * (size_t)h);
        st = tw_slide_read_region(s, level, x0[k], y0[k], w, h, a, stride, &err);
        if (st != TW_OK) {
            fz_check_error(st, &err);
            FZ_CHECK(st != TW_E_INVALID); /* the region lies inside the level */
            continue;
        }
        /* A sub-region read alone gives the same pixels as inside the bigger read. Not
         * through OpenSlide at a non-integer downsample: it takes level-0 coordinates and
         * resamples at the fractional level offset they map to (finding T2,
         * docs/reliability.md); tilewave reads such levels with libtiff where it can, but
         * not every input here allows it (JPEG 2000, gray levels). */
        if (w >= 2 && h >= 2 &&
            (tw_slide_get_reader(s) != TW_READER_OPENSLIDE ||
             li->downsample == (double)(int64_t)li->downsample)) {
            int64_t sx = w / 3, sy = h / 3, sw = w / 2, sh = h / 2;
            size_t sstride = (size_t)sw * px;

            st2 = tw_slide_read_region(s, level, x0[k] + sx, y0[k] + sy, sw, sh, b, sstride,
                                       &err);
            if (st2 == TW_OK) {
                for (int64_t r = 0; r < sh; r++)
                    FZ_CHECK(memcmp(b + (size_t)r * sstride,
                                    a + (size_t)(sy + r) * stride + (size_t)sx * px,
                                    sstride) == 0);
            } else {
                fz_check_error(st2, &err);
            }
        }
    }
    /* Regions outside the level are refused before anything is written to dst. */
    {
        const int64_t bad[][4] = {{-1, 0, 1, 1},
                                  {0, -1, 1, 1},
                                  {li->w, 0, 1, 1},
                                  {0, li->h, 1, 1},
                                  {0, 0, 0, 1},
                                  {0, 0, 1, -5},
                                  {li->w - 1, 0, 2, 1},
                                  {INT64_MAX, INT64_MAX, 1, 1},
                                  {1, 1, INT64_MAX, INT64_MAX},
                                  {INT64_MIN, 0, INT64_MAX, 1},
                                  {0, INT64_MAX - 1, 1, 2}};

        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            memset(b, 0x5A, stride);
            st = tw_slide_read_region(s, level, bad[i][0], bad[i][1], bad[i][2], bad[i][3], b,
                                      stride, &err);
            FZ_CHECK(st == TW_E_INVALID);
            fz_check_error(st, &err);
            for (size_t j = 0; j < stride; j++)
                FZ_CHECK(b[j] == 0x5A);
        }
        /* a stride below one row */
        if (stride > 1) {
            st = tw_slide_read_region(s, level, 0, 0, w, 1, b, stride - 1, &err);
            FZ_CHECK(st == TW_E_INVALID);
        }
    }
    free(a);
    free(b);
}

static void
fz_slide(const char *path, tw_reader_kind reader)
{
    tw_slide *s = NULL;
    tw_error err;
    tw_status st = tw_slide_open(path, reader, &s, &err);
    const char *const *names;
    int n, ch;
    size_t px;
    double mx = -1, my = -1;

    if (st != TW_OK) {
        fz_check_error(st, &err);
        FZ_CHECK(s == NULL);
        FZ_CHECK(st == TW_E_IO || st == TW_E_FORMAT || st == TW_E_NOMEM);
        return;
    }
    FZ_CHECK(s != NULL);
    FZ_CHECK(tw_slide_get_format(s) != NULL);
    if (reader != TW_READER_AUTO)
        FZ_CHECK(tw_slide_get_reader(s) == reader);
    n = tw_slide_get_level_count(s);
    ch = tw_slide_get_channels(s);
    FZ_CHECK(n >= 1);
    FZ_CHECK(ch == 1 || ch == 2 || ch == 3);
    px = (size_t)ch * tw_sample_size(tw_slide_get_sample_type(s));
    FZ_CHECK(px >= 1 && px <= 24);
    tw_slide_get_mpp(s, &mx, &my);
    FZ_CHECK(mx >= 0 && my >= 0);
    names = tw_slide_get_property_names(s);
    for (size_t i = 0; names && names[i]; i++) {
        const char *v = tw_slide_get_property(s, names[i]);
        FZ_CHECK(v != NULL);
        (void)strlen(v);
    }
    FZ_CHECK(tw_slide_get_property(s, "tilewave.fuzz.no-such-property") == NULL);
    for (int l = 0; l < n && l < 8; l++) {
        tw_level_info li;

        FZ_CHECK(tw_slide_get_level(s, l, &li) == TW_OK);
        FZ_CHECK(li.w >= 1 && li.h >= 1);
        FZ_CHECK(li.downsample > 0);
        FZ_CHECK(li.tile_w >= 0 && li.tile_h >= 0);
        fz_level(s, l, &li, px);
    }
    {
        tw_level_info li;
        FZ_CHECK(tw_slide_get_level(s, n, &li) == TW_E_INVALID);
        FZ_CHECK(tw_slide_get_level(s, -1, &li) == TW_E_INVALID);
    }
    tw_slide_close(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    char path[64];
    int fd;

    if (!init) {
        fz_quiet();
        init = 1;
    }
    if (size > (1u << 20))
        return 0;
    if ((fd = fz_memfile(data, size, path, sizeof path)) < 0)
        return 0;
    fz_slide(path, TW_READER_TIFF);
    fz_slide(path, TW_READER_AUTO);
    close(fd);
    return 0;
}
