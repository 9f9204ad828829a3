/* SPDX-License-Identifier: MIT */
/* tilewave tests: allocation failures of the tree of shapes' kernel (omp/tos_omp.c), those of
 * the sort's sub-tree split (its labellings, the parts they make) among them, injected by
 * wrapping malloc, calloc and realloc (this test alone links with --wrap:
 * tests/CMakeLists.txt). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "omp_kernels.h"
#include "twtest.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

/* fail_nth >= 0: the allocation that many from now fails (0: the next), once; counting:
 * allocations are counted in `calls`. */
static atomic_llong fail_nth = -1;
static atomic_bool counting = false;
static atomic_llong calls = 0;

static int
should_fail(void)
{
    if (atomic_load(&counting))
        atomic_fetch_add(&calls, 1);
    return atomic_load(&fail_nth) >= 0 && atomic_fetch_sub(&fail_nth, 1) == 0;
}

void *
__wrap_malloc(size_t n)
{
    return should_fail() ? NULL : __real_malloc(n);
}

void *
__wrap_calloc(size_t n, size_t size)
{
    return should_fail() ? NULL : __real_calloc(n, size);
}

void *
__wrap_realloc(void *p, size_t n)
{
    return should_fail() ? NULL : __real_realloc(p, n);
}

/* Cones and pits 6 pixels apart on a flat 16-bit background at 30000, or 16-bit noise. */
static void
image(uint16_t *img, int w, int h, int noise)
{
    uint64_t rng = 0x6e6f6d656dull;

    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int cx = x % 6 - 3, cy = y % 6 - 3, d = cx * cx + cy * cy, s = (x / 6 + y / 6) & 1;

            img[y * w + x] = noise ? (uint16_t)twtest_rnd(&rng, 50000)
                             : (uint16_t)(d < 5 ? 30000 + (s ? -1 : 1) * (40 - 7 * d + x / 6)
                                                : 30000);
        }
}

Test(tos_nomem, every_allocation_of_the_sort_fails_cleanly)
{
    /* One thread, parts split after every batch and labelled (the sub-tree split) every 3
     * faces they pop, run one after the other: the same allocations every run. Each
     * allocation of the kernel fails in turn: TW_E_NOMEM (or TW_OK with the one-thread bytes, where a failure is
     * absorbed), no crash, no hang, no leak (ASan). 18 x 18 cones, 9 x 9 noise. */
    enum { W = 18, H = 18 };
    uint16_t img[W * H];
    uint32_t *p1 = malloc(W * H * 4), *pk = malloc(W * H * 4);
    tw_tile_view vi = { .data = img, .stride = 2 * W, .w = W, .h = H, .channels = 1,
                        .type = TW_U16 },
                 vp = { .data = p1, .stride = 4 * W, .w = W, .h = H, .channels = 1,
                        .type = TW_U32 };

    cr_assert(p1 && pk);
    for (int noise = 0; noise < 2; noise++) {
        const size_t bytes = (size_t)(noise ? W / 2 : W) * (size_t)(noise ? H / 2 : H) * 4;
        const twi_tos_run opt = { .nthreads = 1, .split_always = true, .split_min = 1,
                                  .comp_every = 3 };
        twi_tos_run r1 = { .nthreads = 1 }, r = opt;
        long long n, nomem = 0;

        vi.w = vp.w = noise ? W / 2 : W;
        vi.h = vp.h = noise ? H / 2 : H;
        vi.stride = 2 * vi.w;
        vp.stride = 4 * vp.w;
        image(img, (int)vi.w, (int)vi.h, noise);
        vp.data = p1;
        cr_assert(eq(int, twi_omp_tos(&vi, &vp, NULL, NULL, 0, &r1), TW_OK));
        vp.data = pk;
        atomic_store(&calls, 0);
        atomic_store(&counting, true);
        cr_assert(eq(int, twi_omp_tos(&vi, &vp, NULL, NULL, 0, &r), TW_OK));
        atomic_store(&counting, false);
        n = atomic_load(&calls);
        cr_assert(eq(int, memcmp(pk, p1, bytes), 0));
        cr_assert(gt(i64, r.comp_parts, 0), "image %d: no part made by the sub-tree split",
                  noise);
        for (long long k = 0; k < n; k++) {
            tw_status st;

            r = opt;
            atomic_store(&fail_nth, k);
            st = twi_omp_tos(&vi, &vp, NULL, NULL, 0, &r);
            atomic_store(&fail_nth, -1);
            if (st == TW_OK)
                cr_assert(eq(int, memcmp(pk, p1, bytes), 0), "image %d, allocation %lld",
                          noise, k);
            else
                cr_assert(eq(int, st, TW_E_NOMEM), "image %d, allocation %lld", noise, k);
            nomem += st == TW_E_NOMEM;
        }
        cr_assert(gt(i64, nomem, n / 2), "image %d: %lld of %lld failures seen", noise, nomem,
                  n);
    }
    free(pk);
    free(p1);
}
