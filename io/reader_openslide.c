/* SPDX-License-Identifier: MIT */
/* tilewave: the OpenSlide reader: vendor slides as 8-bit RGB, premultiplied ARGB undone. */
#include <glib.h>
#include <math.h>
#include <openslide.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>

#include "io_internal.h"

/* Pixels per openslide_read_region call: bounds the ARGB buffer to 16 MiB per reading thread
 * whatever region is asked for. */
#define CHUNK_PIXELS ((int64_t)1 << 22)

typedef struct os_reader {
    openslide_t *osr; /* thread-safe: one handle shared by every reading thread */
    /* Levels read through libtiff instead (non-integer downsamples of TIFF-based vendors,
     * below): the libtiff slide of the same file and, per OpenSlide level, its level there or
     * -1. NULL when none is. */
    tw_slide *tiff;
    int *tiff_level;
} os_reader;

static void
os_close(tw_slide *s)
{
    os_reader *r = s->priv;

    if (!r)
        return;
    if (r->osr)
        openslide_close(r->osr);
    tw_slide_close(r->tiff);
    free(r->tiff_level);
    free(r);
    s->priv = NULL;
}

/* Integer property, or 0 when absent or not a number. */
static int64_t
prop_i64(openslide_t *osr, const char *name)
{
    const char *v = openslide_get_property_value(osr, name);
    int64_t n = 0;

    if (!v || twi_parse_i64(v, 0, INT32_MAX, &n) != TW_OK)
        return 0;
    return n;
}

static double
prop_f64(openslide_t *osr, const char *name)
{
    const char *v = openslide_get_property_value(osr, name);
    double d = 0;

    if (!v || twi_parse_f64(v, &d) != TW_OK || d < 0)
        return 0;
    return d;
}

/*
 * OpenSlide 3.4.1 takes a region's corner in level-0 pixels and, at a level whose downsample
 * is not an integer (Aperio's 2.0005, 4.0003, 16.0012 ...), resamples the level at the
 * fractional offset that corner maps back to: the same level pixel differs (by a few grey
 * levels) with the region's origin, so tiles of a job would not match a whole-level read (fuzz
 * finding T2, docs/reliability.md, issue 27). The levels of TIFF-based vendors are plain TIFF
 * directories: such levels are read from their directory with libtiff instead, exactly, when
 * it decodes them as 8-bit RGB (JPEG, deflate, LZW ..., and Aperio's JPEG 2000 through
 * OpenJPEG, io/codec_j2k.c). Levels at integer downsamples, level 0 included, stay with
 * OpenSlide; the few levels left at non-integer downsamples are read in aligned blocks
 * (os_read_blocks).
 */
static void
os_attach_tiff(tw_slide *s, os_reader *r, const char *path, const char *vendor)
{
    tw_error terr;
    bool any = false;

    if (!vendor || (strcmp(vendor, "aperio") != 0 && strcmp(vendor, "generic-tiff") != 0))
        return;
    for (int i = 1; i < s->n_levels; i++)
        any = any || s->levels[i].downsample != floor(s->levels[i].downsample);
    if (!any || !(r->tiff_level = malloc((size_t)s->n_levels * sizeof *r->tiff_level)))
        return;
    /* 8-bit RGB, or 8-bit gray that OpenSlide shows as R = G = B */
    if (twi_tiff_open_levels(path, s->levels, s->n_levels, r->tiff_level, &r->tiff, &terr) !=
            TW_OK ||
        (tw_slide_get_channels(r->tiff) != 3 && tw_slide_get_channels(r->tiff) != 1) ||
        tw_slide_get_sample_type(r->tiff) != TW_U8) {
        TW_DEBUG("io.openslide", "'%s': levels at non-integer downsamples stay with OpenSlide",
                 path);
        tw_slide_close(r->tiff);
        r->tiff = NULL;
        free(r->tiff_level);
        r->tiff_level = NULL;
        return;
    }
    for (int i = 0; i < s->n_levels; i++) {
        if (s->levels[i].downsample == floor(s->levels[i].downsample))
            r->tiff_level[i] = -1;
        else if (r->tiff_level[i] >= 0)
            TW_DEBUG("io.openslide", "'%s': level %d (downsample %.4f) read with libtiff", path,
                     i, s->levels[i].downsample);
    }
}

/* OpenSlide 3.4.1 opens its TIFFs with TIFFClientOpen and no handlers of its own, so libtiff's
 * process-wide ones print its warnings and errors to stderr ("TIFFReadDirectory: Warning,
 * Unknown field with tag ..."): up to 32 lines a slide (issue 26); OpenSlide and the libraries
 * under it (GLib, gdk-pixbuf, cairo) log through GLib, whose default handler prints too. The
 * library never prints: the first OpenSlide open routes both to tilewave's log
 * at debug level, once for the process. OpenSlide's own error string carries what failed; our
 * own libtiff handles have per-handle handlers and never reach these. An embedder with
 * handlers of its own sets them again after opening its first OpenSlide slide (docs/io.md). */
static void
os_tiff_warning(const char *module, const char *fmt, va_list ap)
{
    twi_tiff_log_warning("io.openslide", module, fmt, ap);
}

static void
os_tiff_error(const char *module, const char *fmt, va_list ap)
{
    twi_tiff_log_warning("io.openslide", module, fmt, ap);
}

/* GLib's default handler for every domain: its G_LOG_LEVEL_ERROR still aborts after this
 * returns (GLib's rule, not ours: such a message means the library under OpenSlide is broken). */
static void
os_glib_message(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer user)
{
    (void)user;
    TW_DEBUG("io.openslide", "%s %s: %s", domain ? domain : "GLib",
             (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL))  ? "error"
             : (level & G_LOG_LEVEL_WARNING)                       ? "warning"
                                                                   : "message",
             message ? message : "");
}

static void
os_route_messages(void)
{
    TIFFSetWarningHandler(os_tiff_warning);
    TIFFSetErrorHandler(os_tiff_error);
    (void)g_log_set_default_handler(os_glib_message, NULL);
}

static tw_status
os_open(tw_slide *s, const char *path, tw_error *err)
{
    static pthread_once_t routed = PTHREAD_ONCE_INIT;
    os_reader *r = NULL;
    const char *e, *vendor;
    const char *const *names;
    tw_status st;
    int32_t n, i;
    char key[64];

    if (!(r = calloc(1, sizeof *r)))
        return twi_error_set(err, TW_E_NOMEM, "io.openslide: out of memory opening '%s'", path);
    s->priv = r;
    /* OpenSlide's libtiff prints errors to stderr and allocates whole tiles of what a header
     * claims: check a TIFF-based file's structure first, silently (4 bytes per ARGB pixel) */
    if ((st = twi_tiff_precheck(path, "io.openslide", 4, TWI_OPENSLIDE_MAX_TILE_BYTES, err)) !=
        TW_OK)
        return st;
    pthread_once(&routed, os_route_messages);
    if (!(r->osr = openslide_open(path)))
        return twi_error_set(err, TW_E_FORMAT,
                             "io.openslide: '%s' is not a slide OpenSlide can open", path);
    if ((e = openslide_get_error(r->osr)))
        return twi_error_set(err, TW_E_FORMAT, "io.openslide: cannot open '%s' (%s)", path, e);
    n = openslide_get_level_count(r->osr);
    if (n < 1)
        return twi_error_set(err, TW_E_FORMAT, "io.openslide: '%s' has no levels", path);
    if (!(s->levels = calloc((size_t)n, sizeof *s->levels)))
        return twi_error_set(err, TW_E_NOMEM, "io.openslide: out of memory opening '%s'", path);
    for (i = 0; i < n; i++) {
        tw_level_info *l = &s->levels[i];

        openslide_get_level_dimensions(r->osr, i, &l->w, &l->h);
        l->downsample = openslide_get_level_downsample(r->osr, i);
        if (l->w < 1 || l->h < 1 || !(l->downsample > 0))
            return twi_error_set(err, TW_E_FORMAT,
                                 "io.openslide: bad dimensions of level %d of '%s'", (int)i, path);
        snprintf(key, sizeof key, "openslide.level[%d].tile-width", (int)i);
        l->tile_w = (int32_t)prop_i64(r->osr, key);
        snprintf(key, sizeof key, "openslide.level[%d].tile-height", (int)i);
        l->tile_h = (int32_t)prop_i64(r->osr, key);
        /* OpenSlide decodes whole tiles as ARGB: refuse what no buffer should hold */
        if ((uint64_t)l->tile_w * (uint64_t)l->tile_h * 4 > TWI_OPENSLIDE_MAX_TILE_BYTES)
            return twi_error_set(err, TW_E_FORMAT,
                                 "io.openslide: tile of %dx%d pixels in level %d of '%s' is too "
                                 "large (more than %llu MiB decoded)",
                                 (int)l->tile_w, (int)l->tile_h, (int)i, path,
                                 (unsigned long long)(TWI_OPENSLIDE_MAX_TILE_BYTES >> 20));
    }
    s->n_levels = (int)n;
    s->channels = 3;
    s->type = TW_U8;
    s->mpp_x = prop_f64(r->osr, OPENSLIDE_PROPERTY_NAME_MPP_X);
    s->mpp_y = prop_f64(r->osr, OPENSLIDE_PROPERTY_NAME_MPP_Y);
    if (!(s->mpp_x > 0 && s->mpp_y > 0)) {
        /* OpenSlide 3.4 gives generic TIFFs no openslide.mpp-x (4.0 does, from tags in
         * centimetres): use the tags, in centimetres only, as the libtiff reader does (tags in
         * inches are an image editor's 72 or 300 dpi; docs/io.md) */
        const char *unit = openslide_get_property_value(r->osr, "tiff.ResolutionUnit");
        double rx = prop_f64(r->osr, "tiff.XResolution");
        double ry = prop_f64(r->osr, "tiff.YResolution");

        s->mpp_x = s->mpp_y = 0;
        if (unit && strcmp(unit, "centimeter") == 0)
            twi_meta_mpp_from_cm(rx, ry, &s->mpp_x, &s->mpp_y);
    }
    s->objective_power = prop_f64(r->osr, OPENSLIDE_PROPERTY_NAME_OBJECTIVE_POWER);
    vendor = openslide_get_property_value(r->osr, OPENSLIDE_PROPERTY_NAME_VENDOR);
    if (!(s->format = strdup(vendor ? vendor : "openslide")))
        return twi_error_set(err, TW_E_NOMEM, "io.openslide: out of memory opening '%s'", path);
    names = openslide_get_property_names(r->osr);
    for (; names && *names; names++) {
        if ((st = twi_slide_set_property(s, *names,
                                         openslide_get_property_value(r->osr, *names))) != TW_OK)
            return twi_error_set(err, st, "io.openslide: out of memory opening '%s'", path);
    }
    if (vendor && strcmp(vendor, "generic-tiff") == 0) {
        /* OpenSlide 3.4 reads no metadata of generic TIFFs: the pixel size and objective
         * power of OME-XML and of tilewave's plain descriptions, as the libtiff reader */
        twi_meta m;

        if ((st = twi_meta_from_description(
                 s, openslide_get_property_value(r->osr, "tiff.ImageDescription"), &m)) != TW_OK)
            return twi_error_set(err, st, "io.openslide: out of memory opening '%s'", path);
        s->objective_power = m.objective_power;
        if (m.mpp_x > 0 && (!m.own || !(s->mpp_x > 0))) { /* as the libtiff reader */
            s->mpp_x = m.mpp_x;
            s->mpp_y = m.mpp_y;
        } else {
            twi_meta_exact_own_mpp(&m, &s->mpp_x, &s->mpp_y);
        }
    }
    if ((e = openslide_get_error(r->osr)))
        return twi_error_set(err, TW_E_FORMAT, "io.openslide: cannot open '%s' (%s)", path, e);
    os_attach_tiff(s, r, path, vendor);
    return TW_OK;
}

/* Premultiplied ARGB to RGB: opaque as is, transparent is glass (white), partial alpha is
 * divided out with rounding. */
static void
argb_to_rgb(const uint32_t *src, int64_t n, uint8_t *dst)
{
    int64_t i;

    for (i = 0; i < n; i++, dst += 3) {
        const uint32_t p = src[i];
        const uint32_t a = p >> 24;
        uint32_t c[3] = {(p >> 16) & 0xff, (p >> 8) & 0xff, p & 0xff};
        int k;

        if (a == 255) {
            dst[0] = (uint8_t)c[0];
            dst[1] = (uint8_t)c[1];
            dst[2] = (uint8_t)c[2];
        } else if (a == 0) {
            dst[0] = dst[1] = dst[2] = 255;
        } else {
            for (k = 0; k < 3; k++) {
                uint32_t v = (c[k] * 255 + a / 2) / a;

                dst[k] = (uint8_t)(v > 255 ? 255 : v);
            }
        }
    }
}

/* The edge of the blocks os_read_blocks reads a level in: the level's tile edge within
 * 64..2048, or 512. */
static int64_t
block_edge(int32_t tile)
{
    return tile < 64 ? 512 : tile > 2048 ? 2048 : tile;
}

/*
 * A level at a non-integer downsample that only OpenSlide reads (no libtiff directory of it):
 * OpenSlide resamples it at the fraction its level-0 corner maps to, so it is read in blocks of
 * a grid fixed per level (block_edge), each always from the same level-0 corner and whole,
 * and the region is cut out of them. A pixel then comes from the same read whatever region
 * asks for it: the same bytes for any --tile, though OpenSlide's resampled ones (only the block
 * at (0, 0) is the level's own pixels; docs/io.md).
 */
static tw_status
os_read_blocks(tw_slide *s, os_reader *r, int level, int64_t x, int64_t y, int64_t w,
               int64_t h, uint8_t *dst, size_t stride, tw_error *err)
{
    const tw_level_info *l = &s->levels[level];
    const int64_t bw = block_edge(l->tile_w), bh = block_edge(l->tile_h);
    uint32_t *buf = NULL;
    tw_status st = TW_OK;
    const char *e;

    if (!(buf = malloc((size_t)bw * (size_t)bh * sizeof *buf)))
        return twi_error_set(err, TW_E_NOMEM, "io.openslide: out of memory reading '%s'",
                             s->path);
    for (int64_t by = y / bh * bh; by < y + h; by += bh) {
        const int64_t hh = l->h - by < bh ? l->h - by : bh;
        const int64_t cy0 = y > by ? y : by, cy1 = y + h < by + hh ? y + h : by + hh;

        for (int64_t bx = x / bw * bw; bx < x + w; bx += bw) {
            const int64_t ww = l->w - bx < bw ? l->w - bx : bw;
            const int64_t cx0 = x > bx ? x : bx, cx1 = x + w < bx + ww ? x + w : bx + ww;

            openslide_read_region(r->osr, buf, llround((double)bx * l->downsample),
                                  llround((double)by * l->downsample), (int32_t)level, ww, hh);
            if ((e = openslide_get_error(r->osr))) {
                st = twi_error_set(err, TW_E_FORMAT,
                                   "io.openslide: cannot read level %d of '%s' (%s)", level,
                                   s->path, e);
                goto out;
            }
            for (int64_t row = cy0; row < cy1; row++)
                argb_to_rgb(buf + (row - by) * ww + (cx0 - bx), cx1 - cx0,
                            dst + (size_t)(row - y) * stride + (size_t)(cx0 - x) * 3);
            if (s->io)
                twi_io_add(&s->io->bytes_decoded, (uint64_t)(ww * hh) * 4);
        }
    }
out:
    free(buf);
    return st;
}

static tw_status
os_read_region(tw_slide *s, int level, int64_t x, int64_t y, int64_t w, int64_t h,
               uint8_t *dst, size_t stride, tw_error *err)
{
    os_reader *r = s->priv;
    const double ds = s->levels[level].downsample;
    const int64_t cw = w < CHUNK_PIXELS ? w : CHUNK_PIXELS;
    const int64_t ch_max = CHUNK_PIXELS / cw;
    uint32_t *buf = NULL;
    tw_status st = TW_OK;
    const char *e;
    int64_t cx, cy, row;

    if (r->tiff && r->tiff_level[level] >= 0) {
        r->tiff->io = s->io; /* its decodes count as this slide's */
        if ((st = twi_reader_tiff_ops.read_region(r->tiff, r->tiff_level[level], x, y, w, h,
                                                  dst, stride, err)) != TW_OK ||
            r->tiff->channels == 3)
            return st;
        /* gray: each row's w samples spread in place to R = G = B, from its end (the
         * stride holds 3 w bytes) */
        for (row = 0; row < h; row++) {
            uint8_t *p = dst + (size_t)row * stride;

            for (int64_t i = w - 1; i >= 0; i--)
                p[3 * i] = p[3 * i + 1] = p[3 * i + 2] = p[i];
        }
        return TW_OK;
    }
    if (ds != floor(ds))
        return os_read_blocks(s, r, level, x, y, w, h, dst, stride, err);
    if (!(buf = malloc((size_t)cw * (size_t)(h < ch_max ? h : ch_max) * sizeof *buf)))
        return twi_error_set(err, TW_E_NOMEM, "io.openslide: out of memory reading '%s'",
                             s->path);
    for (cy = 0; cy < h; cy += ch_max) {
        const int64_t ch = h - cy < ch_max ? h - cy : ch_max;

        for (cx = 0; cx < w; cx += cw) {
            const int64_t ww = w - cx < cw ? w - cx : cw;
            /* OpenSlide takes the top-left corner in level-0 pixels */
            const int64_t x0 = llround((double)(x + cx) * ds);
            const int64_t y0 = llround((double)(y + cy) * ds);

            openslide_read_region(r->osr, buf, x0, y0, (int32_t)level, ww, ch);
            if ((e = openslide_get_error(r->osr))) {
                st = twi_error_set(err, TW_E_FORMAT,
                                   "io.openslide: cannot read level %d of '%s' (%s)", level,
                                   s->path, e);
                goto out;
            }
            for (row = 0; row < ch; row++)
                argb_to_rgb(buf + row * ww, ww, dst + (size_t)(cy + row) * stride + (size_t)cx * 3);
            if (s->io) /* OpenSlide decodes out of sight: its pixels are what is known */
                twi_io_add(&s->io->bytes_decoded, (uint64_t)(ww * ch) * 4);
        }
    }
out:
    free(buf);
    return st;
}

const twi_reader_ops twi_reader_openslide_ops = {
    .name = "openslide",
    .kind = TW_READER_OPENSLIDE,
    .open = os_open,
    .read_region = os_read_region,
    .close = os_close,
};
