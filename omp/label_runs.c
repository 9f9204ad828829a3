/* SPDX-License-Identifier: MIT */
/* tilewave: connected-component labelling of one tile by runs (the tile tasks of ops/label.c on
 * CPU workers): the same components and numbers as twi_omp_label, with a union-find over the
 * runs of foreground pixels of each row instead of over pixels. */
/*
 * A run is a maximal horizontal segment of foreground pixels. Runs are numbered in raster order
 * (a chunk of rows at a time, see below), so the run holding a component's first pixel is its
 * run of smallest index, and a union that links the larger root under the smaller one keeps
 * that run the root (parents stay below their children, as in twi_omp_label). Two runs of
 * consecutive rows join when they overlap (4-connectivity) or touch at a corner too (8). Each
 * row is scanned once, a word at a time where the mask is uniform, and joined to the row above
 * by a two-pointer walk over both rows' runs: the work follows the runs, not the pixels.
 *
 * A team splits the rows into chunks exactly as twi_omp_label does (labelled alone, flattened,
 * the rows where chunks meet joined serially, each run's final root found by reads only, roots
 * counted and numbered per chunk in raster order, every run given its root's number); chunk c's
 * runs start at index R0(c) * ceil(w / 2), the most runs the rows above it can hold, so run
 * indices increase in raster order across chunks too and the numbering is the team's
 * independent of its size. Nothing per pixel is written here: the labels are written from the
 * runs (twi_label_runs_write: the tile's local labels, or through a map its final ones, in one
 * pass), and the border labels of pass 1 come from the runs alone (twi_label_runs_border).
 */
#include <stdlib.h>
#include <string.h>

#include "omp_kernels.h"
#include "omp_stop.h"
#include "omp_uf.h"

enum { RX0, RX1, RP, RQ }; /* a run's words: first x, end x (exclusive), parent, root / label */

#define RUN(r, i, f) ((r)->run[4 * (size_t)(i) + (f)])

static size_t
runs_per_row(int32_t w)
{
    return ((size_t)w + 1) / 2;
}

size_t
twi_label_runs_scratch(int32_t w, int32_t h)
{
    if (w <= 0 || h <= 0)
        return 16;
    /* rs and re (h each), padding to 16 bytes, then the runs */
    return (size_t)h * 8 + 16 + (size_t)h * runs_per_row(w) * 16;
}

/* Joins the runs of row y (cur) with those of row y - 1 (prev) that touch them. */
static void
join_rows(twi_label_runs *r, int32_t y, int conn)
{
    uint32_t d = conn == 8 ? 1 : 0, j = r->rs[y - 1], je = r->re[y - 1];

    for (uint32_t i = r->rs[y]; i < r->re[y] && j < je; i++) {
        uint32_t x0 = RUN(r, i, RX0), x1 = RUN(r, i, RX1);

        /* runs of the row above that end before this one (and so before every later one) */
        while (j < je && RUN(r, j, RX1) + d <= x0)
            j++;
        for (uint32_t k = j; k < je && RUN(r, k, RX0) < x1 + d; k++)
            twi_uf_union(r->run + RP, 4, i, k);
    }
}

/* Foreground bits of n <= 64 samples of a row from x: bit i set when sample x + i differs
 * from bg (0 for a mask), bits n and above clear. Eight u8 (or four u16) samples at a time,
 * XORed with bg in every lane: a word's nonzero lanes marked in their high bits without a
 * branch, then gathered (a multiply for bytes). */
static inline uint64_t
row_bits(const void *row, int32_t x, int32_t n, int wide, uint16_t bg)
{
    uint64_t m = 0;
    int32_t i = 0;

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (!wide) {
        const uint64_t lo7 = 0x7f7f7f7f7f7f7f7full, hi = 0x8080808080808080ull;

        for (; i + 8 <= n; i += 8) {
            uint64_t v, nz;

            memcpy(&v, (const uint8_t *)row + x + i, 8);
            v ^= (uint64_t)(uint8_t)bg * 0x0101010101010101ull;
            nz = (((v & lo7) + lo7) | v) & hi;
            m |= ((nz >> 7) * 0x0102040810204080ull >> 56) << i;
        }
    } else {
        const uint64_t lo15 = 0x7fff7fff7fff7fffull, hi = 0x8000800080008000ull;

        for (; i + 4 <= n; i += 4) {
            uint64_t v, nz;

            memcpy(&v, (const uint16_t *)row + x + i, 8);
            v ^= (uint64_t)bg * 0x0001000100010001ull;
            nz = (((v & lo15) + lo15) | v) & hi;
            m |= (((nz >> 15) | (nz >> 30) | (nz >> 45) | (nz >> 60)) & 0xf) << i;
        }
    }
#endif
    for (; i < n; i++)
        m |= (uint64_t)(wide ? ((const uint16_t *)row)[x + i] != bg
                             : ((const uint8_t *)row)[x + i] != (uint8_t)bg)
             << i;
    return m;
}

/* Phase 1, rows [r0, r1) of the mask into runs from index k; each row joined to the one above
 * inside the chunk; then flattened (parents below children: already flat when reached). The
 * foreground bits come from `bits` (rows of `words` words) when given, else from the mask. */
static void
chunk_runs(const tw_tile_view *m, const uint64_t *bits, size_t words, twi_label_runs *r,
           int conn, int32_t r0, int32_t r1, uint32_t k)
{
    int wide = m->type == TW_U16, open = 0;
    int32_t w = m->w, x0 = 0;
    uint32_t k0 = k;
    uint64_t carry = 0;

    for (int32_t y = r0; y < r1; y++) {
        const void *row = TWI_ROW(m, uint8_t, y);

        r->rs[y] = k;
        /* the row's transitions, 64 pixels at a time: bit i of e set where pixel x + i
         * differs from the pixel before it (the one before the row is background); they
         * alternate run start, run end. x in 64 bits: the last block of a row of 2^31 - 1
         * pixels starts at 2^31 - 64. */
        for (int64_t x = 0; x < w; x += 64) {
            uint64_t fg = bits ? bits[(size_t)y * words + (size_t)x / 64]
                               : row_bits(row, (int32_t)x, w - x < 64 ? (int32_t)(w - x) : 64,
                                          wide, r->bg);
            uint64_t e = fg ^ ((fg << 1) | carry);

            carry = fg >> 63;
            while (e) {
                int32_t at = (int32_t)(x + __builtin_ctzll(e));

                e &= e - 1;
                if (!open) {
                    x0 = at;
                    open = 1;
                    continue;
                }
                RUN(r, k, RX0) = (uint32_t)x0;
                RUN(r, k, RX1) = (uint32_t)at;
                RUN(r, k, RP) = k;
                k++;
                open = 0;
            }
        }
        if (open) { /* a run up to the row's end (a 64-pixel block's last pixel) */
            RUN(r, k, RX0) = (uint32_t)x0;
            RUN(r, k, RX1) = (uint32_t)w;
            RUN(r, k, RP) = k;
            k++;
            open = 0;
        }
        carry = 0;
        r->re[y] = k;
        if (y > r0)
            join_rows(r, y, conn);
    }
    for (uint32_t i = k0; i < k; i++)
        RUN(r, i, RP) = RUN(r, RUN(r, i, RP), RP);
}

/* Phase 3: each run's final root (reads of parents only) into RQ; the chunk's roots counted. */
static int64_t
chunk_roots(twi_label_runs *r, int32_t r0, int32_t r1)
{
    int64_t n = 0;

    if (r0 >= r1)
        return 0;
    for (uint32_t i = r->rs[r0]; i < r->re[r1 - 1]; i++) {
        uint32_t p = RUN(r, i, RP);

        while (RUN(r, p, RP) != p)
            p = RUN(r, p, RP);
        RUN(r, i, RQ) = p;
        n += p == i;
    }
    return n;
}

/* Phase 4: the chunk's roots numbered from base + 1 in raster order, in their RP. */
static void
chunk_number(twi_label_runs *r, int32_t r0, int32_t r1, int64_t base)
{
    if (r0 >= r1)
        return;
    for (uint32_t i = r->rs[r0]; i < r->re[r1 - 1]; i++)
        if (RUN(r, i, RQ) == i)
            RUN(r, i, RP) = (uint32_t)++base;
}

/* Phase 5: every run takes its root's number, in RQ. */
static void
chunk_apply(twi_label_runs *r, int32_t r0, int32_t r1)
{
    if (r0 >= r1)
        return;
    for (uint32_t i = r->rs[r0]; i < r->re[r1 - 1]; i++)
        RUN(r, i, RQ) = RUN(r, RUN(r, i, RQ), RP);
}

static inline uint64_t
popcount64(uint64_t v)
{
    v -= (v >> 1) & 0x5555555555555555ull;
    v = (v & 0x3333333333333333ull) + ((v >> 2) & 0x3333333333333333ull);
    v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (v * 0x0101010101010101ull) >> 56;
}

/* The foreground bits of rows [r0, r1) into bits (rows of `words` words); returns their runs
 * (the starts among the rows' transitions). */
static size_t
chunk_bits(const tw_tile_view *m, uint16_t bg, uint64_t *bits, size_t words, int32_t r0,
           int32_t r1)
{
    int wide = m->type == TW_U16;
    size_t n = 0;

    for (int32_t y = r0; y < r1; y++) {
        const void *row = TWI_ROW(m, uint8_t, y);
        uint64_t carry = 0, *b = bits + (size_t)y * words;

        for (int64_t x = 0; x < m->w; x += 64) { /* 64 bits: as in chunk_runs */
            uint64_t fg =
                row_bits(row, (int32_t)x, m->w - x < 64 ? (int32_t)(m->w - x) : 64, wide, bg);

            b[x / 64] = fg;
            n += (size_t)popcount64(fg & ~((fg << 1) | carry));
            carry = fg >> 63;
        }
    }
    return n;
}

/* The argument check both makers share; r zeroed, its size set. */
static tw_status
runs_begin(const tw_tile_view *mask, int conn, twi_label_runs *r)
{
    if (!r)
        return TW_E_INVALID;
    memset(r, 0, sizeof *r);
    if (!mask || (mask->type != TW_U8 && mask->type != TW_U16) || mask->channels != 1 ||
        (conn != 4 && conn != 8) ||
        !twi_view_fits(mask, (size_t)mask->w * tw_sample_size(mask->type),
                       tw_sample_size(mask->type)) ||
        (int64_t)mask->w * mask->h >= (int64_t)UINT32_MAX)
        return TW_E_INVALID;
    r->w = mask->w;
    r->h = mask->h;
    return TW_OK;
}

/* Chunks of at least 16 rows, a few per thread for balance. */
static int32_t
runs_chunks(int32_t h, int nthreads)
{
    int32_t nc = nthreads > 1 ? 4 * nthreads : 1;

    if (nc > (h + 15) / 16)
        nc = (h + 15) / 16;
    return nc < 1 ? 1 : nc;
}

#define R0(c) ((int32_t)((int64_t)h * (c) / nc))

/* The phases over nc chunks, chunk c's runs from index base[c]; r->n set. `stop` (NULL: never)
 * is asked before each chunk of the first phase, the one that reads the mask; once it says
 * stop, the rest is skipped and TW_E_CANCELED returned. */
static tw_status
runs_build(const tw_tile_view *mask, const uint64_t *bits, size_t words, int conn,
           twi_label_runs *r, int nthreads, int32_t nc, const size_t *base,
           const twi_stop *stop)
{
    int32_t h = r->h;
    int64_t *cnt = calloc((size_t)nc + 1, sizeof *cnt);
    atomic_bool stopped = false;

    if (!cnt)
        return TW_E_NOMEM;
#pragma omp parallel num_threads(nc > 1 ? nthreads : 1)
    {
#pragma omp for schedule(dynamic, 1)
        for (int32_t c = 0; c < nc; c++)
            if (!twi_stop_now(stop, &stopped))
                chunk_runs(mask, bits, words, r, conn, R0(c), R0(c + 1), (uint32_t)base[c]);
    }
    if (atomic_load(&stopped)) {
        free(cnt);
        return TW_E_CANCELED;
    }
#pragma omp parallel num_threads(nc > 1 ? nthreads : 1)
    {
#pragma omp single
        for (int32_t c = 1; c < nc; c++)
            join_rows(r, R0(c), conn);
#pragma omp for schedule(dynamic, 1)
        for (int32_t c = 0; c < nc; c++)
            cnt[c + 1] = chunk_roots(r, R0(c), R0(c + 1));
#pragma omp single
        for (int32_t c = 0; c < nc; c++)
            cnt[c + 1] += cnt[c];
#pragma omp for schedule(dynamic, 1)
        for (int32_t c = 0; c < nc; c++)
            chunk_number(r, R0(c), R0(c + 1), cnt[c]);
#pragma omp for schedule(dynamic, 1)
        for (int32_t c = 0; c < nc; c++)
            chunk_apply(r, R0(c), R0(c + 1));
    }
    r->n = cnt[nc];
    free(cnt);
    return TW_OK;
}

tw_status
twi_omp_label_runs(const tw_tile_view *mask, int conn, void *scratch, twi_label_runs *r,
                   int nthreads)
{
    int32_t h, nc;
    size_t *base;
    tw_status st;

    if ((st = runs_begin(mask, conn, r)) != TW_OK || mask->w == 0 || mask->h == 0)
        return st;
    if (!scratch)
        return TW_E_INVALID;
    h = r->h;
    r->rs = scratch;
    r->re = r->rs + h;
    r->run = (uint32_t *)(void *)((char *)scratch + (((size_t)h * 8 + 15) & ~(size_t)15));
    nc = runs_chunks(h, nthreads);
    if (!(base = malloc((size_t)nc * sizeof *base)))
        return TW_E_NOMEM;
    for (int32_t c = 0; c < nc; c++) /* the most runs the rows above chunk c can hold */
        base[c] = (size_t)R0(c) * runs_per_row(mask->w);
    st = runs_build(mask, NULL, 0, conn, r, nthreads, nc, base, NULL);
    free(base);
    return st;
}

tw_status
twi_omp_label_runs_alloc(const tw_tile_view *mask, int conn, twi_label_runs *r, int nthreads,
                         const twi_stop *stop)
{
    return twi_omp_label_runs_alloc_bg(mask, 0, conn, r, nthreads, stop);
}

tw_status
twi_omp_label_runs_alloc_bg(const tw_tile_view *mask, uint16_t bg, int conn, twi_label_runs *r,
                            int nthreads, const twi_stop *stop)
{
    atomic_bool stopped = false;
    int32_t h, nc;
    size_t *base, total = 0, words;
    uint64_t *bits;
    tw_status st;

    if ((st = runs_begin(mask, conn, r)) != TW_OK || mask->w == 0 || mask->h == 0)
        return st;
    r->bg = bg;
    h = r->h;
    nc = runs_chunks(h, nthreads);
    words = ((size_t)mask->w + 63) / 64;
    base = malloc(((size_t)nc + 1) * sizeof *base);
    bits = malloc((size_t)h * words * sizeof *bits);
    if (!base || !bits) {
        free(base);
        free(bits);
        return TW_E_NOMEM;
    }
    /* a first read makes the mask's bits (a bit a pixel) and counts each chunk's runs: the
     * runs then take exactly their room, and are made from the bits */
#pragma omp parallel for num_threads(nc > 1 ? nthreads : 1) schedule(dynamic, 1)
    for (int32_t c = 0; c < nc; c++)
        base[c + 1] = twi_stop_now(stop, &stopped) ? 0
                                                   : chunk_bits(mask, bg, bits, words, R0(c),
                                                                R0(c + 1));
    if (atomic_load(&stopped)) {
        free(base);
        free(bits);
        return TW_E_CANCELED;
    }
    for (int32_t c = 0; c < nc; c++) {
        size_t k = base[c + 1];

        base[c] = total;
        total += k;
    }
    if (!(r->own = malloc((size_t)h * 8 + 16 + total * 16))) {
        free(base);
        free(bits);
        return TW_E_NOMEM;
    }
    r->rs = r->own;
    r->re = r->rs + h;
    r->run = (uint32_t *)(void *)((char *)r->own + (((size_t)h * 8 + 15) & ~(size_t)15));
    if ((st = runs_build(mask, bits, words, conn, r, nthreads, nc, base, stop)) != TW_OK)
        twi_label_runs_free(r);
    free(base);
    free(bits);
    return st;
}
#undef R0

void
twi_label_runs_free(twi_label_runs *r)
{
    if (!r)
        return;
    free(r->own);
    r->own = NULL;
    r->rs = r->re = r->run = NULL;
}

#define WRITE_ROW(T)                                                                           \
    do {                                                                                       \
        T *o = TWI_ROW(out, T, y);                                                             \
        int32_t x = 0;                                                                         \
                                                                                               \
        for (uint32_t i = r->rs[y]; i < r->re[y]; i++) {                                       \
            int32_t x0 = (int32_t)RUN(r, i, RX0), x1 = (int32_t)RUN(r, i, RX1);               \
            T v = (T)(map ? map[RUN(r, i, RQ)] : RUN(r, i, RQ));                               \
                                                                                               \
            for (; x < x0; x++)                                                                \
                o[x] = 0;                                                                      \
            for (; x < x1; x++)                                                                \
                o[x] = v;                                                                      \
        }                                                                                      \
        for (; x < r->w; x++)                                                                  \
            o[x] = 0;                                                                          \
    } while (0)

tw_status
twi_label_runs_write(const twi_label_runs *r, const uint64_t *map, tw_tile_view *out,
                     int nthreads)
{
    if (!r || !out || (out->type != TW_U32 && out->type != TW_U64) || out->channels != 1 ||
        out->w != r->w || out->h != r->h ||
        !twi_view_fits(out, (size_t)out->w * tw_sample_size(out->type),
                       tw_sample_size(out->type)) ||
        (!map && out->type != TW_U32))
        return TW_E_INVALID;
#pragma omp parallel for num_threads(nthreads > 1 ? nthreads : 1) schedule(static)
    for (int32_t y = 0; y < r->h; y++) {
        if (out->type == TW_U32)
            WRITE_ROW(uint32_t);
        else
            WRITE_ROW(uint64_t);
    }
    return TW_OK;
}
#undef WRITE_ROW

tw_status
twi_label_runs_border(const twi_label_runs *r, unsigned sides, twi_label_border *b)
{
    int32_t w, h;
    uint32_t *first, *side, seen = 0;
    tw_status st;

    if (!r || !b || r->w <= 0 || r->h <= 0)
        return TW_E_INVALID;
    w = r->w;
    h = r->h;
    first = malloc(((size_t)r->n + 1) * sizeof *first);
    side = calloc(2 * ((size_t)w + (size_t)h), sizeof *side);
    if (!first || !side) {
        free(first);
        free(side);
        memset(b, 0, sizeof *b);
        return TW_E_NOMEM;
    }
    /* labels appear in raster order of their first pixels: a label above every one seen so
     * far is met at its first run's first pixel */
    first[0] = UINT32_MAX;
    for (int32_t y = 0; y < h; y++) {
        for (uint32_t i = r->rs[y]; i < r->re[y]; i++) {
            uint32_t l = RUN(r, i, RQ);

            if (l > seen) {
                if (l != seen + 1 || l > r->n) {
                    seen = UINT32_MAX; /* not numbered in raster order: refused below */
                    goto done;
                }
                first[l] = (uint32_t)y * (uint32_t)w + RUN(r, i, RX0);
                seen = l;
            }
            /* the sides, in twi_label_border_from_first's order: top, bottom, left, right */
            for (int s = 0; s < 2; s++)
                if (y == (s ? h - 1 : 0))
                    for (uint32_t x = RUN(r, i, RX0); x < RUN(r, i, RX1); x++)
                        side[(size_t)s * w + x] = l;
            if (RUN(r, i, RX0) == 0)
                side[2 * (size_t)w + y] = l;
            if (RUN(r, i, RX1) == (uint32_t)w)
                side[2 * (size_t)w + h + y] = l;
        }
    }
done:
    st = (int64_t)seen == r->n ? twi_label_border_from_first(w, h, r->n, sides, first, side, b)
                      : TW_E_INVALID;
    if (st != TW_OK)
        memset(b, 0, sizeof *b);
    free(first);
    free(side);
    return st;
}
