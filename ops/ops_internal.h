/* SPDX-License-Identifier: MIT */
/* tilewave: helpers shared by the operation drivers in ops/ (private to ops/). */
#ifndef TW_OPS_INTERNAL_H
#define TW_OPS_INTERNAL_H

#include "tw_internal.h"
#include "tw_io.h"

/* The streaming frame every per-tile operation shares: the input slide and region, the
 * output writer and its assembler, the tile grid. */
typedef struct twi_stream {
    tw_slide *slide;
    int level;
    int64_t x, y, w, h;            /* region of the level processed */
    int32_t tile_w, tile_h;        /* processing tiles */
    int64_t tiles_x, tiles_y;
    tw_writer *writer;             /* NULL once closed or aborted */
    twi_assembler *assembler;
    int in_channels;
    tw_sample_type in_type;
} twi_stream;

/* Resolve the processing tile size: explicit (w, h > 0), else the op's key (e.g.
 * "gray.tile_size", 0x0 = inherit), else tile.size. */
TWI_HIDDEN tw_status twi_ops_tile_size(const tw_config *cfg, const char *op_key, int32_t w,
                                       int32_t h, int32_t *out_w, int32_t *out_h, tw_error *err);

/* Open the input, check level and region, open the writer for an output of `out_channels`
 * samples of `out_type` (0: the input's type) over the region (tiles from io.tiff_tile, compression from the
 * output or io.compression, mpp scaled to the level). */
TWI_HIDDEN tw_status twi_stream_open(twi_stream *s, const tw_config *cfg, const char *op,
                                     const tw_input *in, const tw_output *out,
                                     int32_t tile_w, int32_t tile_h, int out_channels,
                                     tw_sample_type out_type, tw_error *err);

/* Position and size of processing tile `i` (raster order) in the level's frame. */
TWI_HIDDEN void twi_stream_tile_rect(const twi_stream *s, int64_t i, int64_t *x, int64_t *y,
                                     int32_t *w, int32_t *h);

/* Finish: on TW_OK close the writer (rename into place), otherwise abort it; close the
 * slide. Returns the status of the close. */
TWI_HIDDEN tw_status twi_stream_finish(twi_stream *s, tw_status st, tw_error *err);

#endif /* TW_OPS_INTERNAL_H */
