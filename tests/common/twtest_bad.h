/* SPDX-License-Identifier: MIT */
/* tilewave tests: hand-made bad TIFFs and other bad slides, shared by tests/io and tests/cli. */
#ifndef TWTEST_BAD_H
#define TWTEST_BAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One directory entry of a hand-made classic TIFF: a single SHORT or LONG value. */
typedef struct twtest_tag {
    uint16_t tag;
    uint32_t value;
} twtest_tag;

/* Where a hand-made TIFF's strip or tile offsets point by default. */
enum { TWTEST_PIXELS_AT = 512 };

/* A little-endian classic TIFF with one directory holding `tags` (sorted here; LONG for sizes
 * and offsets, SHORT for the rest) and `pad` bytes of zeros from byte TWTEST_PIXELS_AT on. */
void twtest_bad_tiff(const char *path, twtest_tag *tags, size_t n, size_t pad);

/* A one-image TIFF: w x h, `spp` samples of `bps` bits, `compression`; tiled with tile x tile
 * tiles when tile >= 0 (tile < 0: striped, one strip), one tile or strip of `count` bytes at
 * `offset`; 300 bytes of zeros at TWTEST_PIXELS_AT. */
void twtest_bad_image(const char *path, uint32_t w, uint32_t h, uint16_t spp, uint16_t bps,
                      uint16_t compression, int64_t tile, uint32_t offset, uint32_t count);

/* Bad slide number i (0, 1, ...) at `path`, *what saying which: zero size, the sample slide
 * truncated three ways, 2^31 x 2^31 pixels striped and tiled, tiles of 0 and 65536 pixels, a
 * 4096-pixel uncompressed tile stored in 16 bytes, compression 12345, compression 33003
 * (Aperio's JPEG 2000) on one gray sample (Aperio's are RGB or YCbCr), a PNG, a JPEG and text named .tif, and a TIFF header followed by noise. False (and no file
 * made) past the last one. */
bool twtest_bad_slide(int i, const char *path, const char **what);

/* How many twtest_bad_slide() makes. */
#define TWTEST_N_BAD_SLIDES 15

#endif /* TWTEST_BAD_H */
