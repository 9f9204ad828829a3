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

/*
 * ---- keys: Dijkstra with a radix heap of (key, pixel); stale entries are skipped.
 *
 * Why a radix heap fits. Every key pushed is at least the last key popped: the markers or
 * seeds are pushed before the first pop, and a key pushed while flooding is
 * twi_watershed_step(k, lev) of the key k just popped, which is strictly larger than k. So the
 * popped keys never decrease, and a monotone priority queue does what a general one does.
 * This one is the radix heap of [Ahuja90] in its bitwise form: with `last` the last key popped
 * (0 before the first pop), an entry of key k sits in bucket 0 when k == last, else in bucket
 * b = 1 + the index of the highest bit in which k and last differ (1..64). As k > last, bit
 * b - 1 is set in k and clear in last and the higher bits agree: every key of a lower bucket
 * is smaller than every key of a higher one. A pop takes from bucket 0; when it is empty, the
 * first non-empty bucket b is emptied: its smallest key (each bucket keeps its minimum as
 * entries arrive) becomes `last` and its entries move to buckets below b (they now agree with
 * last down to bit b - 1). An entry only moves down, so
 * at most 64 times (in practice once or twice), and a push or pop costs O(1) besides, against
 * the O(log n) sift steps of the binary heap this replaced.
 *
 * Why the keys are unchanged. The keys are the fixpoint of key(p) = min over neighbours of the
 * step (the file's essay): the smallest path costs, which any correct Dijkstra order reaches.
 * Like the binary heap, the radix heap pops a smallest key held at every step; only the order
 * among equal keys may differ, and that order decides nothing (a pixel's key is final when it
 * is first popped at that key, whichever pixel of that key comes first).
 *
 * Memory: the entries of all buckets are nodes of one pool, linked through `next`; popped
 * nodes go to a free list that pushes take from first, so the pool holds at most as many nodes
 * as there were entries at once: 16 bytes an entry, as the binary heap's, grown by doubling as
 * it was (plus the 65 bucket heads).
 */
#define RH_BUCKETS 65
#define RH_NIL UINT32_MAX

typedef struct rh_node {
    uint64_t k;
    uint32_t i;    /* tile raster index */
    uint32_t next; /* next node of its bucket or of the free list; RH_NIL: none */
} rh_node;

typedef struct radix_heap {
    rh_node *pool;
    uint32_t cap, used;         /* nodes allocated, nodes ever taken (the rest never used) */
    uint32_t free;              /* head of the free list */
    uint32_t head[RH_BUCKETS];  /* head of each bucket's list */
    uint64_t min[RH_BUCKETS];   /* smallest key of bucket b > 0; UINT64_MAX when empty */
    uint64_t full;              /* bit b - 1: bucket b (1..64) is not empty */
    uint64_t last;              /* the last key popped, 0 before the first: keys held >= last */
} radix_heap;

static void
rh_init(radix_heap *h)
{
    h->pool = NULL;
    h->cap = h->used = 0;
    h->free = RH_NIL;
    for (int b = 0; b < RH_BUCKETS; b++) {
        h->head[b] = RH_NIL;
        h->min[b] = UINT64_MAX;
    }
    h->full = 0;
    h->last = 0;
}

/* The bucket of key k (k >= h->last). */
static inline int
rh_bucket(const radix_heap *h, uint64_t k)
{
    return k == h->last ? 0 : 64 - __builtin_clzll(k ^ h->last);
}

static inline void
rh_link(radix_heap *h, uint32_t node)
{
    uint64_t k = h->pool[node].k;
    int b = rh_bucket(h, k);

    h->pool[node].next = h->head[b];
    h->head[b] = node;
    if (b > 0) {
        h->full |= 1ull << (b - 1);
        if (k < h->min[b])
            h->min[b] = k;
    }
}

/* 0, or -1 when the pool cannot grow (malloc failed, or 2^32 - 1 entries at once). */
static int
rh_push(radix_heap *h, uint64_t k, uint32_t i)
{
    uint32_t node;

    if (h->free != RH_NIL) {
        node = h->free;
        h->free = h->pool[node].next;
    } else {
        if (h->used == h->cap) {
            uint32_t cap = h->cap == 0 ? 256 : h->cap > RH_NIL / 2 ? RH_NIL : 2 * h->cap;
            rh_node *p;

            if (cap == h->cap || !(p = realloc(h->pool, (size_t)cap * sizeof *p)))
                return -1;
            h->pool = p;
            h->cap = cap;
        }
        node = h->used++;
    }
    h->pool[node].k = k;
    h->pool[node].i = i;
    rh_link(h, node);
    return 0;
}

static inline bool
rh_empty(const radix_heap *h)
{
    return h->head[0] == RH_NIL && h->full == 0;
}

/* The entry of the smallest key (the heap not empty). */
static rh_node
rh_pop(radix_heap *h)
{
    uint32_t node;
    rh_node e;

    if (h->head[0] == RH_NIL) {
        int b = __builtin_ctzll(h->full) + 1;
        uint32_t list = h->head[b];

        /* the buckets below b are empty (their minima UINT64_MAX), and receive all of b */
        h->last = h->min[b];
        h->head[b] = RH_NIL;
        h->min[b] = UINT64_MAX;
        h->full &= ~(1ull << (b - 1));
        while (list != RH_NIL) {
            uint32_t next = h->pool[list].next;

            rh_link(h, list); /* to a bucket below b; the smallest key to bucket 0 */
            list = next;
        }
    }
    node = h->head[0];
    e = h->pool[node];
    h->head[0] = e.next;
    h->pool[node].next = h->free;
    h->free = node;
    return e;
}

/* Prefetches the key of pixel i and the keys, levels and flags of the rows above and below. */
static inline void
prefetch_around(const twi_watershed_tile *t, uint32_t i)
{
    int64_t w = t->w, n = w * t->h;

    __builtin_prefetch(&t->key[i]);
    __builtin_prefetch(&t->lev[i]);
    __builtin_prefetch(&t->in[i]);
    if ((int64_t)i >= w) {
        __builtin_prefetch(&t->key[i - w]);
        __builtin_prefetch(&t->lev[i - w]);
        __builtin_prefetch(&t->in[i - w]);
    }
    if ((int64_t)i + w < n) {
        __builtin_prefetch(&t->key[i + w]);
        __builtin_prefetch(&t->lev[i + w]);
        __builtin_prefetch(&t->in[i + w]);
    }
}

tw_status
twi_omp_watershed_flood(twi_watershed_tile *t, int conn, const uint32_t *seeds, int64_t n_seeds,
                        const twi_stop *stop)
{
    atomic_bool stopped = false;
    int64_t n, pops = 0;
    int nk = conn == 8 ? 8 : 4;
    radix_heap h;
    tw_status st = TW_OK;

    if (!t || t->w < 0 || t->h < 0 || (conn != 4 && conn != 8) || (seeds && n_seeds < 0))
        return TW_E_INVALID;
    rh_init(&h);
    n = (int64_t)t->w * t->h;
    if (seeds) {
        for (int64_t s = 0; s < n_seeds; s++) {
            if ((int64_t)seeds[s] >= n) {
                st = TW_E_INVALID;
                goto out;
            }
            /* an unreached seed has nothing to give (and no step from KINF is defined) */
            if (t->key[seeds[s]] == TWI_WATERSHED_KINF)
                continue;
            if (rh_push(&h, t->key[seeds[s]], seeds[s]) != 0) {
                st = TW_E_NOMEM;
                goto out;
            }
        }
    } else {
        for (int64_t i = 0; i < n; i++)
            if (t->key[i] != TWI_WATERSHED_KINF && rh_push(&h, t->key[i], (uint32_t)i) != 0) {
                st = TW_E_NOMEM;
                goto out;
            }
    }
    while (!rh_empty(&h)) {
        rh_node e = rh_pop(&h);
        int32_t x, y;

        /* The next pop is known when bucket 0 holds more: start loading its pixel's key and
         * its neighbours' rows now (they are scattered over the tile; a miss each otherwise). */
        if (h.head[0] != RH_NIL)
            prefetch_around(t, h.pool[h.head[0]].i);
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
            if (rh_push(&h, c, (uint32_t)q) != 0) {
                st = TW_E_NOMEM;
                goto out;
            }
        }
    }
out:
    free(h.pool);
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
