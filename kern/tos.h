/* SPDX-License-Identifier: MIT */
/* tilewave: the tree of shapes' contract: the images it takes and the parent image it gives
 * (valid C and C++). */
#ifndef TWI_KERN_TOS_H
#define TWI_KERN_TOS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Tree of shapes ([deVries24]; omp/tos_omp.c has the algorithm, docs/tos.md the contract): the
 * image immersed in the Khalimsky grid (kw x kh = (2w - 1) x (2h - 1) faces, spans computed
 * from the pixels, never stored), sorted into ranks F_ord by a propagation from the exterior
 * (level m, twi_tos_exterior), the max-tree of the ranks (twi_omp_maxtree_u32, 4-connected, in
 * place), un-interpolated to a parent image on the pixels, then areas and the grain filter.
 * Images: 1 channel TW_U8 / TW_U16, at least 1 x 1, kw kh below TWI_TOS_MAX_FACES (about
 * 2^29 pixels); otherwise TW_E_INVALID.
 *
 * The parent image (uint32 raster indices, w x h packed): a node is a shape's pixels not in
 * a smaller shape; its canonical pixel is its pixel of largest raster index; every pixel
 * points to its node's canonical pixel, a canonical pixel to its parent node's, and a
 * top-level node's canonical pixel to itself. There is one top-level node, the root (the
 * whole image at level m), unless the root holds no pixel: then several (its children) point
 * to themselves, and the root is implicit. A node's level is its pixels' level.
 */
#define TWI_TOS_MAX_FACES ((uint64_t)1 << 31)

#ifdef __cplusplus
}
#endif

#endif /* TWI_KERN_TOS_H */
