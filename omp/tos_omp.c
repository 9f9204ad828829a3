/* SPDX-License-Identifier: MIT */
/* tilewave: tree of shapes on the CPU ([deVries24]): sort into F_ord, un-interpolate, filter. */
/* Why one file: the tree of shapes is one pipeline over one face grid (the image, the queue,
 * the sort, un-interpolation, areas and the grain filter, [deVries24]); each stage reads the
 * grid layout and the sort's private structs defined here. */

/*
 * What this computes. The tree of shapes of an 8- or 16-bit image as Géraud et al. (ISMM
 * 2013) compute it and Higra's component_tree_tree_of_shapes_image2d (padding "mean") gives
 * it: the image is immersed in the Khalimsky grid as a plain map, every face holding the span
 * [min, max] of the pixels around it (a pixel: its level; an edge between two pixels: their
 * span; a vertex between four: theirs), surrounded by an exterior at level m = the floor of
 * the mean of the image's border pixels. A propagation from the exterior orders the faces so
 * that every shape (a saturated connected component of a strict level cut) is visited before
 * the shapes inside it; the max-tree of that order is the tree of shapes on the grid, and its
 * nodes restricted to the pixels are the shapes of the image. On images without a saddle (no
 * 2 x 2 block whose diagonals are strictly separated, the exterior included) the shapes are
 * exactly the saturations of the 4-connected components of {f < t} and {f > t}, holes filled
 * through 8-connectivity; at a saddle the propagation decides which diagonal connects, as
 * Higra's does (tests/omp/test_tos_omp.c checks both).
 *
 * The grid. Only the (2w - 1) x (2h - 1) faces of the image are held, one uint32 each (A); the
 * exterior ring is implicit: every face of the grid's border is reached from it, at its span
 * clamped to m, before anything else. Spans are never stored: a face's span is the min and
 * max of its one, two or four pixels, read from the image when the face is queued.
 *
 * The sort ([deVries24], algorithm 7; [Crozet14]). A part is a hierarchical queue (a
 * stack of faces per level, a three-level bit map of the non-empty levels) and a current level
 * l. It pops all faces of level l (a batch), giving each the part's next rank F_ord (one per
 * batch), and queues every unseen neighbour at its span clamped to l; then l moves to the
 * nearest non-empty level (the lower on a tie). A batch is one or more flat zones (nodes) of
 * the tree, entered in full: each node's faces get one rank, larger than its parent's. After a
 * batch, the faces queued below l and those above it lead to disjoint, non-adjacent regions
 * of unseen faces (a node's child shapes lie wholly on one side of its level, and the current
 * level is never between a pending shape's level and its parent's: reaching past it would
 * pop it first), so a part may split into two that run concurrently and continue from the
 * same rank: their faces are never adjacent, so their ranks never meet in the max-tree. A
 * part splits only when its driver asks (twi_tos_hooks.want_split: idle workers), giving away
 * the side with fewer queued faces when it holds split_min (4096) or more; [deVries24]'s
 * recursion spawned a thread at every level and left one thread with most of the image. The
 * part keeps the larger side: giving it away made a 16-bit sort hand its main work from
 * thread to thread at nearly every batch (62,000 splits of 2048^2 on 16 threads, each moving
 * thousands of levels and every queue to a cold cache: the sort 3.7 times slower than on one
 * thread), and sides of a few hundred faces cost more to split off than they hold. Parts are
 * recycled (a 16-bit part's arrays are 0.6 MB). A part of a 16-bit image also divides its queue
 * by the connected components of its remaining region (the sub-tree split, Property 1, below).
 * The rank is then a valid max-tree input: constant on each node, increasing from parent to
 * child, below 2^31.
 *
 * Shared batches. Splits alone cannot keep many threads busy on 8-bit natural images: a
 * part's batch takes every face queued at its level, across all the shapes the part holds,
 * and 86% of the faces of natural:ihc 2048^2 lie in batches of 16,384 faces or more (3,578
 * batches in all). So a batch whose level holds crew_min faces or more (4096 by default),
 * while the driver says workers are idle, becomes a crew's: its faces go to a shared list
 * of chunks, helper tasks (any idle worker) and the part take chunks, give each face the
 * batch's rank, keep the neighbours found at level l for themselves (handing each full
 * chunk to the crew) and queue the others in queues of their own, which the part merges
 * when the batch is done (nothing left and nobody holding faces). The ranks are those of the
 * part alone: every face of the batch gets the batch's rank whoever takes it, a neighbour's
 * level is its span clamped to l whichever face reached it, and the atomic OR on the seen
 * map gives each face to one participant. A helper that starts after its batch has ended
 * returns at once (the crew is reference-counted, the batch numbered).
 *
 * Seen faces (queued or done) are bits of a map (the caller's: the canonical bit map of the
 * max-tree, unused until then), not a state of A: reading the neighbours above and below in A
 * (rows 4 kw bytes apart) missed the cache at half the sort's time on 4096^2 images, rows of
 * the map are 32 times closer. Parts running together set bits of shared words, hence an
 * atomic OR, once a face (whose old value decides, for a crew's participants); a part alone
 * uses plain stores. A part counts its queued faces per group of levels (1 level at 8 bits,
 * 16 at 16 bits), so that a split weighs its two sides without walking the queues (walking
 * them made each split cost the whole front: 93% of a 7-thread sort of 16-bit noise). A
 * guard row of set bits before and after the grid, and every border face queued first, put
 * the four neighbours of a face at fixed offsets with no bounds test (a step off a row's end
 * lands on the next row's border face, already seen).
 *
 * The tree. The max-tree of the ranks (omp/maxtree_u32.c, in place over A, 4-connected) is
 * the tree of shapes on the grid. Un-interpolation: a pixel's node is its face's node; a
 * node's canonical pixel is its pixel of largest raster index (a rank index over the
 * canonical bit map maps grid nodes to them); a node without pixels is skipped when walking to
 * a parent. Only the root can lack pixels (its faces are then edges and vertices between the
 * exterior and pixels of other levels, and it has at least two children): the top-level nodes
 * then point to themselves and the root, the whole image at level m, is implicit.
 *
 * Attributes. The area of a node (its pixels and its descendants') climbs from the leaves:
 * every node counts its children, and the thread that brings a parent's count to zero goes on
 * with it. The grain filter then gives each node the level of its nearest ancestor (itself
 * included) with area >= N, the root being always kept (at level m when implicit).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "omp_kernels.h"
#include "omp_uf.h"

/* Faces a chunk of a level's stack holds (256-byte chunks). */
#define CHUNK_N 61
/* Chunks a slab of the shared pool holds, and a part keeps for itself at most. */
#define SLAB_CHUNKS 1024
#define LOCAL_CHUNKS 256
/* Faces between two progress reports (and cancel checks). */
#define PROGRESS_FACES (1 << 18)
/* A batch is shared with helpers once its level holds this many faces (default), looked at
 * every CREW_CHECK faces of the batch. */
#define CREW_FACES 4096
#define CREW_CHECK 2048
/* A part splits only when the side it would give away (the one with fewer queued faces)
 * holds this many queued faces (default): 16-bit field 2048^2 on the 16-core host, 256 faces:
 * 2,800 parts, the sort 0.69-0.78 s on 4-16 threads; 4096: 231 parts, 0.59-0.79 s; 16384: 56
 * parts, 0.72-0.86 s (one thread: 0.77 s). */
#define SPLIT_FACES 4096
/* The sub-tree split: a part labels the components of its remaining region every COMP_FACES
 * faces it pops (default). 16-bit field, 16-core host, 16 threads, the sort (2048^2 / 4096^2):
 * every 2^17 faces 0.47 / 0.97 s, 2^18 0.46 / 0.88 s, 2^19 0.42 / 0.87 s, 2^20 0.48 / 0.90 s,
 * never 0.69 / 2.77 s (with the depth-first flood tried first, 2^14 took 3.49 / 6.16 s and an
 * eighth of the last labelling's region 0.73 / 1.81 s). A labelling
 * that meets more than COMP_RUNS row runs (16 bytes each) gives up (noise: a run every few
 * faces). */
#define COMP_FACES (1 << 20)
#define COMP_RUNS (1 << 21)

#if defined(__GNUC__)
#define CLZ64(x) __builtin_clzll(x)
#define CTZ64(x) __builtin_ctzll(x)
#define POPCNT64(x) __builtin_popcountll(x)
#else
#error "tos_omp.c needs GCC or Clang builtins (clz, ctz, popcount)"
#endif

typedef struct chunk {
    struct chunk *next;
    uint32_t n;
    uint32_t v[CHUNK_N];
} chunk;

struct twi_tos_sort {
    const void *f;             /* levels: row y at f + y * fs samples */
    int64_t fs;                /* row stride in samples */
    bool wide;                 /* TW_U16 */
    int64_t w, h, kw, kh;      /* image, grid */
    uint32_t *a;               /* kw * kh faces: the ranks */
    _Atomic uint64_t *seen;    /* bit i + g: face i queued (bits of the guard rows set) */
    int64_t g;                 /* bits before face 0: kw rounded up to a word */
    uint32_t nl;               /* levels: 256 or 65536 */
    uint32_t gshift;           /* a part counts its queued faces by groups of 1 << gshift levels */
    uint32_t m;                /* exterior level */
    pthread_mutex_t lock;      /* the pool */
    chunk *pool;               /* free chunks */
    void **slabs;
    size_t n_slabs, cap_slabs;
    twi_tos_part *spare;       /* ended parts, empty, for the next split or crew (under lock) */
    atomic_llong parts, batches, crews;
    atomic_llong labellings, comp_parts; /* sub-tree splits: labellings, parts they made */
    atomic_llong label_ns;     /* time spent labelling (under lab_lock) */
    atomic_llong max_chain;    /* the longest chain of parts, in faces (see part.chain) */
    pthread_mutex_t lab_lock;  /* one labelling at a time: it holds the map below */
    _Atomic uint64_t *lab_q;   /* the labelling part's queued faces (a map), or NULL */
    atomic_int alive;          /* parts made and not ended */
};

/* A part's crew: the faces of one large batch shared by the part and helpers (see
 * twi_tos_sort_run). Reference-counted: the part holds one, every helper task handed out one,
 * so that a helper that starts after the batch (or the part) has ended only drops its own. */
struct twi_tos_crew {
    twi_tos_sort *s;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refs;                  /* under lock, as everything below */
    uint64_t gen;              /* the batch now open (helpers carry the one they were made for) */
    bool open;                 /* helpers may join */
    bool stop;                 /* a participant failed or was canceled */
    atomic_bool stopping;      /* stop, read without the lock by a participant at work */
    tw_status st;              /* its status */
    uint32_t l, ord;           /* the batch's level and rank */
    chunk *work;               /* full chunks of faces at level l, not yet taken */
    int working;               /* participants holding faces at level l */
    int joined;                /* helpers in the batch, not yet done */
    twi_tos_part *sides;       /* the participants' queues of other levels, to merge */
};

struct twi_tos_part {
    uint32_t cur;              /* current level */
    uint32_t ord;              /* rank of the last batch */
    uint64_t *l1, *l2, top;    /* non-empty levels: bits, words, groups of 64 words */
    uint64_t *gq;              /* faces queued in each group of levels (a split weighs sides) */
    uint64_t *gq2;             /* the same by 64 groups */
    chunk **head;              /* [nl] top chunk of each level's stack, valid where l1 is set */
    chunk *free;               /* chunks kept by this part */
    size_t n_free;
    twi_tos_crew *crew;        /* made at the part's first shared batch */
    bool comp_off;             /* its last labelling gave up (too many runs) */
    int64_t chain;             /* faces it and its ancestors popped before it (a crew's batch
                                * counted whole): the sort's critical path, in faces */
    int64_t labelled_at;       /* chain when its region was last labelled (or it was made) */
    twi_tos_part *next_side;   /* a participant's queue in crew->sides, or the next spare */
};

/* ---- the image ------------------------------------------------------------------------------- */

static tw_status
view_check(const tw_tile_view *in)
{
    size_t ss;

    if (!in || in->channels != 1 || (in->type != TW_U8 && in->type != TW_U16))
        return TW_E_INVALID;
    ss = tw_sample_size(in->type);
    if (!twi_view_fits(in, (size_t)in->w * ss, ss))
        return TW_E_INVALID;
    if (in->w > 0 && in->h > 0 &&
        (uint64_t)(2 * (int64_t)in->w - 1) * (uint64_t)(2 * (int64_t)in->h - 1) >=
            TWI_TOS_MAX_FACES)
        return TW_E_INVALID;
    return TW_OK;
}

static inline uint32_t
px(const tw_tile_view *in, int64_t x, int64_t y)
{
    const char *row = (const char *)in->data + y * in->stride;

    return in->type == TW_U16 ? ((const uint16_t *)(const void *)row)[x]
                              : ((const uint8_t *)(const void *)row)[x];
}

uint32_t
twi_tos_exterior(const tw_tile_view *in)
{
    const int64_t w = in->w, h = in->h;
    uint64_t sum = 0, n = 0;
    int64_t x, y;

    if (w <= 0 || h <= 0)
        return 0;
    /* every border pixel once (a row or column image: all of them) */
    for (x = 0; x < w; x++) {
        sum += px(in, x, 0);
        n++;
        if (h > 1) {
            sum += px(in, x, h - 1);
            n++;
        }
    }
    for (y = 1; y + 1 < h; y++) {
        sum += px(in, 0, y);
        n++;
        if (w > 1) {
            sum += px(in, w - 1, y);
            n++;
        }
    }
    return (uint32_t)(sum / n);
}

/* ---- the queue ------------------------------------------------------------------------------- */

static inline void
lv_set(twi_tos_part *p, uint32_t l)
{
    uint32_t i = l >> 6, j = i >> 6;

    p->l1[i] |= (uint64_t)1 << (l & 63);
    p->l2[j] |= (uint64_t)1 << (i & 63);
    p->top |= (uint64_t)1 << j;
}

static inline void
lv_clear(twi_tos_part *p, uint32_t l)
{
    uint32_t i = l >> 6, j = i >> 6;

    if (!(p->l1[i] &= ~((uint64_t)1 << (l & 63))) && !(p->l2[j] &= ~((uint64_t)1 << (i & 63))))
        p->top &= ~((uint64_t)1 << j);
}

static inline bool
lv_has(const twi_tos_part *p, uint32_t l)
{
    return p->l1[l >> 6] >> (l & 63) & 1;
}

/* Highest non-empty level <= l, or -1. */
static int64_t
lv_max_le(const twi_tos_part *p, int64_t l)
{
    uint32_t i, j;
    uint64_t x;

    if (l < 0)
        return -1;
    i = (uint32_t)l >> 6;
    if ((x = p->l1[i] & (~(uint64_t)0 >> (63 - (l & 63)))))
        return (int64_t)(i << 6 | (uint32_t)(63 - CLZ64(x)));
    j = i >> 6;
    if (!(x = p->l2[j] & (((uint64_t)1 << (i & 63)) - 1))) {
        if (!(x = p->top & (((uint64_t)1 << j) - 1)))
            return -1;
        j = (uint32_t)(63 - CLZ64(x));
        x = p->l2[j];
    }
    i = j << 6 | (uint32_t)(63 - CLZ64(x));
    return (int64_t)(i << 6 | (uint32_t)(63 - CLZ64(p->l1[i])));
}

/* Lowest non-empty level >= l, or nl. */
static int64_t
lv_min_ge(const twi_tos_part *p, int64_t l, uint32_t nl)
{
    uint32_t i, j;
    uint64_t x;

    if (l >= nl)
        return nl;
    i = (uint32_t)l >> 6;
    if ((x = p->l1[i] & (~(uint64_t)0 << (l & 63))))
        return (int64_t)(i << 6 | (uint32_t)CTZ64(x));
    j = i >> 6;
    x = (i & 63) == 63 ? 0 : p->l2[j] & (~(uint64_t)0 << ((i & 63) + 1));
    if (!x) {
        x = j == 63 ? 0 : p->top & (~(uint64_t)0 << (j + 1));
        if (!x)
            return nl;
        j = (uint32_t)CTZ64(x);
        x = p->l2[j];
    }
    i = j << 6 | (uint32_t)CTZ64(x);
    return (int64_t)(i << 6 | (uint32_t)CTZ64(p->l1[i]));
}

/* A chunk for part p: its own, else a batch from the pool (a new slab when it is empty). */
static chunk *
chunk_get(twi_tos_sort *s, twi_tos_part *p)
{
    chunk *c;

    if (!p->free) {
        pthread_mutex_lock(&s->lock);
        if (!s->pool) {
            chunk *slab = NULL;

            if (s->n_slabs == s->cap_slabs) {
                size_t cap = s->cap_slabs ? 2 * s->cap_slabs : 64;
                void **t = realloc(s->slabs, cap * sizeof *t);

                if (t) {
                    s->slabs = t;
                    s->cap_slabs = cap;
                }
            }
            if (s->n_slabs < s->cap_slabs && (slab = malloc(SLAB_CHUNKS * sizeof *slab))) {
                s->slabs[s->n_slabs++] = slab;
                for (size_t i = 0; i < SLAB_CHUNKS; i++) {
                    slab[i].next = s->pool;
                    s->pool = &slab[i];
                }
            }
        }
        for (size_t i = 0; i < LOCAL_CHUNKS / 2 && s->pool; i++) {
            c = s->pool;
            s->pool = c->next;
            c->next = p->free;
            p->free = c;
            p->n_free++;
        }
        pthread_mutex_unlock(&s->lock);
        if (!p->free)
            return NULL;
    }
    c = p->free;
    p->free = c->next;
    p->n_free--;
    return c;
}

/* Give chunks back to the pool: all of them, or half when the part keeps too many. */
static void
chunk_return(twi_tos_sort *s, twi_tos_part *p, size_t keep)
{
    if (p->n_free <= keep)
        return;
    pthread_mutex_lock(&s->lock);
    while (p->n_free > keep / 2 || (keep == 0 && p->free)) {
        chunk *c = p->free;

        p->free = c->next;
        p->n_free--;
        c->next = s->pool;
        s->pool = c;
    }
    pthread_mutex_unlock(&s->lock);
}

static inline void
chunk_put(twi_tos_sort *s, twi_tos_part *p, chunk *c)
{
    c->next = p->free;
    p->free = c;
    if (++p->n_free > LOCAL_CHUNKS)
        chunk_return(s, p, LOCAL_CHUNKS);
}

static inline tw_status
push(twi_tos_sort *s, twi_tos_part *p, uint32_t l, uint32_t face)
{
    chunk *c = lv_has(p, l) ? p->head[l] : NULL;

    if (!c || c->n == CHUNK_N) {
        chunk *nc = chunk_get(s, p);

        if (!nc)
            return TW_E_NOMEM;
        nc->next = c;
        nc->n = 0;
        p->head[l] = c = nc;
        lv_set(p, l);
    }
    c->v[c->n++] = face;
    p->gq[l >> s->gshift]++;
    p->gq2[l >> s->gshift >> 6]++;
    return TW_OK;
}

static inline uint32_t
pop(twi_tos_sort *s, twi_tos_part *p, uint32_t l)
{
    chunk *c = p->head[l];
    uint32_t face = c->v[--c->n];

    p->gq[l >> s->gshift]--;
    p->gq2[l >> s->gshift >> 6]--;
    if (c->n == 0) {
        p->head[l] = c->next;
        chunk_put(s, p, c);
        if (!p->head[l])
            lv_clear(p, l);
    }
    return face;
}

/* Words of a part's level bit maps and face counts. */
static size_t
part_words(const twi_tos_sort *s)
{
    size_t w1 = s->nl / 64, w2 = (w1 + 63) / 64, ng = s->nl >> s->gshift;

    return w1 + w2 + ng + (ng + 63) / 64;
}

/* An empty part: an ended one when there is one (a 16-bit part's arrays are 0.6 MB, which
 * malloc maps and unmaps, and thousands of parts can be split off), else a new one. */
static twi_tos_part *
part_new(twi_tos_sort *s)
{
    twi_tos_part *p;
    size_t w1 = s->nl / 64, w2 = (w1 + 63) / 64, ng = s->nl >> s->gshift;

    pthread_mutex_lock(&s->lock);
    if ((p = s->spare))
        s->spare = p->next_side;
    pthread_mutex_unlock(&s->lock);
    if (p) {
        p->cur = p->ord = 0;
        p->next_side = NULL;
        p->comp_off = false;
        p->chain = p->labelled_at = 0;
        return p;
    }
    if (!(p = calloc(1, sizeof *p)))
        return NULL;
    /* heads are read only where the level's bit is set: no need to clear them */
    if (!(p->l1 = calloc(part_words(s), sizeof *p->l1)) ||
        !(p->head = malloc(s->nl * sizeof *p->head))) {
        free(p->l1);
        free(p);
        return NULL;
    }
    p->l2 = p->l1 + w1;
    p->gq = p->l2 + w2;
    p->gq2 = p->gq + ng;
    return p;
}

void
twi_tos_part_free(twi_tos_sort *s, twi_tos_part *p)
{
    if (!p)
        return;
    /* without the sort (destroyed), its chunks went with its slabs */
    for (int64_t l = s ? lv_min_ge(p, 0, s->nl) : 0; s && l < s->nl;
         l = lv_min_ge(p, l + 1, s->nl)) {
        chunk *c = p->head[l];

        while (c) {
            chunk *nx = c->next;

            chunk_put(s, p, c);
            c = nx;
        }
    }
    if (s) {
        /* kept for the next part: empty (levels and counts zero), its chunks kept too */
        twi_tos_crew_release(p->crew);
        p->crew = NULL;
        if (p->top) {
            memset(p->l1, 0, part_words(s) * sizeof *p->l1);
            p->top = 0;
        }
        chunk_return(s, p, LOCAL_CHUNKS / 2);
        pthread_mutex_lock(&s->lock);
        p->next_side = s->spare;
        s->spare = p;
        pthread_mutex_unlock(&s->lock);
        return;
    }
    twi_tos_crew_release(p->crew);
    free(p->head);
    free(p->l1);
    free(p);
}

/* Move every queued face of src to dst, level by level (chunk lists spliced); src is left
 * empty. */
static void
part_merge(const twi_tos_sort *s, twi_tos_part *dst, twi_tos_part *src)
{
    size_t ng = s->nl >> s->gshift;

    for (size_t g = 0; g < ng; g++)
        dst->gq[g] += src->gq[g];
    for (size_t g = 0; g < (ng + 63) / 64; g++)
        dst->gq2[g] += src->gq2[g];
    for (int64_t L = lv_min_ge(src, 0, s->nl); L < s->nl; L = lv_min_ge(src, L + 1, s->nl)) {
        chunk *t = src->head[L];

        while (t->next)
            t = t->next;
        t->next = lv_has(dst, (uint32_t)L) ? dst->head[L] : NULL;
        dst->head[L] = src->head[L];
        lv_set(dst, (uint32_t)L);
    }
    memset(src->l1, 0, part_words(s) * sizeof *src->l1);
    src->top = 0;
}

static twi_tos_crew *
crew_new(twi_tos_sort *s)
{
    twi_tos_crew *c = calloc(1, sizeof *c);

    if (!c)
        return NULL;
    c->s = s;
    c->refs = 1;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    return c;
}

void
twi_tos_crew_release(twi_tos_crew *c)
{
    int left;

    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    left = --c->refs;
    pthread_mutex_unlock(&c->lock);
    if (left > 0)
        return;
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* Under the crew's lock: the first failure stops every participant. */
static void
crew_stop(twi_tos_crew *c, tw_status st)
{
    if (!c->stop) {
        c->stop = true;
        c->st = st;
    }
    pthread_cond_broadcast(&c->cond);
}

/* ---- the sort -------------------------------------------------------------------------------- */

/* Pixel o of the image (raster offset in samples); the branch is the same for every call. */
static inline uint32_t
sample(const twi_tos_sort *s, int64_t o)
{
    return s->wide ? ((const uint16_t *)s->f)[o] : ((const uint8_t *)s->f)[o];
}

/* The span of face (X, Y) of the grid (its one, two or four pixels, the one at offset o top
 * left) clamped to l, the level it is queued at. */
static inline uint32_t
span_clamp(const twi_tos_sort *s, int64_t X, int64_t Y, uint32_t l)
{
    const int64_t o = (Y >> 1) * s->fs + (X >> 1);
    uint32_t lo = sample(s, o), hi = lo, v;

    if (X & 1) {
        v = sample(s, o + 1);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    if (Y & 1) {
        v = sample(s, o + s->fs);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        if (X & 1) {
            v = sample(s, o + s->fs + 1);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    }
    return l < lo ? lo : l > hi ? hi : l;
}

size_t
twi_tos_seen_words(int64_t w, int64_t h)
{
    int64_t kw = 2 * w - 1, kh = 2 * h - 1, g = (kw + 63) / 64 * 64;

    return (size_t)((kw * kh + 2 * g + 63) / 64);
}

/* Mark face i seen; true when it was not. A part alone (no other alive, and none can appear
 * but by its own split) needs no locked OR, which cost as much as the rest of the sort. */
static inline bool
seen_set(twi_tos_sort *s, int64_t i, bool alone)
{
    uint64_t b = (uint64_t)(i + s->g), bit = (uint64_t)1 << (b & 63);
    uint64_t v = atomic_load_explicit(&s->seen[b >> 6], memory_order_relaxed);

    if (v & bit)
        return false;
    if (alone) {
        atomic_store_explicit(&s->seen[b >> 6], v | bit, memory_order_relaxed);
        return true;
    }
    /* the helpers of a shared batch can reach one face together: one of them gets it */
    return !(atomic_fetch_or_explicit(&s->seen[b >> 6], bit, memory_order_relaxed) & bit);
}

tw_status
twi_tos_sort_create(const tw_tile_view *in, uint32_t *a, uint64_t *seen, twi_tos_sort **out,
                    twi_tos_part **root)
{
    twi_tos_sort *s = NULL;
    twi_tos_part *p = NULL;
    tw_status st;
    int64_t X, Y;

    if (!out || !root || !a || !seen || (st = view_check(in)) != TW_OK || in->w < 1 ||
        in->h < 1)
        return TW_E_INVALID;
    if (!(s = calloc(1, sizeof *s)))
        return TW_E_NOMEM;
    s->f = in->data;
    s->wide = in->type == TW_U16;
    s->fs = in->stride / (int64_t)tw_sample_size(in->type);
    s->w = in->w;
    s->h = in->h;
    s->kw = 2 * s->w - 1;
    s->kh = 2 * s->h - 1;
    s->a = a;
    s->seen = (_Atomic uint64_t *)(void *)seen;
    s->g = (s->kw + 63) / 64 * 64;
    s->nl = s->wide ? 65536 : 256;
    s->gshift = s->wide ? 4 : 0;
    s->m = twi_tos_exterior(in);
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->lab_lock, NULL);
    atomic_init(&s->parts, 1);
    atomic_init(&s->batches, 0);
    atomic_init(&s->crews, 0);
    atomic_init(&s->labellings, 0);
    atomic_init(&s->comp_parts, 0);
    atomic_init(&s->label_ns, 0);
    atomic_init(&s->max_chain, 0);
    atomic_init(&s->alive, 1);
    /* the guard rows seen, so that no neighbour test leaves the grid */
    memset(seen, 0xFF, (size_t)s->g / 8);
    memset(seen + s->g / 64, 0, twi_tos_seen_words(s->w, s->h) * 8 - (size_t)s->g / 8);
    for (X = 0; X < s->g; X++)
        seen_set(s, s->kw * s->kh + X, true);
    if (!(p = part_new(s))) {
        st = TW_E_NOMEM;
        goto out;
    }
    p->cur = s->m;
    /* every border face comes from the exterior ring, at level m */
    for (Y = 0; Y < s->kh; Y++) {
        for (X = 0; X < s->kw; X += (Y == 0 || Y == s->kh - 1 || s->kw == 1) ? 1 : s->kw - 1) {
            uint32_t face = (uint32_t)(Y * s->kw + X);

            seen_set(s, face, true);
            if ((st = push(s, p, span_clamp(s, X, Y, s->m), face)) != TW_OK)
                goto out;
        }
    }
    *out = s;
    *root = p;
    s = NULL;
    p = NULL;
out:
    if (p)
        twi_tos_part_free(s, p);
    twi_tos_sort_destroy(s);
    return st;
}


/* The coordinates of face `face` (rows of kw faces; rkw = 1 / kw, corrected for rounding). */
static inline void
face_xy(int64_t kw, double rkw, uint32_t face, int64_t *X, int64_t *Y)
{
    int64_t y = (int64_t)((double)face * rkw);

    if (y * kw > (int64_t)face)
        y--;
    else if ((y + 1) * kw <= (int64_t)face)
        y++;
    *Y = y;
    *X = (int64_t)face - y * kw;
}

/* Whether level l of part p holds at least `faces` faces (counts at most that many). */
static bool
level_holds(const twi_tos_part *p, uint32_t l, int64_t faces)
{
    int64_t n = 0;

    for (const chunk *c = lv_has(p, l) ? p->head[l] : NULL; c && n < faces; c = c->next)
        n += c->n;
    return n >= faces;
}

/* A full chunk of the batch's faces for whoever takes it. */
static void
crew_publish(twi_tos_crew *c, chunk *k)
{
    pthread_mutex_lock(&c->lock);
    k->next = c->work;
    c->work = k;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

/* Queue the unseen neighbour N (column X, row Y) of a face of the shared batch: at level l
 * into the participant's fill chunk (handed to the crew when full), else into its own queue
 * x, merged into the part's when the batch ends. */
#define CREW_VISIT(N, X, Y)                                                                        \
    do {                                                                                           \
        int64_t n_ = (N);                                                                          \
        if (seen_set(s, n_, false)) {                                                              \
            uint32_t lv_ = span_clamp(s, (X), (Y), l);                                             \
            if (lv_ != l) {                                                                        \
                if ((st = push(s, x, lv_, (uint32_t)n_)) != TW_OK)                                 \
                    goto fail;                                                                     \
            } else {                                                                               \
                if (fill && fill->n == CHUNK_N) {                                                  \
                    crew_publish(c, fill);                                                         \
                    fill = NULL;                                                                   \
                }                                                                                  \
                if (!fill) {                                                                       \
                    if (!(fill = chunk_get(s, x))) {                                               \
                        st = TW_E_NOMEM;                                                           \
                        goto fail;                                                                 \
                    }                                                                              \
                    fill->n = 0;                                                                   \
                }                                                                                  \
                fill->v[fill->n++] = (uint32_t)n_;                                                 \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* One participant's share of the batch (level l, rank ord): it takes chunks of faces from
 * the crew until none is left and nobody holds any (who holds faces may make more), giving
 * each face the rank and queuing its neighbours; the faces it finds at level l it does
 * itself, handing each full chunk to the crew. Every participant marks seen faces with the
 * atomic OR. Returns its own failure (the crew is then stopped). */
static tw_status
crew_work(twi_tos_sort *s, twi_tos_crew *c, twi_tos_part *x, const twi_tos_hooks *hk)
{
    const int64_t kw = s->kw;
    const double rkw = 1.0 / (double)kw;
    uint32_t *a = s->a, l, ord;
    chunk *cur = NULL, *fill = NULL;
    int64_t since = 0;
    tw_status st = TW_OK;

    pthread_mutex_lock(&c->lock);
    l = c->l;
    ord = c->ord;
    for (;;) {
        while (!c->work && c->working > 0 && !c->stop)
            pthread_cond_wait(&c->cond, &c->lock);
        if (c->stop || !c->work)
            break;
        cur = c->work;
        c->work = cur->next;
        c->working++;
        pthread_mutex_unlock(&c->lock);
        while (cur) {
            while (cur->n > 0) {
                uint32_t face = cur->v[--cur->n];
                int64_t X, Y;

                face_xy(kw, rkw, face, &X, &Y);
                a[face] = ord;
                CREW_VISIT((int64_t)face - kw, X, Y - 1);
                CREW_VISIT((int64_t)face - 1, X - 1, Y);
                CREW_VISIT((int64_t)face + 1, X + 1, Y);
                CREW_VISIT((int64_t)face + kw, X, Y + 1);
                if (++since >= PROGRESS_FACES) {
                    if (hk && hk->progress && !hk->progress(hk->user, since)) {
                        st = TW_E_CANCELED;
                        goto fail;
                    }
                    since = 0;
                }
            }
            chunk_put(s, x, cur);
            /* its own faces next (no lock), unless the crew is stopping */
            cur = fill;
            fill = NULL;
            if (cur && atomic_load_explicit(&c->stopping, memory_order_relaxed))
                break;
        }
        if (cur)
            chunk_put(s, x, cur);
        cur = NULL;
        pthread_mutex_lock(&c->lock);
        if (--c->working == 0 && !c->work)
            pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->lock);
    if (hk && hk->progress && since)
        hk->progress(hk->user, since);
    return TW_OK;
fail:
    if (cur)
        chunk_put(s, x, cur);
    if (fill)
        chunk_put(s, x, fill);
    pthread_mutex_lock(&c->lock);
    atomic_store_explicit(&c->stopping, true, memory_order_relaxed);
    crew_stop(c, st);
    c->working--;
    pthread_mutex_unlock(&c->lock);
    return st;
}
#undef CREW_VISIT

/* The rest of part p's batch at level l shared with up to `helpers` helpers (hk->help): its
 * faces at l go to the crew, the part works as one of it, then waits for the helpers that
 * joined and merges their queues of other levels into its own. The ranks are those of the
 * part alone: every face of the batch gets the batch's rank whoever takes it, and a
 * neighbour's level is its span clamped to l whichever face queued it. */
static tw_status
crew_batch(twi_tos_sort *s, twi_tos_part *p, uint32_t l, int helpers, const twi_tos_hooks *hk)
{
    twi_tos_crew *c = p->crew;
    twi_tos_part *x = NULL, *side;
    uint64_t gen;
    tw_status st = TW_OK;

    if (!c && !(c = p->crew = crew_new(s)))
        return TW_E_NOMEM;
    if (!(x = part_new(s)))
        return TW_E_NOMEM;
    pthread_mutex_lock(&c->lock);
    gen = ++c->gen;
    c->open = true;
    c->stop = false;
    atomic_store_explicit(&c->stopping, false, memory_order_relaxed);
    c->st = TW_OK;
    c->l = l;
    c->ord = p->ord;
    c->work = p->head[l];
    c->working = 0;
    c->joined = 0;
    c->sides = NULL;
    pthread_mutex_unlock(&c->lock);
    for (const chunk *k = p->head[l]; k; k = k->next) {
        p->gq[l >> s->gshift] -= k->n;
        p->gq2[l >> s->gshift >> 6] -= k->n;
        p->chain += k->n;
    }
    lv_clear(p, l);
    atomic_fetch_add_explicit(&s->crews, 1, memory_order_relaxed);
    for (int i = 0; i < helpers && st == TW_OK; i++) {
        pthread_mutex_lock(&c->lock);
        c->refs++; /* the helper's, given back by twi_tos_crew_help or the hook */
        pthread_mutex_unlock(&c->lock);
        st = hk->help(hk->user, c, gen);
    }
    if (st != TW_OK) {
        pthread_mutex_lock(&c->lock);
        crew_stop(c, st);
        pthread_mutex_unlock(&c->lock);
    }
    crew_work(s, c, x, hk);
    pthread_mutex_lock(&c->lock);
    c->open = false;
    while (c->joined > 0)
        pthread_cond_wait(&c->cond, &c->lock);
    st = c->stop ? c->st : TW_OK;
    side = c->sides;
    c->sides = NULL;
    /* faces left by a stopped crew */
    while (c->work) {
        chunk *k = c->work;

        c->work = k->next;
        chunk_put(s, p, k);
    }
    pthread_mutex_unlock(&c->lock);
    part_merge(s, p, x);
    twi_tos_part_free(s, x);
    while (side) {
        twi_tos_part *nx = side->next_side;

        part_merge(s, p, side);
        twi_tos_part_free(s, side);
        side = nx;
    }
    return st;
}

void
twi_tos_crew_help(twi_tos_crew *c, uint64_t gen, const twi_tos_hooks *hk)
{
    twi_tos_sort *s = c->s;
    twi_tos_part *x = NULL;
    tw_status st;

    pthread_mutex_lock(&c->lock);
    /* too late: the batch it was made for is over (the part, even the sort, may be gone) */
    if (!c->open || c->gen != gen || c->stop) {
        pthread_mutex_unlock(&c->lock);
        twi_tos_crew_release(c);
        return;
    }
    c->joined++;
    pthread_mutex_unlock(&c->lock);
    st = (x = part_new(s)) ? crew_work(s, c, x, hk) : TW_E_NOMEM;
    pthread_mutex_lock(&c->lock);
    if (st != TW_OK)
        crew_stop(c, st);
    if (x) {
        x->next_side = c->sides;
        c->sides = x;
    }
    if (--c->joined == 0)
        pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    twi_tos_crew_release(c);
}

/* ---- the sub-tree split (Property 1) --------------------------------------------------------- */

/*
 * [deVries24]'s Property 1: after each batch, every unvisited sub-tree of the tree of shapes is
 * a distinct connected component of the remaining faces (queued or unseen). So a part's queue
 * can be divided by the components of its remaining region: each component's queued faces go
 * on in a part of their own, from the same level and rank, as the two sides of a level-side
 * split do. The level-side split cannot separate the child shapes of one side of a level; on
 * 16-bit natural images the longest chain of parts it leaves holds half of the faces
 * (docs/tos.md).
 *
 * The labelling reads the seen map and never writes it: parts' regions may still touch
 * through a face whose span holds the level of both (an edge between a darker and a brighter
 * pixel), which either part may claim with its atomic OR, so a part must not hide or show a
 * face to the others even for a moment. A sort-wide bit map of the grid's layout holds the
 * labelling part's queued faces (set, then cleared); one part labels at a time (a trylock: a
 * part that finds another labelling tries again after its next batch), so that no labelling
 * takes another part's queue for its own. The remaining faces (unseen, or queued by the part)
 * are then labelled in one raster pass by row runs (64 faces a word): a union-find over the
 * runs, each joined to the runs above it that it touches. The components that hold the part's
 * queued faces are its region's (one that reaches into another part's region is only
 * coarser); each queued face's component number goes into its rank slot (the part's until it
 * pops the face). The pass reads the whole grid's bit maps (2 MB at 4096^2 u16: a 64 MB grid
 * of ranks) and handles every run of unseen faces, its own or not (30-130 faces a run on
 * natural images); a DFS flood of the part's region alone, tried first, took 100 ms a
 * labelling at 2048^2 (three bit maps, nine cache lines a run). It runs only while workers
 * are idle, every 2^20 faces the part pops (COMP_FACES); past COMP_RUNS runs (noise: a run
 * every few faces) the part labels no more.
 */

typedef struct comp_run {
    uint32_t b, e;             /* a run of remaining faces: bits [b, e) of the maps */
    uint32_t par;              /* union-find over the runs */
    uint32_t cid;              /* a root's component, or UINT32_MAX */
} comp_run;

typedef struct comp_scratch {
    comp_run *runs;
    size_t n_runs, cap_runs;
    int64_t *size;             /* faces of each component */
    size_t n_comp, cap_comp;
    bool over;                 /* more than COMP_RUNS runs: given up */
} comp_scratch;

static bool
grow(void **v, size_t *cap, size_t need, size_t elem)
{
    size_t c = *cap ? *cap : 256;
    void *t;

    if (need <= *cap)
        return true;
    while (c < need)
        c *= 2;
    if (!(t = realloc(*v, c * elem)))
        return false;
    *v = t;
    *cap = c;
    return true;
}

/* Word w of the remaining faces: unseen, or queued by the labelling part. */
static inline uint64_t
free_word(const twi_tos_sort *s, int64_t w)
{
    return ~atomic_load_explicit(&s->seen[w], memory_order_relaxed) |
           atomic_load_explicit(&s->lab_q[w], memory_order_relaxed);
}

/* The first bit in [b, e) that is free (`want`) or not, or e. */
static int64_t
free_find(const twi_tos_sort *s, int64_t b, int64_t e, bool want)
{
    while (b < e) {
        uint64_t v = free_word(s, b >> 6);

        v = (want ? v : ~v) & (~(uint64_t)0 << (b & 63));
        if (v) {
            int64_t i = (b & ~(int64_t)63) + CTZ64(v);

            return i < e ? i : e;
        }
        b = (b & ~(int64_t)63) + 64;
    }
    return e;
}

/* The union-find of the labellings (omp/omp_uf.h) over the runs' par fields. */
#define RUN_UF_STRIDE (sizeof(comp_run) / sizeof(uint32_t))
_Static_assert(sizeof(comp_run) == 4 * sizeof(uint32_t), "comp_run: four words, no padding");

static inline uint32_t
run_find(comp_run *u, uint32_t r)
{
    return twi_uf_find(&u->par, RUN_UF_STRIDE, r);
}

/* The runs of the remaining faces, row by row, each joined to the runs of the row above that
 * it touches (4-connected: overlapping columns). TW_OK (cs->over set past COMP_RUNS runs) or
 * TW_E_NOMEM. */
static tw_status
label_runs(const twi_tos_sort *s, comp_scratch *cs)
{
    const int64_t g = s->g, kw = s->kw;
    size_t prev0 = 0, prev1 = 0;
    comp_run *u;

    for (int64_t y = 0; y < s->kh; y++) {
        const int64_t rb = g + y * kw, re = rb + kw;
        const size_t cur0 = cs->n_runs;
        size_t j = prev0;

        for (int64_t x0 = free_find(s, rb, re, true), x1; x0 < re;
             x0 = free_find(s, x1, re, true)) {
            size_t r = cs->n_runs;

            x1 = free_find(s, x0, re, false);
            if (r >= (size_t)COMP_RUNS) {
                cs->over = true;
                return TW_OK;
            }
            if (!grow((void **)&cs->runs, &cs->cap_runs, r + 1, sizeof *cs->runs))
                return TW_E_NOMEM;
            u = cs->runs;
            u[r] = (comp_run){ (uint32_t)x0, (uint32_t)x1, (uint32_t)r, UINT32_MAX };
            cs->n_runs++;
            /* the runs above that overlap [x0, x1) (shifted by a row) */
            while (j < prev1 && u[j].e + (uint64_t)kw <= (uint64_t)x0)
                j++;
            for (size_t k = j; k < prev1 && u[k].b + (uint64_t)kw < (uint64_t)x1; k++)
                twi_uf_union(&u->par, RUN_UF_STRIDE, (uint32_t)r, (uint32_t)k);
        }
        prev0 = cur0;
        prev1 = cs->n_runs;
    }
    return TW_OK;
}

/* Components by decreasing size (ties: by number), as qsort sorts them. */
typedef struct comp_ord {
    int64_t size;
    uint32_t k;
} comp_ord;

static int
comp_cmp(const void *x, const void *y)
{
    const comp_ord *a = x, *b = y;

    return a->size != b->size ? (a->size < b->size ? 1 : -1) : (a->k > b->k) - (a->k < b->k);
}

/* The labelling's map of queued faces, made at the first labelling of the sort (under
 * lab_lock; calloc: pages that no queue reaches are never touched). */
static bool
lab_maps(twi_tos_sort *s)
{
    if (!s->lab_q)
        s->lab_q = calloc(twi_tos_seen_words(s->w, s->h), sizeof *s->lab_q);
    return s->lab_q != NULL;
}

/* Mark (or unmark) part p's queued faces in lab_q (plain stores: the map is the lab_lock
 * holder's alone). */
static void
queue_mark(twi_tos_sort *s, const twi_tos_part *p, bool set)
{
    for (int64_t L = lv_min_ge(p, 0, s->nl); L < s->nl; L = lv_min_ge(p, L + 1, s->nl))
        for (const chunk *c = p->head[L]; c; c = c->next)
            for (uint32_t i = 0; i < c->n; i++) {
                uint64_t b = (uint64_t)c->v[i] + (uint64_t)s->g, x = (uint64_t)1 << (b & 63);
                uint64_t v = atomic_load_explicit(&s->lab_q[b >> 6], memory_order_relaxed);

                atomic_store_explicit(&s->lab_q[b >> 6], set ? v | x : v & ~x,
                                      memory_order_relaxed);
            }
}

/* Divide part p's queue by the components of its remaining region (see above): the largest
 * stays, the others go to up to `room` new parts (hk->spawn), balanced by size, each share
 * holding split_min faces or more (smaller shares stay). */
static tw_status
comp_split(twi_tos_sort *s, twi_tos_part *p, const twi_tos_hooks *hk, int room,
           int64_t split_min)
{
    comp_scratch cs = { 0 };
    comp_ord *ord = NULL;
    uint32_t *dest = NULL, *lvls = NULL, *ren = NULL;
    chunk **heads = NULL;
    twi_tos_part **np = NULL;
    int64_t *load = NULL, n_lv = 0;
    int n_new = 0, made = 0;
    tw_status st = TW_OK;
    double t0;

    /* another part is labelling: this one tries again after its next batch */
    if (pthread_mutex_trylock(&s->lab_lock) != 0)
        return TW_OK;
    if (!lab_maps(s)) {
        pthread_mutex_unlock(&s->lab_lock);
        return TW_E_NOMEM;
    }
    atomic_fetch_add_explicit(&s->labellings, 1, memory_order_relaxed);
    p->labelled_at = p->chain;
    t0 = omp_get_wtime();
    queue_mark(s, p, true);
    st = label_runs(s, &cs);
    if (st == TW_OK && !cs.over) {
        comp_run *u = cs.runs;

        /* the part's queued faces: their runs' components, numbered as met, written into
         * their rank slots */
        for (size_t r = 0; r < cs.n_runs && st == TW_OK; r++)
            for (int64_t i = u[r].b; i < (int64_t)u[r].e; i++) {
                uint64_t q = atomic_load_explicit(&s->lab_q[i >> 6], memory_order_relaxed) >>
                             (i & 63);
                uint32_t root;

                if (!q) {
                    i |= 63;
                    continue;
                }
                if ((i += CTZ64(q)) >= (int64_t)u[r].e)
                    break;
                root = run_find(u, (uint32_t)r);
                if (u[root].cid == UINT32_MAX) {
                    if (!grow((void **)&cs.size, &cs.cap_comp, cs.n_comp + 1, sizeof *cs.size)) {
                        st = TW_E_NOMEM;
                        break;
                    }
                    cs.size[cs.n_comp] = 0;
                    u[root].cid = (uint32_t)cs.n_comp++;
                }
                s->a[i - s->g] = u[root].cid;
            }
        for (size_t r = 0; r < cs.n_runs && st == TW_OK; r++) {
            uint32_t root = run_find(u, (uint32_t)r);

            if (u[root].cid != UINT32_MAX)
                cs.size[u[root].cid] += u[r].e - u[r].b;
        }
    }
    queue_mark(s, p, false);
    atomic_fetch_add_explicit(&s->label_ns, (long long)((omp_get_wtime() - t0) * 1e9),
                              memory_order_relaxed);
    pthread_mutex_unlock(&s->lab_lock);
    if (st != TW_OK)
        goto out;
    if (cs.over) {
        /* a fragmented region (noise): not worth labelling again */
        p->comp_off = true;
        goto out;
    }
    if (cs.n_comp <= 1)
        goto out;
    /* the components by decreasing size, the largest kept, the others to the least loaded */
    if (room > (int)cs.n_comp - 1)
        room = (int)cs.n_comp - 1;
    if (!(ord = malloc(cs.n_comp * sizeof *ord)) || !(dest = malloc(cs.n_comp * sizeof *dest)) ||
        !(load = calloc((size_t)room + 1, sizeof *load)) ||
        !(ren = calloc((size_t)room + 1, sizeof *ren))) {
        st = TW_E_NOMEM;
        goto out;
    }
    for (size_t k = 0; k < cs.n_comp; k++)
        ord[k] = (comp_ord){ cs.size[k], (uint32_t)k };
    qsort(ord, cs.n_comp, sizeof *ord, comp_cmp);
    for (size_t r = 0; r < cs.n_comp; r++) {
        int best = 0;

        for (int i = 1; r > 0 && i <= room; i++)
            if (load[i] < load[best])
                best = i;
        dest[ord[r].k] = (uint32_t)best;
        load[best] += ord[r].size;
    }
    /* shares below split_min stay with p; the others numbered 1.. */
    for (int i = 1; i <= room; i++)
        if (load[i] >= split_min) {
            ren[i] = (uint32_t)++n_new;
            load[n_new] = load[i];
        } else {
            load[0] += load[i];
        }
    for (size_t k = 0; k < cs.n_comp; k++)
        dest[k] = ren[dest[k]];
    if (n_new == 0)
        goto out;
    if (!(np = calloc((size_t)n_new + 1, sizeof *np)) ||
        !(lvls = malloc(s->nl * sizeof *lvls)) || !(heads = malloc(s->nl * sizeof *heads))) {
        st = TW_E_NOMEM;
        goto out;
    }
    np[0] = p;
    for (int i = 1; i <= n_new; i++) {
        if (!(np[i] = part_new(s))) {
            st = TW_E_NOMEM;
            goto out;
        }
        np[i]->cur = p->cur;
        np[i]->ord = p->ord;
        np[i]->chain = np[i]->labelled_at = p->chain;
    }
    /* every queued face to its component's part, at its level */
    for (int64_t L = lv_min_ge(p, 0, s->nl); L < s->nl; L = lv_min_ge(p, L + 1, s->nl)) {
        lvls[n_lv] = (uint32_t)L;
        heads[n_lv++] = p->head[L];
    }
    memset(p->l1, 0, part_words(s) * sizeof *p->l1);
    p->top = 0;
    for (int64_t i = 0; i < n_lv; i++) {
        chunk *c = heads[i];

        while (c) {
            chunk *nx = c->next;

            for (uint32_t j = 0; j < c->n && st == TW_OK; j++)
                st = push(s, np[dest[s->a[c->v[j]]]], lvls[i], c->v[j]);
            chunk_put(s, p, c);
            c = nx;
        }
    }
    for (int i = 1; i <= n_new && st == TW_OK; i++) {
        twi_tos_part *q = np[i];

        np[i] = NULL;
        made++;
        atomic_fetch_add_explicit(&s->parts, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->alive, 1, memory_order_relaxed);
        st = hk->spawn(hk->user, q);
    }
out:
    for (int i = 1; np && i <= n_new; i++)
        twi_tos_part_free(s, np[i]); /* NULL: spawned */
    atomic_fetch_add_explicit(&s->comp_parts, made, memory_order_relaxed);
    free(heads);
    free(lvls);
    free(np);
    free(ren);
    free(load);
    free(dest);
    free(ord);
    free(cs.size);
    free(cs.runs);
    return st;
}

/* Queue the unseen neighbour `n` (at column X, row Y) of a face popped at level l. */
#define TOS_VISIT(N, X, Y)                                                                         \
    do {                                                                                           \
        int64_t n_ = (N); /* a guard row when off the grid */                                     \
        if (seen_set(s, n_, alone) &&                                                              \
            (st = push(s, p, span_clamp(s, (X), (Y), l), (uint32_t)n_)) != TW_OK)                  \
            goto out;                                                                              \
    } while (0)

tw_status
twi_tos_sort_run(twi_tos_sort *s, twi_tos_part *p, const twi_tos_hooks *hk)
{
    uint32_t *a = s->a;
    const int64_t kw = s->kw;
    const double rkw = 1.0 / (double)kw;
    const int64_t crew_min = hk && hk->crew_min > 0 ? hk->crew_min : CREW_FACES;
    const int64_t split_min = hk && hk->split_min > 0 ? hk->split_min : SPLIT_FACES;
    /* automatic: 16-bit images only (8-bit ones share their large batches instead: with the
     * sub-tree split as well, the 16-thread sort of field 4096^2 took 0.65 s against 0.52) */
    const int64_t comp_every = !hk                 ? -1
                               : hk->comp_every != 0 ? hk->comp_every
                               : s->wide             ? 0
                                                     : -1;
    int64_t since = 0, batches = 0, crew_check;
    tw_status st = TW_OK;
    bool alone;
    int helpers;

    while (p->top) {
        int64_t lo = lv_max_le(p, p->cur), hi = lv_min_ge(p, p->cur, s->nl);
        uint32_t l;

        /* the nearest non-empty level, the lower on a tie */
        l = (uint32_t)(hi >= s->nl || (lo >= 0 && (int64_t)p->cur - lo <= hi - (int64_t)p->cur)
                           ? lo
                           : hi);
        /* the other parts' last writes are seen once they are counted out (release) */
        alone = atomic_load_explicit(&s->alive, memory_order_acquire) == 1;
        p->cur = l;
        p->ord++;
        batches++;
        crew_check = 0;
        while (lv_has(p, l)) {
            uint32_t face;
            int64_t X, Y;

            /* a large batch with workers idle: shared with helpers from here */
            if (crew_check-- == 0) {
                crew_check = CREW_CHECK;
                if (hk && hk->idle && hk->help && level_holds(p, l, crew_min) &&
                    (helpers = hk->idle(hk->user)) > 0) {
                    if ((st = crew_batch(s, p, l, helpers, hk)) != TW_OK)
                        goto out;
                    break;
                }
            }
            face = pop(s, p, l);
            face_xy(kw, rkw, face, &X, &Y);
            a[face] = p->ord;
            p->chain++;
            TOS_VISIT((int64_t)face - kw, X, Y - 1);
            TOS_VISIT((int64_t)face - 1, X - 1, Y);
            TOS_VISIT((int64_t)face + 1, X + 1, Y);
            TOS_VISIT((int64_t)face + kw, X, Y + 1);
            /* inside the batch: one level can hold most of the faces */
            if (++since >= PROGRESS_FACES) {
                if (hk && hk->progress && !hk->progress(hk->user, since)) {
                    st = TW_E_CANCELED;
                    goto out;
                }
                since = 0;
            }
        }
        /* the components of the part's region, for idle workers, every comp_every faces */
        if (hk && hk->want_split && hk->spawn && p->top && comp_every >= 0 && !p->comp_off &&
            p->chain - p->labelled_at >= (comp_every > 0 ? comp_every : COMP_FACES) &&
            hk->want_split(hk->user)) {
            int room = hk->idle ? hk->idle(hk->user) : 1;

            if ((st = comp_split(s, p, hk, room > 0 ? room : 1, split_min)) != TW_OK)
                goto out;
        }
        /* an independent sub-propagation for an idle worker: the side with fewer faces, if
         * it holds split_min; the part keeps the larger (see the top of the file) */
        if (hk && hk->want_split && p->top && hk->want_split(hk->user)) {
            int64_t below = lv_max_le(p, (int64_t)l - 1), above = lv_min_ge(p, l + 1, s->nl);
            const uint32_t gl = l >> s->gshift, ng = s->nl >> s->gshift;
            uint64_t nb = 0, na = 0, pb = 0, pa = 0;

            if (below >= 0 && above < s->nl) {
                /* the faces on each side: whole groups of levels by their counts (by 64
                 * groups where they can), the levels of l's group (16-bit) by their chunks
                 * once the groups alone leave the split possible */
                for (uint32_t g = 0; g < gl >> 6; g++)
                    nb += p->gq2[g];
                for (uint32_t g = gl >> 6 << 6; g < gl; g++)
                    nb += p->gq[g];
                for (uint32_t g = gl + 1; g < ng && (g & 63); g++)
                    na += p->gq[g];
                for (uint32_t g = (gl >> 6) + 1; g < (ng + 63) / 64; g++)
                    na += p->gq2[g];
                if ((nb < na ? nb : na) + p->gq[gl] < (uint64_t)split_min)
                    continue;
                for (int64_t L = (int64_t)gl << s->gshift; L < (int64_t)(gl + 1) << s->gshift;
                     L++)
                    for (chunk *c = lv_has(p, (uint32_t)L) ? p->head[L] : NULL; c; c = c->next)
                        *(L < l ? &pb : &pa) += c->n;
            }
            if (below >= 0 && above < s->nl &&
                (nb + pb < na + pa ? nb + pb : na + pa) >= (uint64_t)split_min) {
                twi_tos_part *np = part_new(s);
                int64_t L;
                bool give_low;

                if (!np) {
                    st = TW_E_NOMEM;
                    goto out;
                }
                give_low = nb + pb <= na + pa;
                for (uint32_t g = give_low ? 0 : gl + 1; g < (give_low ? gl : ng); g++) {
                    np->gq[g] = p->gq[g];
                    np->gq2[g >> 6] += p->gq[g];
                    p->gq2[g >> 6] -= p->gq[g];
                    p->gq[g] = 0;
                }
                np->gq[gl] = give_low ? pb : pa;
                np->gq2[gl >> 6] += np->gq[gl];
                p->gq2[gl >> 6] -= np->gq[gl];
                p->gq[gl] -= np->gq[gl];
                for (L = give_low ? below : above; L >= 0 && L < s->nl;
                     L = give_low ? lv_max_le(p, L - 1) : lv_min_ge(p, L + 1, s->nl)) {
                    np->head[L] = p->head[L];
                    lv_set(np, (uint32_t)L);
                }
                for (L = give_low ? lv_max_le(np, s->nl - 1) : lv_min_ge(np, 0, s->nl);
                     L >= 0 && L < s->nl;
                     L = give_low ? lv_max_le(np, L - 1) : lv_min_ge(np, L + 1, s->nl))
                    lv_clear(p, (uint32_t)L);
                np->cur = l;
                np->ord = p->ord;
                np->chain = np->labelled_at = p->chain;
                atomic_fetch_add_explicit(&s->parts, 1, memory_order_relaxed);
                atomic_fetch_add_explicit(&s->alive, 1, memory_order_relaxed);
                if ((st = hk->spawn(hk->user, np)) != TW_OK)
                    goto out;
            }
        }
    }
    if (hk && hk->progress && since)
        hk->progress(hk->user, since);
out:
    atomic_fetch_add_explicit(&s->batches, batches, memory_order_relaxed);
    for (long long c = atomic_load_explicit(&s->max_chain, memory_order_relaxed);
         c < p->chain && !atomic_compare_exchange_weak_explicit(
                             &s->max_chain, &c, p->chain, memory_order_relaxed,
                             memory_order_relaxed);)
        ;
    twi_tos_part_free(s, p);
    atomic_fetch_sub_explicit(&s->alive, 1, memory_order_release);
    return st;
}

void
twi_tos_sort_stats(twi_tos_sort *s, int64_t *parts, int64_t *batches, int64_t *crews,
                   size_t *queue_bytes)
{
    if (parts)
        *parts = atomic_load(&s->parts);
    if (crews)
        *crews = atomic_load(&s->crews);
    if (batches)
        *batches = atomic_load(&s->batches);
    if (queue_bytes) {
        pthread_mutex_lock(&s->lock);
        *queue_bytes = s->n_slabs * SLAB_CHUNKS * sizeof(chunk);
        pthread_mutex_unlock(&s->lock);
    }
}

void
twi_tos_sort_comp_stats(twi_tos_sort *s, int64_t *labellings, int64_t *comp_parts,
                        double *label_s, int64_t *chain)
{
    if (chain)
        *chain = atomic_load(&s->max_chain);
    if (label_s)
        *label_s = (double)atomic_load(&s->label_ns) * 1e-9;
    if (labellings)
        *labellings = atomic_load(&s->labellings);
    if (comp_parts)
        *comp_parts = atomic_load(&s->comp_parts);
}

uint32_t
twi_tos_sort_exterior(const twi_tos_sort *s)
{
    return s->m;
}

void
twi_tos_sort_destroy(twi_tos_sort *s)
{
    if (!s)
        return;
    while (s->spare) {
        twi_tos_part *p = s->spare;

        s->spare = p->next_side;
        free(p->head);
        free(p->l1);
        free(p);
    }
    free((void *)s->lab_q);
    for (size_t i = 0; i < s->n_slabs; i++)
        free(s->slabs[i]);
    free(s->slabs);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->lab_lock);
    free(s);
}

/* ---- un-interpolation ------------------------------------------------------------------------ */

struct twi_tos_un {
    const tw_tile_view *in;
    const uint32_t *a;         /* grid parents (canonical max-tree of the ranks) */
    const uint64_t *canon;     /* the grid's canonical faces */
    uint32_t *rank;            /* set bits of canon before each word */
    _Atomic uint32_t *mp;      /* per grid node: 1 + its largest pixel index, 0: no pixel */
    uint32_t *par;             /* the parent image (w * h, packed) */
    int64_t w, h, kw;
    uint32_t groot;            /* the grid's root */
    int64_t nodes;             /* grid nodes */
};

static inline uint32_t
node_rank(const twi_tos_un *u, uint32_t c)
{
    uint64_t word = u->canon[c >> 6], below = ((uint64_t)1 << (c & 63)) - 1;

    return u->rank[c >> 6] + (uint32_t)POPCNT64(word & below);
}

tw_status
twi_tos_un_create(const tw_tile_view *in, const uint32_t *a, const uint64_t *canon,
                  uint32_t *parent, twi_tos_un **out)
{
    twi_tos_un *u;
    size_t words;
    uint32_t r = 0;

    if (!out || !a || !canon || !parent || view_check(in) != TW_OK || in->w < 1 || in->h < 1)
        return TW_E_INVALID;
    if (!(u = calloc(1, sizeof *u)))
        return TW_E_NOMEM;
    u->in = in;
    u->a = a;
    u->canon = canon;
    u->par = parent;
    u->w = in->w;
    u->h = in->h;
    u->kw = 2 * u->w - 1;
    words = ((size_t)(u->kw * (2 * u->h - 1)) + 63) / 64;
    if (!(u->rank = malloc(words * sizeof *u->rank))) {
        free(u);
        return TW_E_NOMEM;
    }
    for (size_t i = 0; i < words; i++) {
        u->rank[i] = r;
        r += (uint32_t)POPCNT64(canon[i]);
    }
    u->nodes = r;
    if (!(u->mp = calloc((size_t)r, sizeof *u->mp))) {
        free(u->rank);
        free(u);
        return TW_E_NOMEM;
    }
    for (u->groot = 0; a[u->groot] != u->groot;)
        u->groot = a[u->groot];
    *out = u;
    return TW_OK;
}

void
twi_tos_un_nodes(twi_tos_un *u, int64_t y0, int64_t y1)
{
    for (int64_t y = y0; y < y1; y++) {
        for (int64_t x = 0; x < u->w; x++) {
            uint32_t k = (uint32_t)(2 * y * u->kw + 2 * x), c, p = (uint32_t)(y * u->w + x);
            _Atomic uint32_t *slot;
            uint32_t cur;

            c = u->canon[k >> 6] >> (k & 63) & 1 ? k : u->a[k];
            /* the node's grid face, until the pixel's parent is known */
            u->par[p] = c;
            slot = &u->mp[node_rank(u, c)];
            cur = atomic_load_explicit(slot, memory_order_relaxed);
            while (cur < p + 1 && !atomic_compare_exchange_weak_explicit(
                                      slot, &cur, p + 1, memory_order_relaxed,
                                      memory_order_relaxed)) {
            }
        }
    }
}

void
twi_tos_un_parents(twi_tos_un *u, int64_t y0, int64_t y1)
{
    for (int64_t p = y0 * u->w; p < y1 * u->w; p++) {
        uint32_t c = u->par[p], m = atomic_load_explicit(&u->mp[node_rank(u, c)],
                                                         memory_order_relaxed);

        if (m != (uint32_t)p + 1) {
            u->par[p] = m - 1;
            continue;
        }
        /* the canonical pixel: up to the nearest grid ancestor holding pixels */
        for (;;) {
            uint32_t c2 = u->a[c];

            if (c2 == c) {
                u->par[p] = (uint32_t)p;
                break;
            }
            if ((m = atomic_load_explicit(&u->mp[node_rank(u, c2)], memory_order_relaxed))) {
                u->par[p] = m - 1;
                break;
            }
            c = c2;
        }
    }
}

bool
twi_tos_un_root_implicit(const twi_tos_un *u)
{
    return atomic_load_explicit(&u->mp[node_rank(u, u->groot)], memory_order_relaxed) == 0;
}

int64_t
twi_tos_un_grid_nodes(const twi_tos_un *u)
{
    return u->nodes;
}

void
twi_tos_un_destroy(twi_tos_un *u)
{
    if (!u)
        return;
    free(u->rank);
    free((void *)u->mp);
    free(u);
}

/* ---- areas and the grain filter -------------------------------------------------------------- */

/* The scratch of the attribute steps: two uint32 a pixel. */
#define ATTR_INTERNAL 0x80000000u

static inline bool
is_canon(const tw_tile_view *in, const uint32_t *par, int64_t w, uint32_t p)
{
    uint32_t q = par[p];

    return q == p || px(in, (int64_t)(q % (uint32_t)w), (int64_t)(q / (uint32_t)w)) !=
                         px(in, (int64_t)(p % (uint32_t)w), (int64_t)(p / (uint32_t)w));
}

void
twi_tos_attr_init(uint32_t *scratch, int64_t w, int64_t h, int64_t y0, int64_t y1)
{
    memset(scratch + y0 * w, 0, (size_t)((y1 - y0) * w) * sizeof *scratch);
    memset(scratch + w * h + y0 * w, 0, (size_t)((y1 - y0) * w) * sizeof *scratch);
}

void
twi_tos_attr_count(const tw_tile_view *in, const uint32_t *par, uint32_t *scratch, int64_t y0,
                   int64_t y1)
{
    const int64_t w = in->w, n = w * in->h;
    _Atomic uint32_t *cnt = (_Atomic uint32_t *)(void *)scratch;
    _Atomic uint32_t *acc = (_Atomic uint32_t *)(void *)(scratch + n);

    for (int64_t y = y0; y < y1; y++) {
        for (int64_t x = 0; x < w; x++) {
            uint32_t p = (uint32_t)(y * w + x), q = par[p];

            if (q == p || px(in, (int64_t)(q % (uint32_t)w), (int64_t)(q / (uint32_t)w)) !=
                              px(in, x, y)) {
                atomic_fetch_add_explicit(&acc[p], 1, memory_order_relaxed);
                if (q != p)
                    atomic_fetch_add_explicit(&cnt[q], 1, memory_order_relaxed);
            } else {
                atomic_fetch_add_explicit(&acc[q], 1, memory_order_relaxed);
            }
        }
    }
}

void
twi_tos_attr_mark(uint32_t *scratch, int64_t w, int64_t y0, int64_t y1)
{
    /* nodes with children keep a flag: the climb starts only at the leaves */
    for (int64_t p = y0 * w; p < y1 * w; p++)
        if (scratch[p])
            scratch[p] |= ATTR_INTERNAL;
}

void
twi_tos_attr_climb(const tw_tile_view *in, const uint32_t *par, uint32_t *scratch, int64_t y0,
                   int64_t y1)
{
    const int64_t w = in->w, n = w * in->h;
    _Atomic uint32_t *cnt = (_Atomic uint32_t *)(void *)scratch;
    _Atomic uint32_t *acc = (_Atomic uint32_t *)(void *)(scratch + n);

    for (int64_t s = y0 * w; s < y1 * w; s++) {
        uint32_t x = (uint32_t)s;

        if ((atomic_load_explicit(&cnt[x], memory_order_relaxed) & ATTR_INTERNAL) ||
            !is_canon(in, par, w, x))
            continue;
        /* a leaf: its area is complete; hand it up while this thread completes parents */
        for (;;) {
            uint32_t q = par[x], area = atomic_load_explicit(&acc[x], memory_order_acquire);

            if (q == x)
                break;
            atomic_fetch_add_explicit(&acc[q], area, memory_order_relaxed);
            if ((atomic_fetch_sub_explicit(&cnt[q], 1, memory_order_acq_rel) & ~ATTR_INTERNAL) !=
                1)
                break;
            x = q;
        }
    }
}

void
twi_tos_attr_area(const tw_tile_view *in, const uint32_t *par, const uint32_t *scratch,
                  tw_tile_view *area, int64_t y0, int64_t y1)
{
    const int64_t w = in->w, n = w * in->h;

    for (int64_t y = y0; y < y1; y++) {
        uint32_t *row = (uint32_t *)(void *)((char *)area->data + y * area->stride);

        for (int64_t x = 0; x < w; x++) {
            uint32_t p = (uint32_t)(y * w + x);

            row[x] = scratch[n + (is_canon(in, par, w, p) ? p : par[p])];
        }
    }
}

/* The level a node keeps under the grain filter (see twi_tos_grain). */
static uint32_t
grain_of(const tw_tile_view *in, const uint32_t *par, uint32_t *scratch, int64_t w,
         const twi_tos_grain_rule *g, uint32_t x)
{
    const int64_t n = w * in->h;
    _Atomic uint32_t *res = (_Atomic uint32_t *)(void *)scratch;
    const uint32_t *acc = scratch + n;
    uint32_t y = x, v, r;

    /* up to a node known or kept; its value then down the path walked */
    for (;;) {
        if ((r = atomic_load_explicit(&res[y], memory_order_relaxed))) {
            v = r - 1;
            break;
        }
        if (acc[y] >= g->area) {
            v = px(in, (int64_t)(y % (uint32_t)w), (int64_t)(y / (uint32_t)w));
            break;
        }
        if (par[y] == y) {
            v = g->implicit_root ? g->exterior
                                 : px(in, (int64_t)(y % (uint32_t)w), (int64_t)(y / (uint32_t)w));
            break;
        }
        y = par[y];
    }
    for (y = x;; y = par[y]) {
        if (atomic_load_explicit(&res[y], memory_order_relaxed))
            break;
        atomic_store_explicit(&res[y], v + 1, memory_order_relaxed);
        if (acc[y] >= g->area || par[y] == y)
            break;
    }
    return v;
}

void
twi_tos_grain_reset(uint32_t *scratch, int64_t w, int64_t y0, int64_t y1)
{
    memset(scratch + y0 * w, 0, (size_t)((y1 - y0) * w) * sizeof *scratch);
}

void
twi_tos_grain(const tw_tile_view *in, const uint32_t *par, uint32_t *scratch,
              const twi_tos_grain_rule *g, tw_tile_view *out, int64_t y0, int64_t y1)
{
    const int64_t w = in->w;

    for (int64_t y = y0; y < y1; y++) {
        char *row = (char *)out->data + y * out->stride;

        for (int64_t x = 0; x < w; x++) {
            uint32_t p = (uint32_t)(y * w + x);
            uint32_t v = grain_of(in, par, scratch, w, g, is_canon(in, par, w, p) ? p : par[p]);

            if (out->type == TW_U16)
                ((uint16_t *)(void *)row)[x] = (uint16_t)v;
            else
                ((uint8_t *)(void *)row)[x] = (uint8_t)v;
        }
    }
}

/* ---- the whole computation with OpenMP ------------------------------------------------------- */

/* The sort's parts as OpenMP tasks of one team (or, without a team, one after another). */
typedef struct omp_sort {
    twi_tos_sort *s;
    atomic_int active;         /* parts started and not finished */
    atomic_int helpers;        /* helper tasks made and not finished */
    int nthreads;
    bool always;
    int64_t crew_min, split_min, comp_every;
    _Atomic int st;            /* first error */
    twi_tos_part **pending;    /* without a team: parts split off, run after */
    size_t n_pending, cap_pending;
} omp_sort;

/* Threads with nothing to do, as far as the counts of parts and helpers tell. */
static int
omp_idle(void *user)
{
    omp_sort *o = user;
    int busy = atomic_load_explicit(&o->active, memory_order_relaxed) +
               atomic_load_explicit(&o->helpers, memory_order_relaxed);

    if (o->nthreads <= 1)
        return 0;
    /* tests: every large batch shared, with at least one helper */
    if (o->always && busy >= o->nthreads)
        return 1;
    return o->nthreads - busy > 0 ? o->nthreads - busy : 0;
}

static bool
omp_want_split(void *user)
{
    omp_sort *o = user;

    return o->always || atomic_load_explicit(&o->active, memory_order_relaxed) +
                                atomic_load_explicit(&o->helpers, memory_order_relaxed) <
                            o->nthreads;
}

static tw_status
omp_help(void *user, twi_tos_crew *c, uint64_t gen)
{
    omp_sort *o = user;

    atomic_fetch_add_explicit(&o->helpers, 1, memory_order_relaxed);
#pragma omp task default(none) firstprivate(o, c, gen)
    {
        twi_tos_crew_help(c, gen, NULL);
        atomic_fetch_sub_explicit(&o->helpers, 1, memory_order_relaxed);
    }
    return TW_OK;
}

static void omp_run_part(omp_sort *o, twi_tos_part *p);

static tw_status
omp_spawn(void *user, twi_tos_part *p)
{
    omp_sort *o = user;

    atomic_fetch_add_explicit(&o->active, 1, memory_order_relaxed);
    if (o->nthreads <= 1) {
        if (o->n_pending == o->cap_pending) {
            size_t cap = o->cap_pending ? 2 * o->cap_pending : 64;
            twi_tos_part **t = realloc(o->pending, cap * sizeof *t);

            if (!t) {
                twi_tos_part_free(o->s, p);
                return TW_E_NOMEM;
            }
            o->pending = t;
            o->cap_pending = cap;
        }
        o->pending[o->n_pending++] = p;
        return TW_OK;
    }
#pragma omp task default(none) firstprivate(o, p)
    omp_run_part(o, p);
    return TW_OK;
}

static void
omp_run_part(omp_sort *o, twi_tos_part *p)
{
    const twi_tos_hooks hk = { .user = o, .want_split = omp_want_split, .spawn = omp_spawn,
                               .idle = omp_idle, .help = omp_help, .crew_min = o->crew_min,
                               .split_min = o->split_min, .comp_every = o->comp_every };
    tw_status st = twi_tos_sort_run(o->s, p, &hk);
    int ok = TW_OK;

    if (st != TW_OK)
        atomic_compare_exchange_strong(&o->st, &ok, (int)st);
    atomic_fetch_sub_explicit(&o->active, 1, memory_order_relaxed);
}

/* Bands of rows for the parallel loops: a few per thread. */
static int64_t
band_rows(int64_t h, int nthreads)
{
    int64_t b = h / (8 * (int64_t)(nthreads < 1 ? 1 : nthreads));

    return b < 1 ? 1 : b;
}

tw_status
twi_omp_tos(const tw_tile_view *in, tw_tile_view *parent, tw_tile_view *area,
            tw_tile_view *grain, uint64_t grain_area, twi_tos_run *r)
{
    const int nth = r && r->nthreads > 1 ? r->nthreads : 1;
    tw_status st;
    int64_t w, h, kw, kh, nk, n, rows, nb;
    uint32_t *a = NULL, *par = NULL, *scratch = NULL, *sbuf = NULL;
    uint64_t *seen = NULL, *canon;
    twi_tos_sort *s = NULL;
    twi_tos_part *root = NULL;
    twi_tos_un *u = NULL;
    omp_sort o;
    double t0;
    uint32_t m;
    bool implicit = false;

    if ((st = view_check(in)) != TW_OK)
        return st;
    w = in->w;
    h = in->h;
    if (w == 0 || h == 0)
        return TW_OK;
    n = w * h;
    if ((parent && (parent->type != TW_U32 || parent->channels != 1 || parent->w != w ||
                    parent->h != h || !twi_view_fits(parent, (size_t)w * 4, 4))) ||
        (area && (area->type != TW_U32 || area->channels != 1 || area->w != w ||
                  area->h != h || !twi_view_fits(area, (size_t)w * 4, 4))) ||
        (grain && (grain->type != in->type || grain->channels != 1 || grain->w != w ||
                   grain->h != h || grain_area < 1 ||
                   !twi_view_fits(grain, (size_t)w * tw_sample_size(in->type),
                                  tw_sample_size(in->type)))))
        return TW_E_INVALID;
    kw = 2 * w - 1;
    kh = 2 * h - 1;
    nk = kw * kh;
    rows = band_rows(h, nth);
    nb = (h + rows - 1) / rows;
    memset(&o, 0, sizeof o);
    /* the grid; the sort's seen faces, later the canonical faces (past the guard row) */
    if (!(a = malloc((size_t)nk * sizeof *a)) ||
        !(seen = malloc(twi_tos_seen_words(w, h) * sizeof *seen))) {
        st = TW_E_NOMEM;
        goto out;
    }
    canon = seen + (kw + 63) / 64;
    if (parent && (size_t)parent->stride == (size_t)w * 4)
        par = parent->data;
    else if (!(par = sbuf = malloc((size_t)n * sizeof *par))) {
        st = TW_E_NOMEM;
        goto out;
    }

    t0 = omp_get_wtime();
    if ((st = twi_tos_sort_create(in, a, seen, &s, &root)) != TW_OK)
        goto out;
    o.s = s;
    o.nthreads = nth;
    o.always = r && r->split_always;
    o.crew_min = r ? r->crew_min : 0;
    o.split_min = r && r->split_min > 0 ? r->split_min : o.always ? 1 : 0;
    o.comp_every = r ? r->comp_every : 0;
    atomic_init(&o.active, 1);
    atomic_init(&o.helpers, 0);
    atomic_init(&o.st, TW_OK);
    if (nth <= 1) {
        omp_run_part(&o, root);
        while (o.n_pending > 0)
            omp_run_part(&o, o.pending[--o.n_pending]);
    } else {
        omp_sort *op = &o;

#pragma omp parallel num_threads(nth) default(none) shared(op, root)
#pragma omp single
        omp_run_part(op, root);
    }
    root = NULL;
    if ((st = (tw_status)atomic_load(&o.st)) != TW_OK)
        goto out;
    m = twi_tos_sort_exterior(s);
    if (r) {
        r->exterior = m;
        twi_tos_sort_stats(s, &r->parts, &r->batches, &r->crews, &r->queue_bytes);
        twi_tos_sort_comp_stats(s, &r->labellings, &r->comp_parts, &r->t_label, &r->chain);
        r->t_sort = omp_get_wtime() - t0;
    }
    /* the queues' chunks go before the max-tree's nodes come */
    twi_tos_sort_destroy(s);
    s = NULL;

    t0 = omp_get_wtime();
    if ((st = twi_omp_maxtree_u32(a, (int32_t)kw, (int32_t)kh, 4, canon, nth,
                                  r ? r->gx : 0, r ? r->gy : 0)) != TW_OK)
        goto out;
    if (r)
        r->t_tree = omp_get_wtime() - t0;

    t0 = omp_get_wtime();
    if ((st = twi_tos_un_create(in, a, canon, par, &u)) != TW_OK)
        goto out;
#pragma omp parallel num_threads(nth) default(none) shared(u, nb, rows, h)
    {
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < nb; b++)
            twi_tos_un_nodes(u, b * rows, b * rows + rows < h ? b * rows + rows : h);
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < nb; b++)
            twi_tos_un_parents(u, b * rows, b * rows + rows < h ? b * rows + rows : h);
    }
    implicit = twi_tos_un_root_implicit(u);
    if (r) {
        r->nodes = twi_tos_un_grid_nodes(u) - (implicit ? 1 : 0);
        r->implicit_root = implicit;
        r->t_un = omp_get_wtime() - t0;
    }
    twi_tos_un_destroy(u);
    u = NULL;
    if (par == sbuf && parent)
        for (int64_t y = 0; y < h; y++)
            memcpy((char *)parent->data + y * parent->stride, par + y * w, (size_t)w * 4);

    t0 = omp_get_wtime();
    if (area || grain) {
        twi_tos_grain_rule g = { .area = grain_area, .exterior = m, .implicit_root = implicit };

        /* the grid is free again: it holds the two counts a pixel (not in a 1-pixel-wide
         * image, whose grid is smaller) */
        if (nk >= 2 * n)
            scratch = a;
        else if (!(scratch = malloc((size_t)(2 * n) * sizeof *scratch))) {
            st = TW_E_NOMEM;
            goto out;
        }
#pragma omp parallel num_threads(nth) default(none)                                              \
    shared(in, par, scratch, area, grain, g, nb, rows, h, w)
        {
#pragma omp for schedule(static)
            for (int64_t b = 0; b < nb; b++)
                twi_tos_attr_init(scratch, w, h, b * rows,
                                  b * rows + rows < h ? b * rows + rows : h);
#pragma omp for schedule(dynamic, 1)
            for (int64_t b = 0; b < nb; b++)
                twi_tos_attr_count(in, par, scratch, b * rows,
                                   b * rows + rows < h ? b * rows + rows : h);
#pragma omp for schedule(static)
            for (int64_t b = 0; b < nb; b++)
                twi_tos_attr_mark(scratch, w, b * rows, b * rows + rows < h ? b * rows + rows : h);
#pragma omp for schedule(dynamic, 1)
            for (int64_t b = 0; b < nb; b++)
                twi_tos_attr_climb(in, par, scratch, b * rows,
                                   b * rows + rows < h ? b * rows + rows : h);
            if (area) {
#pragma omp for schedule(dynamic, 1)
                for (int64_t b = 0; b < nb; b++)
                    twi_tos_attr_area(in, par, scratch, area, b * rows,
                                      b * rows + rows < h ? b * rows + rows : h);
            }
            if (grain) {
#pragma omp for schedule(static)
                for (int64_t b = 0; b < nb; b++)
                    twi_tos_grain_reset(scratch, w, b * rows,
                                        b * rows + rows < h ? b * rows + rows : h);
#pragma omp for schedule(dynamic, 1)
                for (int64_t b = 0; b < nb; b++)
                    twi_tos_grain(in, par, scratch, &g, grain, b * rows,
                                  b * rows + rows < h ? b * rows + rows : h);
            }
        }
        if (scratch == a)
            scratch = NULL;
    }
    if (r)
        r->t_attr = omp_get_wtime() - t0;

out:
    if (root)
        twi_tos_part_free(s, root);
    free(o.pending);
    twi_tos_un_destroy(u);
    twi_tos_sort_destroy(s);
    free(scratch);
    free(sbuf);
    free(seen);
    free(a);
    return st;
}
