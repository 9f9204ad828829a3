/* SPDX-License-Identifier: MIT */
/* tilewave: the distance transform kernels' contract: the band they work on and the argument
 * check that the CPU and CUDA variants share (valid C and C++). */
#ifndef TWI_KERN_EDT_H
#define TWI_KERN_EDT_H

#include "tile_view.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Exact Euclidean distance transform of a band of image rows (omp/ and cuda/ twins; ops/edt.c
 * drives them). The band is `h` consecutive rows of the whole image width, starting at image
 * row `y0`; the whole image is one band with no neighbours. Input: TW_U8, 0 = background,
 * anything else = foreground. What lies outside the band reaches the kernel only through
 * `above` and `below`: per column, the image row of the nearest background pixel above the
 * band (< y0) and below it (>= y0 + h), or TWI_EDT_NONE. Because the EDT is separable (the
 * nearest background pixel of p is the nearest over columns of "nearest in that column"), this
 * is all a band needs to be exact: no halo.
 */
#define TWI_EDT_NONE (-1)
/* Largest image side (columns or rows) the EDT kernels accept: keeps every integer
 * intermediate (squared distances, PBA's dominance test) inside int64. */
#define TWI_EDT_MAX_SIDE (1 << 20)

typedef enum twi_edt_format {
    TWI_EDT_F32 = 0, /* TW_F32: (float)sqrt(d2) with d2 in double (exact integer when sx = sy = 1) */
    TWI_EDT_U16,     /* TW_U16: min(65535, floor(sqrt(d2) + 0.5)), sqrt in double */
    TWI_EDT_SQ32,    /* TW_U32: d2 in pixels (isotropic only), UINT32_MAX when larger */
    TWI_EDT_U8       /* TW_U8: min(255, floor(sqrt(d2) + 0.5)); the CPU variant only (the CUDA
                      * variant refuses it) */
} twi_edt_format;

typedef struct twi_edt_band {
    int64_t y0;            /* image row of the band's first row */
    const int32_t *above;  /* [w] or NULL (= all TWI_EDT_NONE); device memory for CUDA */
    const int32_t *below;  /* [w] or NULL */
    double sx, sy;         /* spacing of columns and rows (> 0); exactly 1, 1: integer path */
    int format;            /* twi_edt_format */
    int32_t m1, m2, m3;    /* CUDA only: PBA+ band counts of phases 1, 2, 3; 0 = automatic */
} twi_edt_band;

/* The argument check of twi_omp_edt, shared with its CUDA twin: TW_OK or TW_E_INVALID. */
tw_status twi_edt_check(const tw_tile_view *bin, const twi_edt_band *band,
                        const tw_tile_view *out, const tw_tile_view *idx);

#ifdef __cplusplus
}
#endif

#endif /* TWI_KERN_EDT_H */
