/* SPDX-License-Identifier: MIT */
/* tilewave: exact Euclidean distance transform on CUDA (PBA+), and the wavefront EDT. */
/* Why one file: the three PBA+ phases and the wavefront EDT share the band layout, the device
 * helpers and the host-side launcher's scratch plan; nvcc compiles them as one unit so the
 * helpers stay in an anonymous namespace. */

/*
 * What this computes: the CUDA twin of omp/edt_omp.c (see its essay and omp_kernels.h). For a
 * band of h image rows (the whole image width w) and, per column, the nearest background row
 * above and below the band, every pixel gets d2 = min over background q of
 * sx^2 (x - qx)^2 + sy^2 (y - qy)^2, converted to the output format, and optionally the
 * (row, column) of such a q. The algorithm is PBA+ ([Cao10]: Cao et al. 2010 and the 2019
 * addendum by Zheng and Tan), rewritten for any w x h (no square, no multiple-of-64 rule),
 * 64-bit offsets and int32 coordinates.
 *
 * Layout. Phases 2 and 3 work on image rows, one thread per row, so that a warp (32
 * consecutive rows) reads 32 consecutive words of a "transposed" scratch array T[x][y] =
 * T[x * P + y] (P = h rounded up to 32): every access of a warp at one column is one 128-byte
 * line. Phase 1 writes that layout; phase 3 writes the row-major outputs back. Both transposes
 * go through a 32 x 33 shared-memory tile per warp (PBA+ folds them into phases 1 and 3 the
 * same way; here a warp needs only __syncwarp, never a block barrier).
 *
 * Phase 1 (per column: the nearest background row). The column is cut into m1 bands of bh
 * rows (bh a multiple of 32). p1_summary: per band and column, the first and last background
 * row, and per 32 rows the bit mask of background rows (32 independent byte loads in flight
 * per thread; the masks cost 1/8 byte a pixel). p1_link: per column, a sequential pass over
 * its m1 bands (PBA's interband propagation, O(m1)): the nearest background row above each
 * band (band->above, then the bands above) and below it. p1_fill: per band and column, 32 rows
 * at a time, from the masks alone: the nearest background row above a pixel is the highest bit
 * at or before it (or the carry from above), the nearest below the lowest bit at or after it
 * (or the first background row of a later chunk, found by a look-ahead over the following
 * masks and cached, or the band's "below"). Output: Y, the band-local row of the nearest
 * background pixel of the column (int32; rows of `above` are negative, rows of `below` are
 * >= h; NONE when the column has none at all).
 *
 * Phase 2 (per row: proximate sites, PBA's lower envelope). A column c with a site contributes
 * the parabola f_c(X) = sx^2 (X - c)^2 + sy^2 g_c^2, g_c = y - Y[c][y]. The row is cut into m2
 * bands of bw columns. p2_local: per row and band, the stack of the Meijster / PBA algorithm:
 * site b between a and c (a < b < c) is dropped when it is dominated, i.e. when the
 * intersection of f_a and f_b lies strictly right of that of f_b and f_c:
 *     [k1 (c1 + c2) + g2^2 - g1^2] k2 > [k2 (c2 + c3) + g3^2 - g2^2] k1,  k1 = c2 - c1,
 *     k2 = c3 - c2
 * (PBA+'s integer test, written with g). Every term is below 2^42 and every product below
 * 2^62 (sides <= 2^20), so it is exact in int64. Anisotropic spacing weights the two parts by
 * sx^2 and sy^2 and evaluates the test in double. A pushed site gets S[c][y] = (Y, back
 * link), and the element it is pushed onto gets its forward link F = c (the last element
 * pushed onto an element is its successor in the final stack; F reuses Y's memory, whose
 * columns this thread has already read); at the end, the band's head and tail. p2_merge:
 * ceil(log2 m2) rounds, each merging pairs of neighbouring blocks of bands as PBA's
 * kernelMergeBands does: the left block's stack is popped from its top while the
 * right block's list (walked forward with F) dominates it, until two elements of the right
 * block survive (the rest of the right list is then untouched: the envelope of two sets of
 * parabolas split by a vertical line is a prefix of one plus a suffix of the other). Links are
 * patched in both directions, and every element popped by a merge gets F = DEAD.
 *
 * Phase 3 (colouring). p3_colour: m3 threads per row, each on a contiguous segment of columns
 * (multiples of 32; by default the phase-2 bands), walking its segment right to left with the
 * back links as PBA does (move to the previous site while it is at least as near). Unlike PBA+
 * (every thread walks the whole list from the row's right end, so the list is read m3 times),
 * a thread starts inside the list: the anchor is the rightmost live element at or left of its
 * segment's last column X, found from the local tail of X's phase-2 band by following back
 * links through dead elements. This is exact because a dead element's back link was its
 * neighbour when it died and nothing between the two was alive then or later (elements never
 * come back). From the anchor (or the row's head when there is none), the thread walks forward
 * while the next element is at least as near X (the distances along the list are unimodal at
 * any X), then colours. Total work is w plus the list per row, not m3 times the list, and the
 * threads per row are no longer capped by walking cost. The thread writes the site of each
 * pixel (or its converted distance) into its warp's tile, and the warp writes 32 x 32 blocks
 * of the outputs in rows.
 *
 * Output: d2 = (double)(dx^2 + dy^2) exactly (isotropic) or (sx sx) dx^2 + (sy sy) dy^2 with
 * __dmul_rn / __dadd_rn in omp/edt_omp.c's order (no FMA contraction), then F32
 * (float)sqrt(d2), U16 min(65535, floor(sqrt(d2) + 0.5)), SQ32 min(d2, 2^32 - 1); +inf /
 * 65535 / 2^32 - 1 and index (2^32 - 1, 2^32 - 1) where the row has no site (no background in
 * the band, above or below). Isotropic output equals the CPU twin's bytes (d2 is the unique
 * minimum); the index may name another pixel at the same distance.
 *
 * Memory: the scratch holds Y/F (4 B/px) and S (8 B/px) in the transposed layout, the masks
 * (1/8 B/px), 16 B per column and phase-1 band and 12 B per row and phase-2 band: about 12.2
 * bytes a pixel.
 * Traffic per pixel: about 1 B of input (summary), 4 (Y written), 4 (Y read) + 8 + 4
 * (S and F of every site pushed), 8 per envelope site (phase 3) and the outputs (4, + 8 with
 * indices).
 *
 * The wavefront variant ([Teodoro13], algorithm 6) is at the end of the file.
 */
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "cuda_common.cuh"
#include "cuda_kernels.h"
#include "edt.h" /* twi_edt_check: the contract both variants share (kern/) */

namespace cg = cooperative_groups;

namespace {

/* Tuning (in policies, not kernels), measured on an H100 (8192^2 and 16384^2, 1 % and 50 % random
 * background, min of 7; before the phase-1 masks): phase-1 bands of 32 rows were about 1 %
 * faster than 64 and 3-6 % faster than 128 (p1_link's sequential pass over m1 bands is cheap
 * next to a longer per-thread sweep); phase-2 bands of 128 columns were within 3 % of the best
 * of 32 ... 256 everywhere (16384^2 1 %: 32 cols 5.29 ms, 64 4.94, 128 4.77, 256 4.74; 8192^2
 * 50 %: 1.48, 1.42, 1.44, 1.55), narrower when the rows are too few to give the GPU about two
 * waves of (row, band) threads (P2_TARGET_THREADS); phase-3 segments equal to the phase-2
 * bands beat segments of 32 columns by 1-10 %. */
struct EdtPolicy {
    static constexpr int TILE = 32;                 /* warp width, rows / columns of a tile */
    static constexpr int P1_WARPS = 4;              /* phase-1 bands per block */
    static constexpr int P2_WARPS = 4;              /* phase-2 bands per block */
    static constexpr int P3_WARPS = 4;              /* phase-3 segments per block */
    static constexpr int P3_WARPS_IDX = 2;          /* ... when the index tile is needed too */
    static constexpr int LINK_THREADS = 128;        /* columns per block in p1_link */
    static constexpr int AUTO_BAND_ROWS = 32;       /* phase-1 band height (m1 = h / this) */
    static constexpr int MAX_AUTO_M1 = 4096;        /* p1_link walks m1 bands sequentially */
    static constexpr int64_t P2_TARGET_THREADS = 1 << 19; /* rows x phase-2 bands */
    static constexpr int AUTO_BAND_COLS = 128;      /* phase-2 band width, at most */
    static constexpr int WF_THREADS = 256;          /* wavefront blocks */
    static constexpr int WF_BLOCKS_PER_SM = 4;
    static constexpr int PIX_ROWS = 8;              /* per-pixel kernels: 32 x 8 blocks */
};

constexpr int TILE = EdtPolicy::TILE;
constexpr int32_t NONE = INT32_MIN; /* Y: no background in the column */
constexpr int32_t DEAD = -2;        /* F: popped by a merge */
using twi_cu::ALIGN;
using twi_cu::align_up;
using twi_cu::aligned_base;
using twi_cu::ceil_div;
using twi_cu::finish;
using twi_cu::launched;
constexpr unsigned FULL = 0xffffffffu;

static_assert(TILE == 32, "the transposes and bit masks assume warp-wide tiles");
static_assert(EdtPolicy::P3_WARPS * TILE * (TILE + 1) * sizeof(uint32_t) <= 48 * 1024,
              "phase-3 value tiles over the static shared-memory limit");
static_assert(EdtPolicy::P3_WARPS_IDX * TILE * (TILE + 1) * (sizeof(uint32_t) + sizeof(uint2)) <=
                  48 * 1024,
              "phase-3 value and index tiles over the static shared-memory limit");
static_assert(EdtPolicy::P1_WARPS * TILE * (TILE + 1) * sizeof(int32_t) <= 48 * 1024,
              "phase-1 tiles over the static shared-memory limit");

/* Sizes and band counts of one call, all derived on the host. */
struct Geo {
    int32_t w, h;
    size_t P;        /* pitch of the transposed arrays, elements (h rounded up to 32) */
    int32_t bh, m1;  /* phase 1: rows per band (multiple of 32), bands */
    int32_t bw, m2;  /* phase 2: columns per band (multiple of 32), bands */
    int32_t sw, m3;  /* phase 3: columns per segment (multiple of 32), segments */
};

/* Scratch layout, byte offsets from the 256-aligned base. */
struct Layout {
    size_t y, s, mk, fl, up, dn, ht, lt, total;
};

struct Spacing {
    double sx2, sy2; /* sx * sx, sy * sy (host products, as the CPU twin computes them) */
};

__host__ __device__ constexpr int64_t
round_up(int64_t a, int64_t b)
{
    return ceil_div(a, b) * b;
}

/* Band sizes for w x h with the requested m1, m2, m3 (0 = automatic; others clamped). */
Geo
make_geo(int32_t w, int32_t h, int32_t m1, int32_t m2, int32_t m3)
{
    using Pol = EdtPolicy;
    Geo g;
    int64_t bh, bw, sw;

    g.w = w;
    g.h = h;
    g.P = (size_t)round_up(h, TILE);
    if (m1 > 0) {
        bh = round_up(ceil_div(h, m1), TILE);
    } else {
        bh = Pol::AUTO_BAND_ROWS;
        if (ceil_div(h, bh) > Pol::MAX_AUTO_M1)
            bh = round_up(ceil_div(h, Pol::MAX_AUTO_M1), TILE);
    }
    g.bh = (int32_t)bh;
    g.m1 = (int32_t)ceil_div(h, bh);
    if (m2 > 0) {
        bw = round_up(ceil_div(w, m2), TILE);
    } else {
        /* Bands of AUTO_BAND_COLS columns, narrower when the rows are too few to fill the
         * GPU with (row, band) threads. */
        int64_t want = ceil_div(Pol::P2_TARGET_THREADS, h);

        if (want < ceil_div(w, Pol::AUTO_BAND_COLS))
            want = ceil_div(w, Pol::AUTO_BAND_COLS);
        bw = round_up(ceil_div(w, want), TILE);
    }
    g.bw = (int32_t)bw;
    g.m2 = (int32_t)ceil_div(w, bw);
    sw = m3 > 0 ? round_up(ceil_div(w, m3), TILE) : bw;
    g.sw = (int32_t)sw;
    g.m3 = (int32_t)ceil_div(w, sw);
    return g;
}

Layout
make_layout(const Geo &g)
{
    const size_t px = (size_t)g.w * g.P;
    Layout L;

    L.y = 0;
    L.s = L.y + align_up(px * sizeof(int32_t));
    L.mk = L.s + align_up(px * sizeof(int2));
    L.fl = L.mk + align_up((size_t)ceil_div(g.h, TILE) * (size_t)g.w * sizeof(uint32_t));
    L.up = L.fl + align_up((size_t)g.m1 * (size_t)g.w * sizeof(int2));
    L.dn = L.up + align_up((size_t)g.m1 * (size_t)g.w * sizeof(int32_t));
    L.ht = L.dn + align_up((size_t)g.m1 * (size_t)g.w * sizeof(int32_t));
    L.lt = L.ht + align_up((size_t)g.m2 * g.P * sizeof(int2));
    L.total = L.lt + align_up((size_t)g.m2 * g.P * sizeof(int32_t)) + ALIGN; /* + base slack */
    return L;
}

/* ---- phase 1 ---------------------------------------------------------------------------- */

/* Bit j set when row r0 + j (j < n) of column x is background. The loads are independent, so
 * a thread has all of them in flight at once. */
__device__ __forceinline__ uint32_t
bg_mask(const unsigned char *__restrict__ bin, int64_t bstride, int64_t x, int32_t r0, int32_t n)
{
    uint32_t m = 0;

#pragma unroll
    for (int j = 0; j < TILE; j++) {
        if (j < n && bin[(int64_t)(r0 + j) * bstride + x] == 0)
            m |= 1u << j;
    }
    return m;
}

/* Per phase-1 band and column: the first and last background row (band-local), or NONE, and
 * the background mask of every 32 rows (mk[row / 32][x]), which is all p1_fill reads of the
 * image. */
__global__ void __launch_bounds__(EdtPolicy::P1_WARPS * TILE)
p1_summary(const unsigned char *__restrict__ bin, int64_t bstride, Geo g, uint32_t *__restrict__ mk,
           int2 *__restrict__ fl)
{
    const int64_t x = (int64_t)blockIdx.x * TILE + threadIdx.x;
    const int32_t k = (int32_t)blockIdx.y * EdtPolicy::P1_WARPS + (int32_t)threadIdx.y;

    if (x >= g.w || k >= g.m1)
        return;
    const int32_t r0 = k * g.bh, r1 = min(g.h, r0 + g.bh);
    int32_t first = NONE, last = NONE;

    for (int32_t c0 = r0; c0 < r1; c0 += TILE) {
        const uint32_t m = bg_mask(bin, bstride, x, c0, min(TILE, r1 - c0));

        mk[(size_t)(c0 / TILE) * g.w + x] = m;
        if (m) {
            if (first == NONE)
                first = c0 + __ffs((int)m) - 1;
            last = c0 + 31 - __clz((int)m);
        }
    }
    fl[(size_t)k * g.w + x] = make_int2(first, last);
}

/* Per column, sequentially over its bands: the nearest background row above each band and
 * below it (band-local rows; `above` / `below` are image rows, < 0 for none). */
__global__ void __launch_bounds__(EdtPolicy::LINK_THREADS)
p1_link(const int32_t *__restrict__ above, const int32_t *__restrict__ below, int64_t y0, Geo g,
        const int2 *__restrict__ fl, int32_t *__restrict__ up, int32_t *__restrict__ dn)
{
    const int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

    if (x >= g.w)
        return;
    int32_t a = NONE, b = NONE;

    if (above && above[x] >= 0)
        a = (int32_t)(above[x] - y0);
    if (below && below[x] >= 0)
        b = (int32_t)(below[x] - y0);
#pragma unroll 4
    for (int32_t k = 0; k < g.m1; k++) {
        const size_t i = (size_t)k * g.w + x;
        const int32_t last = fl[i].y;

        up[i] = a;
        if (last != NONE)
            a = last;
    }
#pragma unroll 4
    for (int32_t k = g.m1 - 1; k >= 0; k--) {
        const size_t i = (size_t)k * g.w + x;
        const int32_t first = fl[i].x;

        dn[i] = b;
        if (first != NONE)
            b = first;
    }
}

/* The nearer of two candidate rows of the same column for row r (NONE loses; ties: above). */
__device__ __forceinline__ int32_t
nearer(int32_t a, int32_t b, int32_t r)
{
    if (a == NONE)
        return b;
    if (b == NONE)
        return a;
    return r - a <= b - r ? a : b;
}

/* Phase 1 proper: one warp per 32 columns of a band, 32 rows at a time, written transposed. */
__global__ void __launch_bounds__(EdtPolicy::P1_WARPS * TILE)
p1_fill(const uint32_t *__restrict__ mk, Geo g, const int32_t *__restrict__ up,
        const int32_t *__restrict__ dn, int32_t *__restrict__ Y)
{
    __shared__ int32_t tiles[EdtPolicy::P1_WARPS][TILE][TILE + 1];
    const int lane = threadIdx.x;
    const int32_t k = (int32_t)blockIdx.y * EdtPolicy::P1_WARPS + (int32_t)threadIdx.y;
    const int64_t xbase = (int64_t)blockIdx.x * TILE;
    const int64_t x = xbase + lane;
    const bool valid = x < g.w;

    if (k >= g.m1)
        return; /* warp-uniform */
    int32_t (*tile)[TILE + 1] = tiles[threadIdx.y];
    const int32_t r0 = k * g.bh, r1 = min(g.h, r0 + g.bh);
    int32_t prev = NONE, after = NONE, below = NONE;
    int32_t scanned = r0; /* `after`: the first background row >= scanned (or `below`) */
    bool exhausted = false;

    if (valid) {
        prev = up[(size_t)k * g.w + x];
        below = dn[(size_t)k * g.w + x];
    }
    for (int32_t c0 = r0; c0 < r1; c0 += TILE) {
        const int32_t n = min(TILE, r1 - c0);
        const uint32_t m = valid ? mk[(size_t)(c0 / TILE) * g.w + x] : 0u;

        /* Rows after the chunk's last background row need the next one below the chunk. */
        if (valid && (m >> (n - 1)) == 0u && !exhausted && scanned < c0 + TILE) {
            int32_t c = c0 + TILE;

            after = NONE;
            for (; c < r1; c += TILE) {
                const uint32_t mm = mk[(size_t)(c / TILE) * g.w + x];

                if (mm) {
                    after = c + __ffs((int)mm) - 1;
                    break;
                }
            }
            if (c >= r1) {
                exhausted = true;
                after = below;
            }
            scanned = after == NONE ? r1 : after;
        }
#pragma unroll 4
        for (int j = 0; j < n; j++) {
            const uint32_t upto = j == TILE - 1 ? FULL : (2u << j) - 1u;
            const uint32_t at_or_above = m & upto, at_or_below = m >> j;
            const int32_t r = c0 + j;
            const int32_t a = at_or_above ? c0 + 31 - __clz((int)at_or_above) : prev;
            const int32_t b = at_or_below ? r + __ffs((int)at_or_below) - 1 : after;

            tile[lane][j] = nearer(a, b, r);
        }
        if (m)
            prev = c0 + 31 - __clz((int)m);
        __syncwarp();
        /* Column xbase + jj, rows c0 .. c0 + n - 1: one 128-byte line per column. */
        if (lane < n) {
            for (int jj = 0; jj < TILE && xbase + jj < g.w; jj++)
                Y[(size_t)(xbase + jj) * g.P + (size_t)(c0 + lane)] = tile[jj][lane];
        }
        __syncwarp();
    }
}

/* ---- phase 2 ---------------------------------------------------------------------------- */

/* Site b = (c2, g2) between a and c has an empty (or inverted) interval of the envelope. */
template <bool ANISO>
__device__ __forceinline__ bool
dominated(int32_t c1, int32_t g1, int32_t c2, int32_t g2, int32_t c3, int32_t g3, Spacing sp)
{
    const int64_t k1 = (int64_t)c2 - c1, k2 = (int64_t)c3 - c2;
    const int64_t h1 = (int64_t)g2 * g2 - (int64_t)g1 * g1;
    const int64_t h2 = (int64_t)g3 * g3 - (int64_t)g2 * g2;

    if (!ANISO) {
        const int64_t a = k1 * ((int64_t)c1 + c2) + h1, b = k2 * ((int64_t)c2 + c3) + h2;

        return a * k2 > b * k1;
    } else {
        const double a = __dadd_rn(__dmul_rn(sp.sx2, (double)(k1 * ((int64_t)c1 + c2))),
                                   __dmul_rn(sp.sy2, (double)h1));
        const double b = __dadd_rn(__dmul_rn(sp.sx2, (double)(k2 * ((int64_t)c2 + c3))),
                                   __dmul_rn(sp.sy2, (double)h2));

        return __dmul_rn(a, (double)k2) > __dmul_rn(b, (double)k1);
    }
}

__device__ __forceinline__ int32_t
back_of(const int2 *s)
{
    return reinterpret_cast<const int32_t *>(s)[1];
}

/* Per row and phase-2 band: the stack of proximate sites, its forward links, head and tail. */
template <bool ANISO>
__global__ void __launch_bounds__(EdtPolicy::P2_WARPS * TILE)
p2_local(Geo g, Spacing sp, int32_t *__restrict__ YF, int2 *__restrict__ S,
         int2 *__restrict__ ht, int32_t *__restrict__ lt)
{
    const int32_t y = (int32_t)blockIdx.x * TILE + (int32_t)threadIdx.x;
    const int32_t b = (int32_t)blockIdx.y * EdtPolicy::P2_WARPS + (int32_t)threadIdx.y;

    if (y >= g.h || b >= g.m2)
        return;
    const size_t P = g.P;
    const int32_t xs = b * g.bw, xe = min(g.w, xs + g.bw);
    int32_t *Fy = YF + y;
    int2 *Sy = S + y;
    /* Top of the stack (column t, g tg, back link tb) and the element below it (column tb). */
    int32_t t = -1, tg = 0, tb = -1, sg = 0, sb = -1, head = -1;

    for (int32_t x = xs; x < xe; x++) {
        const int32_t yn = Fy[(size_t)x * P];

        if (yn == NONE)
            continue;
        const int32_t gx = y - yn;

        while (tb >= 0 && dominated<ANISO>(tb, sg, t, tg, x, gx, sp)) {
            t = tb;
            tg = sg;
            tb = sb;
            if (tb >= 0) {
                const int2 u = Sy[(size_t)tb * P];

                sg = y - u.x;
                sb = u.y;
            }
        }
        /* S at the column just read: the warp's lanes write one line together (writing the
         * top only once something covers it saves writes in sparse rows but scatters them
         * over the lanes' columns, which measured slower: 16384^2 50 %, 6.5 ms vs 5.3). */
        Sy[(size_t)x * P] = make_int2(yn, t);
        /* The forward link of the element below: the last element pushed onto an element is
         * its successor in the final stack (a later push would have popped it first). F
         * overwrites Y at columns this thread has read. */
        if (t >= 0)
            Fy[(size_t)t * P] = x;
        sb = tb;
        sg = tg;
        tb = t;
        t = x;
        tg = gx;
        if (head < 0)
            head = x;
    }
    if (t >= 0)
        Fy[(size_t)t * P] = -1;
    ht[(size_t)b * P + y] = make_int2(head, t);
    lt[(size_t)b * P + y] = t;
}

/* One merge round: blocks of `span` bands starting at 2 p span (left) and (2 p + 1) span. */
template <bool ANISO>
__global__ void __launch_bounds__(EdtPolicy::P2_WARPS * TILE)
p2_merge(Geo g, Spacing sp, int32_t span, int32_t *__restrict__ F, int2 *__restrict__ S,
         int2 *__restrict__ ht)
{
    const int32_t y = (int32_t)blockIdx.x * TILE + (int32_t)threadIdx.x;
    const int64_t p = (int64_t)blockIdx.y * EdtPolicy::P2_WARPS + threadIdx.y;
    const int64_t bl = 2 * p * span, br = bl + span;

    if (y >= g.h || br >= g.m2)
        return;
    const size_t P = g.P;
    const int2 L = ht[(size_t)bl * P + y], R = ht[(size_t)br * P + y];

    if (R.x < 0)
        return; /* nothing on the right: the left block stands */
    if (L.x < 0) {
        ht[(size_t)bl * P + y] = R;
        return;
    }
    int32_t *Fy = F + y;
    int2 *Sy = S + y;
    int32_t t = L.y, tg, tb, sg = 0, sb = -1;
    {
        const int2 v = Sy[(size_t)t * P];

        tg = y - v.x;
        tb = v.y;
        if (tb >= 0) {
            const int2 u = Sy[(size_t)tb * P];

            sg = y - u.x;
            sb = u.y;
        }
    }
    /* Right-block elements on the stack (PBA's `top`); two survivors end the merge. */
    int32_t cur = R.x, on_stack = 0;

    while (on_stack < 2 && cur >= 0) {
        const int2 cv = Sy[(size_t)cur * P];
        const int32_t cg = y - cv.x, nxt = Fy[(size_t)cur * P];

        while (tb >= 0 && dominated<ANISO>(tb, sg, t, tg, cur, cg, sp)) {
            Fy[(size_t)t * P] = DEAD;
            t = tb;
            tg = sg;
            tb = sb;
            on_stack--;
            if (tb >= 0) {
                const int2 u = Sy[(size_t)tb * P];

                sg = y - u.x;
                sb = u.y;
            }
        }
        reinterpret_cast<int32_t *>(Sy + (size_t)cur * P)[1] = t;
        Fy[(size_t)t * P] = cur;
        sb = tb;
        sg = tg;
        tb = t;
        t = cur;
        tg = cg;
        on_stack = on_stack < 0 ? 1 : on_stack + 1;
        cur = nxt;
    }
    ht[(size_t)bl * P + y] = make_int2(L.x, R.y);
}

/* ---- phase 3 ---------------------------------------------------------------------------- */

/* Squared distance of a pixel to a site dx columns and dy rows away: the exact integer
 * (isotropic) or (sx sx) dx^2 + (sy sy) dy^2 rounded as the CPU twin rounds it. */
template <bool ANISO>
struct Dist;

template <>
struct Dist<false> {
    typedef int64_t T;
    static __device__ __forceinline__ T
    of(int32_t dx, int32_t dy, Spacing)
    {
        return (int64_t)dx * dx + (int64_t)dy * dy;
    }
    static __device__ __forceinline__ double
    d2(T v)
    {
        return (double)v;
    }
};

template <>
struct Dist<true> {
    typedef double T;
    static __device__ __forceinline__ T
    of(int32_t dx, int32_t dy, Spacing sp)
    {
        return __dadd_rn(__dmul_rn(sp.sx2, (double)((int64_t)dx * dx)),
                         __dmul_rn(sp.sy2, (double)((int64_t)dy * dy)));
    }
    static __device__ __forceinline__ double
    d2(T v)
    {
        return v;
    }
};

/* The output sample of a squared distance (+inf: no background), as omp/edt_omp.c's emit_row. */
template <int FMT>
__device__ __forceinline__ uint32_t
convert(double d2)
{
    if (FMT == TWI_EDT_F32)
        return __float_as_uint(__double2float_rn(__dsqrt_rn(d2)));
    if (FMT == TWI_EDT_U16) {
        const double r = __dadd_rn(__dsqrt_rn(d2), 0.5);

        return r >= 65535.0 ? 65535u : (uint32_t)r;
    }
    return d2 >= 4294967295.0 ? UINT32_MAX : (uint32_t)d2;
}

/* The same for an exact isotropic d2. F32 below 2^24: float(d2) is exact and sqrt rounded to
 * double and then to float equals sqrt rounded once to float (double rounding is innocuous for
 * sqrt when 53 >= 2 * 24 + 2, Figueroa 1995), so the single-precision square root gives the
 * same bits at a fraction of the cost. */
template <int FMT>
__device__ __forceinline__ uint32_t
convert_iso(int64_t d2)
{
    if (FMT == TWI_EDT_F32 && d2 < (1 << 24))
        return __float_as_uint(__fsqrt_rn((float)(int32_t)d2));
    return convert<FMT>((double)d2);
}

template <int FMT>
__device__ __forceinline__ void
store_out(unsigned char *row, int64_t x, uint32_t v)
{
    if (FMT == TWI_EDT_U16)
        reinterpret_cast<uint16_t *>(row)[x] = (uint16_t)v;
    else
        reinterpret_cast<uint32_t *>(row)[x] = v;
}

struct OutViews {
    unsigned char *out;
    int64_t ostride;
    unsigned char *idx; /* NULL: no indices */
    int64_t istride;
    int64_t y0;
};

template <int FMT, bool ANISO, bool IDX>
struct P3Cfg {
    static constexpr int WARPS = IDX ? EdtPolicy::P3_WARPS_IDX : EdtPolicy::P3_WARPS;
};

template <int FMT, bool ANISO, bool IDX>
__global__ void __launch_bounds__(P3Cfg<FMT, ANISO, IDX>::WARPS * TILE)
p3_colour(Geo g, Spacing sp, const int32_t *__restrict__ F, const int2 *__restrict__ S,
          const int2 *__restrict__ ht, const int32_t *__restrict__ lt, OutViews o)
{
    typedef Dist<ANISO> D;
    typedef typename D::T DT;
    constexpr int WARPS = P3Cfg<FMT, ANISO, IDX>::WARPS;
    __shared__ uint32_t vtiles[WARPS][TILE][TILE + 1];
    __shared__ uint2 itiles[IDX ? WARPS : 1][TILE][TILE + 1];
    const int lane = threadIdx.x;
    const int64_t j = (int64_t)blockIdx.y * WARPS + threadIdx.y;

    if (j >= g.m3)
        return; /* warp-uniform */
    uint32_t (*vt)[TILE + 1] = vtiles[threadIdx.y];
    uint2 (*it)[TILE + 1] = itiles[IDX ? threadIdx.y : 0];
    const size_t P = g.P;
    const int32_t ybase = (int32_t)blockIdx.x * TILE, y = ybase + lane;
    const int32_t s0 = (int32_t)(j * g.sw), s1 = min(g.w, s0 + g.sw);
    const int32_t *Fy = F + y;
    const int2 *Sy = S + y;
    /* Current site (column c, row yc) and the previous one in the list (p, yp, its link pb). */
    int32_t c = -1, yc = 0, p = -1, yp = 0, pb = -1;

    if (y < g.h && ht[y].x >= 0) {
        const int32_t xe = s1 - 1;

        /* Anchor: the rightmost live element at or left of xe. */
        for (int32_t bb = xe / g.bw; bb >= 0 && c < 0; bb--)
            c = lt[(size_t)bb * P + y];
        while (c >= 0 && (c > xe || Fy[(size_t)c * P] == DEAD))
            c = back_of(Sy + (size_t)c * P);
        if (c < 0)
            c = ht[y].x; /* every live element lies right of xe: start at the head */
        int2 v = Sy[(size_t)c * P];
        DT dc = D::of(xe - c, y - v.x, sp);

        /* Forward while the next element is at least as near xe. */
        for (;;) {
            const int32_t n = Fy[(size_t)c * P];

            if (n < 0)
                break;
            const int2 vn = Sy[(size_t)n * P];
            const DT dn = D::of(xe - n, y - vn.x, sp);

            if (dn > dc)
                break;
            c = n;
            v = vn;
            dc = dn;
        }
        yc = v.x;
        p = v.y;
        if (p >= 0) {
            const int2 u = Sy[(size_t)p * P];

            yp = u.x;
            pb = u.y;
        }
    }
    for (int32_t X = s1 - 1; X >= s0; X--) {
        uint32_t val;
        uint2 ix = make_uint2(UINT32_MAX, UINT32_MAX);

        if (c >= 0) {
            DT best = D::of(X - c, y - yc, sp);

            while (p >= 0) {
                const DT dp = D::of(X - p, y - yp, sp);

                if (dp > best)
                    break;
                best = dp;
                c = p;
                yc = yp;
                p = pb;
                if (p >= 0) {
                    const int2 u = Sy[(size_t)p * P];

                    yp = u.x;
                    pb = u.y;
                }
            }
            if (ANISO)
                val = convert<FMT>(D::d2(best));
            else
                val = convert_iso<FMT>((int64_t)best);
            if (IDX)
                ix = make_uint2((uint32_t)((int64_t)yc + o.y0), (uint32_t)c);
        } else {
            val = convert<FMT>(__longlong_as_double(0x7ff0000000000000ll)); /* +inf */
        }
        vt[lane][X & (TILE - 1)] = val;
        if (IDX)
            it[lane][X & (TILE - 1)] = ix;
        if ((X & (TILE - 1)) == 0 || X == s0) {
            /* The warp writes the block of 32 rows x (up to) 32 columns row by row. */
            const int32_t cs = X & ~(TILE - 1), xw = cs + lane;
            const bool in = xw >= s0 && xw < s1 && xw >= X;

            __syncwarp();
            for (int r = 0; r < TILE && ybase + r < g.h; r++) {
                if (in) {
                    store_out<FMT>(o.out + (int64_t)(ybase + r) * o.ostride, xw, vt[r][lane]);
                    if (IDX)
                        reinterpret_cast<uint2 *>(o.idx + (int64_t)(ybase + r) * o.istride)[xw] =
                            it[r][lane];
                }
            }
            __syncwarp();
        }
    }
}

/* ---- host side ------------------------------------------------------------------------ */

template <int FMT, bool ANISO>
void
launch_p3(const Geo &g, Spacing sp, const int32_t *F, const int2 *S, const int2 *ht,
          const int32_t *lt, const OutViews &o, cudaStream_t s)
{
    if (o.idx) {
        constexpr int W = P3Cfg<FMT, ANISO, true>::WARPS;
        const dim3 grid((unsigned)ceil_div(g.h, TILE), (unsigned)ceil_div(g.m3, W));

        p3_colour<FMT, ANISO, true><<<grid, dim3(TILE, W), 0, s>>>(g, sp, F, S, ht, lt, o);
    } else {
        constexpr int W = P3Cfg<FMT, ANISO, false>::WARPS;
        const dim3 grid((unsigned)ceil_div(g.h, TILE), (unsigned)ceil_div(g.m3, W));

        p3_colour<FMT, ANISO, false><<<grid, dim3(TILE, W), 0, s>>>(g, sp, F, S, ht, lt, o);
    }
}

template <bool ANISO>
tw_status
launch_edt(const tw_tile_view *bin, const twi_edt_band *band, const Geo &g, const Layout &L,
           unsigned char *base, const OutViews &o, cudaStream_t s)
{
    const Spacing sp = {band->sx * band->sx, band->sy * band->sy};
    int32_t *Y = reinterpret_cast<int32_t *>(base + L.y);
    int2 *S = reinterpret_cast<int2 *>(base + L.s);
    uint32_t *mk = reinterpret_cast<uint32_t *>(base + L.mk);
    int2 *fl = reinterpret_cast<int2 *>(base + L.fl);
    int32_t *up = reinterpret_cast<int32_t *>(base + L.up);
    int32_t *dn = reinterpret_cast<int32_t *>(base + L.dn);
    int2 *ht = reinterpret_cast<int2 *>(base + L.ht);
    int32_t *lt = reinterpret_cast<int32_t *>(base + L.lt);
    const unsigned char *in = static_cast<const unsigned char *>(bin->data);
    const dim3 p1_grid((unsigned)ceil_div(g.w, TILE),
                       (unsigned)ceil_div(g.m1, EdtPolicy::P1_WARPS));
    const dim3 p1_block(TILE, EdtPolicy::P1_WARPS);
    const dim3 p2_block(TILE, EdtPolicy::P2_WARPS);
    const unsigned rows = (unsigned)ceil_div(g.h, TILE);

    p1_summary<<<p1_grid, p1_block, 0, s>>>(in, bin->stride, g, mk, fl);
    p1_link<<<(unsigned)ceil_div(g.w, EdtPolicy::LINK_THREADS), EdtPolicy::LINK_THREADS, 0, s>>>(
        band->above, band->below, band->y0, g, fl, up, dn);
    p1_fill<<<p1_grid, p1_block, 0, s>>>(mk, g, up, dn, Y);
    p2_local<ANISO><<<dim3(rows, (unsigned)ceil_div(g.m2, EdtPolicy::P2_WARPS)), p2_block, 0, s>>>(
        g, sp, Y, S, ht, lt);
    for (int64_t span = 1; span < g.m2; span *= 2) {
        const int64_t pairs = ceil_div(g.m2 - span, 2 * span);

        p2_merge<ANISO><<<dim3(rows, (unsigned)ceil_div(pairs, EdtPolicy::P2_WARPS)), p2_block,
                          0, s>>>(g, sp, (int32_t)span, Y, S, ht);
    }
    switch (band->format) {
    case TWI_EDT_F32:
        launch_p3<TWI_EDT_F32, ANISO>(g, sp, Y, S, ht, lt, o, s);
        break;
    case TWI_EDT_U16:
        launch_p3<TWI_EDT_U16, ANISO>(g, sp, Y, S, ht, lt, o, s);
        break;
    default:
        launch_p3<TWI_EDT_SQ32, ANISO>(g, sp, Y, S, ht, lt, o, s);
        break;
    }
    return launched();
}

bool
size_ok(int32_t w, int32_t h)
{
    return w >= 0 && h >= 0 && w <= TWI_EDT_MAX_SIDE && h <= TWI_EDT_MAX_SIDE;
}

} // namespace

extern "C" size_t
twi_cuda_edt_scratch_size(int32_t w, int32_t h, const twi_edt_band *band)
{
    if (!size_ok(w, h))
        return 0;
    if (w == 0 || h == 0)
        return ALIGN;
    const Geo g = make_geo(w, h, band ? band->m1 : 0, band ? band->m2 : 0, band ? band->m3 : 0);

    return make_layout(g).total;
}

extern "C" tw_status
twi_cuda_edt(const tw_tile_view *d_bin, const twi_edt_band *band, tw_tile_view *d_out,
             tw_tile_view *d_idx, void *d_scratch, size_t scratch_bytes, void *stream)
{
    try {
        tw_status st = twi_edt_check(d_bin, band, d_out, d_idx);

        if (st != TW_OK)
            return st;
        if (band->format == TWI_EDT_U8)
            return TW_E_INVALID; /* not written for the GPU yet: the job runs u8 on CPUs */
        if (d_bin->w == 0 || d_bin->h == 0)
            return TW_OK;
        const Geo g = make_geo(d_bin->w, d_bin->h, band->m1, band->m2, band->m3);
        const Layout L = make_layout(g);

        if (!d_scratch || scratch_bytes < L.total)
            return TW_E_INVALID;
        cudaStream_t s = static_cast<cudaStream_t>(stream);
        const OutViews o = {static_cast<unsigned char *>(d_out->data), d_out->stride,
                            d_idx ? static_cast<unsigned char *>(d_idx->data) : nullptr,
                            d_idx ? d_idx->stride : 0, band->y0};
        const bool iso = band->sx == 1.0 && band->sy == 1.0;

        st = iso ? launch_edt<false>(d_bin, band, g, L, aligned_base(d_scratch), o, s)
                 : launch_edt<true>(d_bin, band, g, L, aligned_base(d_scratch), o, s);
        if (st != TW_OK)
            return st;
        return finish(s);
    } catch (...) {
        return TW_E_DEVICE;
    }
}

/*
 * ---- the wavefront EDT ([Teodoro13], algorithm 6) ------------------------------------------
 *
 * VR(p), the nearest background pixel found so far, is one 64-bit word per pixel,
 * (row << 32) | column, or VR_NONE. Background pixels start with themselves; the initial
 * wavefront is every background pixel with a foreground 8-neighbour, compacted into a queue
 * with one atomicAdd per warp. A round pops every entry p of the queue in parallel and offers
 * VR(p) to each 8-neighbour q with an atomicCAS loop on VR(q) that replaces it while the offer
 * is strictly nearer to q; a q improved in round r is pushed onto the next queue unless it is
 * already there (atomicMax of r + 1 on its flag word). Rounds run until a queue comes out empty.
 *
 * Synchronisation: one persistent cooperative kernel (as many blocks as are resident) runs all
 * the rounds, separated by grid barriers, and reads the next queue's size on the device after
 * each barrier, so the launcher never waits for the host. The queue counters use three slots:
 * round r reads slot r % 3, pushes into slot (r + 1) % 3 and block 0 clears slot (r + 2) % 3,
 * which no one touches during round r, so one barrier per round suffices. VR is read with
 * ld.global.cg (L2): L1 is not coherent with the other SMs' atomics.
 *
 * Approximate like the CPU twin: 8-neighbour propagation of nearest pixels (Danielsson) can
 * settle on a background pixel slightly farther than the nearest, never a nearer one, and the
 * pixel it settles on may depend on the order of the atomics.
 */

namespace {

constexpr unsigned long long VR_NONE = ~0ull;

struct WfCtrl {
    unsigned long long count[3]; /* queue entries pushed, per slot */
    unsigned long long rounds;
};
static_assert(sizeof(WfCtrl) <= ALIGN, "wavefront header");

struct WfLayout {
    uint64_t npix;
    size_t entry; /* bytes per queue entry: 4 (raster index < 2^32) or 8 */
    size_t vr, flag, q0, q1, total;
};

WfLayout
make_wf_layout(int32_t w, int32_t h)
{
    WfLayout L;

    L.npix = (uint64_t)w * (uint64_t)h;
    L.entry = L.npix <= (1ull << 32) ? sizeof(uint32_t) : sizeof(uint64_t);
    L.vr = align_up(sizeof(WfCtrl));
    L.flag = L.vr + align_up(L.npix * sizeof(unsigned long long));
    L.q0 = L.flag + align_up(L.npix * sizeof(uint32_t));
    L.q1 = L.q0 + align_up(L.npix * L.entry);
    L.total = L.q1 + align_up(L.npix * L.entry) + ALIGN;
    return L;
}

template <bool ANISO>
__device__ __forceinline__ typename Dist<ANISO>::T
site_dist(int64_t x, int64_t y, unsigned long long v, Spacing sp)
{
    return Dist<ANISO>::of((int32_t)(x - (int64_t)(uint32_t)v), (int32_t)(y - (int64_t)(v >> 32)),
                           sp);
}

__device__ __forceinline__ unsigned long long
pack(int64_t y, int64_t x)
{
    return ((unsigned long long)y << 32) | (unsigned long long)(uint32_t)x;
}

/* VR init: background pixels are their own nearest. */
__global__ void __launch_bounds__(TILE * EdtPolicy::PIX_ROWS)
wf_init(const unsigned char *__restrict__ bin, int64_t bstride, int32_t w, int32_t h,
        unsigned long long *__restrict__ vr, uint32_t *__restrict__ flag)
{
    const int64_t x = (int64_t)blockIdx.x * TILE + threadIdx.x;

    if (x >= w)
        return;
    for (int64_t y = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; y < h;
         y += (int64_t)gridDim.y * blockDim.y) {
        const size_t p = (size_t)y * (size_t)w + (size_t)x;

        vr[p] = bin[y * bstride + x] == 0 ? pack(y, x) : VR_NONE;
        flag[p] = 0;
    }
}

/* Warp-aggregated push of up to 8 items per lane (bit k of `bits`: neighbour k of p, or p
 * itself when `self`). All 32 lanes call it, converged. */
template <typename E>
__device__ __forceinline__ void
push_items(unsigned bits, int64_t y, int64_t x, int32_t w, bool self, E *q,
           unsigned long long *count)
{
    const int lane = threadIdx.x & 31;
    unsigned n = __popc(bits), incl = n;

#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        const unsigned v = __shfl_up_sync(FULL, incl, d);

        if (lane >= d)
            incl += v;
    }
    const unsigned total = __shfl_sync(FULL, incl, 31);
    unsigned long long base = 0;

    if (total == 0)
        return;
    if (lane == 31)
        base = atomicAdd(count, (unsigned long long)total);
    base = __shfl_sync(FULL, base, 31) + (incl - n);
    if (self) {
        if (bits)
            q[base] = (E)((uint64_t)y * (uint64_t)w + (uint64_t)x);
        return;
    }
    for (int k = 0; k < 8; k++) {
        if (bits & (1u << k)) {
            const int i = k < 4 ? k : k + 1;
            const int64_t qy = y + i / 3 - 1, qx = x + i % 3 - 1;

            q[base++] = (E)((uint64_t)qy * (uint64_t)w + (uint64_t)qx);
        }
    }
}

/* The initial wavefront: background pixels with a foreground 8-neighbour, one warp per 32
 * pixels of a row. */
template <typename E>
__global__ void __launch_bounds__(TILE * EdtPolicy::PIX_ROWS)
wf_front(const unsigned char *__restrict__ bin, int64_t bstride, int32_t w, int32_t h, E *q,
         WfCtrl *ctrl)
{
    const int64_t x = (int64_t)blockIdx.x * TILE + threadIdx.x;

    for (int64_t y = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; y < h;
         y += (int64_t)gridDim.y * blockDim.y) {
        bool front = false;

        if (x < w && bin[y * bstride + x] == 0) {
            for (int64_t yy = y - 1; yy <= y + 1 && !front; yy++) {
                if (yy < 0 || yy >= h)
                    continue;
                for (int64_t xx = x - 1; xx <= x + 1; xx++) {
                    if (xx >= 0 && xx < w && bin[yy * bstride + xx] != 0) {
                        front = true;
                        break;
                    }
                }
            }
        }
        push_items<E>(front ? 1u : 0u, y, x, w, true, q, &ctrl->count[0]);
    }
}

template <typename E, bool ANISO>
struct WfArgs {
    unsigned long long *vr;
    uint32_t *flag;
    E *q0, *q1;
    WfCtrl *ctrl;
    int32_t w, h;
    Spacing sp;
};

/* All the rounds (see above). */
template <typename E, bool ANISO>
__global__ void __launch_bounds__(EdtPolicy::WF_THREADS)
wf_rounds(WfArgs<E, ANISO> a)
{
    cg::grid_group grid = cg::this_grid();
    const int lane = threadIdx.x & 31;
    const uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const uint64_t warps = ((uint64_t)gridDim.x * blockDim.x) / 32;

    for (uint32_t r = 0;; r++) {
        const unsigned long long n = __ldcg(&a.ctrl->count[r % 3]);

        if (n == 0)
            break;
        const E *in = (r & 1) ? a.q1 : a.q0;
        E *out = (r & 1) ? a.q0 : a.q1;
        unsigned long long *cnt = &a.ctrl->count[(r + 1) % 3];

        for (uint64_t i0 = warp * 32; i0 < n; i0 += warps * 32) {
            const uint64_t i = i0 + lane;
            unsigned bits = 0;
            int64_t py = 0, px = 0;

            if (i < n) {
                const uint64_t pi = (uint64_t)__ldcg(in + i);
                const unsigned long long site = __ldcg(&a.vr[pi]);

                py = (int64_t)(pi / (uint64_t)a.w);
                px = (int64_t)(pi - (uint64_t)py * (uint64_t)a.w);
                for (int k = 0; k < 8 && site != VR_NONE; k++) {
                    const int ii = k < 4 ? k : k + 1;
                    const int64_t qy = py + ii / 3 - 1, qx = px + ii % 3 - 1;

                    if (qy < 0 || qy >= a.h || qx < 0 || qx >= a.w)
                        continue;
                    const size_t qi = (size_t)qy * (size_t)a.w + (size_t)qx;
                    const auto offer = site_dist<ANISO>(qx, qy, site, a.sp);
                    unsigned long long cur = __ldcg(&a.vr[qi]);
                    bool better = false;

                    while (cur == VR_NONE || offer < site_dist<ANISO>(qx, qy, cur, a.sp)) {
                        const unsigned long long old = atomicCAS(&a.vr[qi], cur, site);

                        if (old == cur) {
                            better = true;
                            break;
                        }
                        cur = old;
                    }
                    if (better && atomicMax(&a.flag[qi], r + 1) < r + 1)
                        bits |= 1u << k;
                }
            }
            push_items<E>(bits, py, px, a.w, false, out, cnt);
        }
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            a.ctrl->count[(r + 2) % 3] = 0;
            a.ctrl->rounds = r + 1;
        }
        grid.sync();
    }
}

/* VR to the outputs, with the exact path's conversion. */
template <int FMT, bool ANISO>
__global__ void __launch_bounds__(TILE * EdtPolicy::PIX_ROWS)
wf_output(const unsigned long long *__restrict__ vr, int32_t w, int32_t h, Spacing sp,
          OutViews o)
{
    const int64_t x = (int64_t)blockIdx.x * TILE + threadIdx.x;

    if (x >= w)
        return;
    for (int64_t y = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; y < h;
         y += (int64_t)gridDim.y * blockDim.y) {
        const unsigned long long v = vr[(size_t)y * (size_t)w + (size_t)x];
        double d2 = __longlong_as_double(0x7ff0000000000000ll);
        uint2 ix = make_uint2(UINT32_MAX, UINT32_MAX);

        if (v != VR_NONE) {
            d2 = Dist<ANISO>::d2(site_dist<ANISO>(x, y, v, sp));
            ix = make_uint2((uint32_t)(v >> 32), (uint32_t)v);
        }
        store_out<FMT>(o.out + y * o.ostride, x, convert<FMT>(d2));
        if (o.idx)
            reinterpret_cast<uint2 *>(o.idx + y * o.istride)[x] = ix;
    }
}

template <bool ANISO>
void
launch_wf_output(int format, const unsigned long long *vr, int32_t w, int32_t h, Spacing sp,
                 const OutViews &o, dim3 grid, dim3 block, cudaStream_t s)
{
    if (format == TWI_EDT_F32)
        wf_output<TWI_EDT_F32, ANISO><<<grid, block, 0, s>>>(vr, w, h, sp, o);
    else if (format == TWI_EDT_U16)
        wf_output<TWI_EDT_U16, ANISO><<<grid, block, 0, s>>>(vr, w, h, sp, o);
    else
        wf_output<TWI_EDT_SQ32, ANISO><<<grid, block, 0, s>>>(vr, w, h, sp, o);
}

template <typename E, bool ANISO>
tw_status
launch_wavefront(const tw_tile_view *bin, const twi_edt_band *band, const WfLayout &L,
                 unsigned char *base, const OutViews &o, cudaStream_t s)
{
    const int32_t w = bin->w, h = bin->h;
    const Spacing sp = {band->sx * band->sx, band->sy * band->sy};
    const unsigned char *in = static_cast<const unsigned char *>(bin->data);
    WfArgs<E, ANISO> a;
    const dim3 block(TILE, EdtPolicy::PIX_ROWS);
    const dim3 grid((unsigned)ceil_div(w, TILE),
                    (unsigned)std::min(ceil_div(h, EdtPolicy::PIX_ROWS), (int64_t)65535));
    int64_t cap = 0;
    auto kernel = wf_rounds<E, ANISO>;

    a.vr = reinterpret_cast<unsigned long long *>(base + L.vr);
    a.flag = reinterpret_cast<uint32_t *>(base + L.flag);
    a.q0 = reinterpret_cast<E *>(base + L.q0);
    a.q1 = reinterpret_cast<E *>(base + L.q1);
    a.ctrl = reinterpret_cast<WfCtrl *>(base);
    a.w = w;
    a.h = h;
    a.sp = sp;
    if (twi_cu::coop_capacity(kernel, EdtPolicy::WF_THREADS, EdtPolicy::WF_BLOCKS_PER_SM, &cap) !=
        TW_OK)
        return TW_E_DEVICE;
    if (cudaMemsetAsync(a.ctrl, 0, sizeof(WfCtrl), s) != cudaSuccess) {
        (void)cudaGetLastError();
        return TW_E_DEVICE;
    }
    const int64_t want = ceil_div((int64_t)L.npix, EdtPolicy::WF_THREADS);
    const unsigned blocks = (unsigned)std::max((int64_t)1, std::min(want, cap));
    void *args[] = {&a};

    wf_init<<<grid, block, 0, s>>>(in, bin->stride, w, h, a.vr, a.flag);
    wf_front<E><<<grid, block, 0, s>>>(in, bin->stride, w, h, a.q0, a.ctrl);
    if (launched() != TW_OK)
        return TW_E_DEVICE;
    if (cudaLaunchCooperativeKernel(reinterpret_cast<const void *>(kernel), dim3(blocks),
                                    dim3(EdtPolicy::WF_THREADS), args, 0, s) != cudaSuccess) {
        (void)cudaGetLastError();
        return TW_E_DEVICE;
    }
    launch_wf_output<ANISO>(band->format, a.vr, w, h, sp, o, grid, block, s);
    return launched();
}

} // namespace

extern "C" size_t
twi_cuda_edt_wavefront_scratch_size(int32_t w, int32_t h)
{
    if (!size_ok(w, h))
        return 0;
    return make_wf_layout(w, h).total;
}

extern "C" tw_status
twi_cuda_edt_wavefront(const tw_tile_view *d_bin, const twi_edt_band *band,
                       tw_tile_view *d_out, tw_tile_view *d_idx, void *d_scratch,
                       size_t scratch_bytes, void *stream)
{
    try {
        tw_status st = twi_edt_check(d_bin, band, d_out, d_idx);

        if (st != TW_OK)
            return st;
        if (band->format == TWI_EDT_U8)
            return TW_E_INVALID; /* not written for the GPU yet: the job runs u8 on CPUs */
        /* A whole image, as the CPU twin requires. */
        if (band->y0 != 0 || band->above || band->below)
            return TW_E_INVALID;
        if (d_bin->w == 0 || d_bin->h == 0)
            return TW_OK;
        const WfLayout L = make_wf_layout(d_bin->w, d_bin->h);

        if (!d_scratch || scratch_bytes < L.total)
            return TW_E_INVALID;
        cudaStream_t s = static_cast<cudaStream_t>(stream);
        const OutViews o = {static_cast<unsigned char *>(d_out->data), d_out->stride,
                            d_idx ? static_cast<unsigned char *>(d_idx->data) : nullptr,
                            d_idx ? d_idx->stride : 0, 0};
        const bool iso = band->sx == 1.0 && band->sy == 1.0;
        unsigned char *base = aligned_base(d_scratch);

        if (L.entry == sizeof(uint32_t))
            st = iso ? launch_wavefront<uint32_t, false>(d_bin, band, L, base, o, s)
                     : launch_wavefront<uint32_t, true>(d_bin, band, L, base, o, s);
        else
            st = iso ? launch_wavefront<unsigned long long, false>(d_bin, band, L, base, o, s)
                     : launch_wavefront<unsigned long long, true>(d_bin, band, L, base, o, s);
        if (st != TW_OK)
            return st;
        return finish(s);
    } catch (...) {
        return TW_E_DEVICE;
    }
}
