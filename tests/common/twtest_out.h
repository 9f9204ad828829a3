/* SPDX-License-Identifier: MIT */
/* tilewave tests: written outputs read back with libtiff alone, reference pyramids, vips. */
#ifndef TWTEST_OUT_H
#define TWTEST_OUT_H

#include <stdbool.h>
#include <stdint.h>

#include "tilewave.h"

/* One level of a TIFF as libtiff alone reads it: the tags that matter and the pixels. */
typedef struct twout_level {
    int64_t w, h;
    int channels;
    tw_sample_type type;
    uint32_t tile_w, tile_h;
    uint16_t compression, photometric;
    uint32_t subfile;          /* SUBFILETYPE */
    bool has_res;              /* X/YResolution and ResolutionUnit present */
    double xres, yres;         /* pixels per unit */
    uint16_t resunit;
    uint8_t *px;               /* h rows of w pixels of `channels` samples, packed; JPEG
                                  YCbCr tiles decoded to RGB by libtiff */
} twout_level;

/* The levels of a written file: its main-chain directories, or with `ome` (the first directory
 * carries SubIFDs) 1 + the number of SubIFDs. Asserts that libtiff opens it. */
int twout_level_count(const char *path, bool *ome);
/* Read level `level` (page `level` of the chain; OME: the main directory for 0, SubIFD
 * level - 1 otherwise) with libtiff. Asserts. */
void twout_read_level(const char *path, int level, twout_level *out);
void twout_level_free(twout_level *l);
/* The ImageDescription of the first directory (malloc'd), or NULL. */
char *twout_description(const char *path);

/* Reduction rules of the reference pyramid (docs/io.md "Outputs"), written independently of
 * io/pyramid.c: pixel (X, Y) of the next level from the pixels (2X..2X+1, 2Y..2Y+1) that exist,
 * channel by channel. MEAN: (sum + n/2) / n for integers; float: the double sum in the order
 * (2X,2Y), (2X+1,2Y), (2X,2Y+1), (2X+1,2Y+1), divided by n, rounded to float. MAX: the largest.
 * NEAREST: the sample at (2X, 2Y). */
typedef enum twout_rule {
    TWOUT_MEAN = 0,
    TWOUT_MAX,
    TWOUT_NEAREST
} twout_rule;

/* A malloc'd ceil(w/2) x ceil(h/2) reduction of the packed image src. */
uint8_t *twout_reduce(const uint8_t *src, int64_t w, int64_t h, int ch, tw_sample_type t,
                      twout_rule rule);

/* Assert that level 0 of `path` is img (w x h, ch x t, packed) and that every level below is
 * the `rule` reduction of the one above (twout_reduce). Returns the number of levels. */
int twout_check_pyramid(const char *path, const uint8_t *img, int64_t w, int64_t h, int ch,
                        tw_sample_type t, twout_rule rule);

/* A deterministic packed w x h image of ch x t samples: random samples, or with `smooth` a
 * slowly varying pattern (what JPEG is meant for). malloc'd. */
uint8_t *twout_image(int64_t w, int64_t h, int ch, tw_sample_type t, uint64_t seed, bool smooth);

/* Write `img` (packed, w x h, ch x t) as a tiled BigTIFF input of `n_levels` levels, each the
 * MEAN reduction of the one above (NEAREST for u32), in 64x64 deflate tiles, with resolution
 * tags for `mpp` (0: none). Asserts. */
void twout_write_input(const char *path, const uint8_t *img, int64_t w, int64_t h, int ch,
                       tw_sample_type t, int n_levels, double mpp);

/* Run argv[0] (searched in PATH) with argv; stdout into *out (malloc'd, may be NULL when
 * out is NULL), stderr to /dev/null. Returns the exit code, 127 when it cannot start. */
int twout_run(const char *const *argv, char **out);
/* True when the vips command line tools (vips, vipsheader) can be run. */
bool twout_have_vips(void);
/* `vips rawsave SRC` (SRC may carry loader options, "f.tif[page=2]"); the raw pixels,
 * malloc'd, their byte count in *n; NULL when vips fails. `tmpdir` holds the raw file. */
uint8_t *twout_vips_raw(const char *src, const char *tmpdir, size_t *n);
/* `vipsheader -f FIELD SRC` as an integer; -1 when it fails. */
int64_t twout_vips_field(const char *src, const char *field);

#endif /* TWTEST_OUT_H */
