/* SPDX-License-Identifier: MIT */
/* tilewave tests: max-tree helpers (naive reference, random images, structural check). */
#include "twtest_maxtree.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "omp_kernels.h"
#include "twtest.h"

static uint32_t
level_at(const void *img, tw_sample_type type, size_t i)
{
    return type == TW_U16 ? ((const uint16_t *)img)[i] : ((const uint8_t *)img)[i];
}

/* qsort context: no reentrant qsort in C11, and the tests are single-threaded per process. */
static const uint32_t *sort_levels;

/* Processing order of the union-find: level descending, then raster index ascending. */
static int
cmp_process(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    uint32_t la = sort_levels[a], lb = sort_levels[b];

    if (la != lb)
        return la > lb ? -1 : 1;
    return a < b ? -1 : a > b ? 1 : 0;
}

static uint64_t
uf_root(uint64_t *uf, uint64_t x)
{
    uint64_t r = x;

    while (uf[r] != r)
        r = uf[r];
    while (uf[x] != r) {
        uint64_t nx = uf[x];

        uf[x] = r;
        x = nx;
    }
    return r;
}

void
twtest_maxtree_naive(const void *img, tw_sample_type type, int w, int h, int conn,
                     uint64_t *parent)
{
    size_t n = (size_t)w * (size_t)h, k;
    uint32_t *lv = malloc((n ? n : 1) * sizeof *lv);
    uint64_t *order = malloc((n ? n : 1) * sizeof *order);
    uint64_t *uf = malloc((n ? n : 1) * sizeof *uf);
    char *done = calloc(n ? n : 1, 1);
    static const int dx8[8] = { -1, 0, 1, -1, 1, -1, 0, 1 };
    static const int dy8[8] = { -1, -1, -1, 0, 0, 1, 1, 1 };

    cr_assert(lv && order && uf && done, "twtest_maxtree_naive: out of memory");
    for (k = 0; k < n; k++) {
        lv[k] = level_at(img, type, k);
        order[k] = k;
    }
    sort_levels = lv;
    qsort(order, n, sizeof *order, cmp_process);

    /* Algorithm 1 of [Blin22]: every merged set's root becomes a child of the new pixel. */
    for (k = 0; k < n; k++) {
        uint64_t p = order[k];
        int x = (int)(p % (uint64_t)w), y = (int)(p / (uint64_t)w);

        parent[p] = p;
        uf[p] = p;
        done[p] = 1;
        for (int d = 0; d < 8; d++) {
            int nx = x + dx8[d], ny = y + dy8[d];
            uint64_t q, r;

            if (conn == 4 && dx8[d] != 0 && dy8[d] != 0)
                continue;
            if (nx < 0 || ny < 0 || nx >= w || ny >= h)
                continue;
            q = (uint64_t)ny * (uint64_t)w + (uint64_t)nx;
            if (!done[q])
                continue;
            r = uf_root(uf, q);
            if (r != p) {
                parent[r] = p;
                uf[r] = p;
            }
        }
    }
    /* Canonicalisation, root first: a parent is final before its children are visited. */
    for (k = n; k-- > 0;) {
        uint64_t p = order[k], q = parent[p];

        if (lv[parent[q]] == lv[q])
            parent[p] = parent[q];
    }
    free(done);
    free(uf);
    free(order);
    free(lv);
}

void
twtest_maxtree_random_image(uint64_t *rng, void *img, tw_sample_type type, int w, int h, int mode)
{
    const uint32_t maxv = type == TW_U16 ? 65535u : 255u;
    size_t n = (size_t)w * (size_t)h, k;
    uint32_t *v = malloc((n ? n : 1) * sizeof *v);
    int x, y;

    cr_assert(v, "twtest_maxtree_random_image: out of memory");
    mode = ((mode % 6) + 6) % 6;
    switch (mode) {
    case 0:
        for (k = 0; k < n; k++)
            v[k] = twtest_rnd(rng, maxv + 1);
        break;
    case 1:
        for (k = 0; k < n; k++)
            v[k] = twtest_rnd(rng, 4);
        break;
    case 2: {
        uint32_t nl = 2 + twtest_rnd(rng, 4), nr = 1 + twtest_rnd(rng, 12);
        uint32_t step = maxv / nl;

        for (k = 0; k < n; k++)
            v[k] = twtest_rnd(rng, 2) * step;
        for (uint32_t r = 0; r < nr; r++) {
            int rx = (int)twtest_rnd(rng, (uint32_t)w), ry = (int)twtest_rnd(rng, (uint32_t)h);
            int rw = 1 + (int)twtest_rnd(rng, (uint32_t)w);
            int rh = 1 + (int)twtest_rnd(rng, (uint32_t)h);
            uint32_t lvl = twtest_rnd(rng, nl + 1) * step;

            for (y = ry; y < ry + rh && y < h; y++)
                for (x = rx; x < rx + rw && x < w; x++)
                    v[(size_t)y * (size_t)w + (size_t)x] = lvl;
        }
        break;
    }
    case 3: {
        /* a walk along each row, averaged with the row above: smooth with noise on top */
        int64_t cur = (int64_t)twtest_rnd(rng, maxv + 1);
        int64_t stepmax = type == TW_U16 ? 600 : 6;

        for (y = 0; y < h; y++) {
            for (x = 0; x < w; x++) {
                int64_t s;

                cur += (int64_t)twtest_rnd(rng, (uint32_t)(2 * stepmax + 1)) - stepmax;
                s = y > 0 ? (cur + (int64_t)v[(size_t)(y - 1) * (size_t)w + (size_t)x]) / 2 : cur;
                s = s < 0 ? 0 : s > (int64_t)maxv ? (int64_t)maxv : s;
                cur = s;
                v[(size_t)y * (size_t)w + (size_t)x] = (uint32_t)s;
            }
        }
        break;
    }
    case 4:
        for (y = 0; y < h; y++)
            for (x = 0; x < w; x++)
                v[(size_t)y * (size_t)w + (size_t)x] =
                    type == TW_U16 ? (twtest_rnd(rng, 4096) + (uint32_t)(x + y) * 7u) % 65536u
                                   : twtest_rnd(rng, 256);
        break;
    default:
        for (k = 0; k < n; k++)
            v[k] = twtest_rnd(rng, 2) ? maxv : 0;
        break;
    }
    for (k = 0; k < n; k++) {
        if (type == TW_U16)
            ((uint16_t *)img)[k] = (uint16_t)v[k];
        else
            ((uint8_t *)img)[k] = (uint8_t)v[k];
    }
    free(v);
}

const char *
twtest_maxtree_check(const void *img, tw_sample_type type, int w, int h, int conn,
                     const uint64_t *parent)
{
    size_t n = (size_t)w * (size_t)h, k, roots = 0;
    uint32_t minv = UINT32_MAX;

    (void)conn; /* the structure does not depend on it; the semantics do */
    for (k = 0; k < n; k++) {
        uint32_t v = level_at(img, type, k);

        if (v < minv)
            minv = v;
    }
    for (k = 0; k < n; k++) {
        uint64_t q = parent[k];
        uint32_t fp = level_at(img, type, k), fq;

        if (q >= n)
            return "parent index out of range";
        fq = level_at(img, type, q);
        if (q == k) {
            roots++;
            if (fp != minv)
                return "root not at the minimum level";
            continue;
        }
        if (fq > fp)
            return "f(parent) > f";
        if (fq == fp && q < k)
            return "parent of the same level has a smaller index (not the canonical pixel)";
        /* the parent must be canonical: the root or a pixel whose parent has a lower level */
        if (parent[q] != q && level_at(img, type, parent[q]) == fq)
            return "parent is not canonical";
    }
    if (n && roots != 1)
        return "not exactly one root";
    return NULL;
}

int32_t *
twtest_maxtree_cuts(uint64_t *rng, int32_t len, int32_t t, int64_t *k)
{
    int32_t *c = malloc(((size_t)len + 1) * sizeof *c);
    int64_t m = 0;
    int scheme = t > 0 ? 0 : (int)twtest_rnd(rng, 5);

    cr_assert(c != NULL);
    c[m++] = 0;
    if (scheme == 0 && t <= 0)
        t = 1 + (int32_t)twtest_rnd(rng, (uint32_t)len);
    switch (scheme) {
    case 0: /* regular, the last tile smaller */
        for (int32_t x = t; x < len; x += t)
            c[m++] = x;
        break;
    case 1: /* random */
    case 2:
        for (int32_t x = 1; x < len; x++)
            if (twtest_rnd(rng, scheme == 1 ? 3 : 9) == 0)
                c[m++] = x;
        break;
    case 3: /* one-pixel tiles */
        for (int32_t x = 1; x < len; x++)
            c[m++] = x;
        break;
    default: /* one tile */
        break;
    }
    c[m] = len;
    *k = m;
    return c;
}

twtest_maxtree_grid
twtest_maxtree_grid_make(uint64_t *rng, const void *img, int32_t W, int32_t H, tw_sample_type type,
                    int conn, int32_t tw, int32_t th, int extra_one_in)
{
    const size_t ss = type == TW_U16 ? 2 : 1;
    const unsigned char *src = img;
    int64_t kx, ky;
    int32_t *cx = twtest_maxtree_cuts(rng, W, tw, &kx), *cy = twtest_maxtree_cuts(rng, H, th, &ky);
    twtest_maxtree_grid g = {kx, ky, NULL, NULL, type == TW_U16 ? 65535u : 255u, (int64_t)W * H};

    g.bt = calloc((size_t)(kx * ky), sizeof *g.bt);
    g.bp = calloc((size_t)(kx * ky), sizeof *g.bp);
    cr_assert(g.bt && g.bp);
    for (int64_t t = 0; t < kx * ky; t++) {
        const int64_t i = t % kx, j = t / kx;
        const int32_t x0 = cx[i], y0 = cy[j], w = cx[i + 1] - x0, h = cy[j + 1] - y0;
        unsigned char *px = malloc((size_t)w * (size_t)h * ss);
        uint32_t *par = malloc((size_t)w * (size_t)h * 4);
        unsigned sides = (j > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_TOP) : 0) |
                         (j + 1 < ky ? TWI_MAXTREE_SIDE(TWI_MAXTREE_BOTTOM) : 0) |
                         (i > 0 ? TWI_MAXTREE_SIDE(TWI_MAXTREE_LEFT) : 0) |
                         (i + 1 < kx ? TWI_MAXTREE_SIDE(TWI_MAXTREE_RIGHT) : 0);

        cr_assert(px && par);
        for (int32_t y = 0; y < h; y++)
            memcpy(px + (size_t)y * (size_t)w * ss,
                   src + ((size_t)(y0 + y) * (size_t)W + (size_t)x0) * ss, (size_t)w * ss);
        tw_tile_view in = {px, (int64_t)((size_t)w * ss), w, h, 1, type, 0, 0};
        tw_tile_view pv = {par, (int64_t)w * 4, w, h, 1, TW_U32, 0, 0};

        if (kx * ky == 1)
            sides = TWI_MAXTREE_SIDE(twtest_rnd(rng, 4));
        if (extra_one_in > 0 && twtest_rnd(rng, (uint32_t)extra_one_in) == 0)
            sides |= twtest_rnd(rng, 16);
        cr_assert(twi_omp_maxtree(&in, conn, &pv, 1) == TW_OK);
        cr_assert(twi_maxtree_border_extract(&in, &pv, sides, &g.bt[t]) == TW_OK);
        g.bp[t] = &g.bt[t];
        free(px);
        free(par);
    }
    free(cx);
    free(cy);
    return g;
}

void
twtest_maxtree_grid_free(twtest_maxtree_grid *g)
{
    for (int64_t t = 0; t < g->tx * g->ty; t++)
        twi_maxtree_border_free(&g->bt[t]);
    free(g->bt);
    free(g->bp);
    memset(g, 0, sizeof *g);
}

/* A natural-like image: smooth waves at four scales (blobs, ridges), a gentle slope and fine
 * noise, like a stained tissue's gray levels; over the type's whole range. */
void
twtest_maxtree_natural_image(uint64_t *rng, void *img, tw_sample_type t, int w, int h)
{
    const double top = t == TW_U16 ? 65535.0 : 255.0;
    double fx[8], fy[8], ph[8], amp[8];

    for (int k = 0; k < 8; k++) {
        double scale = 4.0 * (double)(1 << (k / 2)); /* wavelengths w/4 .. w/32 */

        fx[k] = 2 * M_PI * scale * ((double)twtest_rnd(rng, 1000) / 1000.0 - 0.5) / w;
        fy[k] = 2 * M_PI * scale * ((double)twtest_rnd(rng, 1000) / 1000.0 - 0.5) / h;
        ph[k] = 2 * M_PI * (double)twtest_rnd(rng, 1000) / 1000.0;
        amp[k] = 1.0 / (1 + k / 2);
    }
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            double v = 0.3 * x / w;

            for (int k = 0; k < 8; k++)
                v += amp[k] * sin(fx[k] * x + fy[k] * y + ph[k]);
            v = (v + 3.5) / 7.3 + 0.03 * ((double)twtest_rnd(rng, 1001) / 1000.0 - 0.5);
            v = v < 0 ? 0 : v > 1 ? 1 : v;
            if (t == TW_U16)
                ((uint16_t *)img)[(size_t)y * (size_t)w + (size_t)x] = (uint16_t)(v * top);
            else
                ((uint8_t *)img)[(size_t)y * (size_t)w + (size_t)x] = (uint8_t)(v * top);
        }
    }
}
