/* SPDX-License-Identifier: MIT */
/* tilewave: the union-find of the CPU labellings (omp/label_omp.c over pixels, omp/label_runs.c
 * over runs): parents stored every `stride` words of `par`, a set's root its smallest index. */
#ifndef TWI_OMP_UF_H
#define TWI_OMP_UF_H

#include <stddef.h>
#include <stdint.h>

/* Root of p with path halving; parents stay below their children. */
static inline uint32_t
twi_uf_find(uint32_t *par, size_t stride, uint32_t p)
{
    while (par[stride * p] != p) {
        uint32_t g = par[stride * par[stride * p]];

        par[stride * p] = g;
        p = g;
    }
    return p;
}

/* Joins the sets of a and b: the larger root is linked under the smaller, so a root is always
 * the smallest index of its set. */
static inline void
twi_uf_union(uint32_t *par, size_t stride, uint32_t a, uint32_t b)
{
    a = twi_uf_find(par, stride, a);
    b = twi_uf_find(par, stride, b);
    if (a < b)
        par[stride * b] = a;
    else if (b < a)
        par[stride * a] = b;
}

#endif /* TWI_OMP_UF_H */
