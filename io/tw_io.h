/* SPDX-License-Identifier: MIT */
/* tilewave: io's internal interface for ops/: the tile assembler and output-tile helpers. */
#ifndef TW_IO_H
#define TW_IO_H

#include <stdint.h>

#include "tw_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The tile assembler. Operations work on tiles of any size (even 1x1); the written TIFF has
 * tiles whose sizes are multiples of 16. An assembler sits between the two for one level of
 * one tw_writer: puts copy operation tiles into the output tiles they overlap, and an output
 * tile is compressed and written (on the putting thread) as soon as it is completely covered.
 * Only output tiles that are partly covered hold a buffer. A put that covers whole output tiles
 * hands them to the writer straight from its own memory, without a copy.
 */
typedef struct twi_assembler twi_assembler;

/* An assembler for `level` (level_w x level_h pixels) of `wr`, whose tiles are tile_w x
 * tile_h with `channels` samples of `type`: all must equal what wr was opened with.
 * TW_OK, TW_E_INVALID (a mismatch, with a message in no error: the caller's bug), TW_E_NOMEM. */
TWI_HIDDEN tw_status twi_assembler_create(tw_writer *wr, int level, int64_t level_w,
                                          int64_t level_h, int32_t tile_w, int32_t tile_h,
                                          int channels, tw_sample_type type,
                                          twi_assembler **out);

/* Copy `src` (host memory), whose first pixel belongs at (x, y) of the level, into the output
 * tiles; write those it completes. src must lie inside the level and match channels/type.
 * Thread-safe: concurrent puts must cover disjoint pixels; each pixel is put once.
 * TW_OK, TW_E_INVALID (outside the level, wrong type, pixels put twice), TW_E_NOMEM, or the
 * writer's error (TW_E_IO ...), with a message in err. */
TWI_HIDDEN tw_status twi_assembler_put(twi_assembler *a, int64_t x, int64_t y,
                                       const tw_tile_view *src, tw_error *err);

/* Free the assembler and any partial tile buffers (tiles never completed are not written;
 * tw_writer_close() then reports them). NULL is a no-op. */
TWI_HIDDEN void twi_assembler_destroy(twi_assembler *a);

/* For building tw_writer_opts from an operation's tile edge: the output TIFF tile edge, a
 * multiple of 16 in 256..1024 chosen to line up with operation tiles where it can: op_tile
 * itself when it is such a multiple; a multiple of op_tile for small tiles; a divisor of
 * op_tile for large ones (whole output tiles inside an operation tile are written without a
 * copy); 512 when nothing lines up. op_tile < 1 gives 512. */
TWI_HIDDEN int32_t twi_io_out_tile(int32_t op_tile);

/* The most levels tw_writer_open() accepts for a w x h image: halving until 1x1. */
TWI_HIDDEN int twi_io_max_levels(int64_t w, int64_t h);

#ifdef __cplusplus
}
#endif

#endif /* TW_IO_H */
