/* SPDX-License-Identifier: MIT */
/* tilewave: canonical max-tree of an image on the CPU (flooding per block, CONNECT merge). */
/* Why one file: the block flooding, the CONNECT merge and their drivers are one algorithm
 * ([Blin22]) specialised per sample type through the same macros; split, each part would need
 * the macros and the block structs in a header of their own. */

/*
 * What this computes. The canonical parent image of kern/maxtree.h: with the total
 * order p < q iff f(p) < f(q) or (f(p) = f(q) and p > q), every pixel points to the canonical
 * pixel (largest raster index) of its node, canonical pixels point to the canonical pixel of
 * the parent node, the root to itself. The representation is unique, so the one-block path,
 * the blocked paths and the CUDA twin must write the same bytes.
 *
 * One block: flooding with a stack of open nodes (Salembier et al. 1998, in the
 * non-recursive form of Nistér and Stewénius 2008). From a first pixel, the flood always takes
 * next the highest pixel of its boundary queue; scanning a pixel's neighbours, an unvisited
 * one above it is climbed into at once (the pixel goes back to the queue and a node opens at
 * the new level), the others join the queue. A pixel whose neighbours are all visited or not
 * above it joins the open node of its level; when the queue's highest level falls below the
 * top open node's, that node is complete and gets as parent the next open node, or a new node
 * at the queue's level. Unlike the union-find over pixels sorted by level (Berger et al. 2007),
 * the flood touches the image near its front rather than in level order all over the block:
 * on 1024^2 16-bit images with nearly all levels distinct it is 1.3 to 2 times as fast, on
 * 8-bit ones about 1.2 times. The queue holds a stack per level, laid out by a histogram of the
 * block (each pixel is queued at most once at a time), and a three-level bit map of the
 * non-empty levels finds the highest one in a few word operations among 65536 levels. The
 * block's levels are copied into a framed array (row stride width + 2, the one-pixel frame
 * marked visited in a bit map), so neighbours are at fixed offsets with no bounds test. Each
 * pixel records its node; a node's canonical pixel is the largest raster index that joined
 * it, so a last pass over the block writes the canonical form directly.
 *
 * Indices. The parent image holds global raster indices y * w + x, so blocks need no index
 * translation and the output no division; it is the output view itself when that is packed
 * with the index size. The flood's arrays live in one scratch slot per thread. Indices are
 * 32-bit up to 2^31 pixels (the top bit marks gathered nodes during a border merge, below),
 * 64-bit above or when a TW_U64 parent is asked for.
 *
 * Blocks. Large images are cut into a grid of square-ish blocks (sizes at BLOCK_PIXELS_1):
 * alone, blocks of millions of pixels, above which the flood slows down in cache; with a team,
 * at least a block a thread. A binary tree of OpenMP tasks builds each block (its parents stay
 * inside it); each inner node then merges its two halves along their shared border. 8-bit:
 * CONNECT ([Blin22], algorithm 3): for an edge (a, b), a goes up to its level root, b up to
 * its highest ancestor of level >= f(a), the lower of the two in the order above becomes the
 * parent of the other, and the zip goes on with the old parent. Ties link the smaller index
 * under the larger, so level roots stay the largest index of their node. 16-bit: CONNECT
 * walks a node per level crossed, and with nearly every level a node of its own it walks the
 * same long chains for edge after edge (a 1024-pixel border of a natural 16-bit image: 30 to
 * 50 steps per node of the border trees); instead, the level roots of the border's pixels and
 * all their ancestors (both sides' border trees) are gathered once and merged by a union-find
 * over them in decreasing order, the border edges and the parent links as its edges (as
 * twi_maxtree_merge does for tiles; CONNECT again when out of memory). Sibling tasks touch
 * disjoint sets of pixels: no races. A border edge is skipped when a path through the edges
 * already merged joins its ends at its level ([Blin22] section 5.2's grid simplification).
 *
 * Flatten. After the merges only the level roots that a merge linked under another root of
 * their level ("demoted", marked in a byte map) can be stale parents; every other parent is
 * still a level root. Rows are then flattened in parallel: a pixel whose parent was demoted
 * takes the level root of its parent. That gives the same bytes as the one-block path.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "omp_kernels.h"
#include "omp_stop.h"

/* Automatic grid: square blocks of about this many pixels. Alone, a block of about 2^20
 * pixels floods as fast per pixel as smaller ones (the flood stays near its front) and needs
 * no merges: 8-bit 1024^2 images flood a fifth faster as one block than as 16 of 2^16, 4096^2
 * ones as fast as 16 blocks of 2^20 as 256 of 2^16; 16-bit images, whose merges cost more,
 * take blocks up to 2^22 (4096^2: 4 blocks about 10% faster than 1 or 16). A team of 8-bit
 * workers keeps cache-sized blocks of 2^16, at least BLOCKS_PER_THREAD_8 a thread for images
 * worth it (a few more than one even out the cost of blocks: noise costs more than flat
 * background); 16-bit teams take one block a thread, as every merge costs a union-find over
 * the border trees. Measured on 1024^2 and 4096^2 natural-like images. */
#define BLOCK_PIXELS_1 (1 << 20)
#define BLOCK_PIXELS_8 (1 << 16)
#define BLOCK_PIXELS_16 (1 << 22)
#define PAR_MIN_PIXELS (256 * 256)
#define BLOCKS_PER_THREAD_8 4
#define BLOCKS_PER_THREAD_16 1
/* Most blocks in a grid (keeps the block table and the task tree small). */
#define MAX_GRID_BLOCKS (1 << 24)
/* Rows flattened between two cancel checks. */
#define FLATTEN_ROWS 64

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define CLZ64(x) __builtin_clzll(x)
#else
#define ALWAYS_INLINE inline
#define UNLIKELY(x) (x)
#endif

/* A block of the grid. */
typedef struct blk {
    int64_t x0, y0, x1, y1;  /* pixels [x0, x1) x [y0, y1) */
} blk;

/* Everything the typed functions share. Global arrays are indexed by raster index y * w + x. */
typedef struct mtree {
    const void *f;           /* levels, w * h packed, uint8_t or uint16_t */
    void *par;               /* parent, uint32_t or uint64_t */
    uint8_t *demoted;        /* 1: was a level root, linked under one of its level by a merge */
    int64_t w, h;
    bool c8;
    const blk *blocks;       /* gx * gy, row-major */
    const int64_t *xs, *ys;  /* block edges: gx + 1 and gy + 1 entries */
    int32_t gx, gy;
    bool team;               /* running in our own team: tasks deferred, a slot per thread */
    char *scratch;           /* one slot per thread of the team */
    size_t fspan, bspan;     /* largest framed block ((w + 2) (h + 2)), largest block, pixels */
    size_t slot_bytes;       /* bytes of a thread's slot (slot_size()) */
    const twi_stop *stop;    /* NULL: never */
    atomic_bool *stopped;    /* set once stop said so: every later step is skipped */
} mtree;

/* True once the run is to stop (omp_stop.h). */
static inline bool
mt_stopped(const mtree *m)
{
    return twi_stop_now(m->stop, m->stopped);
}

/* CLZ64 without GCC builtins: leading zero bits of x (not 0). */
#ifndef CLZ64
static inline int
clz64(uint64_t x)
{
    int n = 0;

    while (!(x >> 63)) {
        x <<= 1;
        n++;
    }
    return n;
}
#define CLZ64(x) clz64(x)
#endif

/* The boundary queue's non-empty levels: a three-level bitmap, so that the highest level at
 * most l is found in a few word operations even among 65536 levels. */
typedef struct lvq {
    uint64_t *l1, *l2;
    uint64_t top;
} lvq;
#define LVQ_L1(nl) ((size_t)(nl) / 64)
#define LVQ_L2(nl) (((size_t)(nl) / 64 + 63) / 64)

static ALWAYS_INLINE void
lvq_set(lvq *q, unsigned l)
{
    unsigned i = l >> 6, j = i >> 6;

    q->l1[i] |= (uint64_t)1 << (l & 63);
    q->l2[j] |= (uint64_t)1 << (i & 63);
    q->top |= (uint64_t)1 << j;
}

static ALWAYS_INLINE void
lvq_clear(lvq *q, unsigned l)
{
    unsigned i = l >> 6, j = i >> 6;

    if (!(q->l1[i] &= ~((uint64_t)1 << (l & 63))) && !(q->l2[j] &= ~((uint64_t)1 << (i & 63))))
        q->top &= ~((uint64_t)1 << j);
}

/* The highest level <= l in the queue (there is one). */
static ALWAYS_INLINE unsigned
lvq_max_le(const lvq *q, unsigned l)
{
    unsigned i = l >> 6, j;
    uint64_t x = q->l1[i] & (~(uint64_t)0 >> (63 - (l & 63)));

    if (x)
        return (i << 6) | (unsigned)(63 - CLZ64(x));
    j = i >> 6;
    x = q->l2[j] & (((uint64_t)1 << (i & 63)) - 1);
    if (!x) {
        x = q->top & (((uint64_t)1 << j) - 1);
        j = (unsigned)(63 - CLZ64(x));
        x = q->l2[j];
    }
    i = (j << 6) | (unsigned)(63 - CLZ64(x));
    return (i << 6) | (unsigned)(63 - CLZ64(q->l1[i]));
}

/* Mark framed pixel V visited in the bit map vb. */
#define MT_VSET(V) (vb[(size_t)(V) >> 6] |= (uint64_t)1 << ((size_t)(V) & 63))

/* One neighbour at offset OFF of the flooding's current pixel v (flood_body_*): unvisited and
 * above v, the flood climbs into it (v goes back to the queue); else it joins the queue. A
 * level's bit is set when its stack was empty; on 16-bit images, where that is a coin toss,
 * always (cheaper than the mispredicted test). */
#define MT_FLOOD_NB(IT, OFF)                                                                       \
    n = v + (IT)(OFF);                                                                             \
    if (!(vb[n >> 6] >> (n & 63) & 1)) {                                                           \
        vb[n >> 6] |= (uint64_t)1 << (n & 63);                                                     \
        xv = fl[n];                                                                                \
        if (xv > lc) {                                                                             \
            if (sizeof *fl == 2 || bk[2 * lc] == bk[2 * lc + 1])                                   \
                lvq_set(&q, lc);                                                                   \
            qa[bk[2 * lc]++] = v;                                                                  \
            t++;                                                                                   \
            slev[t] = xv;                                                                          \
            sc[t] = 0;                                                                             \
            sid[t] = nodes++;                                                                      \
            v = n;                                                                                 \
            lc = xv;                                                                               \
            goto scan;                                                                             \
        }                                                                                          \
        if (sizeof *fl == 2 || bk[2 * xv] == bk[2 * xv + 1])                                       \
            lvq_set(&q, xv);                                                                       \
        qa[bk[2 * xv]++] = n;                                                                      \
    }

uint64_t *
twi_radix_u64(uint64_t *a, uint64_t *tmp, size_t n, unsigned first_bit)
{
    uint64_t all_or = 0, all_and = ~(uint64_t)0;
    size_t i, cnt[256];

    for (i = 0; i < n; i++) {
        all_or |= a[i];
        all_and &= a[i];
    }
    for (unsigned d = first_bit; d < 64; d += 8) {
        uint64_t *t;
        size_t s = 0;

        if (!((all_or ^ all_and) >> d & 255))
            continue;
        memset(cnt, 0, sizeof cnt);
        for (i = 0; i < n; i++)
            cnt[a[i] >> d & 255]++;
        for (i = 0; i < 256; i++) {
            size_t c = cnt[i];

            cnt[i] = s;
            s += c;
        }
        for (i = 0; i < n; i++)
            tmp[cnt[a[i] >> d & 255]++] = a[i];
        t = a;
        a = tmp;
        tmp = t;
    }
    return a;
}

/*
 * MT_DEFINE(LT, IT, SFX) defines, for levels LT (uint8_t, uint16_t) and indices IT (uint32_t,
 * uint64_t):
 *   build_SFX:     one block by flooding, written canonical;
 *   connect_SFX:   CONNECT of two pixels of two already-built max-trees;
 *   merge_SFX:     CONNECT along a vertical or horizontal border of two regions;
 *   mergebuf_SFX:  the same merge by a union-find over the two sides' border trees;
 *   region_SFX:    blocks built as tasks and merged, recursively;
 *   flatten_SFX:   parent := level root of the parent, into output rows;
 *   copy_out_SFX:  the internal parent into the output view.
 * The connectivity is a constant argument of force-inlined bodies, instantiated twice, so that
 * no pixel loop tests it.
 */
#define MT_DEFINE(LT, IT, SFX)                                                                   \
    /* The framed index V of a pixel to its raster index (a row: a division by the stride done in \
     * floating point and corrected). */                                                         \
    static ALWAYS_INLINE IT                                                                      \
    global_##SFX(IT V, double rsw, IT isw, IT gbase, IT gw)                                      \
    {                                                                                            \
        IT r = (IT)((double)V * rsw);                                                            \
                                                                                                 \
        if (r * isw > V)                                                                         \
            r--;                                                                                 \
        else if ((r + 1) * isw <= V)                                                             \
            r++;                                                                                 \
        return gbase + (r - 1) * gw + (V - r * isw - 1);                                         \
    }                                                                                            \
                                                                                                 \
    /* The block's levels into the framed array fl (row stride bw + 2, a one-pixel frame), the   \
     * frame marked visited in the bit map vb, so that neighbours are at fixed offsets with no   \
     * bounds test; the levels' histogram into bk[2 l + 1]. */                                   \
    static void                                                                                  \
    frame_##SFX(const mtree *m, const blk *b, LT *fl, uint64_t *vb, IT *bk)                      \
    {                                                                                            \
        const LT *f = (const LT *)m->f;                                                          \
        const int64_t bw = b->x1 - b->x0, bh = b->y1 - b->y0, sw = bw + 2;                       \
        const size_t nf = (size_t)sw * (size_t)(bh + 2);                                         \
        int64_t x, y;                                                                            \
                                                                                                 \
        memset(vb, 0, (nf + 63) / 64 * 8);                                                       \
        for (x = 0; x < sw; x++) {                                                               \
            MT_VSET(x);                                                                          \
            MT_VSET((bh + 1) * sw + x);                                                          \
        }                                                                                        \
        for (y = 0; y < bh; y++) {                                                               \
            const LT *row = f + (b->y0 + y) * m->w + b->x0;                                      \
            LT *d = fl + (y + 1) * sw + 1;                                                       \
                                                                                                 \
            MT_VSET((y + 1) * sw);                                                               \
            MT_VSET((y + 1) * sw + bw + 1);                                                      \
            for (x = 0; x < bw; x++) {                                                           \
                d[x] = row[x];                                                                   \
                bk[2 * (size_t)row[x] + 1]++;                                                    \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    /* One block by flooding (see the file's comment), the parent image written canonical. The   \
     * slot: the queue's level bit map, the visited bit map (framed), per level the queue's stack \
     * tops and bottoms (bk), the open nodes' canonical pixels (framed, sc) and numbers (sid), per \
     * framed pixel its node number (nl), the queue (qa), per node its canonical raster index and \
     * parent node, the open nodes' levels, the framed levels. */                                \
    static ALWAYS_INLINE void                                                                    \
    flood_body_##SFX(const mtree *m, const blk *b, char *slot, const bool c8)                    \
    {                                                                                            \
        enum { NL = 1 << (8 * sizeof(LT)) };                                                     \
        const int64_t bw = b->x1 - b->x0, bh = b->y1 - b->y0, sw = bw + 2;                       \
        const IT gbase = (IT)(b->y0 * m->w + b->x0), gw = (IT)m->w;                              \
        const IT isw = (IT)sw;                                                                   \
        const double rsw = 1.0 / (double)sw;                                                     \
        lvq q;                                                                                   \
        IT *bk, *qa, *sc, *sid, *nl, *ncanon, *npar;                                             \
        LT *fl;                                                                                  \
        unsigned *slev;                                                                          \
        uint64_t *vb;                                                                            \
        IT *par = (IT *)m->par;                                                                  \
        IT v, nodes = 0;                                                                         \
        unsigned lc;                                                                             \
        int64_t t = 0, y, x;                                                                     \
                                                                                                 \
        q.l1 = (uint64_t *)(void *)slot;                                                         \
        q.l2 = q.l1 + LVQ_L1(NL);                                                                \
        vb = q.l2 + LVQ_L2(NL);                                                                  \
        bk = (IT *)(void *)(vb + (m->fspan + 63) / 64);                                          \
        sc = bk + 2 * NL;                                                                        \
        sid = sc + NL;                                                                           \
        nl = sid + NL;                                                                           \
        qa = nl + m->fspan;                                                                      \
        ncanon = qa + m->bspan;                                                                  \
        npar = ncanon + m->bspan;                                                                \
        slev = (unsigned *)(void *)(npar + m->bspan);                                            \
        fl = (LT *)(void *)(slev + NL);                                                          \
        memset(q.l1, 0, (LVQ_L1(NL) + LVQ_L2(NL)) * sizeof(uint64_t));                           \
        q.top = 0;                                                                               \
        memset(bk, 0, 2 * NL * sizeof *bk);                                                      \
        frame_##SFX(m, b, fl, vb, bk);                                                           \
        /* level l's stack in qa: from bk[2 l + 1] up to bk[2 l] (exclusive) */                  \
        for (v = 0, x = 0; v < (IT)NL; v++) {                                                    \
            IT c = bk[2 * v + 1];                                                                \
                                                                                                 \
            bk[2 * v] = bk[2 * v + 1] = (IT)x;                                                   \
            x += (int64_t)c;                                                                     \
        }                                                                                        \
                                                                                                 \
        v = (IT)sw + 1;                                                                          \
        lc = fl[v];                                                                              \
        MT_VSET(v);                                                                              \
        slev[0] = lc;                                                                            \
        sc[0] = 0;                                                                               \
        sid[0] = nodes++;                                                                        \
        for (;;) {                                                                               \
            IT n;                                                                                \
            unsigned xv, l;                                                                      \
                                                                                                 \
        scan:                                                                                    \
            if (c8) {                                                                            \
                MT_FLOOD_NB(IT, -sw - 1)                                                         \
            }                                                                                    \
            MT_FLOOD_NB(IT, -sw)                                                                 \
            if (c8) {                                                                            \
                MT_FLOOD_NB(IT, -sw + 1)                                                         \
            }                                                                                    \
            MT_FLOOD_NB(IT, -1)                                                                  \
            MT_FLOOD_NB(IT, 1)                                                                   \
            if (c8) {                                                                            \
                MT_FLOOD_NB(IT, sw - 1)                                                          \
            }                                                                                    \
            MT_FLOOD_NB(IT, sw)                                                                  \
            if (c8) {                                                                            \
                MT_FLOOD_NB(IT, sw + 1)                                                          \
            }                                                                                    \
            /* v has no unvisited neighbour above it: it belongs to the top node */              \
            nl[v] = sid[t];                                                                      \
            if (v > sc[t])                                                                       \
                sc[t] = v;                                                                       \
            if (!q.top)                                                                          \
                break;                                                                           \
            l = lvq_max_le(&q, lc);                                                              \
            v = qa[--bk[2 * l]];                                                                 \
            if (bk[2 * l] == bk[2 * l + 1])                                                      \
                lvq_clear(&q, l);                                                                \
            /* nodes above l are complete: link them down to l */                                \
            while (l < slev[t]) {                                                                \
                IT id = sid[t], cv = sc[t];                                                      \
                                                                                                 \
                ncanon[id] = global_##SFX(cv, rsw, isw, gbase, gw);                              \
                if (t == 0 || slev[t - 1] < l) {                                                 \
                    npar[id] = nodes;                                                            \
                    slev[t] = l;                                                                 \
                    sc[t] = 0;                                                                   \
                    sid[t] = nodes++;                                                            \
                    break;                                                                       \
                }                                                                                \
                npar[id] = sid[t - 1];                                                           \
                t--;                                                                             \
            }                                                                                    \
            lc = l;                                                                              \
        }                                                                                        \
        for (; t >= 0; t--) {                                                                    \
            ncanon[sid[t]] = global_##SFX(sc[t], rsw, isw, gbase, gw);                           \
            npar[sid[t]] = t ? sid[t - 1] : sid[t];                                              \
        }                                                                                        \
        for (y = 0; y < bh; y++) {                                                               \
            const IT *lab = nl + (y + 1) * sw + 1;                                               \
            IT *prow = par + gbase + (IT)y * gw, g0 = gbase + (IT)y * gw;                        \
                                                                                                 \
            for (x = 0; x < bw; x++) {                                                           \
                IT id = lab[x], g = ncanon[id];                                                  \
                                                                                                 \
                prow[x] = g == g0 + (IT)x ? ncanon[npar[id]] : g;                                \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    static void                                                                                  \
    build_##SFX(const mtree *m, const blk *b, char *slot)                                        \
    {                                                                                            \
        if (m->c8)                                                                               \
            flood_body_##SFX(m, b, slot, true);                                                  \
        else                                                                                     \
            flood_body_##SFX(m, b, slot, false);                                                 \
    }                                                                                            \
                                                                                                 \
    /* Topmost pixel of x's node (same level), pointing the chain walked at it. */               \
    static ALWAYS_INLINE IT                                                                      \
    level_root_##SFX(const LT *f, IT *par, IT x)                                                 \
    {                                                                                            \
        const LT v = f[x];                                                                       \
        IT r = x, q;                                                                             \
                                                                                                 \
        while ((q = par[r]) != r && f[q] == v)                                                   \
            r = q;                                                                               \
        while (x != r) {                                                                         \
            q = par[x];                                                                          \
            par[x] = r;                                                                          \
            x = q;                                                                               \
        }                                                                                        \
        return r;                                                                                \
    }                                                                                            \
                                                                                                 \
    /* Highest ancestor of x (x included) whose level is >= lvl. */                              \
    static ALWAYS_INLINE IT                                                                      \
    peak_root_##SFX(const LT *f, const IT *par, IT x, LT lvl)                                    \
    {                                                                                            \
        IT q;                                                                                    \
                                                                                                 \
        while ((q = par[x]) != x && f[q] >= lvl)                                                 \
            x = q;                                                                               \
        return x;                                                                                \
    }                                                                                            \
                                                                                                 \
    /* [Blin22], algorithm 3: merge the branches of a and b of an edge (a, b). */                \
    static void                                                                                  \
    connect_##SFX(const LT *f, IT *par, uint8_t *demoted, IT a, IT b)                            \
    {                                                                                            \
        for (;;) {                                                                               \
            IT t, old;                                                                           \
                                                                                                 \
            if (f[b] < f[a]) {                                                                   \
                t = a;                                                                           \
                a = b;                                                                           \
                b = t;                                                                           \
            }                                                                                    \
            a = level_root_##SFX(f, par, a);                                                     \
            b = peak_root_##SFX(f, par, b, f[a]);                                                \
            if (a == b)                                                                          \
                return;                                                                          \
            /* f(b) >= f(a); on a tie the larger index stays the level root */                   \
            if (f[b] == f[a] && b > a) {                                                         \
                t = a;                                                                           \
                a = b;                                                                           \
                b = t;                                                                           \
            }                                                                                    \
            old = par[b];                                                                        \
            par[b] = a;                                                                          \
            if (f[b] == f[a])                                                                    \
                demoted[b] = 1;                                                                  \
            if (old == b)                                                                        \
                return;                                                                          \
            b = old;                                                                             \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    /*                                                                                           \
     * The edges across a border, pixel a_i on one side and b_i on the other, i along the        \
     * border (step `da` between a_i and a_i+1, `db` = b_i - a_i). An edge is skipped when       \
     * a path through edges already merged joins its ends at its level: (a_i, b_i) when the      \
     * previous pair's min is >= its min; the diagonals (a_i, b_i+1) when f(b_i) >= their min,   \
     * (a_i+1, b_i) when f(a_i) >= their min, since (a_i, b_i) is joined at this point.          \
     */                                                                                          \
    static ALWAYS_INLINE void                                                                    \
    merge_body_##SFX(const mtree *m, IT a0, IT da, IT db, int64_t len, const bool c8)            \
    {                                                                                            \
        const LT *f = (const LT *)m->f;                                                          \
        IT *par = (IT *)m->par;                                                                  \
        uint8_t *dem = m->demoted;                                                               \
        LT prev = 0;                                                                             \
        int64_t i;                                                                               \
                                                                                                 \
        for (i = 0; i < len; i++) {                                                              \
            IT a = a0 + (IT)i * da, b = a + db;                                                  \
            LT fa = f[a], fb = f[b], mn = fa < fb ? fa : fb;                                     \
                                                                                                 \
            if (i == 0 || prev < mn)                                                             \
                connect_##SFX(f, par, dem, a, b);                                                \
            prev = mn;                                                                           \
            if (c8 && i + 1 < len) {                                                             \
                LT fa1 = f[a + da], fb1 = f[b + da];                                             \
                                                                                                 \
                if (fb < (fa < fb1 ? fa : fb1))                                                  \
                    connect_##SFX(f, par, dem, a, b + da);                                       \
                if (fa < (fa1 < fb ? fa1 : fb))                                                  \
                    connect_##SFX(f, par, dem, a + da, b);                                       \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    static void                                                                                  \
    merge_##SFX(const mtree *m, IT a0, IT da, IT db, int64_t len)                                \
    {                                                                                            \
        if (m->c8)                                                                               \
            merge_body_##SFX(m, a0, da, db, len, true);                                          \
        else                                                                                     \
            merge_body_##SFX(m, a0, da, db, len, false);                                         \
    }                                                                                            \
                                                                                                 \
    /* Level root of x's node with the merge's marks: a pixel whose parent has the top bit set is \
     * a gathered level root (its parent moved to the gathered list). */                         \
    static ALWAYS_INLINE IT                                                                      \
    lroot_##SFX(const LT *f, IT *par, IT x)                                                      \
    {                                                                                            \
        const IT flag = (IT)1 << (sizeof(IT) * 8 - 1);                                           \
        const LT v = f[x];                                                                       \
        IT r = x, q;                                                                             \
                                                                                                 \
        while (!((q = par[r]) & flag) && q != r && f[q] == v)                                    \
            r = q;                                                                               \
        while (x != r) {                                                                         \
            q = par[x];                                                                          \
            par[x] = r;                                                                          \
            x = q;                                                                               \
        }                                                                                        \
        return r;                                                                                \
    }                                                                                            \
                                                                                                 \
    /* The gathered nodes of one side of a border merge (see mergebuf_*). */                     \
    typedef struct gath_##SFX {                                                                  \
        IT *node, *gp, *pk;     /* level root, its old parent pixel, its parent's number */      \
        LT *lv;                 /* its level */                                                  \
        size_t n, cap;                                                                           \
    } gath_##SFX;                                                                                \
                                                                                                 \
    static void                                                                                  \
    gath_free_##SFX(gath_##SFX *g)                                                               \
    {                                                                                            \
        free(g->node);                                                                           \
        free(g->gp);                                                                             \
        free(g->pk);                                                                             \
        free(g->lv);                                                                             \
    }                                                                                            \
                                                                                                 \
    /* Room for at least `want` nodes; false when out of memory. */                              \
    static bool                                                                                  \
    gath_grow_##SFX(gath_##SFX *g, size_t want)                                                  \
    {                                                                                            \
        size_t c = g->cap ? g->cap : 4096;                                                       \
        IT *a;                                                                                   \
        LT *l;                                                                                   \
                                                                                                 \
        while (c < want)                                                                         \
            c *= 2;                                                                              \
        if (c == g->cap)                                                                         \
            return true;                                                                         \
        if (!(a = realloc(g->node, c * sizeof *a)))                                              \
            return false;                                                                        \
        g->node = a;                                                                             \
        if (!(a = realloc(g->gp, c * sizeof *a)))                                                \
            return false;                                                                        \
        g->gp = a;                                                                               \
        if (!(a = realloc(g->pk, c * sizeof *a)))                                                \
            return false;                                                                        \
        g->pk = a;                                                                               \
        if (!(l = realloc(g->lv, c * sizeof *l)))                                                \
            return false;                                                                        \
        g->lv = l;                                                                               \
        g->cap = c;                                                                              \
        return true;                                                                             \
    }                                                                                            \
                                                                                                 \
    /* The number of the node of p in the gathered list, gathering p's node and its ancestors    \
     * not gathered yet (-1 when out of memory). */                                              \
    static int64_t                                                                               \
    gather_##SFX(const LT *f, IT *par, gath_##SFX *g, IT p)                                      \
    {                                                                                            \
        const IT flag = (IT)1 << (sizeof(IT) * 8 - 1);                                           \
        IT r = lroot_##SFX(f, par, p);                                                           \
        int64_t first = -1, prev = -1;                                                           \
                                                                                                 \
        for (;;) {                                                                               \
            IT q = par[r];                                                                       \
            size_t k;                                                                            \
                                                                                                 \
            if (q & flag) {                                                                      \
                k = (size_t)(q & ~flag);                                                         \
                if (prev >= 0)                                                                   \
                    g->pk[prev] = (IT)k;                                                         \
                return first >= 0 ? first : (int64_t)k;                                          \
            }                                                                                    \
            if (g->n == g->cap && !gath_grow_##SFX(g, g->n + 1))                                 \
                return -1;                                                                       \
            k = g->n++;                                                                          \
            g->node[k] = r;                                                                      \
            g->gp[k] = q;                                                                        \
            g->pk[k] = (IT)k;                                                                    \
            g->lv[k] = f[r];                                                                     \
            par[r] = flag | (IT)k;                                                               \
            if (prev >= 0)                                                                       \
                g->pk[prev] = (IT)k;                                                             \
            else                                                                                 \
                first = (int64_t)k;                                                              \
            if (q == r)                                                                          \
                return first;                                                                    \
            prev = (int64_t)k;                                                                   \
            r = lroot_##SFX(f, par, q);                                                          \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    /* One side of a border merge: the nodes of the np pixels px and their ancestors into g, the \
     * pixels' node numbers into k (false when out of memory). */                                \
    static bool                                                                                  \
    gather_side_##SFX(const LT *f, IT *par, gath_##SFX *g, const IT *px, size_t np, IT *k)       \
    {                                                                                            \
        for (size_t i = 0; i < np; i++) {                                                        \
            int64_t r = gather_##SFX(f, par, g, px[i]);                                          \
                                                                                                 \
            if (r < 0)                                                                           \
                return false;                                                                    \
            k[i] = (IT)r;                                                                        \
        }                                                                                        \
        return true;                                                                             \
    }                                                                                            \
                                                                                                 \
    /* Parents of the sorted nodes [s0, s1) into the parent image, demoted ones marked. */       \
    static void                                                                                  \
    merge_write_##SFX(const mtree *m, const IT *X, const LT *L, const IT *gp, size_t s0,         \
                      size_t s1)                                                                 \
    {                                                                                            \
        IT *par = (IT *)m->par;                                                                  \
                                                                                                 \
        for (size_t s = s0; s < s1; s++) {                                                       \
            IT p = gp[s];                                                                        \
                                                                                                 \
            par[X[s]] = X[p];                                                                    \
            if (p != (IT)s && L[p] == L[s])                                                      \
                m->demoted[X[s]] = 1;                                                            \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    /*                                                                                           \
     * CONNECT along a border for deep trees (16-bit): the same edges as merge_body_* (with its  \
     * skips), but instead of zipping the two branches of every edge, which walks a node per     \
     * level crossed and so again and again the same long chains, the level roots of the edges'  \
     * ends and all their ancestors (the two sides' border trees) are gathered once and merged   \
     * by a union-find over them in decreasing order (Berger et al.), as twi_maxtree_merge does  \
     * for tiles. Nodes off these chains keep their parents. While gathering, a node's parent    \
     * holds its number on its side with the top bit set. With a team, the two sides are         \
     * gathered, and the parents written, by two tasks (each side's chains stay in its region).  \
     * Returns false, with nothing changed, when out of memory.                                  \
     */                                                                                          \
    static bool                                                                                  \
    mergebuf_##SFX(const mtree *m, IT a0, IT da, IT db, int64_t len, const bool c8)              \
    {                                                                                            \
        enum { NL = 1 << (8 * sizeof(LT)) };                                                     \
        const IT flag = (IT)1 << (sizeof(IT) * 8 - 1);                                           \
        const uint64_t xmask = ((uint64_t)1 << 48) - 1;                                          \
        const LT *f = (const LT *)m->f;                                                          \
        IT *par = (IT *)m->par;                                                                  \
        gath_##SFX ga, gb;                                                                       \
        uint32_t *cnt = NULL;                                                                    \
        IT *ea = NULL, *eb = NULL, *ka = NULL, *kb = NULL, *pos = NULL, *head = NULL, *adj = NULL; \
        IT *zp = NULL, *gp = NULL, *X = NULL, *K = NULL;                                         \
        LT *L = NULL;                                                                            \
        uint64_t *key = NULL, *tmp = NULL;                                                       \
        size_t ne = 0, na, nb, s, k, e, nl;                                                      \
        bool ok = false, oka = true, okb = true;                                                 \
        LT prev = 0;                                                                             \
        int64_t i;                                                                               \
                                                                                                 \
        memset(&ga, 0, sizeof ga);                                                               \
        memset(&gb, 0, sizeof gb);                                                               \
        if (!(ea = malloc((size_t)len * 3 * sizeof *ea)) ||                                      \
            !(eb = malloc((size_t)len * 3 * sizeof *eb)) ||                                      \
            !(ka = malloc((size_t)len * 3 * sizeof *ka)) ||                                      \
            !(kb = malloc((size_t)len * 3 * sizeof *kb)))                                        \
            goto out;                                                                            \
        for (i = 0; i < len; i++) {                                                              \
            IT a = a0 + (IT)i * da, b = a + db;                                                  \
            LT fa = f[a], fb = f[b], mn = fa < fb ? fa : fb;                                     \
                                                                                                 \
            if (i == 0 || prev < mn) {                                                           \
                ea[ne] = a;                                                                      \
                eb[ne++] = b;                                                                    \
            }                                                                                    \
            prev = mn;                                                                           \
            if (c8 && i + 1 < len) {                                                             \
                LT fa1 = f[a + da], fb1 = f[b + da];                                             \
                                                                                                 \
                if (fb < (fa < fb1 ? fa : fb1)) {                                                \
                    ea[ne] = a;                                                                  \
                    eb[ne++] = b + da;                                                           \
                }                                                                                \
                if (fa < (fa1 < fb ? fa1 : fb)) {                                                \
                    ea[ne] = a + da;                                                             \
                    eb[ne++] = b;                                                                \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        _Pragma("omp task default(shared) if (m->team)")                                         \
        oka = gather_side_##SFX(f, par, &ga, ea, ne, ka);                                        \
        okb = gather_side_##SFX(f, par, &gb, eb, ne, kb);                                        \
        _Pragma("omp taskwait")                                                                  \
        if (!oka || !okb)                                                                        \
            goto undo;                                                                           \
        /* one list: side b's nodes after side a's */                                            \
        na = ga.n;                                                                               \
        nb = na + gb.n;                                                                          \
        if (!gath_grow_##SFX(&ga, nb))                                                           \
            goto undo;                                                                           \
        memcpy(ga.node + na, gb.node, gb.n * sizeof *ga.node);                                   \
        memcpy(ga.gp + na, gb.gp, gb.n * sizeof *ga.gp);                                         \
        memcpy(ga.lv + na, gb.lv, gb.n * sizeof *ga.lv);                                         \
        for (k = 0; k < gb.n; k++)                                                               \
            ga.pk[na + k] = gb.pk[k] + (IT)na;                                                   \
        ga.n = nb;                                                                               \
        gb.n = 0;                                                                                \
        if (!(key = malloc(nb * sizeof *key)) || !(K = malloc(nb * sizeof *K)) ||                \
            !(pos = malloc(nb * sizeof *pos)) || !(head = calloc(nb + 1, sizeof *head)) ||       \
            !(zp = malloc(nb * sizeof *zp)) || !(gp = malloc(nb * sizeof *gp)) ||                \
            !(X = malloc(nb * sizeof *X)) || !(L = malloc(nb * sizeof *L)) ||                    \
            !(adj = malloc((nb + ne + 1) * sizeof *adj)) ||                                      \
            !(cnt = calloc((size_t)NL + 1, sizeof *cnt)))                                        \
            goto undo;                                                                           \
        /* Decreasing levels, increasing indices: by level (counting), then by index within the  \
         * levels (insertion, carrying the numbers, as runs are short on 16-bit images; a radix  \
         * sort of the keys when one is not, the numbers then read back from the marks). */      \
        for (k = 0; k < nb; k++)                                                                 \
            cnt[NL - ga.lv[k]]++;                                                                \
        for (k = 0, e = 0; k < (size_t)NL; k++) {                                                \
            e = cnt[k + 1] > e ? cnt[k + 1] : e;                                                 \
            cnt[k + 1] += cnt[k];                                                                \
        }                                                                                        \
        for (k = 0; k < nb; k++) {                                                               \
            uint32_t d = cnt[NL - 1 - ga.lv[k]]++;                                               \
                                                                                                 \
            key[d] = (uint64_t)(NL - 1 - ga.lv[k]) << 48 | (uint64_t)ga.node[k];                 \
            K[d] = (IT)k;                                                                        \
        }                                                                                        \
        if (e > 32) {                                                                            \
            uint64_t *srt;                                                                       \
                                                                                                 \
            if (!(tmp = malloc(nb * sizeof *tmp)))                                               \
                goto undo;                                                                       \
            for (k = na; k < nb; k++)                                                            \
                par[ga.node[k]] = flag | (IT)k;                                                  \
            srt = twi_radix_u64(key, tmp, nb, 0);                                                \
            for (s = 0; s < nb; s++)                                                             \
                K[s] = par[srt[s] & xmask] & ~flag;                                              \
            if (srt != key)                                                                      \
                memcpy(key, srt, nb * sizeof *key);                                              \
        } else {                                                                                 \
            for (s = 1; s < nb; s++) {                                                           \
                uint64_t x = key[s];                                                             \
                IT kx = K[s];                                                                    \
                size_t t = s;                                                                    \
                                                                                                 \
                for (; t > 0 && key[t - 1] > x; t--) {                                           \
                    key[t] = key[t - 1];                                                         \
                    K[t] = K[t - 1];                                                             \
                }                                                                                \
                key[t] = x;                                                                      \
                K[t] = kx;                                                                       \
            }                                                                                    \
        }                                                                                        \
        for (s = 0; s < nb; s++) {                                                               \
            X[s] = (IT)(key[s] & xmask);                                                         \
            L[s] = (LT)(NL - 1 - (unsigned)(key[s] >> 48));                                      \
            pos[K[s]] = (IT)s;                                                                   \
        }                                                                                        \
        /* the links, attached to their lower end: tree links and edges */                       \
        for (k = 0; k < nb; k++)                                                                 \
            if (ga.pk[k] != (IT)k)                                                               \
                head[pos[ga.pk[k]] + 1]++;                                                       \
        for (e = 0; e < ne; e++) {                                                               \
            IT sa = pos[ka[e]], sb = pos[kb[e] + na];                                            \
                                                                                                 \
            head[(sa > sb ? sa : sb) + 1]++;                                                     \
        }                                                                                        \
        for (s = 0; s < nb; s++)                                                                 \
            head[s + 1] += head[s];                                                              \
        for (k = 0; k < nb; k++)                                                                 \
            if (ga.pk[k] != (IT)k)                                                               \
                adj[head[pos[ga.pk[k]]]++] = pos[k];                                             \
        for (e = 0; e < ne; e++) {                                                               \
            IT sa = pos[ka[e]], sb = pos[kb[e] + na];                                            \
                                                                                                 \
            adj[head[sa > sb ? sa : sb]++] = sa > sb ? sb : sa;                                  \
        }                                                                                        \
        /* head[s] now ends s's links, head[s - 1] starts them */                                \
        nl = 0;                                                                                  \
        for (s = 0; s < nb; s++) {                                                               \
            size_t e1 = head[s];                                                                 \
                                                                                                 \
            gp[s] = zp[s] = (IT)s;                                                               \
            for (e = nl; e < e1; e++) {                                                          \
                IT r = adj[e], t;                                                                \
                                                                                                 \
                while (zp[r] != r)                                                               \
                    r = zp[r];                                                                   \
                for (IT x = adj[e]; zp[x] != r; x = t) {                                         \
                    t = zp[x];                                                                   \
                    zp[x] = r;                                                                   \
                }                                                                                \
                if (r != (IT)s)                                                                  \
                    gp[r] = zp[r] = (IT)s;                                                       \
            }                                                                                    \
            nl = e1;                                                                             \
        }                                                                                        \
        /* canonical: every node under the level root of its parent's node */                    \
        for (s = nb; s-- > 0;) {                                                                 \
            IT q = gp[s];                                                                        \
                                                                                                 \
            if (L[gp[q]] == L[q])                                                                \
                gp[s] = gp[q];                                                                   \
        }                                                                                        \
        _Pragma("omp task default(shared) if (m->team)")                                         \
        merge_write_##SFX(m, X, L, gp, 0, nb / 2);                                               \
        merge_write_##SFX(m, X, L, gp, nb / 2, nb);                                              \
        _Pragma("omp taskwait")                                                                  \
        ok = true;                                                                               \
        goto out;                                                                                \
    undo:                                                                                        \
        for (k = 0; k < ga.n; k++)                                                               \
            par[ga.node[k]] = ga.gp[k];                                                          \
        for (k = 0; k < gb.n; k++)                                                               \
            par[gb.node[k]] = gb.gp[k];                                                          \
    out:                                                                                         \
        gath_free_##SFX(&ga);                                                                    \
        gath_free_##SFX(&gb);                                                                    \
        free(ea);                                                                                \
        free(eb);                                                                                \
        free(ka);                                                                                \
        free(kb);                                                                                \
        free(key);                                                                               \
        free(K);                                                                                 \
        free(tmp);                                                                               \
        free(pos);                                                                               \
        free(head);                                                                              \
        free(zp);                                                                                \
        free(gp);                                                                                \
        free(X);                                                                                 \
        free(L);                                                                                 \
        free(adj);                                                                               \
        free(cnt);                                                                               \
        return ok;                                                                               \
    }                                                                                            \
    static void                                                                                  \
    mergeany_##SFX(const mtree *m, IT a0, IT da, IT db, int64_t len)                             \
    {                                                                                            \
        if (sizeof(LT) == 2 && mergebuf_##SFX(m, a0, da, db, len, m->c8))                        \
            return;                                                                              \
        merge_##SFX(m, a0, da, db, len);                                                         \
    }                                                                                            \
                                                                                                 \
    /* Blocks [i0, i1) x [j0, j1) of the grid as one max-tree: one half as a task, the other     \
     * on this thread, then CONNECT along the line between them. A leaf runs with no task        \
     * scheduling point inside, so the thread's scratch slot is its own while it runs. */        \
    static void                                                                                  \
    region_##SFX(const mtree *m, int32_t i0, int32_t i1, int32_t j0, int32_t j1)                 \
    {                                                                                            \
        int32_t mid;                                                                             \
                                                                                                 \
        if (i1 - i0 == 1 && j1 - j0 == 1) {                                                      \
            size_t t_ = m->team ? (size_t)omp_get_thread_num() : 0;                              \
                                                                                                 \
            if (mt_stopped(m))                                                                   \
                return;                                                                          \
            build_##SFX(m, &m->blocks[(size_t)j0 * (size_t)m->gx + (size_t)i0],                  \
                        m->scratch + t_ * m->slot_bytes);                                        \
            return;                                                                              \
        }                                                                                        \
        if (i1 - i0 >= j1 - j0) {                                                                \
            int64_t x = m->xs[(mid = i0 + (i1 - i0) / 2)], y0 = m->ys[j0];                       \
                                                                                                 \
            _Pragma("omp task default(none) firstprivate(m, i0, mid, j0, j1) if (m->team)")      \
            region_##SFX(m, i0, mid, j0, j1);                                                    \
            region_##SFX(m, mid, i1, j0, j1);                                                    \
            _Pragma("omp taskwait")                                                              \
            if (mt_stopped(m)) /* a block below may be missing */                                \
                return;                                                                          \
            mergeany_##SFX(m, (IT)(y0 * m->w + x - 1), (IT)m->w, 1, m->ys[j1] - y0);             \
        } else {                                                                                 \
            int64_t y = m->ys[(mid = j0 + (j1 - j0) / 2)], x0 = m->xs[i0];                       \
                                                                                                 \
            _Pragma("omp task default(none) firstprivate(m, i0, i1, j0, mid) if (m->team)")      \
            region_##SFX(m, i0, i1, j0, mid);                                                    \
            region_##SFX(m, i0, i1, mid, j1);                                                    \
            _Pragma("omp taskwait")                                                              \
            if (mt_stopped(m))                                                                   \
                return;                                                                          \
            mergeany_##SFX(m, (IT)((y - 1) * m->w + x0), 1, (IT)m->w, m->xs[i1] - x0);           \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    /* Level root of x's parent q, when q was demoted by a merge. With the parent image in       \
     * place, other threads may be rewriting the pixels walked (to their level root, which       \
     * is on the same chain): atomic accesses, plain moves on the targets we build for. */       \
    static ALWAYS_INLINE IT                                                                      \
    walk_##SFX(const LT *f, IT *par, IT q)                                                       \
    {                                                                                            \
        const LT v = f[q];                                                                       \
        IT t;                                                                                    \
                                                                                                 \
        for (;;) {                                                                               \
            _Pragma("omp atomic read")                                                           \
            t = par[q];                                                                          \
            if (t == q || f[t] != v)                                                             \
                return q;                                                                        \
            q = t;                                                                               \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    /* Rows [y0, y1): every parent made canonical again after the merges. Only parents that      \
     * a merge demoted can be stale (blocks were canonical, merges link level roots). In place   \
     * (the parent image is the output) or copied into the output (o64: its type). */            \
    static ALWAYS_INLINE void                                                                    \
    flatten_rows_##SFX(const mtree *m, tw_tile_view *out, int64_t y0, int64_t y1,                \
                       const bool inplace, const bool o64)                                       \
    {                                                                                            \
        const LT *f = (const LT *)m->f;                                                          \
        IT *par = (IT *)m->par;                                                                  \
        const uint8_t *dem = m->demoted;                                                         \
        int64_t x, y;                                                                            \
                                                                                                 \
        for (y = y0; y < y1; y++) {                                                              \
            IT *prow = par + y * m->w;                                                           \
            void *orow = (char *)out->data + y * out->stride;                                    \
                                                                                                 \
            for (x = 0; x < m->w; x++) {                                                         \
                IT q = prow[x];                                                                  \
                                                                                                 \
                if (UNLIKELY(dem[q])) {                                                          \
                    q = walk_##SFX(f, par, q);                                                   \
                    if (inplace) {                                                               \
                        _Pragma("omp atomic write")                                              \
                        prow[x] = q;                                                             \
                    }                                                                            \
                }                                                                                \
                if (inplace)                                                                     \
                    continue;                                                                    \
                if (o64)                                                                         \
                    ((uint64_t *)orow)[x] = (uint64_t)q;                                         \
                else                                                                             \
                    ((uint32_t *)orow)[x] = (uint32_t)q;                                         \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    static void                                                                                  \
    flatten_##SFX(const mtree *m, tw_tile_view *out, int64_t y0, int64_t y1)                     \
    {                                                                                            \
        if (out->data == m->par)                                                                 \
            flatten_rows_##SFX(m, out, y0, y1, true, false);                                     \
        else if (out->type == TW_U64)                                                            \
            flatten_rows_##SFX(m, out, y0, y1, false, true);                                     \
        else                                                                                     \
            flatten_rows_##SFX(m, out, y0, y1, false, false);                                    \
    }                                                                                            \
                                                                                                 \
    /* The sequential result, when it was not built in the output itself. */                     \
    static void                                                                                  \
    copy_out_##SFX(const mtree *m, tw_tile_view *out)                                            \
    {                                                                                            \
        const IT *par = (const IT *)m->par;                                                      \
        int64_t x, y;                                                                            \
                                                                                                 \
        for (y = 0; y < m->h; y++) {                                                             \
            const IT *prow = par + y * m->w;                                                     \
            void *orow = (char *)out->data + y * out->stride;                                    \
                                                                                                 \
            if (tw_sample_size(out->type) == sizeof(IT)) {                                       \
                memcpy(orow, prow, (size_t)m->w * sizeof(IT));                                   \
            } else if (out->type == TW_U32) {                                                    \
                for (x = 0; x < m->w; x++)                                                       \
                    ((uint32_t *)orow)[x] = (uint32_t)prow[x];                                   \
            } else {                                                                             \
                for (x = 0; x < m->w; x++)                                                       \
                    ((uint64_t *)orow)[x] = (uint64_t)prow[x];                                   \
            }                                                                                    \
        }                                                                                        \
    }

MT_DEFINE(uint8_t, uint32_t, b32)
MT_DEFINE(uint16_t, uint32_t, w32)
MT_DEFINE(uint8_t, uint64_t, b64)
MT_DEFINE(uint16_t, uint64_t, w64)

/* ---- drivers ------------------------------------------------------------------------------ */

typedef struct mt_ops {
    void (*build)(const mtree *m, const blk *b, char *slot);
    void (*region)(const mtree *m, int32_t i0, int32_t i1, int32_t j0, int32_t j1);
    void (*flatten)(const mtree *m, tw_tile_view *out, int64_t y0, int64_t y1);
    void (*copy_out)(const mtree *m, tw_tile_view *out);
} mt_ops;

static const mt_ops ops_b32 = { build_b32, region_b32, flatten_b32, copy_out_b32 };
static const mt_ops ops_w32 = { build_w32, region_w32, flatten_w32, copy_out_w32 };
static const mt_ops ops_b64 = { build_b64, region_b64, flatten_b64, copy_out_b64 };
static const mt_ops ops_w64 = { build_w64, region_w64, flatten_w64, copy_out_w64 };

/* 32-bit levels: the in-place kernel of omp/maxtree_u32.c on the parent image itself when it
 * is packed TW_U32 (after copying the levels into it, unless `in` is that same view), else on
 * a copy written back into the parent view. gx <= 0: the automatic grid. */
static tw_status
maxtree_u32(const tw_tile_view *in, int conn, tw_tile_view *parent, int nthreads, int32_t gx,
            int32_t gy)
{
    const int64_t w = in->w, h = in->h;
    const bool direct = parent->type == TW_U32 && (size_t)parent->stride == (size_t)w * 4;
    uint32_t *buf = NULL;
    tw_status st;
    int64_t x, y;

    if (w == 0 || h == 0)
        return TW_OK;
    if (direct)
        buf = parent->data;
    else if (!(buf = malloc((size_t)(w * h) * sizeof *buf)))
        return TW_E_NOMEM;
    if (in->data != (void *)buf)
        for (y = 0; y < h; y++)
            memcpy(buf + y * w, (const char *)in->data + y * in->stride, (size_t)w * 4);
    st = twi_omp_maxtree_u32(buf, (int32_t)w, (int32_t)h, conn, NULL, nthreads, gx, gy);
    if (!direct) {
        for (y = 0; st == TW_OK && y < h; y++) {
            char *row = (char *)parent->data + y * parent->stride;

            if (parent->type == TW_U32)
                memcpy(row, buf + y * w, (size_t)w * 4);
            else
                for (x = 0; x < w; x++)
                    ((uint64_t *)(void *)row)[x] = buf[y * w + x];
        }
        free(buf);
    }
    return st;
}

/* Bytes of a thread's scratch slot for blocks of at most bspan pixels, fspan framed pixels,
 * index size `is`, level size `ls` (flood_body_*'s arrays, in its order). */
static size_t
slot_size(size_t fspan, size_t bspan, size_t is, size_t ls)
{
    size_t nl = ls == 2 ? 65536 : 256;
    size_t b = (LVQ_L1(nl) + LVQ_L2(nl) + (fspan + 63) / 64) * 8 + 4 * nl * is + fspan * is +
               3 * bspan * is + nl * sizeof(unsigned) + fspan * ls;

    return (b + 63) / 64 * 64;
}

/* Everything but the checks: a gx x gy grid (1 x 1 = one block, in the output itself when it
 * fits), a team of nthreads. */
static tw_status
maxtree(const tw_tile_view *in, int conn, tw_tile_view *parent, int nthreads, int32_t gx,
        int32_t gy, const twi_stop *stop)
{
    tw_status st = TW_OK;
    const bool wide = in->type == TW_U16;
    const size_t ls = wide ? 2 : 1;
    const int64_t w = in->w, h = in->h;
    const uint64_t npx = (uint64_t)w * (uint64_t)h;
    /* the 32-bit path keeps the top bit of indices for the border merge's marks */
    const bool big = parent->type == TW_U64 || npx > ((uint64_t)1 << 31);
    const size_t is = big ? 8 : 4;
    const mt_ops *ops = wide ? (big ? &ops_w64 : &ops_w32) : (big ? &ops_b64 : &ops_b32);
    const bool one = gx == 1 && gy == 1;
    void *fcopy = NULL, *par = NULL;
    uint8_t *demoted = NULL;
    char *scratch = NULL;
    blk *blocks = NULL;
    int64_t *xs = NULL, *ys = NULL;
    size_t n, nb = (size_t)gx * (size_t)gy, fspan = 0, bspan = 0;
    int nteam = nthreads < 1 ? 1 : nthreads;
    atomic_bool stopped;
    mtree m;
    int32_t i, j;

    if (w == 0 || h == 0)
        return TW_OK;
    if (npx > SIZE_MAX / 16)
        return TW_E_NOMEM;
    n = (size_t)npx;
    if ((size_t)nteam > nb)
        nteam = (int)nb;
    memset(&m, 0, sizeof m);
    m.w = w;
    m.h = h;
    m.c8 = conn == 8;
    m.gx = gx;
    m.gy = gy;
    atomic_init(&stopped, false);
    m.stop = stop && stop->stop ? stop : NULL;
    m.stopped = &stopped;
    if (!(blocks = malloc(nb * sizeof *blocks)) ||
        !(xs = malloc(((size_t)gx + 1) * sizeof *xs)) ||
        !(ys = malloc(((size_t)gy + 1) * sizeof *ys))) {
        st = TW_E_NOMEM;
        goto out;
    }
    for (i = 0; i <= gx; i++)
        xs[i] = i * w / gx;
    for (j = 0; j <= gy; j++)
        ys[j] = j * h / gy;
    for (j = 0; j < gy; j++) {
        for (i = 0; i < gx; i++) {
            blk *b = &blocks[(size_t)j * (size_t)gx + (size_t)i];
            size_t sp;

            b->x0 = xs[i];
            b->x1 = xs[i + 1];
            b->y0 = ys[j];
            b->y1 = ys[j + 1];
            sp = (size_t)(b->x1 - b->x0 + 2) * (size_t)(b->y1 - b->y0 + 2);
            fspan = sp > fspan ? sp : fspan;
            sp = (size_t)(b->x1 - b->x0) * (size_t)(b->y1 - b->y0);
            bspan = sp > bspan ? sp : bspan;
        }
    }
    m.blocks = blocks;
    m.xs = xs;
    m.ys = ys;
    m.fspan = fspan;
    m.bspan = bspan;
    m.slot_bytes = slot_size(fspan, bspan, is, ls);

    /* Levels packed w * h: indices are then raster indices of the level array too. */
    if ((size_t)in->stride == (size_t)w * ls) {
        m.f = in->data;
    } else {
        if (!(fcopy = malloc(n * ls))) {
            st = TW_E_NOMEM;
            goto out;
        }
        for (int64_t y = 0; y < h; y++)
            memcpy((char *)fcopy + (size_t)y * (size_t)w * ls,
                   (const char *)in->data + y * in->stride, (size_t)w * ls);
        m.f = fcopy;
    }
    /* Build in the output itself when it is packed with our index size. */
    if (tw_sample_size(parent->type) == is && (size_t)parent->stride == (size_t)w * is)
        m.par = parent->data;
    else if (!(m.par = par = malloc(n * is))) {
        st = TW_E_NOMEM;
        goto out;
    }
    if (!one && !(m.demoted = demoted = calloc(n, 1))) {
        st = TW_E_NOMEM;
        goto out;
    }
    if ((size_t)nteam > SIZE_MAX / m.slot_bytes ||
        !(m.scratch = scratch = malloc((size_t)nteam * m.slot_bytes))) {
        st = TW_E_NOMEM;
        goto out;
    }

    if (one) {
        ops->build(&m, &blocks[0], scratch);
        if (m.par != parent->data)
            ops->copy_out(&m, parent);
    } else if (nteam == 1) {
        /* No team: the tasks of the recursion are undeferred, run on this thread in order
         * (even when the caller is itself inside a parallel region). */
        ops->region(&m, 0, gx, 0, gy);
        for (int64_t y = 0; y < h && !mt_stopped(&m); y += FLATTEN_ROWS)
            ops->flatten(&m, parent, y, y + FLATTEN_ROWS < h ? y + FLATTEN_ROWS : h);
    } else {
        const mtree *mp = &m;

        m.team = true;
        /* The tree of tasks builds and merges; then the rows are flattened in parallel. */
#pragma omp parallel num_threads(nteam) default(none) shared(mp, ops, parent, gx, gy, h)
        {
            int64_t y;

#pragma omp single
            ops->region(mp, 0, gx, 0, gy);
#pragma omp for schedule(static)
            for (y = 0; y < h; y++)
                if (!(y % FLATTEN_ROWS ? atomic_load_explicit(mp->stopped, memory_order_relaxed)
                                       : mt_stopped(mp)))
                    ops->flatten(mp, parent, y, y + 1);
        }
    }
    if (st == TW_OK && m.stop && atomic_load(&stopped))
        st = TW_E_CANCELED;

out:
    free(scratch);
    free(demoted);
    free(par);
    free(fcopy);
    free(ys);
    free(xs);
    free(blocks);
    return st;
}

/* Square blocks of about `bpx` pixels, at least `bpt` per thread of a team for images worth
 * it: the fewest blocks that satisfy both, cut along the longer side. */
static void
choose_grid(int64_t w, int64_t h, int64_t bpx, int64_t bpt, int nthreads, int32_t *gx,
            int32_t *gy)
{
    int64_t n = w * h, want = (n + bpx / 2) / bpx, cx = 1, cy = 1;

    if (nthreads > 1 && n >= PAR_MIN_PIXELS && want < (int64_t)nthreads * bpt)
        want = (int64_t)nthreads * bpt;
    want = want > MAX_GRID_BLOCKS ? MAX_GRID_BLOCKS : want;
    while (cx * cy < want) {
        /* cut the dimension whose blocks are longer */
        if ((w * cy >= h * cx && cx < w) || cy >= h)
            cx++;
        else
            cy++;
        if (cx >= w && cy >= h)
            break;
    }
    *gx = (int32_t)(cx < w ? cx : w);
    *gy = (int32_t)(cy < h ? cy : h);
}

tw_status
twi_omp_maxtree_grid(const tw_tile_view *in, int conn, tw_tile_view *parent, int nthreads,
                     int32_t gx, int32_t gy)
{
    tw_status st;

    if ((st = twi_maxtree_check(in, conn, parent)) != TW_OK)
        return st;
    if (gx < 1 || gy < 1)
        return TW_E_INVALID;
    gx = gx > in->w ? in->w : gx;
    gy = gy > in->h ? in->h : gy;
    if ((int64_t)gx * gy > MAX_GRID_BLOCKS)
        return TW_E_INVALID;
    if (in->type == TW_U32)
        return maxtree_u32(in, conn, parent, nthreads, gx, gy);
    return maxtree(in, conn, parent, nthreads, gx, gy, NULL);
}

tw_status
twi_omp_maxtree(const tw_tile_view *in, int conn, tw_tile_view *parent, int nthreads)
{
    return twi_omp_maxtree_stop(in, conn, parent, nthreads, NULL);
}

tw_status
twi_omp_maxtree_stop(const tw_tile_view *in, int conn, tw_tile_view *parent, int nthreads,
                     const twi_stop *stop)
{
    tw_status st;
    int32_t gx, gy;
    uint16_t lo, hi;

    if ((st = twi_maxtree_check(in, conn, parent)) != TW_OK)
        return st;
    if (in->type == TW_U32)
        return maxtree_u32(in, conn, parent, nthreads, 0, 0);
    /* masks: the components of their upper level by runs, not a flood (omp/maxtree_two.c) */
    if ((uint64_t)in->w * (uint64_t)in->h < UINT32_MAX && twi_maxtree_two_levels(in, &lo, &hi))
        return twi_omp_maxtree_two(in, lo, hi, conn, parent, nthreads, stop);
    if (in->type == TW_U16)
        choose_grid(in->w, in->h, BLOCK_PIXELS_16, BLOCKS_PER_THREAD_16, nthreads, &gx, &gy);
    else if (nthreads > 1)
        choose_grid(in->w, in->h, BLOCK_PIXELS_8, BLOCKS_PER_THREAD_8, nthreads, &gx, &gy);
    else
        choose_grid(in->w, in->h, BLOCK_PIXELS_1, 1, nthreads, &gx, &gy);
    return maxtree(in, conn, parent, nthreads, gx, gy, stop);
}
