/* SPDX-License-Identifier: MIT */
/* tilewave: the gray kernels' contract: parameters and argument checks that the CPU and
 * CUDA variants share (valid C and C++). */
#ifndef TWI_KERN_GRAY_H
#define TWI_KERN_GRAY_H

#include "tile_view.h"

#ifdef __cplusplus
extern "C" {
#endif

/* tw_gray_mode (include/tilewave/ops.h) as plain ints, which both variants compute with: the
 * kernels take the mode as an int and see no op header. */
enum {
    TWI_GRAY_LUMINANCE = 0,
    TWI_GRAY_R = 1,
    TWI_GRAY_G = 2,
    TWI_GRAY_B = 3,
    TWI_GRAY_HEMA = 4,
    TWI_GRAY_EOSIN = 5
};

/*
 * The gray kernel's full parameters: the mode, the fixed-point colour deconvolution of the
 * stain modes (hematoxylin = 4, eosin = 5: 8-bit RGB only) and an optional threshold. Made by
 * twi_gray_params_init() on the host and used unchanged by both variants, which then compute
 * in integers only (docs/io.md, "Gray from colour"):
 *   g = clamp((od[R] w[0] + od[G] w[1] + od[B] w[2] + 2^35) >> 36, 0, 255), 0 for a sum <= 0,
 *   od[v] = round(2^20 (-log10(max(v, 1) / 255))),  w[i] = round(2^16 255 D[i][s]),
 * D the inverse of the stain matrix (rows: the stains' RGB optical densities), s the stain.
 * With `threshold`, out = ((g > t) != invert) ? the type's maximum : 0, for every mode and for
 * 1-channel TW_U8/TW_U16 inputs (copied, then thresholded).
 */
typedef struct twi_gray_params {
    int mode;          /* tw_gray_mode */
    int32_t od[256];   /* stain modes: optical density of an 8-bit sample, Q20 */
    int64_t w[3];      /* stain modes: weights of the R, G, B densities, Q16 x 255 */
    int threshold;     /* 0: none, 1: binarise */
    int64_t t;         /* foreground: g > t (t may be -1: all) */
    int invert;        /* foreground: g <= t instead */
} twi_gray_params;

/* The standard H&E(-DAB) stain vectors of Ruifrok & Johnston as scikit-image's rgb_from_hed:
 * hematoxylin, eosin, DAB (residual), each (R, G, B) optical densities. */
extern const double twi_stains_hed[9];
/* Parameters of `mode` without threshold; `stains` (9 numbers, rows as twi_stains_hed) or NULL
 * for twi_stains_hed. TW_E_INVALID for a bad mode or a singular (or near-singular: inverse
 * entries beyond 2^12) stain matrix. */
tw_status twi_gray_params_init(twi_gray_params *p, int mode, const double *stains);

/* The argument check of twi_omp_gray, shared with its CUDA twin: TW_OK or TW_E_INVALID. */
tw_status twi_gray_check(const tw_tile_view *in, const tw_tile_view *out, int mode);
/* The argument check of twi_omp_gray_p, shared with its CUDA twin. */
tw_status twi_gray_check_p(const tw_tile_view *in, const tw_tile_view *out,
                           const twi_gray_params *p);

#ifdef __cplusplus
}
#endif

#endif /* TWI_KERN_GRAY_H */
