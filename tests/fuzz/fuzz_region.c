/* SPDX-License-Identifier: MIT */
/* tilewave fuzz target: region and tile arithmetic (tw_slide_read_region bounds on small
 * generated TIFFs, twi_parse_*, twi_format_bytes, twi_io_pyramid_levels, twi_io_out_tile),
 * each checked against an independent reference. */
#include <ctype.h>
#include <errno.h>
#include <math.h>

#include "fuzz_common.h"
#include "tw_internal.h"
#include "tw_io.h"

/* The generated slides: level 0 of W0 x H0, tiles of 16, three levels, no compression. */
#define W0 150
#define H0 90
#define NLEV 3

static tw_slide *slides[2]; /* gray u8, RGB u8 */
static int chans[2] = {1, 3};

static uint8_t
fz_pixel(int level, int64_t x, int64_t y, int c)
{
    return (uint8_t)((x * 7 + y * 13 + level * 31 + c * 50) & 0xff);
}

static void
fz_write_slide(const char *path, int ch)
{
    tw_writer_opts o;
    tw_writer *wr = NULL;
    tw_error err;
    uint8_t tile[16 * 16 * 3];
    int64_t lw = W0, lh = H0;

    tw_writer_opts_init(&o);
    o.w = W0;
    o.h = H0;
    o.channels = ch;
    o.type = TW_U8;
    o.tile_w = o.tile_h = 16;
    o.n_levels = NLEV;
    o.compression = TW_COMPRESS_NONE;
    FZ_CHECK(tw_writer_open(path, &o, &wr, &err) == TW_OK);
    for (int l = 0; l < NLEV; l++) {
        for (int64_t ty = 0; ty * 16 < lh; ty++)
            for (int64_t tx = 0; tx * 16 < lw; tx++) {
                for (int y = 0; y < 16; y++)
                    for (int x = 0; x < 16; x++)
                        for (int c = 0; c < ch; c++)
                            tile[(y * 16 + x) * ch + c] =
                                fz_pixel(l, tx * 16 + x, ty * 16 + y, c);
                FZ_CHECK(tw_writer_write_tile(wr, l, tx, ty, tile, (size_t)(16 * ch), &err) ==
                         TW_OK);
            }
        lw = (lw + 1) / 2;
        lh = (lh + 1) / 2;
    }
    FZ_CHECK(tw_writer_close(wr, &err) == TW_OK);
}

static void
fz_init(void)
{
    char dir[] = "/tmp/tw-fuzz-region-XXXXXX", path[64];
    tw_error err;

    fz_quiet();
    FZ_CHECK(mkdtemp(dir) != NULL);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/s%d.tif", dir, i);
        fz_write_slide(path, chans[i]);
        FZ_CHECK(tw_slide_open(path, TW_READER_TIFF, &slides[i], &err) == TW_OK);
        unlink(path); /* the reader keeps its descriptor */
    }
    rmdir(dir);
}

/* ---- a little reader of the fuzzer's bytes */
typedef struct fz_in {
    const uint8_t *p;
    size_t n;
} fz_in;

static uint64_t
fz_u64(fz_in *in, int bytes)
{
    uint64_t v = 0;

    for (int i = 0; i < bytes && in->n; i++, in->p++, in->n--)
        v = v << 8 | *in->p;
    return v;
}

/* Mostly small values near the level's edges, sometimes any int64. */
static int64_t
fz_coord(fz_in *in)
{
    uint8_t k = (uint8_t)fz_u64(in, 1);

    if (k & 0x80)
        return (int64_t)fz_u64(in, 8);
    return (int64_t)(k & 0x7f) * 3 / 2 - 20 + (int64_t)(fz_u64(in, 1) & 3);
}

static void
fz_region(fz_in *in)
{
    int which = (int)(fz_u64(in, 1) & 1);
    tw_slide *s = slides[which];
    int ch = chans[which];
    int level = (int)(int8_t)fz_u64(in, 1) % 5;
    int64_t x = fz_coord(in), y = fz_coord(in), w = fz_coord(in), h = fz_coord(in);
    int stride_delta = (int)(fz_u64(in, 1) % 9) - 1; /* -1: one byte short of a row */
    int64_t lw = 0, lh = 0;
    tw_level_info li;
    bool inside;
    tw_error err;
    tw_status st;

    if (level >= 0 && level < NLEV) {
        FZ_CHECK(tw_slide_get_level(s, level, &li) == TW_OK);
        lw = li.w;
        lh = li.h;
        FZ_CHECK(lw == (W0 + (1 << level) - 1) >> level);
        FZ_CHECK(lh == (H0 + (1 << level) - 1) >> level);
    }
    inside = level >= 0 && level < NLEV && w >= 1 && h >= 1 && x >= 0 && y >= 0 && w <= lw &&
             h <= lh && x <= lw - w && y <= lh - h;
    if (inside && stride_delta >= 0) {
        size_t row = (size_t)w * (size_t)ch, stride = row + (size_t)stride_delta;
        uint8_t *dst = malloc(stride * (size_t)h);

        FZ_CHECK(dst != NULL);
        st = tw_slide_read_region(s, level, x, y, w, h, dst, stride, &err);
        FZ_CHECK(st == TW_OK);
        for (int64_t r = 0; r < h; r++)
            for (int64_t c = 0; c < w; c++)
                for (int k = 0; k < ch; k++)
                    FZ_CHECK(dst[(size_t)r * stride + (size_t)c * (size_t)ch + (size_t)k] ==
                             fz_pixel(level, x + c, y + r, k));
        free(dst);
    } else {
        /* refused, dst untouched */
        uint8_t guard[256];
        size_t stride;

        memset(guard, 0xC3, sizeof guard);
        if (inside)
            stride = (size_t)w * (size_t)ch - 1;
        else
            stride = (size_t)(fz_u64(in, 2) % 257);
        st = tw_slide_read_region(s, level, x, y, w, h, guard, stride, &err);
        FZ_CHECK(st == TW_E_INVALID);
        fz_check_error(st, &err);
        for (size_t i = 0; i < sizeof guard; i++)
            FZ_CHECK(guard[i] == 0xC3);
    }
}

/* ---- parsers against independent references */

/* strtoll's grammar in base 10, without strtoll: blanks, a sign, digits. */
static bool
ref_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    bool neg = false;
    uint64_t mag = 0, lim;
    size_t digits = 0;

    while (isspace((unsigned char)*s))
        s++;
    if (*s == '+' || *s == '-')
        neg = *s++ == '-';
    lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; *s >= '0' && *s <= '9'; s++, digits++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (mag > (lim - d) / 10)
            return false;
        mag = mag * 10 + d;
    }
    if (!digits || *s)
        return false;
    if (neg)
        *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    else
        *out = (int64_t)mag;
    return *out >= min && *out <= max;
}

static bool
ref_bytes(const char *s, int64_t min, int64_t max, int64_t *out)
{
    size_t n = strlen(s);
    int shift = 0;
    uint64_t v = 0;

    if (n == 0 || n >= 32)
        return false;
    switch (s[n - 1]) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    case 'T': case 't': shift = 40; break;
    default: break;
    }
    if (shift)
        n--;
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        if (v > ((uint64_t)INT64_MAX - (uint64_t)(s[i] - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > ((uint64_t)INT64_MAX >> shift))
        return false;
    *out = (int64_t)(v << shift);
    return *out >= min && *out <= max;
}

static void
fz_parse(fz_in *in)
{
    int64_t lo = fz_coord(in), hi = fz_coord(in), a = 0, b = 0, ra = 0, rb = 0;
    int which = (int)(fz_u64(in, 1) % 4);
    char *s = malloc(in->n + 1);
    bool ok, rok;

    FZ_CHECK(s != NULL);
    memcpy(s, in->p, in->n);
    s[in->n] = '\0';
    if (which == 0) {
        ok = twi_parse_i64(s, lo, hi, &a) == TW_OK;
        rok = ref_i64(s, lo, hi, &ra);
        FZ_CHECK(ok == rok);
        FZ_CHECK(!ok || a == ra);
    } else if (which == 1) {
        ok = twi_parse_bytes(s, lo, hi, &a) == TW_OK;
        rok = ref_bytes(s, lo, hi, &ra);
        FZ_CHECK(ok == rok);
        if (ok) {
            char buf[64];

            FZ_CHECK(a == ra);
            /* the formatted count parses back to itself */
            twi_format_bytes(a, buf, sizeof buf);
            FZ_CHECK(twi_parse_bytes(buf, a, a, &b) == TW_OK && b == a);
        }
    } else if (which == 2) {
        const char *x = strchr(s, 'x');

        ok = twi_parse_dims(s, lo, hi, &a, &b) == TW_OK;
        if (!x) {
            rok = ref_i64(s, lo, hi, &ra);
            rb = ra;
        } else if ((size_t)(x - s) == 0 || (size_t)(x - s) >= 64) {
            rok = false; /* the first number is limited to 63 characters */
        } else {
            char *first = strndup(s, (size_t)(x - s));

            FZ_CHECK(first != NULL);
            rok = ref_i64(first, lo, hi, &ra) && ref_i64(x + 1, lo, hi, &rb);
            free(first);
        }
        FZ_CHECK(ok == rok);
        FZ_CHECK(!ok || (a == ra && b == rb && a >= lo && a <= hi && b >= lo && b <= hi));
    } else {
        double d = 0, d2 = 0;
        char buf[64];

        if (twi_parse_f64(s, &d) == TW_OK) {
            FZ_CHECK(isfinite(d));
            snprintf(buf, sizeof buf, "%.17g", d);
            FZ_CHECK(twi_parse_f64(buf, &d2) == TW_OK && d2 == d);
        }
    }
    free(s);
}

/* ---- tile arithmetic */

static int
ref_pyramid_levels(int64_t w, int64_t h, int32_t tw, int32_t th)
{
    int n = 1;

    if (w < 1 || h < 1 || tw < 1 || th < 1)
        return 0;
    /* ceil(w / 2) without w + 1 */
    while ((w > 1 || h > 1) && w - w / 2 >= tw && h - h / 2 >= th) {
        w -= w / 2;
        h -= h / 2;
        n++;
    }
    return n;
}

static void
fz_tiles(fz_in *in)
{
    int64_t w = (int64_t)fz_u64(in, 8), h = (int64_t)fz_u64(in, 8);
    int32_t tw = (int32_t)fz_u64(in, 4), th = (int32_t)fz_u64(in, 4), op = (int32_t)fz_u64(in, 4);
    int32_t t;
    int n;

    n = twi_io_pyramid_levels(w, h, tw, th);
    FZ_CHECK(n == ref_pyramid_levels(w, h, tw, th));
    FZ_CHECK(n >= 0 && n <= 64);
    /* every level down to 1x1: the same halving with 1x1 tiles */
    FZ_CHECK(twi_io_max_levels(w, h) == ref_pyramid_levels(w, h, 1, 1));
    if (n >= 1) {
        /* the smallest level still covers a tile (or is level 0) */
        int64_t lw = w, lh = h;
        for (int k = 1; k < n; k++) {
            lw -= lw / 2;
            lh -= lh / 2;
        }
        FZ_CHECK(n == 1 || (lw >= tw && lh >= th));
    }
    t = twi_io_out_tile(op);
    FZ_CHECK(t >= 256 && t <= 1024 && t % 16 == 0);
    if (op >= 256 && op <= 1024 && op % 16 == 0)
        FZ_CHECK(t == op);
    else if (op >= 1 && t != 512 && t != 256)
        FZ_CHECK(t % op == 0 || op % t == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    fz_in in = {data, size};

    if (!init) {
        fz_init();
        init = 1;
    }
    if (size > 4096)
        return 0;
    switch (fz_u64(&in, 1) % 3) {
    case 0: fz_region(&in); break;
    case 1: fz_parse(&in); break;
    default: fz_tiles(&in); break;
    }
    return 0;
}
