/* SPDX-License-Identifier: MIT */
/* tilewave: the plain tile view that kernels in omp/ and cuda/ receive (valid C and C++). */
#ifndef TW_TILE_VIEW_H
#define TW_TILE_VIEW_H

#include <stdint.h>

#include "tilewave/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A rectangle of pixels in host or device memory. Kernels never see the scheduler: this is
 * all they get. Samples of a pixel are interleaved; rows are `stride` bytes apart. */
typedef struct tw_tile_view {
    void *data;          /* first sample of row 0; host or device pointer */
    int64_t stride;      /* bytes between rows, >= w * channels * sample size */
    int32_t w, h;        /* pixels */
    int32_t channels;    /* interleaved samples per pixel */
    tw_sample_type type;
    int64_t x0, y0;      /* position of the tile's first pixel in the image being processed */
} tw_tile_view;

#ifdef __cplusplus
}
#endif

#endif /* TW_TILE_VIEW_H */
