/* SPDX-License-Identifier: MIT */
/* tilewave tests: written outputs read back with libtiff alone, reference pyramids, vips. */
#include "twtest_out.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <tiffio.h>
#include <unistd.h>

#include "twtest.h"

extern char **environ;

/* libtiff prints warnings about our private tags to stderr otherwise */
static void
silent(const char *module, const char *fmt, va_list ap)
{
    (void)module;
    (void)fmt;
    (void)ap;
}

static TIFF *
open_tiff(const char *path)
{
    TIFF *tif;

    TIFFSetWarningHandler(silent);
    tif = TIFFOpen(path, "r");
    cr_assert_not_null(tif, "libtiff cannot open %s", path);
    return tif;
}

/* The SubIFD offsets of the current directory; 0 when none. */
static int
subifds(TIFF *tif, uint64_t **offs)
{
    uint16_t n = 0;
    uint64_t *p = NULL;

    if (!TIFFGetField(tif, TIFFTAG_SUBIFD, &n, &p))
        return 0;
    *offs = p;
    return n;
}

int
twout_level_count(const char *path, bool *ome)
{
    TIFF *tif = open_tiff(path);
    uint64_t *offs = NULL;
    int n_sub = subifds(tif, &offs);
    int n;

    if (ome)
        *ome = n_sub > 0;
    n = n_sub > 0 ? 1 + n_sub : (int)TIFFNumberOfDirectories(tif);
    TIFFClose(tif);
    return n;
}

void
twout_read_level(const char *path, int level, twout_level *o)
{
    TIFF *tif = open_tiff(path);
    uint64_t *offs = NULL;
    int n_sub = subifds(tif, &offs);
    uint32_t w = 0, h = 0;
    uint16_t bps = 0, spp = 0, fmt = SAMPLEFORMAT_UINT;
    float xr = 0, yr = 0;
    size_t px, tbytes;
    uint8_t *tile;

    memset(o, 0, sizeof *o);
    if (n_sub > 0 && level > 0) {
        cr_assert(level <= n_sub, "%s has %d SubIFDs, level %d asked", path, n_sub, level);
        cr_assert(TIFFSetSubDirectory(tif, offs[level - 1]), "SubIFD %d of %s", level - 1, path);
    } else if (level > 0) {
        cr_assert(TIFFSetDirectory(tif, (tdir_t)level), "directory %d of %s", level, path);
    }
    cr_assert(TIFFIsTiled(tif), "level %d of %s is not tiled", level, path);
    TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w);
    TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h);
    TIFFGetField(tif, TIFFTAG_TILEWIDTH, &o->tile_w);
    TIFFGetField(tif, TIFFTAG_TILELENGTH, &o->tile_h);
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bps);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &fmt);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SUBFILETYPE, &o->subfile);
    TIFFGetField(tif, TIFFTAG_COMPRESSION, &o->compression);
    TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &o->photometric);
    o->has_res = TIFFGetField(tif, TIFFTAG_XRESOLUTION, &xr) &&
                 TIFFGetField(tif, TIFFTAG_YRESOLUTION, &yr) &&
                 TIFFGetField(tif, TIFFTAG_RESOLUTIONUNIT, &o->resunit);
    o->xres = xr;
    o->yres = yr;
    o->w = w;
    o->h = h;
    o->channels = spp;
    o->type = fmt == SAMPLEFORMAT_IEEEFP ? TW_F32
              : bps == 8                  ? TW_U8
              : bps == 16                 ? TW_U16
              : bps == 32                 ? TW_U32
                                          : TW_U64;
    if (o->photometric == PHOTOMETRIC_YCBCR)
        TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
    px = (size_t)spp * tw_sample_size(o->type);
    tbytes = (size_t)o->tile_w * o->tile_h * px;
    if ((size_t)TIFFTileSize(tif) > tbytes)
        tbytes = (size_t)TIFFTileSize(tif);
    tile = malloc(tbytes);
    o->px = malloc((size_t)w * h * px);
    cr_assert(tile && o->px);
    for (uint32_t ty = 0; ty < h; ty += o->tile_h)
        for (uint32_t tx = 0; tx < w; tx += o->tile_w) {
            uint32_t idx = TIFFComputeTile(tif, tx, ty, 0, 0);
            uint32_t cw = w - tx < o->tile_w ? w - tx : o->tile_w;
            uint32_t ch = h - ty < o->tile_h ? h - ty : o->tile_h;

            cr_assert(TIFFReadEncodedTile(tif, idx, tile, (tmsize_t)tbytes) > 0,
                      "tile %u of level %d of %s", idx, level, path);
            for (uint32_t r = 0; r < ch; r++)
                memcpy(o->px + ((size_t)(ty + r) * w + tx) * px,
                       tile + (size_t)r * o->tile_w * px, (size_t)cw * px);
        }
    free(tile);
    TIFFClose(tif);
}

void
twout_level_free(twout_level *l)
{
    free(l->px);
    l->px = NULL;
}

char *
twout_description(const char *path)
{
    TIFF *tif = open_tiff(path);
    const char *d = NULL;
    char *r = NULL;

    if (TIFFGetField(tif, TIFFTAG_IMAGEDESCRIPTION, &d) && d)
        r = strdup(d);
    TIFFClose(tif);
    return r;
}

static uint64_t
get_u(const uint8_t *p, tw_sample_type t)
{
    switch (t) {
    case TW_U8: return *p;
    case TW_U16: {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case TW_U32: {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    default: {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    }
}

static void
put_u(uint8_t *p, tw_sample_type t, uint64_t v)
{
    switch (t) {
    case TW_U8: *p = (uint8_t)v; break;
    case TW_U16: {
        uint16_t x = (uint16_t)v;
        memcpy(p, &x, 2);
        break;
    }
    case TW_U32: {
        uint32_t x = (uint32_t)v;
        memcpy(p, &x, 4);
        break;
    }
    default: memcpy(p, &v, 8); break;
    }
}

uint8_t *
twout_reduce(const uint8_t *src, int64_t w, int64_t h, int ch, tw_sample_type t,
             twout_rule rule)
{
    const int64_t dw = (w + 1) / 2, dh = (h + 1) / 2;
    const size_t ss = tw_sample_size(t), px = (size_t)ch * ss;
    uint8_t *dst = malloc((size_t)(dw * dh) * px);

    cr_assert_not_null(dst);
    for (int64_t Y = 0; Y < dh; Y++)
        for (int64_t X = 0; X < dw; X++)
            for (int c = 0; c < ch; c++) {
                const uint8_t *s[4];
                int n = 0;
                uint8_t *d = dst + ((size_t)(Y * dw + X)) * px + (size_t)c * ss;

                /* raster order inside the 2x2 block */
                for (int dy = 0; dy < 2; dy++)
                    for (int dx = 0; dx < 2; dx++)
                        if (2 * X + dx < w && 2 * Y + dy < h)
                            s[n++] = src + ((size_t)((2 * Y + dy) * w + 2 * X + dx)) * px +
                                     (size_t)c * ss;
                if (rule == TWOUT_NEAREST) {
                    memcpy(d, s[0], ss);
                } else if (t == TW_F32) {
                    float v[4] = {0}, r;
                    double sum = 0;

                    for (int i = 0; i < n; i++)
                        memcpy(&v[i], s[i], 4);
                    r = v[0];
                    for (int i = 0; i < n; i++) {
                        sum += v[i];
                        if (v[i] > r)
                            r = v[i];
                    }
                    if (rule == TWOUT_MEAN)
                        r = (float)(sum / n);
                    memcpy(d, &r, 4);
                } else {
                    uint64_t sum = 0, mx = 0;

                    for (int i = 0; i < n; i++) {
                        uint64_t v = get_u(s[i], t);

                        sum += v;
                        mx = v > mx ? v : mx;
                    }
                    put_u(d, t, rule == TWOUT_MEAN ? (sum + (uint64_t)n / 2) / (uint64_t)n : mx);
                }
            }
    return dst;
}

int
twout_check_pyramid(const char *path, const uint8_t *img, int64_t w, int64_t h, int ch,
                    tw_sample_type t, twout_rule rule)
{
    const size_t px = (size_t)ch * tw_sample_size(t);
    int n = twout_level_count(path, NULL);
    uint8_t *ref = malloc((size_t)(w * h) * px);

    cr_assert_not_null(ref);
    memcpy(ref, img, (size_t)(w * h) * px);
    for (int l = 0; l < n; l++) {
        twout_level lv;

        twout_read_level(path, l, &lv);
        cr_assert(eq(i64, lv.w, w));
        cr_assert(eq(i64, lv.h, h));
        cr_assert(eq(int, lv.channels, ch));
        cr_assert(eq(int, (int)lv.type, (int)t));
        cr_assert(memcmp(lv.px, ref, (size_t)(w * h) * px) == 0,
                  "%s: level %d is not the rule-%d reduction", path, l, (int)rule);
        twout_level_free(&lv);
        if (l + 1 < n) {
            uint8_t *next = twout_reduce(ref, w, h, ch, t, rule);

            free(ref);
            ref = next;
            w = (w + 1) / 2;
            h = (h + 1) / 2;
        }
    }
    free(ref);
    return n;
}

uint8_t *
twout_image(int64_t w, int64_t h, int ch, tw_sample_type t, uint64_t seed, bool smooth)
{
    const size_t ss = tw_sample_size(t);
    uint8_t *img = malloc((size_t)(w * h) * (size_t)ch * ss);
    uint64_t s = twtest_rnd_stream(seed);

    cr_assert_not_null(img);
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++)
            for (int c = 0; c < ch; c++) {
                uint8_t *p = img + ((size_t)(y * w + x) * (size_t)ch + (size_t)c) * ss;
                uint64_t r = twtest_xorshift(&s);

                if (smooth) {
                    /* in [0, 1]: low frequencies only, a different phase per channel */
                    double v = 0.5 + 0.35 * sin((double)x / 61.0 + c) * cos((double)y / 83.0) +
                               0.1 * sin((double)(x + 2 * y) / 149.0 + 2 * c);

                    r = (uint64_t)(v * 255.0 + 0.5);
                    if (t == TW_U16)
                        r = (uint64_t)(v * 65535.0 + 0.5);
                }
                if (t == TW_F32) {
                    float f = smooth ? (float)r / 4.0f
                                     : (float)(int32_t)(r % 400000u) / 64.0f - 3000.0f;

                    memcpy(p, &f, 4);
                } else {
                    put_u(p, t, r);
                }
            }
    return img;
}

void
twout_write_input(const char *path, const uint8_t *img, int64_t w, int64_t h, int ch,
                  tw_sample_type t, int n_levels, double mpp)
{
    const size_t px = (size_t)ch * tw_sample_size(t);
    tw_writer_opts wo;
    tw_writer *wr = NULL;
    tw_error err;
    uint8_t *lv = NULL;
    const uint8_t *cur = img;

    tw_writer_opts_init(&wo);
    wo.w = w;
    wo.h = h;
    wo.channels = ch;
    wo.type = t;
    wo.tile_w = wo.tile_h = 64;
    wo.n_levels = n_levels;
    wo.mpp_x = wo.mpp_y = mpp;
    cr_assert(eq(int, tw_writer_open(path, &wo, &wr, &err), TW_OK), "%s", err.message);
    for (int l = 0; l < n_levels; l++) {
        for (int64_t ty = 0; ty * 64 < h; ty++)
            for (int64_t tx = 0; tx * 64 < w; tx++)
                cr_assert(eq(int,
                             tw_writer_write_tile(wr, l, tx, ty,
                                                  cur + ((size_t)(ty * 64 * w + tx * 64)) * px,
                                                  (size_t)w * px, &err),
                             TW_OK),
                          "%s", err.message);
        if (l + 1 < n_levels) {
            uint8_t *next = twout_reduce(cur, w, h, ch, t, t == TW_U32 ? TWOUT_NEAREST
                                                                       : TWOUT_MEAN);

            free(lv);
            lv = next;
            cur = lv;
            w = (w + 1) / 2;
            h = (h + 1) / 2;
        }
    }
    free(lv);
    cr_assert(eq(int, tw_writer_close(wr, &err), TW_OK), "%s", err.message);
}

int
twout_run(const char *const *argv, char **out)
{
    posix_spawn_file_actions_t fa;
    int fds[2], ws = 0, rc = 127;
    pid_t pid;
    size_t len = 0, cap = 4096;
    char *buf = NULL;

    if (pipe(fds) != 0)
        return 127;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ) != 0)
        pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    buf = malloc(cap);
    for (;;) {
        ssize_t r;

        if (buf && cap - len < 2) {
            char *nb = realloc(buf, cap * 2);

            if (!nb) {
                free(buf);
                buf = NULL;
            } else {
                buf = nb;
                cap *= 2;
            }
        }
        if (!buf)
            break;
        r = read(fds[0], buf + len, cap - len - 1);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fds[0]);
    if (buf)
        buf[len] = '\0';
    if (pid > 0 && waitpid(pid, &ws, 0) == pid)
        rc = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    if (out)
        *out = buf;
    else
        free(buf);
    return rc;
}

bool
twout_have_vips(void)
{
    const char *const a[] = {"vips", "--version", NULL};
    const char *const b[] = {"vipsheader", "--version", NULL};

    return twout_run(a, NULL) == 0 && twout_run(b, NULL) == 0;
}

uint8_t *
twout_vips_raw(const char *src, const char *tmpdir, size_t *n)
{
    char *raw = twtest_path(tmpdir, "vips.raw");
    const char *const a[] = {"vips", "rawsave", src, raw, NULL};
    uint8_t *buf = NULL;
    FILE *f;
    long sz;

    unlink(raw);
    if (twout_run(a, NULL) == 0 && (f = fopen(raw, "rb"))) {
        fseek(f, 0, SEEK_END);
        sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        buf = malloc(sz > 0 ? (size_t)sz : 1);
        if (buf && fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
            free(buf);
            buf = NULL;
        }
        *n = (size_t)sz;
        fclose(f);
    }
    unlink(raw);
    free(raw);
    return buf;
}

int64_t
twout_vips_field(const char *src, const char *field)
{
    const char *const a[] = {"vipsheader", "-f", field, src, NULL};
    char *out = NULL;
    int64_t v = -1;

    if (twout_run(a, &out) == 0 && out)
        v = strtoll(out, NULL, 10);
    free(out);
    return v;
}
