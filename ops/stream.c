/* SPDX-License-Identifier: MIT */
/* tilewave: the input/output frame shared by streaming per-tile operations. */
#include <errno.h>
#include <pthread.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "omp_kernels.h"
#include "ops_internal.h"

/* Where a key's value came from (TW_CONFIG_DEFAULT when unknown). */
static tw_config_source
key_source(const tw_config *cfg, const char *key)
{
    tw_config_entry e;

    for (size_t i = 0; i < tw_config_count(); i++)
        if (tw_config_describe(cfg, i, &e) == TW_OK && strcmp(e.key, key) == 0)
            return e.source;
    return TW_CONFIG_DEFAULT;
}

tw_status
twi_ops_tile_size(const tw_config *cfg, const char *op_key, int32_t w, int32_t h, int32_t *out_w,
                  int32_t *out_h, tw_error *err)
{
    int64_t cw = 0, ch = 0;

    if (w < 0 || h < 0 || (w == 0) != (h == 0))
        return twi_error_set(err, TW_E_INVALID, "ops: bad tile size %dx%d", (int)w, (int)h);
    if (w > 0) {
        *out_w = w;
        *out_h = h;
        return TW_OK;
    }
    /* The op's own key refines tile.size, unless tile.size came from a source of higher
     * precedence (e.g. --tile on the command line over mrecon.tile_size in a file). */
    if (op_key && tw_config_get_dims(cfg, op_key, &cw, &ch) == TW_OK && cw > 0 && ch > 0 &&
        key_source(cfg, op_key) >= key_source(cfg, "tile.size")) {
        *out_w = (int32_t)cw;
        *out_h = (int32_t)ch;
        return TW_OK;
    }
    if (tw_config_get_dims(cfg, "tile.size", &cw, &ch) != TW_OK)
        return twi_error_set(err, TW_E_INTERNAL, "ops: the config has no tile.size");
    *out_w = (int32_t)cw;
    *out_h = (int32_t)ch;
    return TW_OK;
}

bool
twi_ops_ctx_stop(const void *ctx)
{
    return twi_ctx_canceled(ctx);
}

bool
twi_ops_tile_implicit(const tw_config *cfg, const char *op_key, int32_t given_w)
{
    int64_t cw = 0, ch = 0;

    if (given_w > 0 || key_source(cfg, "tile.size") != TW_CONFIG_DEFAULT)
        return false;
    return !op_key || key_source(cfg, op_key) == TW_CONFIG_DEFAULT ||
           tw_config_get_dims(cfg, op_key, &cw, &ch) != TW_OK || cw <= 0 || ch <= 0;
}

void
twi_stream_align_tile(const twi_stream *s, int32_t *tw, int32_t *th)
{
    tw_level_info li;

    if (!s->slide || tw_slide_get_level(s->slide, s->level, &li) != TW_OK || li.tile_w < 1 ||
        li.tile_h < 1 || s->x % li.tile_w != 0 || s->y % li.tile_h != 0)
        return;
    /* the nearest multiple, at least one file tile */
    *tw = (int32_t)(*tw + li.tile_w / 2) / li.tile_w * li.tile_w;
    *th = (int32_t)(*th + li.tile_h / 2) / li.tile_h * li.tile_h;
    if (*tw < li.tile_w)
        *tw = li.tile_w;
    if (*th < li.tile_h)
        *th = li.tile_h;
}

/* Compared by device and inode so that "./a.tif" and "a.tif" match. */
int
twi_ops_same_file(const char *a, const char *b)
{
    struct stat sa, sb;

    if (stat(a, &sa) != 0 || stat(b, &sb) != 0)
        return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static tw_status
reader_from_config(const tw_config *cfg, tw_reader_kind given, tw_reader_kind *out)
{
    const char *name = NULL;

    *out = given;
    if (given != TW_READER_AUTO)
        return TW_OK;
    if (tw_config_get_string(cfg, "io.reader", &name) != TW_OK)
        return TW_OK;
    if (strcmp(name, "openslide") == 0)
        *out = TW_READER_OPENSLIDE;
    else if (strcmp(name, "tiff") == 0)
        *out = TW_READER_TIFF;
    return TW_OK;
}

/* --mpp / --magnification (tw_input.mpp, .magnification): the level tw_slide_choose_level()
 * picks, and s->slide replaced by its reduced view when it is 2x finer or more. Reported in
 * the input's report and in the log. */
static tw_status
choose_resolution(twi_stream *s, const char *op, const tw_input *in, tw_error *err)
{
    tw_level_choice c;
    tw_slide *view = NULL;
    tw_status st;
    const char *what = in->mpp > 0 ? "an mpp" : "a magnification";

    if (!(in->mpp > 0) && !(in->magnification > 0)) {
        if (in->mpp != 0 || in->magnification != 0)
            return twi_error_set(err, TW_E_INVALID,
                                 "%s: mpp %g and magnification %g: each must be a positive "
                                 "number or 0 (not given)",
                                 op, in->mpp, in->magnification);
        tw_level_info li;

        c.level = s->level;
        c.reduce = 1;
        tw_slide_get_mpp(s->slide, &c.mpp_x, &c.mpp_y);
        if (tw_slide_get_level(s->slide, s->level, &li) == TW_OK) {
            c.mpp_x *= li.downsample;
            c.mpp_y *= li.downsample;
        }
        goto report;
    }
    if (in->level != 0)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: a level (%d) and %s cannot both be given: %s chooses the level",
                             op, in->level, what, what);
    if ((st = tw_slide_choose_level(s->slide, in->mpp, in->magnification, &c, err)) != TW_OK)
        return st;
    if (c.reduce > 1) {
        if ((st = twi_slide_reduce(s->slide, c.level, c.reduce, &view, err)) != TW_OK)
            return st;
        s->slide = view;
        s->level = 0;
    } else {
        s->level = c.level;
    }
    s->src_level = c.level;
    s->reduce = c.reduce;
    if (c.reduce > 1)
        TW_INFO(op, "'%s': level %d reduced %dx%d by area average, %.4g um per pixel (asked %s %g)",
                in->path, c.level, c.reduce, c.reduce, c.mpp_x, in->mpp > 0 ? "mpp" : "magnification",
                in->mpp > 0 ? in->mpp : in->magnification);
    else
        TW_INFO(op, "'%s': level %d, %.4g um per pixel (asked %s %g)", in->path, c.level,
                c.mpp_x, in->mpp > 0 ? "mpp" : "magnification",
                in->mpp > 0 ? in->mpp : in->magnification);
report:
    if (in->report) {
        in->report->level = c.level;
        in->report->reduce = c.reduce;
        in->report->mpp_x = c.mpp_x;
        in->report->mpp_y = c.mpp_y;
    }
    return TW_OK;
}

tw_status
twi_stream_open_input(twi_stream *s, const tw_config *cfg, const char *op, const tw_input *in,
                      tw_error *err)
{
    tw_status st = TW_OK;
    tw_reader_kind reader = TW_READER_AUTO;
    tw_level_info li;
    tw_error cerr;

    if (!in || !in->path)
        return twi_error_set(err, TW_E_INVALID, "%s: an input path is required", op);
    const char *bad_tile = NULL;

    s->t_open = twi_now_ns();

    reader_from_config(cfg, in->reader, &reader);
    if ((st = tw_slide_open(in->path, reader, &s->slide, err)) != TW_OK)
        return st;
    if (in->channel && (st = tw_slide_set_channel(s->slide, in->channel, &cerr)) != TW_OK) {
        /* the message is io's; the operation names it */
        twi_error_set(err, st, "%s: %s", op,
                      strncmp(cerr.message, "io: ", 4) == 0 ? cerr.message + 4 : cerr.message);
        goto out;
    }
    if ((st = twi_slide_channel_missing(s->slide, op, err)) != TW_OK)
        goto out;
    if (tw_config_get_string(cfg, "io.on_bad_tile", &bad_tile) == TW_OK && bad_tile)
        twi_slide_set_bad_tiles(s->slide, strcmp(bad_tile, "fill") == 0);
    if (in->level < 0 || in->level >= tw_slide_get_level_count(s->slide)) {
        st = twi_error_set(err, TW_E_INVALID, "%s: level %d does not exist ('%s' has %d)", op,
                           in->level, in->path, tw_slide_get_level_count(s->slide));
        goto out;
    }
    s->level = s->src_level = in->level;
    s->reduce = 1;
    if ((st = choose_resolution(s, op, in, err)) != TW_OK)
        goto out;
    if ((st = tw_slide_get_level(s->slide, s->level, &li)) != TW_OK) {
        twi_error_set(err, st, "%s: cannot describe level %d of '%s'", op, s->level, in->path);
        goto out;
    }
    s->downsample = li.downsample;
    /* A tile is decoded whole (libtiff has no partial decode of a tile), outside the budget's
     * account: one larger than the whole budget is refused before anything is read. */
    {
        int64_t budget = 0;
        uint64_t tile = twi_slide_decoded_tile_bytes(s->slide, s->level);

        if (tw_config_get_int(cfg, "runtime.host_mem", &budget) == TW_OK && budget > 0 &&
            tile > (uint64_t)budget) {
            if (li.tile_w > 0)
                st = twi_error_set(err, TW_E_INVALID,
                                   "%s: a %dx%d tile of level %d of '%s' decodes to %.1f MiB, "
                                   "more than the host memory budget runtime.host_mem (%.1f "
                                   "MiB); raise the budget or rewrite the slide with smaller "
                                   "tiles",
                                   op, (int)li.tile_w, (int)li.tile_h, s->level, in->path,
                                   (double)tile / 1048576.0, (double)budget / 1048576.0);
            else
                st = twi_error_set(err, TW_E_INVALID,
                                   "%s: a strip of level %d of '%s' decodes to %.1f MiB, more "
                                   "than the host memory budget runtime.host_mem (%.1f MiB); "
                                   "raise the budget or rewrite the slide with smaller strips",
                                   op, s->level, in->path, (double)tile / 1048576.0,
                                   (double)budget / 1048576.0);
            goto out;
        }
    }
    if (in->w == 0 && in->h == 0 && in->x == 0 && in->y == 0) {
        s->x = 0;
        s->y = 0;
        s->w = li.w;
        s->h = li.h;
    } else {
        if (in->w < 1 || in->h < 1) {
            st = twi_error_set(err, TW_E_INVALID,
                               "%s: region %lld,%lld,%lldx%lld is empty (its width and height "
                               "must be at least 1)",
                               op, (long long)in->x, (long long)in->y, (long long)in->w,
                               (long long)in->h);
            goto out;
        }
        if (in->x < 0 || in->y < 0 || in->x > li.w - in->w ||
            in->y > li.h - in->h) {
            st = twi_error_set(err, TW_E_INVALID,
                               "%s: region %lld,%lld,%lldx%lld is outside level %d (%lldx%lld)",
                               op, (long long)in->x, (long long)in->y, (long long)in->w,
                               (long long)in->h, s->level, (long long)li.w, (long long)li.h);
            goto out;
        }
        s->x = in->x;
        s->y = in->y;
        s->w = in->w;
        s->h = in->h;
    }
    s->in_channels = tw_slide_get_channels(s->slide);
    s->in_type = tw_slide_get_sample_type(s->slide);
    s->in_path = in->path;
    s->in_mask = in->threshold_mode != TW_THRESHOLD_NONE;
    return TW_OK;
out:
    tw_slide_close(s->slide);
    s->slide = NULL;
    return st;
}

/* How the pyramid of an output is reduced (docs/io.md): u32/u64 are labels, indices or
 * coordinates (the top-left sample keeps them valid); the maxima of regional-max and hmax, and
 * what any operation but edt makes of a thresholded input (a mask in, a mask out), are masks
 * (the largest sample keeps small ones visible); the rest is visual or gray data, distances
 * included (the mean). */
static twi_pyr_rule
output_rule(const char *op, tw_sample_type type, bool thresholded)
{
    if (type == TW_U32 || type == TW_U64)
        return TWI_PYR_NEAREST;
    if (strcmp(op, "regional-max") == 0 || strcmp(op, "hmax") == 0 ||
        (thresholded && strcmp(op, "edt") != 0))
        return TWI_PYR_MAX;
    return TWI_PYR_MEAN;
}

/* The overlay of `out` over s's slide, attached to s->assembler (`binary`: the result is a
 * mask); nothing for a secondary output (EDT indices: the main output has it), an error for an
 * input in memory. */
static tw_status
open_overlay(twi_stream *s, const char *op, const tw_output *out, const tw_writer_opts *main_o,
             bool binary, tw_error *err)
{
    tw_writer_opts wo = *main_o;
    tw_writer *ov = NULL;
    tw_status st;
    int ch;
    tw_sample_type t;

    if (!out->overlay || s->meta)
        return TW_OK; /* a secondary output: the main one has the overlay */
    if (!s->slide)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: an overlay needs a slide to blend over (a file input, not an "
                             "image in memory)",
                             op);
    ch = tw_slide_get_channels(s->slide);
    t = tw_slide_get_sample_type(s->slide);
    if ((ch != 1 && ch != 3) || (t != TW_U8 && t != TW_U16) || main_o->channels != 1)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: an overlay needs a gray or RGB 8/16-bit input and a one-channel "
                             "result (input %d x %s, result %d x %s)",
                             op, ch, tw_sample_type_name(t), main_o->channels,
                             tw_sample_type_name(main_o->type));
    if (strcmp(out->overlay, out->path) == 0 || twi_ops_same_file(out->overlay, out->path))
        return twi_error_set(err, TW_E_INVALID, "%s: the overlay '%s' is the output itself", op,
                             out->overlay);
    /* the overlay is renamed into place when the job ends: over the input, it would replace
     * the slide being read */
    if (s->in_path && twi_ops_same_file(out->overlay, s->in_path))
        return twi_error_set(err, TW_E_INVALID, "%s: the overlay '%s' would overwrite the input",
                             op, out->overlay);
    wo.channels = 3;
    wo.type = TW_U8;
    wo.n_levels = twi_io_pyramid_levels(wo.w, wo.h, wo.tile_w, wo.tile_h);
    wo.compression = out->overlay_deflate ? TW_COMPRESS_DEFLATE : TW_COMPRESS_JPEG;
    wo.level_of_compression = 0;
    if ((st = tw_writer_open(out->overlay, &wo, &ov, err)) != TW_OK)
        return st;
    if ((st = twi_writer_start_thread(ov, err)) != TW_OK) {
        tw_writer_abort(ov);
        return st;
    }
    if ((st = twi_assembler_set_overlay(s->assembler, ov, s->slide, s->level, s->x, s->y,
                                        binary)) != TW_OK)
        return twi_error_set(err, st, "%s: cannot set up the overlay", op);
    return TW_OK;
}

/* io.partial_tiles: keep the output tiles being filled in a scratch file when they would take
 * over a quarter of the host budget (or always, or never). They are not in the budget's
 * account, and grow with the slide's width (io/assembler.c). */
static tw_status
partial_tiles_setup(twi_stream *s, const tw_config *cfg, const char *op, tw_error *err)
{
    const char *mode = NULL;
    int64_t budget = 0, bytes = twi_assembler_partial_bytes(s->assembler);

    if (tw_config_get_string(cfg, "io.partial_tiles", &mode) != TW_OK || !mode)
        mode = "auto";
    if (tw_config_get_int(cfg, "runtime.host_mem", &budget) != TW_OK)
        budget = 0;
    if (strcmp(mode, "file") != 0 &&
        (strcmp(mode, "memory") == 0 || budget <= 0 || bytes <= budget / 4))
        return TW_OK;
    TW_INFO(op, "partly computed output tiles (up to %.1f MiB) kept in a scratch file",
            (double)bytes / (1 << 20));
    return twi_assembler_set_scratch(s->assembler, twi_scratch_dir(cfg), err);
}

tw_status
twi_stream_open_output(twi_stream *s, const tw_config *cfg, const char *op, const tw_output *out,
                       int out_channels, tw_sample_type out_type, tw_error *err)
{
    tw_status st = TW_OK;
    tw_writer_opts wo;
    int64_t tw64 = 0, th64 = 0, level_cmp = 0, quality = 0;
    const char *comp_name = NULL, *word = NULL;
    double mpp_x = 0, mpp_y = 0, power = 0;
    bool pyramid;
    twi_pyr_rule rule;
    char *desc = NULL;

    if (!out || !out->path)
        return twi_error_set(err, TW_E_INVALID, "%s: an output path is required", op);
    if (out_type == (tw_sample_type)0)
        out_type = s->in_type;
    tw_writer_opts_init(&wo);
    wo.w = s->w;
    wo.h = s->h;
    wo.channels = out_channels;
    wo.type = out_type;
    if (tw_config_get_dims(cfg, "io.tiff_tile", &tw64, &th64) == TW_OK) {
        wo.tile_w = (int32_t)tw64;
        wo.tile_h = (int32_t)th64;
    }
    if (out->compression_set) {
        wo.compression = out->compression;
    } else if (tw_config_get_string(cfg, "io.compression", &comp_name) == TW_OK &&
               tw_compression_parse(comp_name, &wo.compression) != TW_OK) {
        return twi_error_set(err, TW_E_INVALID, "%s: bad io.compression '%s'", op, comp_name);
    }
    if (tw_config_get_int(cfg, "io.compression_level", &level_cmp) == TW_OK)
        wo.level_of_compression = (int)level_cmp;
    if (out->layout_set)
        wo.layout = out->layout;
    else if (tw_config_get_string(cfg, "io.layout", &word) == TW_OK &&
             tw_layout_parse(word, &wo.layout) != TW_OK)
        return twi_error_set(err, TW_E_INVALID, "%s: bad io.layout '%s'", op, word);
    wo.quality = out->quality;
    if (!wo.quality && tw_config_get_int(cfg, "io.jpeg_quality", &quality) == TW_OK)
        wo.quality = (int)quality;
    if (out->quality && wo.compression != TW_COMPRESS_JPEG)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: a quality (%d) applies to JPEG compression only", op,
                             out->quality);
    pyramid = out->pyramid || (tw_config_get_string(cfg, "io.pyramid", &word) == TW_OK &&
                               strcmp(word, "yes") == 0);
    rule = output_rule(op, out_type, s->in_mask);
    if (wo.compression == TW_COMPRESS_JPEG && rule != TWI_PYR_MEAN)
        return twi_error_set(err, TW_E_INVALID,
                             "%s: JPEG is lossy and would alter the %s output; use deflate, "
                             "zstd or lzw",
                             op, rule == TWI_PYR_MAX ? "mask" : "label/index");
    if (wo.compression == TW_COMPRESS_JPEG && (out_type != TW_U8 || out_channels == 2))
        return twi_error_set(err, TW_E_INVALID,
                             "%s: JPEG is only for 8-bit gray or RGB results, this one is %d x %s "
                             "(use deflate, zstd or lzw)",
                             op, out_channels, tw_sample_type_name(out_type));
    if (pyramid)
        wo.n_levels = twi_io_pyramid_levels(wo.w, wo.h, wo.tile_w, wo.tile_h);
    if (s->slide || s->meta) {
        /* level 0 of the output is the level read: its pixels are `downsample` times wider */
        const tw_slide *src = s->slide ? s->slide : s->meta;
        double ds = s->downsample > 0 ? s->downsample : 1.0;

        tw_slide_get_mpp(src, &mpp_x, &mpp_y);
        wo.mpp_x = mpp_x * ds;
        wo.mpp_y = mpp_y * ds;
        power = tw_slide_get_objective_power(src) / ds;
    }
    {
        char head[256], red[32] = "";

        if (s->reduce > 1)
            snprintf(red, sizeof red, " reduced %dx%d", s->reduce, s->reduce);
        snprintf(head, sizeof head, "tilewave %s %s level %d%s region %lld,%lld,%lldx%lld",
                 tw_version_string(), op, s->reduce >= 1 ? s->src_level : s->level, red,
                 (long long)s->x, (long long)s->y, (long long)s->w, (long long)s->h);
        /* 8-bit gray and RGB pages: Aperio's form, for OpenSlide's mpp (io.description,
         * docs/io.md) */
        bool aperio = wo.layout == TW_LAYOUT_TIFF && out_type == TW_U8 &&
                      (out_channels == 1 || out_channels == 3) &&
                      !(tw_config_get_string(cfg, "io.description", &word) == TW_OK &&
                        strcmp(word, "plain") == 0);

        desc = twi_meta_describe(s->slide ? s->slide : s->meta, head, out->description,
                                 wo.mpp_x, power, aperio, s->desc_items);
        if (!desc)
            return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", op);
    }
    wo.description = desc;
    wo.software = "tilewave " TW_VERSION_STRING;
    st = tw_writer_open(out->path, &wo, &s->writer, err);
    if (st == TW_OK)
        st = twi_writer_start_thread(s->writer, err);
    if (st != TW_OK)
        goto out;
    if ((st = twi_assembler_create(s->writer, 0, s->w, s->h, wo.tile_w, wo.tile_h, out_channels,
                                   out_type, &s->assembler)) != TW_OK ||
        (wo.n_levels > 1 && (st = twi_assembler_set_pyramid(s->assembler, rule)) != TW_OK)) {
        twi_error_set(err, st, "%s: cannot set up the output tiles", op);
        goto out;
    }
    if ((st = open_overlay(s, op, out, &wo, rule == TWI_PYR_MAX, err)) != TW_OK)
        goto out;
    st = partial_tiles_setup(s, cfg, op, err);
out:
    if (st != TW_OK) {
        twi_assembler_destroy(s->assembler);
        s->assembler = NULL;
        tw_writer_abort(s->writer);
        s->writer = NULL;
    }
    free(desc);
    return st;
}

tw_status
twi_stream_open(twi_stream *s, const tw_config *cfg, const char *op, const tw_input *in,
                const tw_output *out, int32_t tile_w, int32_t tile_h, bool align,
                int out_channels, tw_sample_type out_type, tw_error *err)
{
    tw_status st = TW_OK;

    memset(s, 0, sizeof *s);
    if (!in || !in->path || !out || !out->path)
        return twi_error_set(err, TW_E_INVALID, "%s: input and output paths are required", op);
    if (tile_w < 1 || tile_h < 1)
        return twi_error_set(err, TW_E_INVALID, "%s: tile size %dx%d must be at least 1x1", op,
                             (int)tile_w, (int)tile_h);
    if (twi_ops_same_file(in->path, out->path))
        return twi_error_set(err, TW_E_INVALID, "%s: the output '%s' would overwrite the input",
                             op, out->path);
    if ((st = twi_stream_open_input(s, cfg, op, in, err)) != TW_OK)
        return st;
    if (align)
        twi_stream_align_tile(s, &tile_w, &tile_h);
    s->tile_w = tile_w;
    s->tile_h = tile_h;
    s->tiles_x = (s->w + tile_w - 1) / tile_w;
    s->tiles_y = (s->h + tile_h - 1) / tile_h;
    if ((st = twi_stream_open_output(s, cfg, op, out, out_channels, out_type, err)) != TW_OK)
        goto out;
    return TW_OK;
out:
    twi_stream_finish(s, st, NULL);
    return st;
}

void
twi_stream_tile_rect(const twi_stream *s, int64_t i, int64_t *x, int64_t *y, int32_t *w,
                     int32_t *h)
{
    int64_t tx = i % s->tiles_x, ty = i / s->tiles_x;
    int64_t lx = tx * s->tile_w, ly = ty * s->tile_h;

    *x = s->x + lx;
    *y = s->y + ly;
    *w = (int32_t)(s->w - lx < s->tile_w ? s->w - lx : s->tile_w);
    *h = (int32_t)(s->h - ly < s->tile_h ? s->h - ly : s->tile_h);
}

tw_status
twi_stream_finish_two(tw_job *job, twi_stream *main, twi_stream *second, tw_status st)
{
    tw_error err, serr;
    tw_status sst = twi_stream_finish(second, st, &serr);

    st = twi_stream_finish(main, st == TW_OK ? sst : st, &err);
    if (sst != TW_OK && sst != TW_E_CANCELED && st == sst)
        return twi_job_fail(job, sst, "%s", serr.message);
    if (st != TW_OK && st != TW_E_CANCELED)
        return twi_job_fail(job, st, "%s", err.message);
    return st;
}

void
twi_stream_attach_io(twi_stream *s, tw_job *job)
{
    twi_io_counts *io = twi_job_io(job);

    twi_slide_set_io(s->slide, io);
    /* the run began when its input began to open (Otsu's pass is part of it), and so did its
     * decodes */
    twi_job_started_at(job, s->t_open);
    if (io) {
        twi_io_add(&io->bytes_read, atomic_load(&s->setup_io.bytes_read));
        twi_io_add(&io->bytes_decoded, atomic_load(&s->setup_io.bytes_decoded));
        twi_io_add(&io->tiles_decoded, atomic_load(&s->setup_io.tiles_decoded));
        twi_io_add(&io->tiles_redecoded, atomic_load(&s->setup_io.tiles_redecoded));
    }
    /* tiles filled while the job was set up (a low level read for Otsu, the tissue mask) */
    if (twi_job_io(job))
        twi_io_add(&twi_job_io(job)->tiles_bad, twi_slide_get_bad_tiles(s->slide));
    twi_writer_set_io(s->writer, twi_job_io(job));
}

tw_status
twi_stream_finish(twi_stream *s, tw_status st, tw_error *err)
{
    /* the overlay (if any) goes into place first, so a failed one fails the run */
    if (st == TW_OK && s->assembler)
        st = twi_assembler_close_overlay(s->assembler, err);
    twi_assembler_destroy(s->assembler);
    s->assembler = NULL;
    if (s->writer) {
        if (st == TW_OK)
            st = tw_writer_close(s->writer, err);
        else
            tw_writer_abort(s->writer);
        s->writer = NULL;
    }
    tw_slide_close(s->slide);
    s->slide = NULL;
    twi_prep_destroy(s->prep);
    s->prep = NULL;
    return st;
}

/* ---- inputs */

static void
types_text(unsigned types, char *buf, size_t n)
{
    static const tw_sample_type all[] = {TW_U8, TW_U16, TW_U32, TW_U64, TW_F32};
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!(types & (1u << all[i])))
            continue;
        used += (size_t)snprintf(buf + used, used < n ? n - used : 0, "%s%s", used ? " or " : "",
                                 tw_sample_type_name(all[i]));
        if (used >= n)
            break;
    }
}

tw_status
twi_src_open(const tw_config *cfg, const char *op, unsigned types, const char *what,
             const tw_input *file, const tw_host_image *mem, twi_src *src, tw_error *err)
{
    char allowed[64];
    tw_status st;

    memset(src, 0, sizeof *src);
    types_text(types, allowed, sizeof allowed);
    if (mem && mem->data) {
        size_t ss = tw_sample_size(mem->type);

        if (ss == 0 || !(types & (1u << mem->type)))
            return twi_error_set(err, TW_E_INVALID, "%s: the %s image is %s (%s needed)", op,
                                 what, ss ? tw_sample_type_name(mem->type) : "of no known type",
                                 allowed);
        if (mem->w < 1 || mem->h < 1 || mem->w > INT64_MAX / 4 / (int64_t)ss ||
            (mem->stride && mem->stride < (size_t)mem->w * ss))
            return twi_error_set(err, TW_E_INVALID, "%s: bad %s image (%lldx%lld, stride %zu)",
                                 op, what, (long long)mem->w, (long long)mem->h, mem->stride);
        src->mem = *mem;
        src->s.w = mem->w;
        src->s.h = mem->h;
        src->s.in_channels = 1;
        src->s.in_type = mem->type;
        return TW_OK;
    }
    if (!file || !file->path)
        return twi_error_set(err, TW_E_INVALID, "%s: no %s given (a file or an image in memory)",
                             op, what);
    if ((st = twi_stream_open_input(&src->s, cfg, op, file, err)) != TW_OK)
        return st;
    src->path = file->path;
    if ((src->s.in_channels != 1 && src->s.in_channels != 3) ||
        !(types & (1u << src->s.in_type))) {
        st = twi_error_set(err, TW_E_FORMAT,
                           "%s: '%s' has %d channel%s of %s (1 or 3 channels of %s needed)",
                           op, file->path, src->s.in_channels, src->s.in_channels == 1 ? "" : "s",
                           tw_sample_type_name(src->s.in_type), allowed);
        twi_stream_finish(&src->s, st, NULL);
        return st;
    }
    /* Gray mode, threshold, tissue: Otsu and the tissue mask are computed now; Otsu's pass
     * may keep the gray image for the reads (twi_prep_kept). */
    src->s.prep_keep = !(types & TWI_SRC_NO_KEEP);
    if ((st = twi_prep_create(cfg, op, file, (int)file->gray, &src->s, &src->s.prep, err)) !=
        TW_OK) {
        twi_stream_finish(&src->s, st, NULL);
        return st;
    }
    return TW_OK;
}

tw_status
twi_src_mask_check(const char *op, const twi_src *src, bool thresholded, tw_error *err)
{
    if (src->mem.data || src->s.in_channels != 3 || thresholded)
        return TW_OK;
    return twi_error_set(err, TW_E_INVALID,
                         "%s: '%s' is a colour (RGB) image, not a mask: give a threshold, e.g. "
                         "threshold_mode TW_THRESHOLD_OTSU with invert (tissue darker than the "
                         "glass)",
                         op, src->path);
}

tw_status
twi_src_read(tw_task_ctx *ctx, const char *op, const twi_src *src, int64_t x, int64_t y,
             tw_tile_view *v, void *rgb_buf)
{
    size_t ss = tw_sample_size(v->type), kstride = 0;
    const void *kept;
    tw_error err;
    tw_status st;

    if (src->mem.data) {
        size_t stride = src->mem.stride ? src->mem.stride : (size_t)src->mem.w * ss;
        const char *base = (const char *)src->mem.data + (size_t)y * stride + (size_t)x * ss;

        for (int32_t r = 0; r < v->h; r++)
            memcpy((char *)v->data + r * v->stride, base + (size_t)r * stride, (size_t)v->w * ss);
        return TW_OK;
    }
    if (src->s.prep && twi_prep_skip(src->s.prep, x, y, v->w, v->h)) {
        /* No tissue under it: not read, every pixel what glass becomes. */
        twi_prep_fill_output(src->s.prep, v);
        return TW_OK;
    }
    if (src->s.prep && v->type == src->s.in_type &&
        (kept = twi_prep_kept(src->s.prep, x, y, v->w, v->h, &kstride))) {
        /* Otsu's pass kept the gray image: not decoded again, copied and thresholded (the
         * mode is for colour; a gray view is copied as it is) */
        twi_gray_params tp = *twi_prep_params(src->s.prep);
        tw_tile_view kv = *v;

        tp.mode = TWI_GRAY_LUMINANCE;
        kv.data = (void *)(uintptr_t)kept;
        kv.stride = (int64_t)kstride;
        if ((st = twi_omp_gray_p(&kv, v, &tp, 1)) != TW_OK)
            return twi_ctx_fail(ctx, st, "%s: cannot threshold '%s'", op, src->path);
        return TW_OK;
    }
    if (src->s.in_channels == 1) {
        st = tw_slide_read_region(src->s.slide, src->s.level, src->s.x + x, src->s.y + y, v->w,
                                  v->h, v->data, (size_t)v->stride, &err);
        if (st == TW_OK && src->s.prep && twi_prep_params(src->s.prep)->threshold &&
            (st = twi_omp_gray_p(v, v, twi_prep_params(src->s.prep), 1)) != TW_OK)
            return twi_ctx_fail(ctx, st, "%s: cannot threshold '%s'", op, src->path);
    } else {
        tw_tile_view rgb = *v;

        rgb.channels = src->s.in_channels;
        rgb.stride = (int64_t)((size_t)v->w * (size_t)rgb.channels * ss);
        rgb.data = rgb_buf ? rgb_buf : twi_ctx_scratch(ctx, (size_t)rgb.stride * (size_t)v->h);
        if (!rgb.data)
            return twi_ctx_fail(ctx, TW_E_NOMEM, "%s: out of memory", op);
        st = tw_slide_read_region(src->s.slide, src->s.level, src->s.x + x, src->s.y + y, v->w,
                                  v->h, rgb.data, (size_t)rgb.stride, &err);
        if (st == TW_OK &&
            (st = src->s.prep ? twi_omp_gray_p(&rgb, v, twi_prep_params(src->s.prep), 1)
                              : twi_omp_gray(&rgb, v, (int)TW_GRAY_LUMINANCE, 1)) != TW_OK)
            return twi_ctx_fail(ctx, st, "%s: cannot convert '%s' to gray", op, src->path);
    }
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s", err.message);
    return TW_OK;
}

tw_status
twi_ops_job_launch(tw_job *job, const char *op, tw_status st, tw_job **out, tw_error *err)
{
    if (st != TW_OK)
        twi_job_fail(job, st, "%s: cannot submit the tasks (%s)", op, tw_status_string(st));
    twi_job_seal(job);
    if (st != TW_OK) {
        tw_job_wait(job, -1);
        twi_error_set(err, st, "%s", tw_job_get_error(job));
        tw_job_destroy(job);
        return st;
    }
    *out = job;
    return TW_OK;
}

/* ---- tile pipelines */


static tw_status
pipes_read_cpu(tw_task_ctx *ctx, void *arg)
{
    twi_pipe_tile *t = arg;
    twi_stream *s = &t->p->s;
    tw_tile_view v = twi_ctx_view(ctx, 0);
    tw_error err;
    tw_status st;

    if (twi_prep_skip(s->prep, t->x - s->x, t->y - s->y, t->w, t->h)) {
        /* --tissue: nothing but glass here; not read, converted as glass */
        twi_prep_fill_input(s->prep, &v);
        return TW_OK;
    }
    st = tw_slide_read_region(s->slide, s->level, t->x, t->y, t->w, t->h, v.data,
                              (size_t)v.stride, &err);
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s", err.message);
    return TW_OK;
}

static tw_status
pipes_write_cpu(tw_task_ctx *ctx, void *arg)
{
    twi_pipe_tile *t = arg;
    twi_pipes *p = t->p;
    tw_tile_view v = twi_ctx_view(ctx, 0);
    tw_error err;
    tw_status st;

    st = twi_assembler_put(p->s.assembler, t->x - p->s.x, t->y - p->s.y, &v, &err);
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "%s", err.message);
    twi_job_add_done(p->job, 1);
    twi_window_retire(p->window);
    return TW_OK;
}

/* Host budget (runtime.host_mem): a read waits until the tile io.write takes fits (the output
 * of the op's task; a copy's own), so that reads never fill the memory the tasks they feed
 * need. */
static int64_t
pipes_read_host_bytes(const void *arg)
{
    const twi_pipe_tile *t = arg;

    return (int64_t)t->w * t->h * (int64_t)t->p->out_channels *
           (int64_t)tw_sample_size(t->p->s.in_type);
}

static const tw_task_kind pipes_read_kind = {
    .name = "io.read",
    .devices = TW_DEVICE_CPU,
    .cpu = pipes_read_cpu,
    .host_bytes = pipes_read_host_bytes,
    .load = true,
};

static const tw_task_kind pipes_write_kind = {
    .name = "io.write",
    .devices = TW_DEVICE_CPU,
    .cpu = pipes_write_cpu,
};

/* Submit the pipeline of processing tile i (the window's admit callback). */
static tw_status
pipes_submit(void *arg, int64_t i)
{
    twi_pipes *p = arg;
    tw_status st = TW_OK;
    tw_runtime *rt = twi_job_runtime(p->job);
    twi_pipe_tile *t = NULL;
    tw_tile *in = NULL, *out = NULL;
    tw_task *rd = NULL, *tp = NULL, *wr = NULL;

    if (!(t = calloc(1, sizeof *t)))
        return TW_E_NOMEM;
    t->p = p;
    twi_stream_tile_rect(&p->s, i, &t->x, &t->y, &t->w, &t->h);
    if ((st = twi_tile_create(rt, t->w, t->h, p->s.in_channels, p->s.in_type, &in)) != TW_OK ||
        (p->tp &&
         (st = twi_tile_create(rt, t->w, t->h, p->out_channels, p->s.in_type, &out)) != TW_OK)) {
        free(t);
        goto out;
    }
    twi_tile_set_origin(in, t->x, t->y);
    if (out)
        twi_tile_set_origin(out, t->x, t->y);
    /* io.write owns `t`: it is the last to complete, even when a cancel drops the tasks, so
     * the others never see it freed. */
    if ((st = twi_task_create(p->job, &pipes_write_kind, t, free, &wr)) != TW_OK) {
        free(t);
        goto out;
    }
    if ((st = twi_task_create(p->job, &pipes_read_kind, t, NULL, &rd)) != TW_OK ||
        (p->tp && (st = twi_task_create(p->job, p->tp, t, NULL, &tp)) != TW_OK) ||
        (st = twi_task_add_tile(rd, in, TW_W)) != TW_OK)
        goto out;
    if (tp && ((st = twi_task_add_tile(tp, in, TW_R)) != TW_OK ||
               (st = twi_task_add_tile(tp, out, TW_W)) != TW_OK ||
               (st = twi_task_depend(tp, rd)) != TW_OK))
        goto out;
    if ((st = twi_task_add_tile(wr, tp ? out : in, TW_R)) != TW_OK ||
        (st = twi_task_depend(wr, tp ? tp : rd)) != TW_OK)
        goto out;
    if ((st = twi_task_submit(wr)) != TW_OK || (tp && (st = twi_task_submit(tp)) != TW_OK) ||
        (st = twi_task_submit(rd)) != TW_OK)
        goto out;
out:
    twi_task_release(rd);
    twi_task_release(tp);
    twi_task_release(wr);
    twi_tile_release(in);
    twi_tile_release(out);
    return st;
}

static tw_status
pipes_finish(tw_job *job, tw_status st, void *user)
{
    twi_pipes *p = user;
    tw_error err;

    st = twi_stream_finish(&p->s, st, &err);
    if (st != TW_OK && st != TW_E_CANCELED)
        return twi_job_fail(job, st, "%s", err.message);
    return st;
}

static void
pipes_free(void *user)
{
    twi_pipes *p = user;

    twi_stream_finish(&p->s, TW_E_CANCELED, NULL);
    free(p);
}

tw_status
twi_pipes_launch(tw_runtime *rt, twi_pipes *p, tw_job **out, tw_error *err)
{
    const char *op = p->op;
    tw_status st = TW_OK;
    tw_job *job = NULL;
    int64_t unit_bytes;

    p->n_tiles = p->s.tiles_x * p->s.tiles_y;
    if ((st = twi_job_create(rt, op, &job)) != TW_OK) {
        twi_stream_finish(&p->s, st, NULL);
        free(p);
        return twi_error_set(err, st, "%s: cannot create the job", op);
    }
    p->job = job;
    twi_job_set_finish(job, pipes_finish, p, pipes_free); /* the job owns p from here */
    twi_stream_attach_io(&p->s, job);
    twi_job_add_total(job, p->n_tiles);
    /* The runtime admits the pipelines as workers free up (runtime/window.c). */
    unit_bytes = (int64_t)p->s.tile_w * p->s.tile_h * (int64_t)tw_sample_size(p->s.in_type) *
                 (p->s.in_channels + (p->tp ? p->out_channels : 0));
    st = twi_window_open(job, p->n_tiles, unit_bytes, pipes_submit, p, &p->window);
    return twi_ops_job_launch(job, op, st, out, err);
}

tw_status
twi_put_cancelable(tw_task_ctx *ctx, twi_assembler *a, int64_t x, int64_t y,
                   const tw_tile_view *v, tw_error *err)
{
    /* about 1 Mpx between two cancel checks: 4 MB of f32 to encode, a few tens of ms */
    const int64_t chunk_px = (int64_t)1 << 20;
    size_t px_bytes = (size_t)v->channels * tw_sample_size(v->type);
    bool by_columns = v->w >= v->h;
    int64_t len = by_columns ? v->w : v->h, other = by_columns ? v->h : v->w;
    /* Multiples of 512 keep output tiles (io.tiff_tile, usually 256 or 512) whole per chunk. */
    int64_t step = other > 0 ? chunk_px / other / 512 * 512 : len;
    tw_status st;

    if (step < 512)
        step = 512;
    for (int64_t at = 0; at < len; at += step) {
        tw_tile_view part = *v;
        int64_t n = len - at < step ? len - at : step;

        if (at > 0 && twi_ctx_canceled(ctx))
            return twi_error_set(err, TW_E_CANCELED, "%s", "ops: canceled");
        if (by_columns) {
            part.w = (int32_t)n;
            part.data = (char *)v->data + (size_t)at * px_bytes;
            part.x0 = v->x0 + at;
            st = twi_assembler_put(a, x + at, y, &part, err);
        } else {
            part.h = (int32_t)n;
            part.data = (char *)v->data + (size_t)at * (size_t)v->stride;
            part.y0 = v->y0 + at;
            st = twi_assembler_put(a, x, y + at, &part, err);
        }
        if (st != TW_OK)
            return st;
    }
    return TW_OK;
}
