/* SPDX-License-Identifier: MIT */
/* tilewave: assembles operation tiles of any size into the writer's output tiles. */

/*
 * Each output tile has a slot: a buffer (only while the tile is partly covered) and the
 * number of its pixels put so far. A put walks the output tiles its source overlaps:
 *
 * - a source covering a whole (edge-clipped) output tile hands it to the writer straight from
 *   its own memory: no buffer, no copy (the common case when operation tiles are multiples of
 *   the output tiles);
 * - otherwise the overlap is copied into the slot's buffer outside the lock, then the count is
 *   raised under the lock. Puts cover disjoint pixels, so concurrent copies never touch the
 *   same bytes, and the thread whose count completes the tile saw (through the lock) every
 *   other copy: it takes the buffer, writes the tile and frees it.
 *
 * A count above the tile's area means some pixels were put twice: an error, not a silent
 * overwrite.
 *
 * Partial tiles in a scratch file (twi_assembler_set_scratch). Tiles come in about raster
 * order, so the partly covered ones span a row of output tiles per level: w x tile_h x pixel
 * bytes, outside the host budget, which grows with the slide's width (a pyramid of a 100,000
 * pixel wide RGB slide in 512-pixel tiles: about 150 MB). With a scratch file, a partial tile
 * lives at offset (its index x tile bytes) of a sparse, nameless file of its level: the overlap
 * is written there row by row (disjoint bytes, so without the lock), and the thread that
 * completes the tile reads it back whole, writes it, and punches its bytes out of the file.
 * Memory then holds only tiles being completed; the kernel's page cache holds the rest and
 * writes it out under memory pressure.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io_internal.h"
#include "tw_io.h"

typedef struct slot {
    uint8_t *buf;    /* tile_w x tile_h pixels, rows packed; NULL unless partly covered */
    int64_t covered; /* pixels put so far */
} slot;

struct twi_assembler {
    tw_writer *wr;
    int level;
    int64_t w, h;            /* level size */
    int32_t tw, th;          /* output tile size */
    int channels;
    tw_sample_type type;
    size_t px;               /* bytes per pixel */
    int64_t tiles_x, tiles_y;
    slot *slots;             /* row-major */
    int fd;                  /* partial tiles in this scratch file (sparse, nameless), at
                                slot index x tile bytes; -1: in memory (slot.buf) */
    pthread_mutex_t lock;    /* guards slots */
    twi_pyr_rule rule;       /* how `child` is reduced from this level */
    twi_assembler *child;    /* the writer's next level, NULL: none built */
    twi_assembler *overlay;  /* level 0 of the overlay file, NULL: none */
    tw_writer *ov_writer;    /* its writer, owned; NULL once closed */
    tw_slide *ov_slide;      /* the overlay's base (not owned) */
    int ov_level;
    int64_t ov_x0, ov_y0;
    bool ov_binary;          /* the result is a mask: nonzero tints fully */
};

tw_status
twi_assembler_create(tw_writer *wr, int level, int64_t level_w, int64_t level_h, int32_t tile_w,
                     int32_t tile_h, int channels, tw_sample_type type, twi_assembler **out)
{
    const tw_writer_opts *o;
    twi_assembler *a = NULL;
    int64_t ww, wh;

    if (!wr || !out)
        return TW_E_INVALID;
    o = twi_writer_opts(wr);
    if (level < 0 || level >= o->n_levels || tile_w != o->tile_w || tile_h != o->tile_h ||
        channels != o->channels || type != o->type)
        return TW_E_INVALID;
    twi_writer_level_size(wr, level, &ww, &wh);
    if (level_w != ww || level_h != wh)
        return TW_E_INVALID;
    if (!(a = calloc(1, sizeof *a)))
        return TW_E_NOMEM;
    a->wr = wr;
    a->level = level;
    a->w = level_w;
    a->h = level_h;
    a->tw = tile_w;
    a->th = tile_h;
    a->channels = channels;
    a->type = type;
    a->px = twi_pixel_size(channels, type);
    a->tiles_x = (level_w + tile_w - 1) / tile_w;
    a->tiles_y = (level_h + tile_h - 1) / tile_h;
    a->fd = -1;
    if (!(a->slots = calloc((size_t)(a->tiles_x * a->tiles_y), sizeof *a->slots))) {
        free(a);
        return TW_E_NOMEM;
    }
    pthread_mutex_init(&a->lock, NULL);
    *out = a;
    return TW_OK;
}

void
twi_assembler_destroy(twi_assembler *a)
{
    int64_t i;

    if (!a)
        return;
    twi_assembler_destroy(a->child);
    twi_assembler_destroy(a->overlay);
    tw_writer_abort(a->ov_writer);
    for (i = 0; i < a->tiles_x * a->tiles_y; i++)
        free(a->slots[i].buf);
    if (a->fd >= 0)
        close(a->fd);
    free(a->slots);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

tw_status
twi_assembler_set_pyramid(twi_assembler *a, twi_pyr_rule rule)
{
    const tw_writer_opts *o;
    twi_assembler *cur = a;
    tw_status st;

    if (!a || a->child)
        return TW_E_INVALID;
    o = twi_writer_opts(a->wr);
    for (int lv = a->level + 1; lv < o->n_levels; lv++) {
        int64_t w, h;

        twi_writer_level_size(a->wr, lv, &w, &h);
        cur->rule = rule;
        if ((st = twi_assembler_create(a->wr, lv, w, h, a->tw, a->th, a->channels, a->type,
                                       &cur->child)) != TW_OK)
            return st;
        cur = cur->child;
    }
    return TW_OK;
}

tw_status
twi_assembler_set_overlay(twi_assembler *a, tw_writer *ov, tw_slide *slide, int slide_level,
                          int64_t x0, int64_t y0, bool binary)
{
    tw_status st;

    if (!a || !ov || !slide || a->overlay || a->level != 0 || a->channels != 1) {
        tw_writer_abort(ov);
        return TW_E_INVALID;
    }
    a->ov_writer = ov;
    if ((st = twi_assembler_create(ov, 0, a->w, a->h, a->tw, a->th, 3, TW_U8, &a->overlay)) !=
            TW_OK ||
        (st = twi_assembler_set_pyramid(a->overlay, TWI_PYR_MEAN)) != TW_OK)
        return st; /* destroy frees them */
    a->ov_slide = slide;
    a->ov_level = slide_level;
    a->ov_x0 = x0;
    a->ov_y0 = y0;
    a->ov_binary = binary;
    return TW_OK;
}

tw_status
twi_assembler_close_overlay(twi_assembler *a, tw_error *err)
{
    tw_writer *ov;

    if (!a || !a->ov_writer)
        return TW_OK;
    ov = a->ov_writer;
    a->ov_writer = NULL;
    return tw_writer_close(ov, err);
}

tw_status
twi_assembler_set_scratch(twi_assembler *a, const char *dir, tw_error *err)
{
    tw_status st;

    for (; a; a = a->child) {
        if (a->overlay && (st = twi_assembler_set_scratch(a->overlay, dir, err)) != TW_OK)
            return st;
        /* sized for every tile (sparse), so that the rows of an edge tile never written
         * read back as zeros */
        if (a->fd < 0 && ((a->fd = twi_scratch_open(dir, "tiles")) < 0 ||
                          ftruncate(a->fd, a->tiles_x * a->tiles_y * (int64_t)a->tw * a->th *
                                               (int64_t)a->px) != 0))
            return twi_error_set(err, TW_E_IO,
                                 "io.assembler: cannot create a scratch file in '%s' (%s); set "
                                 "runtime.scratch_dir to a writable directory",
                                 dir, strerror(errno));
    }
    return TW_OK;
}

int64_t
twi_assembler_partial_bytes(const twi_assembler *a)
{
    int64_t n = 0;

    for (; a; a = a->child) {
        n += a->tiles_x * (int64_t)a->tw * a->th * (int64_t)a->px;
        if (a->overlay)
            n += twi_assembler_partial_bytes(a->overlay);
    }
    return n;
}

/* The part (ix0, iy0)-(ix1, iy1) of src (first pixel at (x, y), rows `stride` apart) into the
 * scratch file's copy of output tile `idx` (origin ox, oy). */
static tw_status
scratch_put(const twi_assembler *a, int64_t idx, int64_t ox, int64_t oy, const uint8_t *data,
            size_t stride, int64_t x, int64_t y, int64_t ix0, int64_t iy0, int64_t ix1,
            int64_t iy1, tw_error *err)
{
    const size_t tb = (size_t)a->tw * (size_t)a->th * a->px, row = (size_t)(ix1 - ix0) * a->px;
    const int64_t base = idx * (int64_t)tb;

    for (int64_t r = iy0; r < iy1; r++)
        if (twi_pwrite_all(a->fd, data + (size_t)(r - y) * stride + (size_t)(ix0 - x) * a->px,
                           row,
                           base + (int64_t)(((size_t)(r - oy) * (size_t)a->tw +
                                             (size_t)(ix0 - ox)) * a->px)) != 0)
            return twi_error_set(err, TW_E_IO,
                                 "io.assembler: cannot keep a partial tile in the scratch "
                                 "file (%s)",
                                 strerror(errno));
    return TW_OK;
}

/* Output tile `idx`, complete in the scratch file, into a fresh buffer (*out); its bytes are
 * punched out of the file. */
static tw_status
scratch_take(const twi_assembler *a, int64_t idx, uint8_t **out, tw_error *err)
{
    const size_t tb = (size_t)a->tw * (size_t)a->th * a->px;
    uint8_t *buf = malloc(tb);

    if (!buf)
        return twi_error_set(err, TW_E_NOMEM, "io.assembler: out of memory for a tile");
    if (twi_pread_all(a->fd, buf, tb, idx * (int64_t)tb) != 0) {
        int e = errno;

        free(buf);
        return twi_error_set(err, TW_E_IO,
                             "io.assembler: cannot read a partial tile back from the scratch "
                             "file (%s)",
                             strerror(e));
    }
    /* the disk space back; where holes cannot be punched the file only grows (sparse) */
    (void)fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, idx * (int64_t)tb,
                    (int64_t)tb);
    *out = buf;
    return TW_OK;
}

/* Output tile (ox, oy) is complete (cw x ch pixels at p, rows `stride` apart) and written:
 * reduce it into the next level and blend it into the overlay. */
static tw_status
tile_done(twi_assembler *a, int64_t ox, int64_t oy, const uint8_t *p, size_t stride,
          int64_t cw, int64_t ch, tw_error *err)
{
    tw_status st = TW_OK;
    uint8_t *buf = NULL, *base = NULL;

    if (a->child) {
        const int64_t rw = (cw + 1) / 2, rh = (ch + 1) / 2;
        tw_tile_view v = {0};

        if (!(buf = malloc((size_t)(rw * rh) * a->px))) {
            st = twi_error_set(err, TW_E_NOMEM, "io.assembler: out of memory for a tile");
            goto out;
        }
        twi_pyr_reduce(p, stride, cw, ch, a->channels, a->type, a->rule, buf,
                       (size_t)rw * a->px);
        v.data = buf;
        v.w = (int32_t)rw;
        v.h = (int32_t)rh;
        v.stride = rw * (int64_t)a->px;
        v.channels = a->channels;
        v.type = a->type;
        if ((st = twi_assembler_put(a->child, ox / 2, oy / 2, &v, err)) != TW_OK)
            goto out;
        free(buf);
        buf = NULL;
    }
    if (a->overlay) {
        const int bch = tw_slide_get_channels(a->ov_slide);
        const tw_sample_type bt = tw_slide_get_sample_type(a->ov_slide);
        const size_t bstride = (size_t)cw * twi_pixel_size(bch, bt);
        tw_tile_view v = {0};

        if (!(base = malloc(bstride * (size_t)ch)) || !(buf = malloc((size_t)(cw * ch) * 3))) {
            st = twi_error_set(err, TW_E_NOMEM, "io.assembler: out of memory for a tile");
            goto out;
        }
        if ((st = tw_slide_read_region(a->ov_slide, a->ov_level, a->ov_x0 + ox, a->ov_y0 + oy,
                                       cw, ch, base, bstride, err)) != TW_OK)
            goto out;
        twi_overlay_blend(p, stride, a->type, a->ov_binary, base, bstride, bch, bt, cw, ch, buf,
                          (size_t)cw * 3);
        v.data = buf;
        v.w = (int32_t)cw;
        v.h = (int32_t)ch;
        v.stride = cw * 3;
        v.channels = 3;
        v.type = TW_U8;
        st = twi_assembler_put(a->overlay, ox, oy, &v, err);
    }
out:
    free(buf);
    free(base);
    return st;
}

static tw_status
put_twice(const twi_assembler *a, int64_t tx, int64_t ty, tw_error *err)
{
    return twi_error_set(err, TW_E_INVALID,
                         "io.assembler: pixels of output tile (%" PRId64 ",%" PRId64
                         ") of level %d put twice",
                         tx, ty, a->level);
}

tw_status
twi_assembler_put(twi_assembler *a, int64_t x, int64_t y, const tw_tile_view *src, tw_error *err)
{
    const uint8_t *data;
    size_t stride;
    int64_t sw, sh, tx, ty;
    tw_status st = TW_OK;

    if (!a || !src || !src->data)
        return twi_error_set(err, TW_E_INVALID, "io.assembler: put: NULL argument");
    sw = src->w;
    sh = src->h;
    if (src->channels != a->channels || src->type != a->type)
        return twi_error_set(err, TW_E_INVALID,
                             "io.assembler: tile of %d x %s samples put into a %d x %s image",
                             (int)src->channels, tw_sample_type_name(src->type), a->channels,
                             tw_sample_type_name(a->type));
    if (sw < 1 || sh < 1 || x < 0 || y < 0 || x >= a->w || y >= a->h || sw > a->w - x ||
        sh > a->h - y)
        return twi_error_set(err, TW_E_INVALID,
                             "io.assembler: tile %" PRId64 ",%" PRId64 ",%" PRId64 "x%" PRId64
                             " is outside level %d (%" PRId64 "x%" PRId64 ")",
                             x, y, sw, sh, a->level, a->w, a->h);
    if (src->stride < 0 || (size_t)src->stride < (size_t)sw * a->px)
        return twi_error_set(err, TW_E_INVALID,
                             "io.assembler: stride %" PRId64 " is below a row of %" PRId64
                             " pixels",
                             src->stride, sw);
    data = src->data;
    stride = (size_t)src->stride;

    for (ty = y / a->th; ty <= (y + sh - 1) / a->th; ty++) {
        for (tx = x / a->tw; tx <= (x + sw - 1) / a->tw; tx++) {
            slot *sl = &a->slots[ty * a->tiles_x + tx];
            const int64_t ox = tx * a->tw, oy = ty * a->th; /* output tile origin */
            /* the output tile clipped to the level */
            const int64_t cw = a->w - ox < a->tw ? a->w - ox : a->tw;
            const int64_t ch = a->h - oy < a->th ? a->h - oy : a->th;
            /* the part of src inside it */
            const int64_t ix0 = x > ox ? x : ox, iy0 = y > oy ? y : oy;
            const int64_t ix1 = x + sw < ox + cw ? x + sw : ox + cw;
            const int64_t iy1 = y + sh < oy + ch ? y + sh : oy + ch;
            const int64_t area = (ix1 - ix0) * (iy1 - iy0);
            uint8_t *buf;
            bool complete, twice;
            int64_t r;

            if (area == cw * ch) {
                /* src holds the whole tile: write it from src's memory */
                pthread_mutex_lock(&a->lock);
                twice = sl->covered != 0;
                sl->covered += area;
                pthread_mutex_unlock(&a->lock);
                if (twice)
                    return put_twice(a, tx, ty, err);
                const uint8_t *p = data + (size_t)(oy - y) * stride + (size_t)(ox - x) * a->px;

                st = tw_writer_write_tile(a->wr, a->level, tx, ty, p, stride, err);
                if (st == TW_OK && (a->child || a->overlay))
                    st = tile_done(a, ox, oy, p, stride, cw, ch, err);
                if (st != TW_OK)
                    return st;
                continue;
            }

            pthread_mutex_lock(&a->lock);
            twice = sl->covered >= cw * ch; /* already complete: these pixels came before */
            if (!sl->buf && !twice && a->fd < 0)
                sl->buf = calloc((size_t)a->tw * (size_t)a->th, a->px);
            buf = sl->buf;
            pthread_mutex_unlock(&a->lock);
            if (twice)
                return put_twice(a, tx, ty, err);
            if (a->fd >= 0) {
                if ((st = scratch_put(a, ty * a->tiles_x + tx, ox, oy, data, stride, x, y, ix0,
                                      iy0, ix1, iy1, err)) != TW_OK)
                    return st;
            } else if (!buf) {
                return twi_error_set(err, TW_E_NOMEM, "io.assembler: out of memory for a tile");
            } else {
                for (r = iy0; r < iy1; r++)
                    memcpy(buf +
                               ((size_t)(r - oy) * (size_t)a->tw + (size_t)(ix0 - ox)) * a->px,
                           data + (size_t)(r - y) * stride + (size_t)(ix0 - x) * a->px,
                           (size_t)(ix1 - ix0) * a->px);
            }

            pthread_mutex_lock(&a->lock);
            sl->covered += area;
            twice = sl->covered > cw * ch;
            complete = sl->covered == cw * ch;
            if (complete)
                sl->buf = NULL; /* ours now */
            pthread_mutex_unlock(&a->lock);
            if (twice)
                return put_twice(a, tx, ty, err);
            if (complete && a->fd >= 0 &&
                (st = scratch_take(a, ty * a->tiles_x + tx, &buf, err)) != TW_OK)
                return st;
            if (complete) {
                st = tw_writer_write_tile(a->wr, a->level, tx, ty, buf,
                                          (size_t)a->tw * a->px, err);
                if (st == TW_OK && (a->child || a->overlay))
                    st = tile_done(a, ox, oy, buf, (size_t)a->tw * a->px, cw, ch, err);
                free(buf);
                if (st != TW_OK)
                    return st;
            }
        }
    }
    return TW_OK;
}
