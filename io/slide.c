/* SPDX-License-Identifier: MIT */
/* tilewave: the tw_slide API: reader choice, argument and region checks, properties. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openslide.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_internal.h"
#include "tw_io.h"

const char *
twi_io_strerror(int errnum, char *buf, size_t n)
{
    /* _GNU_SOURCE is set for the library: the GNU strerror_r returns the text, which may or
     * may not be buf. */
    return strerror_r(errnum, buf, n);
}

tw_status
twi_slide_set_property(tw_slide *s, const char *name, const char *value)
{
    char *n = NULL, *v = NULL;
    size_t i;

    if (!(v = strdup(value ? value : "")))
        return TW_E_NOMEM;
    for (i = 0; i < s->n_props; i++) {
        if (strcmp(s->prop_names[i], name) == 0) {
            free(s->prop_values[i]);
            s->prop_values[i] = v;
            return TW_OK;
        }
    }
    /* names keeps one extra slot for the NULL terminator */
    if (s->n_props + 1 >= s->cap_props) {
        size_t cap = s->cap_props ? 2 * s->cap_props : 16;
        char **nn = realloc(s->prop_names, cap * sizeof *nn);
        char **vv;

        if (!nn) {
            free(v);
            return TW_E_NOMEM;
        }
        s->prop_names = nn;
        if (!(vv = realloc(s->prop_values, cap * sizeof *vv))) {
            free(v);
            return TW_E_NOMEM;
        }
        s->prop_values = vv;
        s->cap_props = cap;
    }
    if (!(n = strdup(name))) {
        free(v);
        return TW_E_NOMEM;
    }
    s->prop_names[s->n_props] = n;
    s->prop_values[s->n_props] = v;
    s->n_props++;
    s->prop_names[s->n_props] = NULL;
    return TW_OK;
}

/* The file must exist and be a readable regular file: checked here so that a missing file is
 * reported as such and not as "not an image" by whichever library tried it. Also reads the
 * first bytes so that the automatic choice knows whether libtiff has a chance. */
static tw_status
check_file(const char *path, bool *is_tiff, tw_error *err)
{
    unsigned char hdr[4] = {0};
    const char *kind = NULL;
    char ebuf[128];
    struct stat sb;
    int64_t n;
    int fd;

    *is_tiff = false;
    /* Regular files only, never blocking: a FIFO or a device would hang or mislead. */
    if ((fd = twi_open_regular(path, &kind)) < 0) {
        int e = errno;
        if (kind)
            return twi_error_set(err, TW_E_IO, "io: '%s' is %s, not a regular file", path,
                                 kind);
        return twi_error_set(err, TW_E_IO, "io: cannot open '%s' (%s)", path,
                             twi_io_strerror(e, ebuf, sizeof ebuf));
    }
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return twi_error_set(err, TW_E_IO, "io: cannot open '%s' (%s)", path,
                             twi_io_strerror(e, ebuf, sizeof ebuf));
    }
    if (sb.st_size == 0) {
        close(fd);
        return twi_error_set(err, TW_E_FORMAT,
                             "io: '%s' is not a TIFF or a slide OpenSlide can open (empty file)",
                             path);
    }
    n = read(fd, hdr, sizeof hdr);
    if (n < 0) {
        int e = errno;
        close(fd);
        return twi_error_set(err, TW_E_IO, "io: cannot read '%s' (%s)", path,
                             twi_io_strerror(e, ebuf, sizeof ebuf));
    }
    close(fd);
    /* classic TIFF is 42, BigTIFF 43, in either byte order */
    if (n == 4 && ((hdr[0] == 'I' && hdr[1] == 'I' && (hdr[2] == 42 || hdr[2] == 43) &&
                    hdr[3] == 0) ||
                   (hdr[0] == 'M' && hdr[1] == 'M' && hdr[2] == 0 &&
                    (hdr[3] == 42 || hdr[3] == 43))))
        *is_tiff = true;
    return TW_OK;
}

/* Open `path` with one backend into a new slide. */
static tw_status
open_with(const twi_reader_ops *ops, const char *path, tw_slide **out, bool *unsupported,
          tw_error *err)
{
    tw_status st = TW_OK;
    tw_slide *s = NULL;

    if (!(s = calloc(1, sizeof *s)) || !(s->path = strdup(path))) {
        st = twi_error_set(err, TW_E_NOMEM, "io: out of memory opening '%s'", path);
        goto out;
    }
    s->ops = ops;
    s->channel = -1;
    if ((st = ops->open(s, path, err)) != TW_OK) {
        if (unsupported)
            *unsupported = s->layout_unsupported;
        goto out;
    }
    if (s->n_levels < 1 || !s->levels || !s->format) {
        st = twi_error_set(err, TW_E_INTERNAL, "io.%s: backend returned no levels for '%s'",
                           ops->name, path);
        goto out;
    }
    if (!s->prop_names) {
        /* get_property_names() always returns a list, if only an empty one */
        if (!(s->prop_names = calloc(1, sizeof *s->prop_names))) {
            st = twi_error_set(err, TW_E_NOMEM, "io: out of memory opening '%s'", path);
            goto out;
        }
        s->cap_props = 1;
    }
    *out = s;
    s = NULL;
out:
    tw_slide_close(s);
    return st;
}

tw_status
tw_slide_open(const char *path, tw_reader_kind reader, tw_slide **out, tw_error *err)
{
    tw_status st = TW_OK;
    const twi_reader_ops *ops = NULL;
    const char *vendor = NULL;
    bool is_tiff = false, unsupported = false;
    tw_error os_err;

    if (!path || !out)
        return twi_error_set(err, TW_E_INVALID, "io: tw_slide_open: NULL argument");
    if (reader != TW_READER_AUTO && reader != TW_READER_OPENSLIDE && reader != TW_READER_TIFF)
        return twi_error_set(err, TW_E_INVALID, "io: unknown reader kind %d", (int)reader);
    if ((st = check_file(path, &is_tiff, err)) != TW_OK)
        return st;

    if (reader == TW_READER_TIFF) {
        ops = &twi_reader_tiff_ops;
    } else if (reader == TW_READER_OPENSLIDE) {
        ops = &twi_reader_openslide_ops;
    } else {
        /* Generic TIFFs go through libtiff, which keeps gray, 16-bit and float samples that
         * OpenSlide would turn into 8-bit RGB; vendor formats need OpenSlide. tilewave's own
         * 8-bit outputs look Aperio to OpenSlide (their description, for the mpp) and are
         * plain tiled TIFFs: libtiff. */
        vendor = openslide_detect_vendor(path);
        if (vendor && strcmp(vendor, "generic-tiff") != 0 &&
            !(is_tiff && strcmp(vendor, "aperio") == 0 && twi_tiff_written_by_tilewave(path)))
            ops = &twi_reader_openslide_ops;
        else if (is_tiff)
            ops = &twi_reader_tiff_ops;
        else if (vendor)
            ops = &twi_reader_openslide_ops;
        else
            return twi_error_set(err, TW_E_FORMAT,
                                 "io: '%s' is not a TIFF or a slide OpenSlide can open", path);
    }
    if (ops == &twi_reader_tiff_ops && !is_tiff)
        return twi_error_set(err, TW_E_FORMAT, "io.tiff: '%s' is not a TIFF (bad header)", path);

    st = open_with(ops, path, out, &unsupported, err);
    /* A generic tiled TIFF whose layout the libtiff reader does not keep (palette, 1-bit,
     * CMYK ...) may still be one OpenSlide reads as RGB: that is better than failing. The
     * libtiff reader's message stands when OpenSlide cannot do it either. */
    if (st == TW_E_FORMAT && unsupported && reader == TW_READER_AUTO && vendor &&
        ops == &twi_reader_tiff_ops &&
        open_with(&twi_reader_openslide_ops, path, out, NULL, &os_err) == TW_OK) {
        TW_INFO("io", "'%s': %s; reading it through OpenSlide as RGB",
                path, err ? err->message : "layout not kept by the libtiff reader");
        if (err)
            memset(err, 0, sizeof *err);
        st = TW_OK;
    }
    return st;
}

void
tw_slide_close(tw_slide *s)
{
    size_t i;

    if (!s)
        return;
    if (s->ops && s->ops->close)
        s->ops->close(s);
    for (i = 0; i < s->n_props; i++) {
        free(s->prop_names[i]);
        free(s->prop_values[i]);
    }
    free(s->prop_names);
    free(s->prop_values);
    for (int c = 0; s->channel_names && c < s->n_channels; c++)
        free(s->channel_names[c]);
    free(s->channel_names);
    free(s->levels);
    free(s->format);
    free(s->path);
    free(s);
}

const char *
tw_slide_get_format(const tw_slide *s)
{
    return s ? s->format : NULL;
}

tw_reader_kind
tw_slide_get_reader(const tw_slide *s)
{
    if (s && s->inner)
        return tw_slide_get_reader(s->inner);
    return s ? s->ops->kind : TW_READER_AUTO;
}

int
tw_slide_get_level_count(const tw_slide *s)
{
    return s ? s->n_levels : 0;
}

tw_status
tw_slide_get_level(const tw_slide *s, int level, tw_level_info *out)
{
    if (!s || !out || level < 0 || level >= s->n_levels)
        return TW_E_INVALID;
    *out = s->levels[level];
    return TW_OK;
}

int
tw_slide_get_channels(const tw_slide *s)
{
    return s ? s->channels : 0;
}

tw_sample_type
tw_slide_get_sample_type(const tw_slide *s)
{
    return s ? s->type : TW_U8;
}

void
tw_slide_get_mpp(const tw_slide *s, double *mpp_x, double *mpp_y)
{
    if (mpp_x)
        *mpp_x = s ? s->mpp_x : 0.0;
    if (mpp_y)
        *mpp_y = s ? s->mpp_y : 0.0;
}

double
tw_slide_get_objective_power(const tw_slide *s)
{
    return s ? s->objective_power : 0.0;
}

const char *
tw_slide_get_property(const tw_slide *s, const char *name)
{
    size_t i;

    if (!s || !name)
        return NULL;
    for (i = 0; i < s->n_props; i++)
        if (strcmp(s->prop_names[i], name) == 0)
            return s->prop_values[i];
    return NULL;
}

const char *const *
tw_slide_get_property_names(const tw_slide *s)
{
    return s ? (const char *const *)s->prop_names : NULL;
}

int
tw_slide_get_channel_count(const tw_slide *s)
{
    return s ? s->n_channels : 0;
}

const char *
tw_slide_get_channel_name(const tw_slide *s, int c)
{
    return s && c >= 0 && c < s->n_channels ? s->channel_names[c] : NULL;
}

int
tw_slide_get_channel(const tw_slide *s)
{
    return s && s->n_channels ? s->channel : -1;
}

/* "0 DAPI, 1 FITC, 2 Cy3" (names omitted where the file has none), cut short to fit. */
static const char *
channel_list(const tw_slide *s, char *buf, size_t n)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int c = 0; c < s->n_channels && used + 1 < n; c++) {
        int k = snprintf(buf + used, n - used, "%s%d%s%s", c ? ", " : "", c,
                         s->channel_names[c][0] ? " " : "", s->channel_names[c]);

        if (k < 0)
            break;
        used += (size_t)k < n - used ? (size_t)k : n - used - 1;
    }
    return buf;
}

tw_status
tw_slide_set_channel(tw_slide *s, const char *channel, tw_error *err)
{
    char list[512];
    int64_t idx = -1;
    int c;

    if (!s || !channel)
        return twi_error_set(err, TW_E_INVALID, "io: tw_slide_set_channel: NULL argument");
    if (s->n_channels == 0)
        return twi_error_set(err, TW_E_INVALID,
                             "io: '%s' has no channels to choose from (one %s channel); leave "
                             "out --channel",
                             s->path, s->channels == 3 ? "RGB colour" : "gray");
    /* a name first: a channel may well be called "1" */
    for (c = 0; c < s->n_channels; c++)
        if (s->channel_names[c][0] && strcmp(s->channel_names[c], channel) == 0)
            break;
    if (c == s->n_channels && twi_parse_i64(channel, 0, s->n_channels - 1, &idx) == TW_OK)
        c = (int)idx;
    if (c == s->n_channels)
        return twi_error_set(err, TW_E_INVALID,
                             "io: '%s' has no channel '%s'; its channels are %s", s->path,
                             channel, channel_list(s, list, sizeof list));
    s->channel = c;
    if (s->ops->set_channel)
        s->ops->set_channel(s, c);
    return TW_OK;
}

tw_status
twi_slide_channel_missing(const tw_slide *s, const char *op, tw_error *err)
{
    char list[512];

    if (!s || s->n_channels == 0 || s->channel >= 0)
        return TW_OK;
    return twi_error_set(err, TW_E_INVALID,
                         "%s: '%s' has %d channels (%s): choose one with --channel N|NAME",
                         op, s->path, s->n_channels, channel_list(s, list, sizeof list));
}

void
twi_slide_set_io(tw_slide *s, twi_io_counts *io)
{
    if (s) {
        s->io = io;
        twi_slide_set_io(s->inner, io);
    }
}

void
twi_slide_set_bad_tiles(tw_slide *s, bool fill)
{
    if (s) {
        s->fill_bad_tiles = fill;
        twi_slide_set_bad_tiles(s->inner, fill);
    }
}

uint64_t
twi_slide_decoded_tile_bytes(const tw_slide *s, int level)
{
    if (!s || !s->ops->decoded_tile_bytes || level < 0 || level >= s->n_levels)
        return 0;
    return s->ops->decoded_tile_bytes(s, level);
}

uint64_t
twi_slide_get_bad_tiles(const tw_slide *s)
{
    return s ? atomic_load(&((tw_slide *)s)->bad_tiles) + twi_slide_get_bad_tiles(s->inner) : 0;
}

void
twi_slide_count_bad_tile(tw_slide *s, const char *what)
{
    atomic_fetch_add(&s->bad_tiles, 1);
    if (s->io)
        twi_io_add(&s->io->tiles_bad, 1);
    TW_DEBUG("io", "%s (filled with 0: io.on_bad_tile=fill)", what);
}

tw_status
tw_slide_read_region(tw_slide *s, int level, int64_t x, int64_t y, int64_t w, int64_t h,
                     void *dst, size_t dst_stride, tw_error *err)
{
    const tw_level_info *l;

    if (!s || !dst)
        return twi_error_set(err, TW_E_INVALID, "io: tw_slide_read_region: NULL argument");
    if (level < 0 || level >= s->n_levels)
        return twi_error_set(err, TW_E_INVALID, "io: level %d does not exist ('%s' has %d %s)",
                             level, s->path, s->n_levels, s->n_levels == 1 ? "level" : "levels");
    l = &s->levels[level];
    if (twi_slide_channel_missing(s, "io", err) != TW_OK)
        return TW_E_INVALID;
    if (w < 1 || h < 1)
        return twi_error_set(err, TW_E_INVALID,
                             "io: region %" PRId64 ",%" PRId64 ",%" PRId64 "x%" PRId64
                             " is empty (width and height must be >= 1)",
                             x, y, w, h);
    /* written so that nothing overflows for any int64 input */
    if (x < 0 || y < 0 || x >= l->w || y >= l->h || w > l->w - x || h > l->h - y)
        return twi_error_set(err, TW_E_INVALID,
                             "io: region %" PRId64 ",%" PRId64 ",%" PRId64 "x%" PRId64
                             " is outside level %d (%" PRId64 "x%" PRId64 ")",
                             x, y, w, h, level, l->w, l->h);
    if (dst_stride < (size_t)w * twi_pixel_size(s->channels, s->type))
        return twi_error_set(err, TW_E_INVALID,
                             "io: row stride %zu is below the %" PRId64 " pixels of the region",
                             dst_stride, w);
    return s->ops->read_region(s, level, x, y, w, h, dst, dst_stride, err);
}
