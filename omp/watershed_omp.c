/* SPDX-License-Identifier: MIT */
/* tilewave: CPU kernels of the marker-controlled watershed inside one tile (ops/watershed.c). */
/*
 * The watershed is computed in two fixpoints, each a monotone "min" propagation, which is why
 * the order of the updates (and so the tiling, the worker count) never changes the result:
 *
 *   1. keys: key(p) = min over neighbours q of twi_watershed_step(key(q), lev(p)), markers at
 *      (lev, 0). The step is monotone and strictly increasing, so the smallest path cost is the
 *      unique fixpoint (a shortest-path problem over an ordered path algebra); inside a tile
 *      Dijkstra computes it, across tiles border propagation lowers keys until stable.
 *   2. labels, once every key is final: lab(p) = min over the best predecessors of lab(q),
 *      markers fixed. The best-predecessor relation only goes to strictly smaller keys (a DAG
 *      rooted at the markers), so again the fixpoint is unique and any order reaches it.
 *
 * Both kernels here work inside one tile; what crosses tile borders is the driver's business.
 */
#include <stdlib.h>
#include <string.h>

#include "omp_kernels.h"
#include "omp_stop.h"

/* Pixels between two cancel checks of a tile kernel. */
#define STOP_EVERY 65536

/* u32 with the order of the floats (IEEE 754 total order on non-NaN; -0 as +0). */
static inline uint32_t
f32_order(float f)
{
    uint32_t b;

    if (f == 0.0f)
        f = 0.0f;
    memcpy(&b, &f, sizeof b);
    return (b & 0x80000000u) ? ~b : b | 0x80000000u;
}

tw_status
twi_omp_watershed_levels(const tw_tile_view *img, bool invert, uint32_t *lev, int64_t *nan)
{
    uint32_t flip = invert ? UINT32_MAX : 0u;
    size_t ss;

    if (!img || !lev)
        return TW_E_INVALID;
    ss = tw_sample_size(img->type);
    if (img->channels != 1 || ss == 0 ||
        !twi_view_fits(img, (size_t)img->w * ss, ss))
        return TW_E_INVALID;
    for (int32_t y = 0; y < img->h; y++) {
        const char *row = (const char *)img->data + (int64_t)y * img->stride;
        uint32_t *o = lev + (int64_t)y * img->w;

        switch (img->type) {
        case TW_U8:
            for (int32_t x = 0; x < img->w; x++)
                o[x] = ((const uint8_t *)row)[x] ^ flip;
            break;
        case TW_U16:
            for (int32_t x = 0; x < img->w; x++)
                o[x] = ((const uint16_t *)(const void *)row)[x] ^ flip;
            break;
        case TW_F32:
            for (int32_t x = 0; x < img->w; x++) {
                float f = ((const float *)(const void *)row)[x];

                if (f != f) {
                    if (nan)
                        *nan = (int64_t)y * img->w + x;
                    return TW_E_INVALID;
                }
                o[x] = f32_order(f) ^ flip;
            }
            break;
        default: return TW_E_INVALID;
        }
    }
    return TW_OK;
}

/* ---- keys: Dijkstra with a binary min-heap of (key, pixel); stale entries are skipped. */

typedef struct heap_ent {
    uint64_t k;
    uint32_t i;
} heap_ent;

typedef struct heap {
    heap_ent *a;
    int64_t n, cap;
} heap;

static int
heap_push(heap *h, uint64_t k, uint32_t i)
{
    int64_t c;

    if (h->n == h->cap) {
        int64_t cap = h->cap ? 2 * h->cap : 256;
        heap_ent *a = realloc(h->a, (size_t)cap * sizeof *a);

        if (!a)
            return -1;
        h->a = a;
        h->cap = cap;
    }
    c = h->n++;
    while (c > 0) {
        int64_t p = (c - 1) / 2;

        if (h->a[p].k <= k)
            break;
        h->a[c] = h->a[p];
        c = p;
    }
    h->a[c].k = k;
    h->a[c].i = i;
    return 0;
}

static heap_ent
heap_pop(heap *h)
{
    heap_ent top = h->a[0], last = h->a[--h->n];
    int64_t c = 0;

    for (;;) {
        int64_t l = 2 * c + 1;

        if (l >= h->n)
            break;
        if (l + 1 < h->n && h->a[l + 1].k < h->a[l].k)
            l++;
        if (h->a[l].k >= last.k)
            break;
        h->a[c] = h->a[l];
        c = l;
    }
    if (h->n > 0)
        h->a[c] = last;
    return top;
}

tw_status
twi_omp_watershed_flood(twi_watershed_tile *t, int conn, const uint32_t *seeds, int64_t n_seeds,
                        const twi_stop *stop)
{
    atomic_bool stopped = false;
    int64_t n, pops = 0;
    int nk = conn == 8 ? 8 : 4;
    heap h = {NULL, 0, 0};
    tw_status st = TW_OK;

    if (!t || t->w < 0 || t->h < 0 || (conn != 4 && conn != 8) || (seeds && n_seeds < 0))
        return TW_E_INVALID;
    n = (int64_t)t->w * t->h;
    if (seeds) {
        for (int64_t s = 0; s < n_seeds; s++) {
            if ((int64_t)seeds[s] >= n) {
                st = TW_E_INVALID;
                goto out;
            }
            if (heap_push(&h, t->key[seeds[s]], seeds[s]) != 0) {
                st = TW_E_NOMEM;
                goto out;
            }
        }
    } else {
        for (int64_t i = 0; i < n; i++)
            if (t->key[i] != TWI_WATERSHED_KINF && heap_push(&h, t->key[i], (uint32_t)i) != 0) {
                st = TW_E_NOMEM;
                goto out;
            }
    }
    while (h.n > 0) {
        heap_ent e = heap_pop(&h);
        int32_t x, y;

        if (e.k != t->key[e.i])
            continue; /* lowered since it was pushed */
        if (++pops % STOP_EVERY == 0 && twi_stop_now(stop, &stopped)) {
            st = TW_E_CANCELED;
            goto out;
        }
        x = (int32_t)(e.i % (uint32_t)t->w);
        y = (int32_t)(e.i / (uint32_t)t->w);
        for (int k = 0; k < nk; k++) {
            int32_t qx = x + twi_watershed_dx[k], qy = y + twi_watershed_dy[k];
            int64_t q;
            uint64_t c;

            if (qx < 0 || qy < 0 || qx >= t->w || qy >= t->h)
                continue;
            q = (int64_t)qy * t->w + qx;
            if (!t->in[q] || (c = twi_watershed_step(e.k, t->lev[q])) >= t->key[q])
                continue;
            t->key[q] = c;
            if (heap_push(&h, c, (uint32_t)q) != 0) {
                st = TW_E_NOMEM;
                goto out;
            }
        }
    }
out:
    free(h.a);
    return st;
}

/* ---- labels */

void
twi_omp_watershed_preds(twi_watershed_tile *t, int conn, const twi_watershed_ring *ring)
{
    int nk = conn == 8 ? 8 : 4;

    for (int32_t y = 0; y < t->h; y++) {
        for (int32_t x = 0; x < t->w; x++) {
            int64_t p = (int64_t)y * t->w + x;
            uint64_t kp = t->key[p], best = TWI_WATERSHED_KINF, kq[8];
            unsigned bits = 0;

            t->pred[p] = 0;
            if (kp == TWI_WATERSHED_KINF || (kp & 0xffffffffu) == 0)
                continue; /* unreached, masked out, or a marker */
            for (int k = 0; k < nk; k++) {
                int32_t qx = x + twi_watershed_dx[k], qy = y + twi_watershed_dy[k];

                if (qx < 0 || qy < 0 || qx >= t->w || qy >= t->h)
                    kq[k] = ring->key[twi_watershed_ring_at(t->w, t->h, qx, qy)];
                else
                    kq[k] = t->key[(int64_t)qy * t->w + qx];
                if (kq[k] == TWI_WATERSHED_KINF || twi_watershed_step(kq[k], t->lev[p]) != kp)
                    kq[k] = TWI_WATERSHED_KINF;
                else if (kq[k] < best)
                    best = kq[k];
            }
            for (int k = 0; k < nk; k++)
                if (kq[k] == best && best != TWI_WATERSHED_KINF)
                    bits |= 1u << k;
            t->pred[p] = (uint8_t)bits;
        }
    }
}

tw_status
twi_omp_watershed_label(twi_watershed_tile *t, int conn, const uint32_t *seeds, int64_t n_seeds,
                        const twi_stop *stop)
{
    atomic_bool stopped = false;
    int64_t n = (int64_t)t->w * t->h, head = 0, tail = 0, len = 0, pops = 0;
    tw_status st = TW_OK;
    int nk = conn == 8 ? 8 : 4;
    uint32_t *q = NULL;
    uint8_t *inq = NULL;

    if (n == 0)
        return TW_OK;
    if (!(q = malloc((size_t)n * sizeof *q)) || !(inq = calloc((size_t)n, 1))) {
        free(q);
        return TW_E_NOMEM;
    }
    /* A circular FIFO of at most n pixels: each is queued at most once at a time. */
#define PUSH(i)                                                                                \
    do {                                                                                       \
        if (!inq[i]) {                                                                         \
            inq[i] = 1;                                                                        \
            q[tail] = (uint32_t)(i);                                                           \
            tail = tail + 1 == n ? 0 : tail + 1;                                               \
            len++;                                                                             \
        }                                                                                      \
    } while (0)
    if (seeds) {
        for (int64_t s = 0; s < n_seeds; s++)
            if ((int64_t)seeds[s] < n)
                PUSH(seeds[s]);
    } else {
        for (int64_t i = 0; i < n; i++)
            if (t->lab[i] != TWI_WATERSHED_LINF)
                PUSH(i);
    }
    while (len > 0) {
        uint32_t p = q[head];
        int32_t x = (int32_t)(p % (uint32_t)t->w), y = (int32_t)(p / (uint32_t)t->w);

        head = head + 1 == n ? 0 : head + 1;
        len--;
        inq[p] = 0;
        if (++pops % STOP_EVERY == 0 && twi_stop_now(stop, &stopped)) {
            st = TW_E_CANCELED;
            break;
        }
        /* Successors: neighbours s for which p is a best predecessor (s sees p as k ^ 1). */
        for (int k = 0; k < nk; k++) {
            int32_t sx = x + twi_watershed_dx[k], sy = y + twi_watershed_dy[k];
            int64_t s;

            if (sx < 0 || sy < 0 || sx >= t->w || sy >= t->h)
                continue;
            s = (int64_t)sy * t->w + sx;
            if (!(t->pred[s] & (1u << (k ^ 1))) || t->lab[p] >= t->lab[s])
                continue;
            t->lab[s] = t->lab[p];
            PUSH(s);
        }
    }
#undef PUSH
    free(q);
    free(inq);
    return st;
}

void
twi_omp_watershed_output(const twi_watershed_tile *t, int conn, const twi_watershed_ring *ring,
                         bool lines,
                         tw_tile_view *out)
{
    int nk = conn == 8 ? 8 : 4;

    for (int32_t y = 0; y < t->h; y++) {
        uint32_t *o = (uint32_t *)(void *)((char *)out->data + (int64_t)y * out->stride);

        for (int32_t x = 0; x < t->w; x++) {
            int64_t p = (int64_t)y * t->w + x;
            uint32_t lp = t->lab[p];
            uint64_t kp = t->key[p];

            o[x] = lp == TWI_WATERSHED_LINF ? 0u : lp;
            if (!lines || lp == TWI_WATERSHED_LINF)
                continue;
            for (int k = 0; k < nk; k++) {
                int32_t qx = x + twi_watershed_dx[k], qy = y + twi_watershed_dy[k];
                uint64_t kq;
                uint32_t lq;

                if (qx < 0 || qy < 0 || qx >= t->w || qy >= t->h) {
                    int64_t r = twi_watershed_ring_at(t->w, t->h, qx, qy);

                    kq = ring->key[r];
                    lq = ring->lab[r];
                } else {
                    kq = t->key[(int64_t)qy * t->w + qx];
                    lq = t->lab[(int64_t)qy * t->w + qx];
                }
                if (lq != TWI_WATERSHED_LINF && lq != lp && (kq < kp || (kq == kp && lq < lp))) {
                    o[x] = 0;
                    break;
                }
            }
        }
    }
}

/* ---- the tile's inputs (ops/watershed.c's load) */

void
twi_omp_watershed_mask(const tw_tile_view *v, uint8_t *in)
{
    for (int32_t y = 0; y < v->h; y++) {
        const char *row = (const char *)v->data + (int64_t)y * v->stride;
        uint8_t *o = in + (int64_t)y * v->w;

        for (int32_t x = 0; x < v->w; x++)
            o[x] = v->type == TW_U8 ? ((const uint8_t *)row)[x] != 0
                                    : ((const uint16_t *)(const void *)row)[x] != 0;
    }
}

int64_t
twi_omp_watershed_markers(twi_watershed_tile *k, const tw_tile_view *v)
{
    int64_t bad = -1;

    for (int32_t y = 0; y < v->h; y++) {
        const char *row = (const char *)v->data + (int64_t)y * v->stride;

        for (int32_t x = 0; x < v->w; x++) {
            int64_t i = (int64_t)y * v->w + x;
            uint32_t l = v->type == TW_U8    ? ((const uint8_t *)row)[x]
                         : v->type == TW_U16 ? ((const uint16_t *)(const void *)row)[x]
                                             : ((const uint32_t *)(const void *)row)[x];

            if (l == TWI_WATERSHED_LINF) {
                if (bad < 0)
                    bad = i;
                l = 0;
            }
            if (l != 0 && k->in[i]) {
                k->lab[i] = l;
                k->key[i] = (uint64_t)k->lev[i] << 32;
            } else {
                k->lab[i] = TWI_WATERSHED_LINF;
                k->key[i] = TWI_WATERSHED_KINF;
            }
        }
    }
    return bad;
}

/* ---- across tiles (ops/watershed.c's label rings and BP) */

/* The tile holding image pixel (gx, gy), and the pixel's raster index in it. */
static inline twi_watershed_tile *
grid_at(const twi_watershed_grid *g, int64_t gx, int64_t gy, int64_t *i)
{
    int64_t tx = gx / g->tw, ty = gy / g->th;
    twi_watershed_tile *u = g->tiles[ty * g->tiles_x + tx];

    *i = (gy - ty * g->th) * u->w + (gx - tx * g->tw);
    return u;
}

void
twi_omp_watershed_fill_ring(const twi_watershed_grid *g, int64_t tile, uint64_t *key,
                            uint32_t *lab)
{
    const twi_watershed_tile *t = g->tiles[tile];
    int64_t x0 = (tile % g->tiles_x) * g->tw, y0 = (tile / g->tiles_x) * g->th;
    int64_t len = 2 * ((int64_t)t->w + 2) + 2 * (int64_t)t->h;

    for (int64_t r = 0; r < len; r++) {
        int32_t x, y;
        int64_t gx, gy;

        if (r < 2 * ((int64_t)t->w + 2)) {
            x = (int32_t)(r % (t->w + 2)) - 1;
            y = r < t->w + 2 ? -1 : t->h;
        } else {
            int64_t c = r - 2 * ((int64_t)t->w + 2);

            x = c < t->h ? -1 : t->w;
            y = (int32_t)(c % t->h);
        }
        gx = x0 + x;
        gy = y0 + y;
        if (gx < 0 || gy < 0 || gx >= g->W || gy >= g->H) {
            key[r] = TWI_WATERSHED_KINF;
            if (lab)
                lab[r] = TWI_WATERSHED_LINF;
        } else {
            int64_t i;
            const twi_watershed_tile *u = grid_at(g, gx, gy, &i);

            key[r] = u->key[i];
            if (lab)
                lab[r] = u->lab[i];
        }
    }
}

tw_status
twi_omp_watershed_pull(const twi_watershed_grid *g, int64_t tile, bool labels, int conn,
                       tw_status (*seed)(void *arg, uint32_t idx), void *arg)
{
    twi_watershed_tile *b = g->tiles[tile];
    int64_t bx = (tile % g->tiles_x) * g->tw, by = (tile / g->tiles_x) * g->th;
    int nk = conn == 8 ? 8 : 4;
    tw_status st = TW_OK;

    for (int32_t y = 0; y < b->h && st == TW_OK; y++) {
        bool edge_row = y == 0 || y == b->h - 1;
        int32_t step = edge_row || b->w == 1 ? 1 : b->w - 1;

        for (int32_t x = 0; x < b->w && st == TW_OK; x += step) {
            int64_t q = (int64_t)y * b->w + x;
            bool lowered = false;

            if (!b->in[q])
                continue;
            for (int k = 0; k < nk; k++) {
                int64_t gx = bx + x + twi_watershed_dx[k], gy = by + y + twi_watershed_dy[k], p;
                const twi_watershed_tile *a;

                if (gx < 0 || gy < 0 || gx >= g->W || gy >= g->H ||
                    (gx >= bx && gx < bx + b->w && gy >= by && gy < by + b->h))
                    continue;
                a = grid_at(g, gx, gy, &p);
                if (!labels) {
                    uint64_t c;

                    if (a->key[p] == TWI_WATERSHED_KINF ||
                        (c = twi_watershed_step(a->key[p], b->lev[q])) >= b->key[q])
                        continue;
                    b->key[q] = c;
                } else {
                    if (!(b->pred[q] & (1u << k)) || a->lab[p] >= b->lab[q])
                        continue;
                    b->lab[q] = a->lab[p];
                }
                lowered = true;
            }
            if (lowered)
                st = seed(arg, (uint32_t)q);
        }
    }
    return st;
}
