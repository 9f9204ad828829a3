/* SPDX-License-Identifier: MIT */
/* tilewave: the reconstruction kernels' contract: the argument check that the CPU and CUDA
 * variants share (valid C and C++). */
#ifndef TWI_KERN_MRECON_H
#define TWI_KERN_MRECON_H

#include "tile_view.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The views of twi_omp_mrecon and twi_cuda_mrecon: marker and mask non-NULL, 1 channel, the
 * same w x h and sample type, TW_U8 or TW_U16, rows that fit (twi_view_fits); conn 4 or 8.
 * Reads only the structs. Each variant adds its own limits (pixel count, seeds). TW_OK or
 * TW_E_INVALID. */
tw_status twi_mrecon_check(const tw_tile_view *marker, const tw_tile_view *mask, int conn);

#ifdef __cplusplus
}
#endif

#endif /* TWI_KERN_MRECON_H */
