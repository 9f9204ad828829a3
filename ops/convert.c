/* SPDX-License-Identifier: MIT */
/* tilewave: `convert`, a slide level copied as it is into a tiled BigTIFF or OME-TIFF. */
/*
 * The no-op of the streaming path: gray.c's pipeline without its conversion. Each processing
 * tile is two tasks (twi_pipes, ops/stream.c),
 *
 *     io.read (CPU) --> io.write (CPU)
 *       [in: W]          [in: R]
 *
 * io.read decodes the tile's rectangle of the slide (every channel, the stored sample type)
 * into a host tile; io.write hands it to the output assembler, which compresses and appends
 * every output TIFF tile it completes and feeds the pyramid levels. A window of a few
 * pipelines per worker is in flight; each io.write submits the next, so tiles are read no
 * faster than they are written and memory stays bounded whatever the slide's size.
 *
 * What it is for: turning any slide tilewave reads (OpenSlide vendor formats, striped or
 * tiled TIFF) into a pyramidal tiled BigTIFF or OME-TIFF; and measuring read + write
 * throughput alone (bench/io.sh).
 */
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

#define OP "convert"

void
tw_convert_opts_init(tw_convert_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

/* The input options that would change pixels have no place in a copy. */
static tw_status
check_input(const tw_input *in, tw_error *err)
{
    const char *what = in->gray != TW_GRAY_LUMINANCE         ? "a gray mode"
                       : in->stains_set                       ? "stain vectors"
                       : in->threshold_mode != TW_THRESHOLD_NONE ? "a threshold"
                       : in->invert                           ? "invert"
                       : in->tissue || in->tissue_mask_path   ? "tissue skipping"
                                                              : NULL;

    if (what)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": copies pixels as they are read; %s does not apply (use gray "
                             "for one channel or a mask)",
                             what);
    return TW_OK;
}

tw_status
tw_convert_submit(tw_runtime *rt, const tw_convert_opts *o, tw_job **out, tw_error *err)
{
    tw_status st = TW_OK;
    const tw_config *cfg;
    twi_pipes *c = NULL;
    int32_t tw = 0, th = 0;

    if (!rt || !o || !out)
        return twi_error_set(err, TW_E_INVALID, OP ": NULL argument");
    if (o->struct_size != sizeof *o)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": options not initialised with tw_convert_opts_init()");
    if ((st = check_input(&o->input, err)) != TW_OK)
        return st;
    if (o->output.overlay)
        return twi_error_set(err, TW_E_INVALID,
                             OP ": an overlay blends an operation's result over the slide; a "
                             "copy has none");
    cfg = tw_runtime_get_config(rt);
    if ((st = twi_ops_tile_size(cfg, NULL, o->tile_w, o->tile_h, &tw, &th, err)) != TW_OK)
        return st;
    if (!(c = calloc(1, sizeof *c)))
        return twi_error_set(err, TW_E_NOMEM, OP ": out of memory");
    c->op = OP; /* c->tp NULL: io.write takes io.read's tile */
    /* The output has the input's channels and sample type. twi_stream_open() opens the slide
     * first, so the channel count is known only there: open the two halves here. */
    if (!o->input.path || !o->output.path) {
        free(c);
        return twi_error_set(err, TW_E_INVALID, OP ": input and output paths are required");
    }
    if (twi_ops_same_file(o->input.path, o->output.path)) {
        free(c);
        return twi_error_set(err, TW_E_INVALID, OP ": the output '%s' would overwrite the input",
                             o->output.path);
    }
    if ((st = twi_stream_open_input(&c->s, cfg, OP, &o->input, err)) != TW_OK) {
        free(c);
        return st;
    }
    c->out_channels = c->s.in_channels;
    if (twi_ops_tile_implicit(cfg, NULL, o->tile_w))
        twi_stream_align_tile(&c->s, &tw, &th);
    c->s.tile_w = tw;
    c->s.tile_h = th;
    c->s.tiles_x = (c->s.w + tw - 1) / tw;
    c->s.tiles_y = (c->s.h + th - 1) / th;
    if ((st = twi_stream_open_output(&c->s, cfg, OP, &o->output, c->s.in_channels,
                                     c->s.in_type, err)) != TW_OK) {
        twi_stream_finish(&c->s, st, NULL);
        free(c);
        return st;
    }
    return twi_pipes_launch(rt, c, out, err); /* owns c */
}
