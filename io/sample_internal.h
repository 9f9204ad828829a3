/* SPDX-License-Identifier: MIT */
/* tilewave: private to io/sample.c and its tests: the synthetic slide's scene and renderer. */
#ifndef TW_SAMPLE_INTERNAL_H
#define TW_SAMPLE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tw_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Deflate level of the sample's tiles: 1, libdeflate's fastest; the sample is test data, not an
 * archive. The default 8192x6144 slide takes 64 MB, 7% more than with zlib's level 1 (before
 * libdeflate), and is written about 1.3x as fast (2 cores). */
#define TWI_SAMPLE_DEFLATE_LEVEL 1
/* zstd level of the sample's tiles: zstd's own default, already fast. */
#define TWI_SAMPLE_ZSTD_LEVEL 3

/* The glass grain repeats every this many level-0 pixels both ways: every tile edge is a
 * multiple of it, so all tiles of pure glass in a level hold the same bytes. */
#define TWI_SAMPLE_GLASS_PERIOD 16

/* The continuous scene behind every level, fixed by the options. Read-only once initialised,
 * so any number of threads may render from it. */
typedef struct twi_sample_scene {
    uint64_t seed;
    int64_t w, h;           /* level-0 size in pixels */
    int tissue_shift;       /* log2 of the coarsest tissue noise cell, level-0 pixels */
    int64_t margin;         /* tissue fades out within this many pixels of the slide edge */
    int64_t threshold;      /* tissue field value at the middle of the tissue edge */
    uint64_t key[8];        /* per-layer hash keys derived from the seed */
    int fiber_angle;        /* index into the angle table: direction of the stroma fibres */
    int8_t glass_noise[TWI_SAMPLE_GLASS_PERIOD * TWI_SAMPLE_GLASS_PERIOD]; /* -1, 0, +1 */
} twi_sample_scene;

/* Validate `o` (w, h in 1..2^31, tile a multiple of 16 in 16..16384, known compression) and
 * set up the scene. TW_OK or TW_E_INVALID with a message "sample: ..." in err. */
TWI_HIDDEN tw_status twi_sample_scene_init(twi_sample_scene *sc, const tw_sample_opts *o,
                                           tw_error *err);

/* Number of pyramid levels for a w x h slide with square tiles of `tile` pixels: levels halve
 * (ceil) while the next level still covers at least one whole tile both ways. */
TWI_HIDDEN int twi_sample_level_count(int64_t w, int64_t h, int32_t tile);

/* Render the w x h rectangle at (x, y) of pyramid level `level` (pixel frame of that level;
 * level k has 2^k level-0 pixels per pixel) as 8-bit RGB into dst, rows `stride` bytes apart.
 * Each pixel is the scene sampled at its centre in level-0 coordinates, so the result depends
 * only on the pixel, never on the rectangle or thread that renders it. Integer arithmetic
 * only: the same bytes on every machine. TW_OK, TW_E_INVALID or TW_E_NOMEM. Thread-safe. */
TWI_HIDDEN tw_status twi_sample_render(const twi_sample_scene *sc, int level, int64_t x,
                                       int64_t y, int32_t w, int32_t h, uint8_t *dst,
                                       size_t stride);

/* Whether the level-0 block [x, x + w) x [y, y + h) renders as plain glass (the periodic
 * grain only: no stroma, no nucleus). Exact when true; may say false for a block of glass near
 * tissue (which then renders as glass anyway). Thread-safe. */
TWI_HIDDEN bool twi_sample_block_is_glass(const twi_sample_scene *sc, int64_t x, int64_t y,
                                          int64_t w, int64_t h);

#ifdef __cplusplus
}
#endif

#endif /* TW_SAMPLE_INTERNAL_H */
