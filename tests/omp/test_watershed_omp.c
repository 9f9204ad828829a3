/* SPDX-License-Identifier: MIT */
/* tilewave tests: the watershed's tile flood (twi_omp_watershed_flood, a radix heap) against a
 * naive label-correcting Bellman-Ford of the same keys, on the queue's edge cases. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "omp_kernels.h"
#include "twtest.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t
rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A tile of w x h and its arrays (keys KINF, labels unused). */
typedef struct tile {
    twi_watershed_tile k;
    uint32_t *lev;
    uint8_t *in;
} tile;

static void
tile_init(tile *t, int32_t w, int32_t h)
{
    size_t n = (size_t)w * (size_t)h;

    t->lev = calloc(n ? n : 1, sizeof *t->lev);
    t->in = malloc(n ? n : 1);
    memset(t->in, 1, n ? n : 1);
    t->k = (twi_watershed_tile){w, h, t->lev, t->in, malloc((n ? n : 1) * sizeof(uint64_t)),
                                NULL, NULL};
    for (size_t i = 0; i < n; i++)
        t->k.key[i] = TWI_WATERSHED_KINF;
}

static void
tile_fini(tile *t)
{
    free(t->lev);
    free(t->in);
    free(t->k.key);
}

/* The keys' fixpoint from the keys in `key` (lowered in place): a FIFO worklist of every
 * pixel that is relaxed again whenever its key drops (Bellman-Ford-Moore: no priority order,
 * so it shares nothing with the flood's queue but the step). */
static void
naive_keys(const tile *t, int conn, uint64_t *key)
{
    int64_t n = (int64_t)t->k.w * t->k.h, head = 0, len = 0;
    int nk = conn == 8 ? 8 : 4;
    uint32_t *q = malloc((size_t)(n ? n : 1) * sizeof *q);
    uint8_t *inq = calloc((size_t)(n ? n : 1), 1);

    for (int64_t i = 0; i < n; i++)
        if (key[i] != TWI_WATERSHED_KINF) {
            q[len++] = (uint32_t)i;
            inq[i] = 1;
        }
    while (len > 0) {
        uint32_t p = q[head];
        int32_t x = (int32_t)(p % (uint32_t)t->k.w), y = (int32_t)(p / (uint32_t)t->k.w);

        head = head + 1 == n ? 0 : head + 1;
        len--;
        inq[p] = 0;
        for (int k = 0; k < nk; k++) {
            int32_t qx = x + twi_watershed_dx[k], qy = y + twi_watershed_dy[k];
            int64_t s;
            uint64_t c;

            if (qx < 0 || qy < 0 || qx >= t->k.w || qy >= t->k.h)
                continue;
            s = (int64_t)qy * t->k.w + qx;
            if (!t->in[s] || (c = twi_watershed_step(key[p], t->lev[s])) >= key[s])
                continue;
            key[s] = c;
            if (!inq[s]) {
                inq[s] = 1;
                q[(head + len++) % n] = (uint32_t)s;
            }
        }
    }
    free(q);
    free(inq);
}

/* Floods t from its keys (seeds NULL: every finite key) and compares with the naive fixpoint
 * of the same start; returns the number of finite keys. */
static int64_t
check_flood(tile *t, int conn, const uint32_t *seeds, int64_t n_seeds)
{
    int64_t n = (int64_t)t->k.w * t->k.h, reached = 0;
    uint64_t *want = malloc((size_t)(n ? n : 1) * sizeof *want);

    memcpy(want, t->k.key, (size_t)n * sizeof *want);
    naive_keys(t, conn, want);
    cr_assert(eq(int, twi_omp_watershed_flood(&t->k, conn, seeds, n_seeds, NULL), TW_OK));
    for (int64_t i = 0; i < n; i++) {
        if (t->k.key[i] != want[i])
            cr_fatal("%dx%d conn %d: key of pixel %lld is %#llx, want %#llx", t->k.w, t->k.h,
                     conn, (long long)i, (unsigned long long)t->k.key[i],
                     (unsigned long long)want[i]);
        reached += want[i] != TWI_WATERSHED_KINF;
    }
    free(want);
    return reached;
}

/* Markers: `m` random pixels inside the mask at (lev, 0). */
static void
put_markers(tile *t, int m)
{
    int64_t n = (int64_t)t->k.w * t->k.h;

    for (int j = 0; j < m && n > 0; j++) {
        int64_t i = (int64_t)(rnd() % (uint64_t)n);

        if (t->in[i])
            t->k.key[i] = (uint64_t)t->lev[i] << 32;
    }
}

/* Levels of the kinds whose keys stress the queue: random u32 (keys differing in the high
 * bits, bit 63 set), two levels (wide plateaus: keys differing only in the low 32 bits), all
 * equal (one plateau: many equal keys), near UINT32_MAX and 0 (the extreme keys). */
static uint32_t
level(int kind, int32_t x, int32_t y)
{
    switch (kind) {
    case 0: return (uint32_t)rnd();
    case 1: return (uint32_t)(rnd() % 2u);
    case 2: return 7u;
    case 3: return UINT32_MAX - (uint32_t)(rnd() % 3u);
    case 4: return 0u;
    default: return (uint32_t)((x / 5 + y / 3) % 4); /* terraces */
    }
}

/* Full floods: random tiles, every kind of levels, conn 4 and 8, with and without a mask. */
Test(watershed_omp, flood_matches_naive_keys_on_random_tiles)
{
    for (int c = 0; c < 240; c++) {
        int32_t w = 1 + (int32_t)(rnd() % 70), h = 1 + (int32_t)(rnd() % 50);
        int kind = c % 6, conn = (c / 6) % 2 ? 8 : 4;
        tile t;

        tile_init(&t, w, h);
        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++) {
                t.lev[y * w + x] = level(kind, x, y);
                if ((c / 12) % 2)
                    t.in[y * w + x] = rnd() % 5 != 0;
            }
        put_markers(&t, 1 + (int)(rnd() % 6));
        check_flood(&t, conn, NULL, 0);
        tile_fini(&t);
    }
}

/* One plateau walked by a one-pixel serpentine: tens of thousands of keys (L, 1), (L, 2), ...
 * that differ only in their low bits, each pop pushing the next, and every bucket of the low
 * 16 bits emptied and refilled on the way; then the same with the plateau above a lower
 * marker so that every key is a step up plus the distance. */
Test(watershed_omp, flood_walks_a_long_plateau)
{
    int32_t w = 257, h = 255;

    for (int raise = 0; raise < 2; raise++) {
        tile t;
        int64_t got;

        tile_init(&t, w, h);
        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++) {
                /* rows of odd y are walls but for one gap, alternately at the right and left */
                bool wall = y % 2 == 1 && x != ((y / 2) % 2 ? 0 : w - 1);

                t.in[y * w + x] = !wall;
                t.lev[y * w + x] = 1000u;
            }
        if (raise)
            t.lev[0] = 3u;
        t.k.key[0] = (uint64_t)t.lev[0] << 32;
        got = check_flood(&t, 4, NULL, 0);
        cr_assert(eq(i64, got, (int64_t)w * ((h + 1) / 2) + h / 2));
        /* the serpentine's far end (the last row is entered at the gap above it) is as many
         * steps from the marker as the path has pixels but one */
        cr_assert(eq(u64, t.k.key[(int64_t)(h - 1) * w + (((h - 2) / 2) % 2 ? w - 1 : 0)],
                     ((uint64_t)1000u << 32) | (uint64_t)(got - 1)));
        tile_fini(&t);
    }
}

/* Seeded floods as the border rounds run them: a tile at its fixpoint, then keys lowered at
 * random pixels (as from a neighbour tile) and given as seeds out of raster order, some twice,
 * some not lowered at all, some outside the mask. */
Test(watershed_omp, seeded_flood_matches_naive_keys)
{
    for (int c = 0; c < 160; c++) {
        int32_t w = 2 + (int32_t)(rnd() % 60), h = 2 + (int32_t)(rnd() % 40);
        int kind = c % 6, conn = (c / 6) % 2 ? 8 : 4, ns = 1 + (int)(rnd() % 12);
        int64_t n = (int64_t)w * h;
        uint32_t seeds[40];
        int64_t m = 0;
        tile t;

        tile_init(&t, w, h);
        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++) {
                t.lev[y * w + x] = level(kind, x, y);
                t.in[y * w + x] = rnd() % 7 != 0;
            }
        put_markers(&t, (int)(rnd() % 3));
        check_flood(&t, conn, NULL, 0);
        for (int s = 0; s < ns; s++) {
            uint32_t i = (uint32_t)(rnd() % (uint64_t)n);
            uint64_t low = ((uint64_t)t.lev[i] << 32) | (1u + rnd() % 4u);

            if (t.in[i] && low < t.k.key[i] && rnd() % 4 != 0)
                t.k.key[i] = low;
            seeds[m++] = i;
            if (rnd() % 3 == 0)
                seeds[m++] = i;
        }
        for (int64_t s = m - 1; s > 0; s--) {
            int64_t r = (int64_t)(rnd() % (uint64_t)(s + 1));
            uint32_t tmp = seeds[s];

            seeds[s] = seeds[r];
            seeds[r] = tmp;
        }
        /* the naive fixpoint starts from every key; the flood from the seeds alone, which is
         * the same because the rest of the tile was at its fixpoint */
        check_flood(&t, conn, seeds, m);
        tile_fini(&t);
    }
}

/* Markers given as seeds in reverse raster order, with duplicates and with the keys 0 (level
 * 0: the key the queue starts its comparisons from) and near KINF (level UINT32_MAX). */
Test(watershed_omp, seeds_out_of_order_and_extreme_keys)
{
    int32_t w = 40, h = 30;
    uint32_t seeds[4] = {(uint32_t)(w * h - 1), 0u, (uint32_t)(w * h - 1), 615u};
    tile t;

    tile_init(&t, w, h);
    for (int32_t i = 0; i < w * h; i++)
        t.lev[i] = i % 3 == 0 ? UINT32_MAX : (uint32_t)(rnd() % 4u);
    t.lev[0] = 0u;
    t.lev[w * h - 1] = UINT32_MAX;
    t.k.key[0] = 0u;
    t.k.key[w * h - 1] = (uint64_t)UINT32_MAX << 32;
    t.k.key[615] = (uint64_t)t.lev[615] << 32;
    cr_assert(eq(i64, check_flood(&t, 8, seeds, 4), (int64_t)w * h));
    tile_fini(&t);
}

/* The contract's other results: a seed outside the tile and a bad connectivity are
 * TW_E_INVALID, an empty tile and no seeds are TW_OK, and a stop hook that says stop ends a
 * flood of more than 2^16 pixels with TW_E_CANCELED. */
static bool
always_stop(const void *user)
{
    (void)user;
    return true;
}

Test(watershed_omp, flood_contract)
{
    twi_stop stop = {always_stop, NULL};
    uint32_t bad = 12;
    tile t;

    tile_init(&t, 4, 3);
    cr_assert(eq(int, twi_omp_watershed_flood(&t.k, 4, &bad, 1, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_watershed_flood(&t.k, 6, NULL, 0, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_watershed_flood(NULL, 4, NULL, 0, NULL), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_watershed_flood(&t.k, 4, &bad, 0, NULL), TW_OK));
    cr_assert(eq(int, twi_omp_watershed_flood(&t.k, 8, NULL, 0, NULL), TW_OK));
    tile_fini(&t);
    tile_init(&t, 0, 0);
    cr_assert(eq(int, twi_omp_watershed_flood(&t.k, 8, NULL, 0, NULL), TW_OK));
    tile_fini(&t);
    tile_init(&t, 300, 300);
    t.k.key[0] = 0u;
    cr_assert(eq(int, twi_omp_watershed_flood(&t.k, 4, NULL, 0, &stop), TW_E_CANCELED));
    tile_fini(&t);
}
