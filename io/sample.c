/* SPDX-License-Identifier: MIT */
/* tilewave: the deterministic synthetic tissue-like sample slide (`tilewave sample`). */

/*
 * What is drawn. A continuous scene in level-0 pixel coordinates (0.25 micron per pixel):
 * glass (near white, faint grain), tissue where a smooth multi-octave value-noise field
 * exceeds a threshold (several irregular blobs with soft edges and a few holes, kept off
 * the slide's border), pink eosin stroma with wavy fibres inside the tissue, and dark purple
 * nucleus-like ellipses 16-32 pixels across (4-8 microns) on a hashed, jittered 32-pixel grid,
 * denser where a second low-frequency field is high.
 *
 * How it stays identical everywhere. Every level is a point-sampled rendering of the same
 * scene: pixel i of level k samples the scene at its centre, (i + 1/2) 2^k in level-0 units.
 * Each pixel therefore depends on nothing but its own position, never on the tile, the order
 * of work or the thread that renders it. All arithmetic is integer (positions in 1/256 pixel,
 * noise values in 1/65536, bilinear weights in 1/256); random numbers come from a 64-bit
 * mixing hash (the splitmix64 finaliser) of the seed, the layer and the cell coordinates.
 * There is no floating point, no rand(), and no right shift of a negative number (the one
 * place that needs a floored shift spells it out), so the bytes are the same on any compiler
 * and machine.
 *
 * How it stays fast. The slow-varying fields (tissue, density, fibre warp, holes) are defined
 * as the bilinear interpolation of their values on a 16-pixel lattice; a render of a block at
 * levels 0-4 computes the lattice points it needs once, deeper levels evaluate the four
 * corners of each pixel directly, and both give the same numbers. Nuclei are painted per
 * block by visiting the grid cells that can reach it, in global cell order, so overlaps
 * resolve the same way in every block. Tiles are rendered and compressed in parallel, one
 * OpenMP thread per tile, each calling the thread-safe tw_writer_write_tile().
 */
#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "io_internal.h"
#include "sample_internal.h"
#include "tilewave/version.h"

#define QB 8               /* positions are in 1/256 of a level-0 pixel */
#define LAT_SHIFT 4        /* lattice of the slow fields: 16 level-0 pixels */
#define LAT_MAX_LEVEL 4    /* up to this level a block caches its lattice points */
#define NUC_SHIFT 5        /* nucleus grid cell: 32 level-0 pixels */
#define NUC_REACH 48       /* a nucleus never reaches further than this beyond its cell */
#define CACHE_MARGIN 96    /* lattice cached around a block: covers every candidate's centre */
#define BLOCK 256          /* render in blocks of at most this many pixels a side */
#define GLASS_PERIOD TWI_SAMPLE_GLASS_PERIOD

#define PEN_MAX 60000      /* tissue field removed at the slide's border */
#define TISSUE_BAND 1600   /* tissue field units across the soft tissue edge */
#define TISSUE_QUANTILE 58 /* percent of the slide with less tissue field than the edge */
#define HOLE_START 50000   /* hole field above which tissue thins out */
#define HOLE_BAND 5000

#define MAX_SIDE ((int64_t)1 << 31)
#define MAX_TILE 16384

enum { KEY_TISSUE, KEY_DENSITY, KEY_WARP, KEY_HOLE, KEY_FIBER, KEY_GRAIN, KEY_NUC, KEY_CHROM };

/* cos, sin of i * pi / 16 in Q14 */
static const int32_t angles[16][2] = {
    {16384, 0}, {16069, 3196}, {15137, 6270}, {13623, 9102}, {11585, 11585},
    {9102, 13623}, {6270, 15137}, {3196, 16069}, {0, 16384}, {-3196, 16069},
    {-6270, 15137}, {-9102, 13623}, {-11585, 11585}, {-13623, 9102}, {-15137, 6270},
    {-16069, 3196},
};

static inline uint64_t
mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static inline uint64_t
hash2(uint64_t key, uint64_t a, uint64_t b)
{
    return mix64(key + a * 0x9E3779B97F4A7C15u + b * 0xC2B2AE3D27D4EB4Fu);
}

/* floor(v / 2^s) without shifting a negative number (implementation-defined in C). */
static inline int64_t
floor_shift(int64_t v, int s)
{
    return v >= 0 ? v >> s : -(int64_t)((uint64_t)(-(v + 1)) >> s) - 1;
}

static inline int64_t
clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Fraction of x inside a cell of 2^b units, in Q16. */
static inline uint64_t
frac16(uint64_t x, int b)
{
    uint64_t f = x & (((uint64_t)1 << b) - 1);

    return b >= 16 ? f >> (b - 16) : f << (16 - b);
}

/* 3t^2 - 2t^3 on Q16 */
static inline uint64_t
smooth16(uint64_t t)
{
    return (t * t * (3 * 65536 - 2 * t)) >> 32;
}

static inline uint64_t
lerp16(uint64_t a, uint64_t b, uint64_t t)
{
    return (a * (65536 - t) + b * t) >> 16;
}

/* Value noise in [0, 65535] at (x, y) (1/256 pixel units), cells 2^sx by 2^sy pixels. */
static uint64_t
vnoise(uint64_t key, uint64_t x, uint64_t y, int sx, int sy)
{
    int bx = sx + QB, by = sy + QB;
    uint64_t cx = x >> bx, cy = y >> by;
    uint64_t tx = smooth16(frac16(x, bx)), ty = smooth16(frac16(y, by));
    uint64_t v00 = hash2(key, cx, cy) >> 48, v10 = hash2(key, cx + 1, cy) >> 48;
    uint64_t v01 = hash2(key, cx, cy + 1) >> 48, v11 = hash2(key, cx + 1, cy + 1) >> 48;

    return lerp16(lerp16(v00, v10, tx), lerp16(v01, v11, tx), ty);
}

/* vnoise() for a run of nearby points: the corner hashes of the last cell are kept, and
 * neighbouring pixels mostly fall in the same cell. Same values as vnoise(). */
typedef struct noise_memo {
    uint64_t cx, cy;
    uint64_t v00, v10, v01, v11;
    bool ok;
} noise_memo;

static inline uint64_t
vnoise_memo(noise_memo *m, uint64_t key, uint64_t x, uint64_t y, int sx, int sy)
{
    int bx = sx + QB, by = sy + QB;
    uint64_t cx = x >> bx, cy = y >> by;
    uint64_t tx = smooth16(frac16(x, bx)), ty = smooth16(frac16(y, by));

    if (!m->ok || cx != m->cx || cy != m->cy) {
        m->cx = cx;
        m->cy = cy;
        m->v00 = hash2(key, cx, cy) >> 48;
        m->v10 = hash2(key, cx + 1, cy) >> 48;
        m->v01 = hash2(key, cx, cy + 1) >> 48;
        m->v11 = hash2(key, cx + 1, cy + 1) >> 48;
        m->ok = true;
    }
    return lerp16(lerp16(m->v00, m->v10, tx), lerp16(m->v01, m->v11, tx), ty);
}

/* Sum of n octaves, the coarsest with cells of 2^shift pixels, each half the amplitude and
 * cell of the previous one (cells no smaller than 16 pixels). Range [0, 2 * 65535). */
static uint64_t
fbm(uint64_t key, uint64_t x, uint64_t y, int shift, int n)
{
    uint64_t sum = 0;
    int o, s;

    for (o = 0; o < n; o++) {
        s = shift - o < LAT_SHIFT ? LAT_SHIFT : shift - o;
        sum += vnoise(key + (uint64_t)o * 0x632BE59BD9B4E019u, x, y, s, s) >> o;
    }
    return sum;
}

/* ---- the slow fields on the 16-pixel lattice */

typedef struct lattice_value {
    int32_t tissue;  /* biased: always >= 0 */
    int32_t density; /* [0, 65535] roughly */
    int32_t warp;
    int32_t hole;
} lattice_value;

/* The tissue field at lattice point (gx, gy), before interpolation. */
static int64_t
lattice_tissue(const twi_sample_scene *sc, uint64_t gx, uint64_t gy)
{
    uint64_t x = gx << (LAT_SHIFT + QB), y = gy << (LAT_SHIFT + QB);
    int64_t px = (int64_t)(gx << LAT_SHIFT), py = (int64_t)(gy << LAT_SHIFT);
    int64_t edge, pen = 0;

    /* Keep tissue off the border, as on a real slide: lower the field near the edges. */
    edge = px < py ? px : py;
    if (sc->w - px < edge)
        edge = sc->w - px;
    if (sc->h - py < edge)
        edge = sc->h - py;
    if (edge < sc->margin) {
        /* a quadratic ramp: no visible straight line where it starts */
        int64_t r = (sc->margin - (edge < 0 ? 0 : edge)) * 4096 / sc->margin;

        pen = r * r * PEN_MAX >> 24;
    }
    return (int64_t)fbm(sc->key[KEY_TISSUE], x, y, sc->tissue_shift, 4) + PEN_MAX - pen;
}

static lattice_value
lattice_point(const twi_sample_scene *sc, uint64_t gx, uint64_t gy)
{
    uint64_t x = gx << (LAT_SHIFT + QB), y = gy << (LAT_SHIFT + QB);
    lattice_value v;

    v.tissue = (int32_t)lattice_tissue(sc, gx, gy);
    v.density = (int32_t)(fbm(sc->key[KEY_DENSITY], x, y, 9, 2) * 2 / 3);
    v.warp = (int32_t)(fbm(sc->key[KEY_WARP], x, y, 8, 2) * 2 / 3);
    v.hole = (int32_t)(fbm(sc->key[KEY_HOLE], x, y, 7, 2) * 2 / 3);
    return v;
}

/* Lattice points of a block, row-major; NULL when the block is rendered without a cache. */
typedef struct lattice_cache {
    uint64_t gx0, gy0;
    uint64_t nx, ny;
    lattice_value *v;
} lattice_cache;

typedef struct fields {
    int64_t tissue, density, warp, hole;
} fields;

/* The slow fields at (x, y): bilinear in the four surrounding lattice points, from the cache
 * when it holds them. */
static void
fields_at(const twi_sample_scene *sc, const lattice_cache *c, uint64_t x, uint64_t y,
          fields *f)
{
    uint64_t gx = x >> (LAT_SHIFT + QB), gy = y >> (LAT_SHIFT + QB);
    int64_t fx = (int64_t)((x >> LAT_SHIFT) & 255), fy = (int64_t)((y >> LAT_SHIFT) & 255);
    int64_t w00 = (256 - fx) * (256 - fy), w10 = fx * (256 - fy);
    int64_t w01 = (256 - fx) * fy, w11 = fx * fy;
    lattice_value p00, p10, p01, p11;

    if (c && gx >= c->gx0 && gy >= c->gy0 && gx + 1 < c->gx0 + c->nx &&
        gy + 1 < c->gy0 + c->ny) {
        const lattice_value *r = c->v + (gy - c->gy0) * c->nx + (gx - c->gx0);

        p00 = r[0];
        p10 = r[1];
        p01 = r[c->nx];
        p11 = r[c->nx + 1];
    } else {
        p00 = lattice_point(sc, gx, gy);
        p10 = lattice_point(sc, gx + 1, gy);
        p01 = lattice_point(sc, gx, gy + 1);
        p11 = lattice_point(sc, gx + 1, gy + 1);
    }
#define BILERP(m) ((p00.m * w00 + p10.m * w10 + p01.m * w01 + p11.m * w11) >> 16)
    f->tissue = BILERP(tissue);
    f->density = BILERP(density);
    f->warp = BILERP(warp);
    f->hole = BILERP(hole);
#undef BILERP
}

/* Tissue coverage in [0, 256]: the soft edge of the thresholded field, minus holes. */
static int64_t
tissue_alpha(const twi_sample_scene *sc, const fields *f)
{
    int64_t a = clamp64((f->tissue - sc->threshold) * 256 / TISSUE_BAND + 128, 0, 256);
    int64_t hole = clamp64((f->hole - HOLE_START) * 256 / HOLE_BAND, 0, 256);

    return a * (256 - hole) >> 8;
}

/* ---- pixels */

/* Position of the centre of pixel i of level k, in 1/256 level-0 pixel. */
static inline uint64_t
centre(int64_t i, int k)
{
    return ((uint64_t)(2 * i + 1)) << (k + QB - 1);
}

static inline uint8_t
u8(int64_t v)
{
    return (uint8_t)clamp64(v, 0, 255);
}

/* Glass at level-0 pixel (X, Y): a faint grain (-1, 0, 0, +1; stronger grain costs deflate
 * time and file size) that repeats every GLASS_PERIOD pixels. Every tile edge is a multiple of
 * the period, so all tiles of pure glass in a level hold the same bytes: the writer compresses
 * one and reuses it, and most of a slide is glass. */
static inline void
glass_pixel(const twi_sample_scene *sc, int64_t X, int64_t Y, uint8_t *px)
{
    int noise = sc->glass_noise[(Y & (GLASS_PERIOD - 1)) * GLASS_PERIOD +
                                (X & (GLASS_PERIOD - 1))];

    px[0] = (uint8_t)(240 + noise);
    px[1] = (uint8_t)(239 + noise);
    px[2] = (uint8_t)(242 + noise);
}

/* Glass, stroma and their blend at one pixel. */
static void
background_pixel(const twi_sample_scene *sc, const lattice_cache *c, noise_memo *memo,
                 uint64_t x, uint64_t y, uint8_t *px)
{
    int64_t glass[3], a, tis[3];
    fields f;

    glass_pixel(sc, (int64_t)(x >> QB), (int64_t)(y >> QB), px);
    fields_at(sc, c, x, y, &f);
    a = tissue_alpha(sc, &f);
    if (a == 0)
        return;
    glass[0] = px[0];
    glass[1] = px[1];
    glass[2] = px[2];
    {
        uint64_t g = hash2(sc->key[KEY_GRAIN], x >> QB, y >> QB);
        /* Fibres: ridges of anisotropic noise (long along, thin across the fibre direction),
         * in coordinates rotated to the slide's fibre angle and warped by a slow field so
         * that the bundles wave. The offset keeps the rotated coordinates positive. */
        const int64_t ca = angles[sc->fiber_angle][0], sa = angles[sc->fiber_angle][1];
        const int64_t off = (int64_t)1 << 42;
        int64_t sx = (int64_t)x, sy = (int64_t)y;
        int64_t u = floor_shift(sx * ca + sy * sa, 14) + off;
        int64_t v = floor_shift(sy * ca - sx * sa, 14) + off + (f.warp - 32768) * 3 / 8;
        uint64_t f1 = vnoise_memo(&memo[0], sc->key[KEY_FIBER], (uint64_t)u, (uint64_t)v, 6, 3);
        uint64_t f2 = vnoise_memo(&memo[1], sc->key[KEY_FIBER] + 1, (uint64_t)u, (uint64_t)v,
                                  4, 2);
        int64_t fib = (int64_t)((3 * f1 + f2) >> 2) - 32768;
        int64_t ridge = 65535 - 2 * (fib < 0 ? -fib : fib);
        int64_t r, cell, grain;

        ridge = clamp64(ridge, 0, 65535);
        r = ridge * ridge >> 16;
        r = r * r >> 16; /* thin, bright-edged fibres */
        /* light pink (242, 190, 216) to eosin fibre (204, 104, 158) */
        tis[0] = 242 - ((242 - 204) * r >> 16);
        tis[1] = 190 - ((190 - 104) * r >> 16);
        tis[2] = 216 - ((216 - 158) * r >> 16);
        /* cellular areas lean purple */
        cell = clamp64((f.density - 30000) * 256 / 30000, 0, 256) / 3;
        tis[0] = (tis[0] * (256 - cell) + 190 * cell) >> 8;
        tis[1] = (tis[1] * (256 - cell) + 130 * cell) >> 8;
        tis[2] = (tis[2] * (256 - cell) + 196 * cell) >> 8;
        grain = (int64_t)((g >> 8) & 7) - 4;
        for (int i = 0; i < 3; i++)
            px[i] = u8((glass[i] * (256 - a) + (tis[i] + grain) * a + 128) >> 8);
    }
}

/* One nucleus, if cell (cx, cy) has one: an ellipse with a soft edge and chromatin grain,
 * painted over the block (x0, y0, w, h) of level k. */
static void
nucleus(const twi_sample_scene *sc, const lattice_cache *c, uint64_t cx, uint64_t cy, int k,
        int64_t x0, int64_t y0, int32_t w, int32_t h, uint8_t *dst, size_t stride)
{
    uint64_t hc = hash2(sc->key[KEY_NUC], cx, cy), h2;
    int64_t pres = (int64_t)(hc & 0xffff);
    int64_t ncx, ncy, a, dn, p, ra, rb, reach, col[3], op;
    int64_t ix0, ix1, iy0, iy1, ca, sa, dv;
    fields f;

    if (pres >= 58982) /* 0.9: the most any cell can have */
        return;
    ncx = (int64_t)((cx << NUC_SHIFT) << QB) + (int64_t)((6 + (hc >> 16) % 21) << QB) +
          (int64_t)((hc >> 24) & 255);
    ncy = (int64_t)((cy << NUC_SHIFT) << QB) + (int64_t)((6 + (hc >> 32) % 21) << QB) +
          (int64_t)((hc >> 40) & 255);
    fields_at(sc, c, (uint64_t)ncx, (uint64_t)ncy, &f);
    a = tissue_alpha(sc, &f);
    if (a == 0)
        return;
    /* probability 0.1 .. 0.9 with density, scaled by tissue coverage at the centre */
    dn = clamp64((f.density - 22000) * 65536 / 36000, 0, 65536);
    p = a * (6554 + (dn * 52428 >> 16)) >> 8;
    if (pres >= p)
        return;

    h2 = mix64(hc);
    ra = (int64_t)(8 + h2 % 9) << QB;                  /* semi-axes 8..16 pixels */
    rb = ra * (int64_t)(60 + (h2 >> 8) % 41) / 100;    /* 60..100 % of the major one */
    ca = angles[(h2 >> 16) & 15][0];
    sa = angles[(h2 >> 16) & 15][1];
    dv = (int64_t)((h2 >> 24) % 41) - 20;
    if (((h2 >> 32) & 7) == 0) { /* a pale, vesicular nucleus now and then */
        col[0] = 128 + dv;
        col[1] = 92 + dv;
        col[2] = 168 + dv;
    } else {
        col[0] = 78 + dv;
        col[1] = 46 + dv;
        col[2] = 122 + dv;
    }
    op = 216 + (int64_t)((h2 >> 40) % 33);

    /* pixels whose centre can be inside: [centre - reach, centre + reach] in level-0 units */
    reach = ra + 256;
    ix0 = ncx - reach < 0 ? 0 : (ncx - reach) >> (k + QB);
    iy0 = ncy - reach < 0 ? 0 : (ncy - reach) >> (k + QB);
    ix1 = (ncx + reach) >> (k + QB);
    iy1 = (ncy + reach) >> (k + QB);
    ix0 = ix0 < x0 ? x0 : ix0;
    iy0 = iy0 < y0 ? y0 : iy0;
    ix1 = ix1 > x0 + w - 1 ? x0 + w - 1 : ix1;
    iy1 = iy1 > y0 + h - 1 ? y0 + h - 1 : iy1;
    for (int64_t iy = iy0; iy <= iy1; iy++) {
        uint8_t *row = dst + (size_t)(iy - y0) * stride;
        uint64_t y = centre(iy, k);

        for (int64_t ix = ix0; ix <= ix1; ix++) {
            uint64_t x = centre(ix, k);
            int64_t dx = (int64_t)x - ncx, dy = (int64_t)y - ncy;
            int64_t du, dw, q, m, chrom;
            uint8_t *px;

            /* deep levels: a pixel's centre may lie far away; keep the squares small */
            if (dx < -reach || dx > reach || dy < -reach || dy > reach)
                continue;
            du = floor_shift(dx * ca + dy * sa, 14);
            dw = floor_shift(dy * ca - dx * sa, 14);
            q = du * du * 65536 / (ra * ra) + dw * dw * 65536 / (rb * rb);
            if (q >= 65536)
                continue;
            /* a soft edge about one pixel wide, then the nucleus's opacity */
            m = clamp64((65536 - q) * (ra >> QB) >> 9, 0, 256) * op >> 8;
            chrom = (int64_t)(hash2(sc->key[KEY_CHROM], x >> QB, y >> QB) & 31) - 16;
            px = row + (size_t)(ix - x0) * 3;
            for (int i = 0; i < 3; i++)
                px[i] = u8((px[i] * (256 - m) + (col[i] + chrom) * m + 128) >> 8);
        }
    }
}

static tw_status
render_block(const twi_sample_scene *sc, int k, int64_t x0, int64_t y0, int32_t w, int32_t h,
             uint8_t *dst, size_t stride)
{
    lattice_cache cache = {0, 0, 0, 0, NULL};
    const lattice_cache *c = NULL;
    int64_t lx0 = x0 << k, ly0 = y0 << k;              /* level-0 extent of the block */
    int64_t lx1 = (x0 + w) << k, ly1 = (y0 + h) << k;
    int64_t cx0, cy0, cx1, cy1;

    if (k <= LAT_MAX_LEVEL) {
        int64_t gx0 = (lx0 - CACHE_MARGIN < 0 ? 0 : lx0 - CACHE_MARGIN) >> LAT_SHIFT;
        int64_t gy0 = (ly0 - CACHE_MARGIN < 0 ? 0 : ly0 - CACHE_MARGIN) >> LAT_SHIFT;
        int64_t gx1 = ((lx1 + CACHE_MARGIN) >> LAT_SHIFT) + 1;
        int64_t gy1 = ((ly1 + CACHE_MARGIN) >> LAT_SHIFT) + 1;

        cache.gx0 = (uint64_t)gx0;
        cache.gy0 = (uint64_t)gy0;
        cache.nx = (uint64_t)(gx1 - gx0 + 1);
        cache.ny = (uint64_t)(gy1 - gy0 + 1);
        if (!(cache.v = malloc(cache.nx * cache.ny * sizeof *cache.v)))
            return TW_E_NOMEM;
        for (uint64_t j = 0; j < cache.ny; j++)
            for (uint64_t i = 0; i < cache.nx; i++)
                cache.v[j * cache.nx + i] = lattice_point(sc, cache.gx0 + i, cache.gy0 + j);
        c = &cache;
    }
    for (int32_t j = 0; j < h; j++) {
        uint8_t *row = dst + (size_t)j * stride;
        uint64_t y = centre(y0 + j, k);
        noise_memo memo[2] = {{0, 0, 0, 0, 0, 0, false}, {0, 0, 0, 0, 0, 0, false}};

        for (int32_t i = 0; i < w; i++)
            background_pixel(sc, c, memo, centre(x0 + i, k), y, row + 3 * (size_t)i);
    }
    /* every grid cell whose nucleus can reach the block, in global (row, column) order */
    cx0 = (lx0 - NUC_REACH < 0 ? 0 : lx0 - NUC_REACH) >> NUC_SHIFT;
    cy0 = (ly0 - NUC_REACH < 0 ? 0 : ly0 - NUC_REACH) >> NUC_SHIFT;
    cx1 = (lx1 + NUC_REACH) >> NUC_SHIFT;
    cy1 = (ly1 + NUC_REACH) >> NUC_SHIFT;
    for (int64_t cy = cy0; cy <= cy1; cy++)
        for (int64_t cx = cx0; cx <= cx1; cx++)
            nucleus(sc, c, (uint64_t)cx, (uint64_t)cy, k, x0, y0, w, h, dst, stride);
    free(cache.v);
    return TW_OK;
}

tw_status
twi_sample_render(const twi_sample_scene *sc, int level, int64_t x, int64_t y, int32_t w,
                  int32_t h, uint8_t *dst, size_t stride)
{
    tw_status st = TW_OK;

    /* The scene is defined up to 2^32 level-0 pixels a side (twice the largest slide), which
     * keeps every product in the renderer inside 64 bits. */
    if (!sc || !dst || level < 0 || level > 31 || x < 0 || y < 0 || w < 0 || h < 0 ||
        x + w > ((int64_t)1 << 32) >> level || y + h > ((int64_t)1 << 32) >> level ||
        stride < (size_t)w * 3)
        return TW_E_INVALID;
    /* Blocks bound the lattice cache; the pixels do not depend on the blocking. */
    for (int32_t by = 0; by < h && st == TW_OK; by += BLOCK) {
        for (int32_t bx = 0; bx < w && st == TW_OK; bx += BLOCK) {
            int32_t bw = w - bx < BLOCK ? w - bx : BLOCK, bh = h - by < BLOCK ? h - by : BLOCK;

            st = render_block(sc, level, x + bx, y + by, bw, bh,
                              dst + (size_t)by * stride + 3 * (size_t)bx, stride);
        }
    }
    return st;
}

/* Whether every pixel of the level-0 block [x, x + w) x [y, y + h) is plain glass: no tissue
 * field above the edge anywhere near it, so no stroma and no nucleus (a nucleus is painted only
 * where its centre has tissue, and centres lie within CACHE_MARGIN of the block). First an
 * upper bound of the field from the noise cells' corners (a few hashes), then, when that is
 * not conclusive, the field at every lattice point the render would read: the interpolated
 * field never exceeds its lattice points. A false "no" only costs a render; "yes" is exact. */
bool
twi_sample_block_is_glass(const twi_sample_scene *sc, int64_t x, int64_t y, int64_t w, int64_t h)
{
    /* a = 0 where (field - threshold) * 256 / TISSUE_BAND <= -128 */
    int64_t limit = sc->threshold - TISSUE_BAND / 2 - 1;
    int64_t ex0 = x - CACHE_MARGIN < 0 ? 0 : x - CACHE_MARGIN, ey0 = y - CACHE_MARGIN < 0 ? 0
                                                                 : y - CACHE_MARGIN;
    uint64_t gx0 = (uint64_t)ex0 >> LAT_SHIFT, gy0 = (uint64_t)ey0 >> LAT_SHIFT;
    uint64_t gx1 = ((uint64_t)(x + w + CACHE_MARGIN) >> LAT_SHIFT) + 1;
    uint64_t gy1 = ((uint64_t)(y + h + CACHE_MARGIN) >> LAT_SHIFT) + 1;
    int64_t bound = 0, edge, pen_min = 0;

    /* the border penalty is smallest where the block is farthest from every edge */
    edge = (int64_t)(gx1 << LAT_SHIFT);
    if ((int64_t)(gy1 << LAT_SHIFT) < edge)
        edge = (int64_t)(gy1 << LAT_SHIFT);
    if (sc->w - (int64_t)(gx0 << LAT_SHIFT) < edge)
        edge = sc->w - (int64_t)(gx0 << LAT_SHIFT);
    if (sc->h - (int64_t)(gy0 << LAT_SHIFT) < edge)
        edge = sc->h - (int64_t)(gy0 << LAT_SHIFT);
    if (edge < sc->margin) {
        int64_t r = (sc->margin - (edge < 0 ? 0 : edge)) * 4096 / sc->margin;

        pen_min = r * r * PEN_MAX >> 24;
    }
    for (int o = 0; o < 4; o++) {
        int s = sc->tissue_shift - o < LAT_SHIFT ? LAT_SHIFT : sc->tissue_shift - o;
        uint64_t key = sc->key[KEY_TISSUE] + (uint64_t)o * 0x632BE59BD9B4E019u, m = 0;
        uint64_t cx0 = (gx0 << LAT_SHIFT) >> s, cx1 = ((gx1 << LAT_SHIFT) >> s) + 1;
        uint64_t cy0 = (gy0 << LAT_SHIFT) >> s, cy1 = ((gy1 << LAT_SHIFT) >> s) + 1;

        if ((cx1 - cx0 + 1) * (cy1 - cy0 + 1) > 64) { /* small cells: no cheap bound */
            bound = INT64_MAX / 2;
            break;
        }
        for (uint64_t cy = cy0; cy <= cy1; cy++)
            for (uint64_t cx = cx0; cx <= cx1; cx++) {
                uint64_t v = hash2(key, cx, cy) >> 48;

                m = v > m ? v : m;
            }
        bound += (int64_t)(m >> o);
    }
    if (bound + PEN_MAX - pen_min <= limit)
        return true;
    for (uint64_t gy = gy0; gy <= gy1; gy++)
        for (uint64_t gx = gx0; gx <= gx1; gx++)
            if (lattice_tissue(sc, gx, gy) > limit)
                return false;
    return true;
}

/* ---- the scene */

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

int
twi_sample_level_count(int64_t w, int64_t h, int32_t tile)
{
    int n = 1;

    /* Halve while the next level still covers at least one whole tile both ways: OpenSlide
     * 3.4.1 (with libtiff 4.5) misreads levels smaller than one tile, shifting their rows. */
    while ((w + 1) / 2 >= tile && (h + 1) / 2 >= tile) {
        w = (w + 1) / 2;
        h = (h + 1) / 2;
        n++;
    }
    return n;
}

tw_status
twi_sample_scene_init(twi_sample_scene *sc, const tw_sample_opts *o, tw_error *err)
{
    enum { GRID = 64 };
    int64_t samples[GRID * GRID], side;
    int shift;

    if (!sc || !o)
        return twi_error_set(err, TW_E_INVALID, "sample: no options");
    if (o->struct_size < sizeof *o)
        return twi_error_set(err, TW_E_INVALID,
                             "sample: options not initialised with tw_sample_opts_init()");
    if (o->w < 1 || o->h < 1 || o->w > MAX_SIDE || o->h > MAX_SIDE)
        return twi_error_set(err, TW_E_INVALID,
                             "sample: size must be 1..%lld pixels a side (got %lldx%lld)",
                             (long long)MAX_SIDE, (long long)o->w, (long long)o->h);
    if (o->tile < 16 || o->tile > MAX_TILE || o->tile % 16 != 0)
        return twi_error_set(err, TW_E_INVALID,
                             "sample: tile must be a multiple of 16 in 16..%d (got %d)", MAX_TILE,
                             (int)o->tile);
    if (o->compression != TW_COMPRESS_NONE && o->compression != TW_COMPRESS_DEFLATE &&
        o->compression != TW_COMPRESS_ZSTD)
        return twi_error_set(err, TW_E_INVALID, "sample: unknown compression %d",
                             (int)o->compression);

    memset(sc, 0, sizeof *sc);
    sc->seed = o->seed;
    sc->w = o->w;
    sc->h = o->h;
    for (int i = 0; i < 8; i++)
        sc->key[i] = mix64(o->seed * 0xD6E8FEB86659FD93u + (uint64_t)i * 0x9E3779B97F4A7C15u);
    sc->fiber_angle = (int)(mix64(sc->key[KEY_FIBER]) & 15);
    for (int j = 0; j < GLASS_PERIOD; j++) {
        for (int i = 0; i < GLASS_PERIOD; i++) {
            uint64_t g = hash2(sc->key[KEY_GRAIN] ^ 0x5bd1e995u, (uint64_t)i, (uint64_t)j);

            sc->glass_noise[j * GLASS_PERIOD + i] = (int8_t)((g & 1) + ((g >> 1) & 1)) - 1;
        }
    }
    /* Tissue blobs scale with the slide (a few across it); cells, fibres and nuclei keep their
     * size in microns. */
    side = o->w > o->h ? o->w : o->h;
    for (shift = 5; shift < 40 && ((int64_t)2 << shift) <= side / 5; shift++)
        ;
    sc->tissue_shift = shift;
    sc->margin = (o->w < o->h ? o->w : o->h) / 4 + 1;

    /* The edge sits at a quantile of the field, so every seed covers about 40 % of the slide
     * (a little less after holes). */
    for (int j = 0; j < GRID; j++) {
        for (int i = 0; i < GRID; i++) {
            uint64_t gx = (uint64_t)((2 * i + 1) * o->w / (2 * GRID)) >> LAT_SHIFT;
            uint64_t gy = (uint64_t)((2 * j + 1) * o->h / (2 * GRID)) >> LAT_SHIFT;

            samples[j * GRID + i] = lattice_point(sc, gx, gy).tissue;
        }
    }
    qsort(samples, GRID * GRID, sizeof samples[0], cmp_i64);
    sc->threshold = samples[GRID * GRID * TISSUE_QUANTILE / 100];
    return TW_OK;
}

/* ---- writing */

void
tw_sample_opts_init(tw_sample_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->w = 8192;
    o->h = 6144;
    o->seed = 1;
    o->tile = 256;
    o->compression = TW_COMPRESS_DEFLATE;
}

/*
 * Writing. The file is a tiled BigTIFF written here by hand rather than through tw_writer:
 * libtiff keeps one directory open at a time, so through it a level must be complete before
 * the next one starts, whereas here every pyramid level is built from the level above while
 * level 0 streams, and a level's tiles are appended as soon as one of its tile rows is
 * complete. Tile data come first, in a fixed order (level 0 row by row, each row of level k
 * right after the level k-1 row that completes it), then the directories; so the bytes depend
 * on nothing but the options, whatever the number of threads.
 *
 * Each tile row of a level goes in chunks of CHUNK tiles: OpenMP threads render a tile
 * (level 0) or cut it out of the row buffer (deeper levels), average it 2x2 into the next
 * level's row buffer and compress it, one tile per thread; then the calling thread appends the
 * chunk in tile order. Tiles of pure glass (found without rendering) are not rendered or
 * compressed: all of them in a level hold the same bytes, compressed once. Memory: one tile row
 * per level below 0 (together about 3 * w * tile bytes: 77 MiB for a 100K-wide slide with
 * 256-pixel tiles), CHUNK compressed tiles, two tile buffers per thread, and 16 bytes per tile
 * for the directories.
 *
 * No fsync before the rename: the slide is test data that the same command recreates, and
 * syncing tens of GiB would take longer than writing them.
 */

#define CHUNK 64

typedef struct pyr_level {
    int64_t w, h, ntx, nty;
    uint64_t *off, *cnt;  /* per tile, row-major: where its bytes are in the file, how many */
    uint8_t *row;         /* k >= 1: the tile row being assembled, ntx tiles wide */
    size_t row_stride;
    uint8_t *nglass;      /* k >= 1: per tile of that row, how many of its children were glass */
    uint8_t *gpx;         /* the pure glass tile of this level */
    uint8_t *gz;          /* ... compressed */
    size_t gz_n;
} pyr_level;

typedef struct tile_out {
    uint8_t *z;           /* compressed tile (malloc'd); NULL for glass */
    size_t n;
    bool glass;
    tw_status st;
} tile_out;

typedef struct thread_buf {
    uint8_t *px;          /* one tile of pixels */
    uint8_t *z;           /* compression scratch, zcap bytes */
    ZSTD_CCtx *zc;
} thread_buf;

typedef struct sample_writer {
    const twi_sample_scene *sc;
    tw_compression comp;
    int32_t tile;
    size_t tile_bytes, zcap;
    int n_levels;
    pyr_level *lv;
    int n_threads;
    thread_buf *tb;
    tile_out outs[CHUNK];
    int fd;
    uint64_t pos;         /* bytes written so far */
    const char *path, *tmp_path;
} sample_writer;

static tw_status
put_at(sample_writer *sw, const void *p, size_t n, uint64_t at, tw_error *err)
{
    const uint8_t *b = p;
    char ebuf[128];

    while (n > 0) {
        int64_t r = (int64_t)pwrite(sw->fd, b, n, (off_t)at);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;

            return twi_error_set(err, TW_E_IO, "sample: cannot write '%s' (%s)", sw->tmp_path,
                                 twi_io_strerror(e, ebuf, sizeof ebuf));
        }
        b += r;
        n -= (size_t)r;
        at += (uint64_t)r;
    }
    return TW_OK;
}

static tw_status
put(sample_writer *sw, const void *p, size_t n, tw_error *err)
{
    tw_status st = put_at(sw, p, n, sw->pos, err);

    if (st == TW_OK)
        sw->pos += n;
    return st;
}

/* Compress one tile (tile_bytes at src) into a new buffer of exactly *n bytes. */
static tw_status
compress_tile(const sample_writer *sw, thread_buf *tb, const uint8_t *src, uint8_t **out,
              size_t *n)
{
    size_t len = sw->tile_bytes;

    if (sw->comp == TW_COMPRESS_DEFLATE) {
        uLongf cap = (uLongf)sw->zcap;

        if (compress2(tb->z, &cap, src, (uLong)len, TWI_SAMPLE_DEFLATE_LEVEL) != Z_OK)
            return TW_E_INTERNAL;
        src = tb->z;
        len = cap;
    } else if (sw->comp == TW_COMPRESS_ZSTD) {
        size_t r = ZSTD_compressCCtx(tb->zc, tb->z, sw->zcap, src, len, TWI_SAMPLE_ZSTD_LEVEL);

        if (ZSTD_isError(r))
            return TW_E_INTERNAL;
        src = tb->z;
        len = r;
    }
    if (!(*out = malloc(len)))
        return TW_E_NOMEM;
    memcpy(*out, src, len);
    *n = len;
    return TW_OK;
}

/* The next level's pixels from w x h pixels of this one: each the rounded mean of the 2x2
 * block above it, or of the part of the block inside the level at its right and bottom
 * edges. */
static void
downsample(const uint8_t *src, size_t sstride, int64_t w, int64_t h, uint8_t *dst,
           size_t dstride)
{
    for (int64_t j = 0; 2 * j < h; j++) {
        const uint8_t *r0 = src + (size_t)(2 * j) * sstride;
        const uint8_t *r1 = 2 * j + 1 < h ? r0 + sstride : r0;
        uint8_t *d = dst + (size_t)j * dstride;
        int64_t i = 0;

        if (2 * j + 1 < h) {
            for (; 2 * i + 1 < w; i++)
                for (int c = 0; c < 3; c++)
                    d[3 * i + c] = (uint8_t)((r0[6 * i + c] + r0[6 * i + 3 + c] +
                                              r1[6 * i + c] + r1[6 * i + 3 + c] + 2) >> 2);
        } else {
            for (; 2 * i + 1 < w; i++)
                for (int c = 0; c < 3; c++)
                    d[3 * i + c] = (uint8_t)((r0[6 * i + c] + r0[6 * i + 3 + c] + 1) >> 1);
        }
        if (2 * i < w) /* a last column of one pixel */
            for (int c = 0; c < 3; c++)
                d[3 * i + c] = (uint8_t)((r0[6 * i + c] + r1[6 * i + c] + 1) >> 1);
    }
}

/* The glass tile of every level: level 0 from the periodic grain, each next one the 2x2 mean
 * of four copies of the one above; each compressed once. */
static tw_status
make_glass_tiles(sample_writer *sw, tw_error *err)
{
    int32_t t = sw->tile;
    size_t stride = (size_t)t * 3;

    for (int k = 0; k < sw->n_levels; k++) {
        pyr_level *lv = &sw->lv[k];
        tw_status st;

        if (!(lv->gpx = malloc(sw->tile_bytes)))
            return twi_error_set(err, TW_E_NOMEM, "sample: out of memory");
        for (int32_t j = 0; j < t; j++) {
            for (int32_t i = 0; i < t; i++) {
                uint8_t *d = lv->gpx + (size_t)j * stride + 3 * (size_t)i;

                if (k == 0) {
                    glass_pixel(sw->sc, i, j, d);
                } else {
                    /* 2i and 2i + 1 of the two tiles side by side: wrap into one tile */
                    const uint8_t *g = sw->lv[k - 1].gpx;
                    size_t i0 = 3 * (size_t)((2 * i) % t), i1 = 3 * (size_t)((2 * i + 1) % t);
                    const uint8_t *r0 = g + (size_t)((2 * j) % t) * stride;
                    const uint8_t *r1 = g + (size_t)((2 * j + 1) % t) * stride;

                    for (int c = 0; c < 3; c++)
                        d[c] = (uint8_t)((r0[i0 + c] + r0[i1 + c] + r1[i0 + c] + r1[i1 + c] +
                                          2) >> 2);
                }
            }
        }
        if ((st = compress_tile(sw, &sw->tb[0], lv->gpx, &lv->gz, &lv->gz_n)) != TW_OK)
            return twi_error_set(err, st, "sample: cannot compress the glass tile of level %d",
                                 k);
    }
    return TW_OK;
}

/* Render or cut out, downsample and compress tile tx of tile row ty of level k (one thread). */
static void
make_tile(sample_writer *sw, int k, int64_t tx, int64_t ty, tile_out *o)
{
    pyr_level *lv = &sw->lv[k], *next = k + 1 < sw->n_levels ? &sw->lv[k + 1] : NULL;
    thread_buf *tb = &sw->tb[omp_get_thread_num()];
    int32_t t = sw->tile;
    size_t stride = (size_t)t * 3;
    int64_t x = tx * t, y = ty * t;
    int32_t w = (int32_t)(lv->w - x < t ? lv->w - x : t), h = (int32_t)(lv->h - y < t ? lv->h - y
                                                                                       : t);
    bool full = w == t && h == t;
    const uint8_t *px;

    o->z = NULL;
    o->n = 0;
    o->st = TW_OK;
    if (k == 0)
        o->glass = full && twi_sample_block_is_glass(sw->sc, x, y, t, t);
    else
        o->glass = full && lv->nglass[tx] == 4;
    if (o->glass) {
        px = lv->gpx;
    } else {
        /* edge tiles are padded with zeros, as tw_writer does */
        if (!full)
            memset(tb->px, 0, sw->tile_bytes);
        if (k == 0) {
            o->st = twi_sample_render(sw->sc, 0, x, y, w, h, tb->px, stride);
        } else {
            for (int32_t j = 0; j < h; j++)
                memcpy(tb->px + (size_t)j * stride,
                       lv->row + (size_t)j * lv->row_stride + (size_t)x * 3, (size_t)w * 3);
        }
        px = tb->px;
    }
    if (o->st != TW_OK)
        return;
    /* tile sides are even: the 2x2 blocks of a tile's pixels never straddle two tiles */
    if (next)
        downsample(px, stride, w, h,
                   next->row + (size_t)(ty % 2) * (size_t)(t / 2) * next->row_stride +
                       (size_t)(x / 2) * 3,
                   next->row_stride);
    if (!o->glass)
        o->st = compress_tile(sw, tb, px, &o->z, &o->n);
}

/* Make and append tile row ty of level k; then, when it completes a row of the next level,
 * that row (and so on down). */
static tw_status
write_row(sample_writer *sw, int k, int64_t ty, tw_error *err)
{
    pyr_level *lv = &sw->lv[k], *next = k + 1 < sw->n_levels ? &sw->lv[k + 1] : NULL;
    tw_status st = TW_OK;

    for (int64_t c0 = 0; c0 < lv->ntx && st == TW_OK; c0 += CHUNK) {
        int nc = (int)(lv->ntx - c0 < CHUNK ? lv->ntx - c0 : CHUNK);

#pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < nc; i++)
            make_tile(sw, k, c0 + i, ty, &sw->outs[i]);
        for (int i = 0; i < nc; i++) {
            tile_out *o = &sw->outs[i];
            int64_t tx = c0 + i, idx = ty * lv->ntx + tx;

            if (st == TW_OK && o->st != TW_OK)
                st = twi_error_set(err, o->st, "sample: cannot make tile (%lld, %lld) of level %d"
                                   " (%s)", (long long)tx, (long long)ty, k,
                                   o->st == TW_E_NOMEM ? "out of memory" : "compression failed");
            if (st == TW_OK) {
                lv->off[idx] = sw->pos;
                lv->cnt[idx] = o->glass ? lv->gz_n : o->n;
                st = put(sw, o->glass ? lv->gz : o->z, (size_t)lv->cnt[idx], err);
            }
            if (next && o->glass)
                next->nglass[tx / 2]++;
            free(o->z);
            o->z = NULL;
        }
    }
    if (st == TW_OK && next && (ty % 2 == 1 || ty == lv->nty - 1)) {
        st = write_row(sw, k + 1, ty / 2, err);
        memset(next->nglass, 0, (size_t)next->ntx);
    }
    return st;
}

/* ---- the directories */

enum { T_ASCII = 2, T_SHORT = 3, T_LONG = 4, T_RATIONAL = 5, T_LONG8 = 16 };

typedef struct ifd_entry {
    uint16_t tag, type;
    uint64_t count;
    const uint8_t *data;  /* count values, little-endian */
    size_t bytes;
} ifd_entry;

static void
le16(uint8_t *p, uint64_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void
le32(uint8_t *p, uint64_t v)
{
    le16(p, v);
    le16(p + 2, v >> 16);
}

static void
le64(uint8_t *p, uint64_t v)
{
    le32(p, v);
    le32(p + 4, v >> 32);
}

/* Pixels per centimetre of a level as a TIFF rational: 10000 / 0.25 um scaled by the level's
 * share of the level-0 width, num / den reduced (and shifted down if it still overflows). */
static void
resolution(int64_t lw, int64_t w0, uint8_t out[8])
{
    uint64_t num = 40000u * (uint64_t)lw, den = (uint64_t)w0, a = num, b = den;

    while (b) {
        uint64_t r = a % b;

        a = b;
        b = r;
    }
    num /= a;
    den /= a;
    while (num > UINT32_MAX || den > UINT32_MAX) {
        num >>= 1;
        den >>= 1;
    }
    le32(out, num);
    le32(out + 4, den ? den : 1);
}

/* Append level k's directory at the next 8-byte boundary, its long values after it; *at is
 * where it starts, *next_at where its next-directory offset is. */
static tw_status
write_ifd(sample_writer *sw, int k, const char *desc, const char *software, uint64_t *at,
          uint64_t *next_at, tw_error *err)
{
    const pyr_level *lv = &sw->lv[k];
    uint64_t n = (uint64_t)(lv->ntx * lv->nty);
    uint8_t sc0[8], sc1[8], sc2[8], sc3[8], bps[6], spp[2], xres[8], fmt[6], one[2], rgb[2];
    uint8_t twb[4], thb[4], unit[2], comp[2], pad[8] = {0};
    uint8_t *offs = malloc(n * 8), *cnts = malloc(n * 8), *buf = NULL;
    ifd_entry e[20];
    size_t ne = 0, size, tail;
    tw_status st = TW_OK;

    if (!offs || !cnts) {
        st = twi_error_set(err, TW_E_NOMEM, "sample: out of memory");
        goto out;
    }
    for (uint64_t i = 0; i < n; i++) {
        le64(offs + 8 * i, lv->off[i]);
        le64(cnts + 8 * i, lv->cnt[i]);
    }
    le32(sc0, k > 0 ? 1 : 0); /* FILETYPE_REDUCEDIMAGE */
    le32(sc1, (uint64_t)lv->w);
    le32(sc2, (uint64_t)lv->h);
    le32(sc3, 0);
    for (int i = 0; i < 3; i++) {
        le16(bps + 2 * i, 8);
        le16(fmt + 2 * i, 1); /* SAMPLEFORMAT_UINT */
    }
    le16(comp, sw->comp == TW_COMPRESS_DEFLATE ? 8 : sw->comp == TW_COMPRESS_ZSTD ? 50000 : 1);
    le16(rgb, 2);
    le16(spp, 3);
    le16(one, 1);
    le16(unit, 3); /* centimetre */
    le32(twb, (uint64_t)sw->tile);
    le32(thb, (uint64_t)sw->tile);
    resolution(lv->w, sw->lv[0].w, xres);
#define ENTRY(t, ty, c, d, b) (e[ne++] = (ifd_entry){(t), (ty), (c), (d), (b)})
    ENTRY(254, T_LONG, 1, sc0, 4);
    ENTRY(256, T_LONG, 1, sc1, 4);
    ENTRY(257, T_LONG, 1, sc2, 4);
    ENTRY(258, T_SHORT, 3, bps, 6);
    ENTRY(259, T_SHORT, 1, comp, 2);
    ENTRY(262, T_SHORT, 1, rgb, 2);
    if (desc)
        ENTRY(270, T_ASCII, strlen(desc) + 1, (const uint8_t *)desc, strlen(desc) + 1);
    ENTRY(277, T_SHORT, 1, spp, 2);
    ENTRY(282, T_RATIONAL, 1, xres, 8);
    ENTRY(283, T_RATIONAL, 1, xres, 8); /* square pixels */
    ENTRY(284, T_SHORT, 1, one, 2);
    ENTRY(296, T_SHORT, 1, unit, 2);
    if (software)
        ENTRY(305, T_ASCII, strlen(software) + 1, (const uint8_t *)software,
              strlen(software) + 1);
    ENTRY(322, T_LONG, 1, twb, 4);
    ENTRY(323, T_LONG, 1, thb, 4);
    ENTRY(324, T_LONG8, n, offs, (size_t)n * 8);
    ENTRY(325, T_LONG8, n, cnts, (size_t)n * 8);
    ENTRY(339, T_SHORT, 3, fmt, 6);
#undef ENTRY
    (void)sc3;

    size = 8 + 20 * ne + 8;
    tail = 0;
    for (size_t i = 0; i < ne; i++)
        if (e[i].bytes > 8)
            tail += (e[i].bytes + 7) & ~(size_t)7;
    if (!(buf = calloc(1, size + tail))) {
        st = twi_error_set(err, TW_E_NOMEM, "sample: out of memory");
        goto out;
    }
    *at = (sw->pos + 7) & ~(uint64_t)7;
    if ((st = put(sw, pad, (size_t)(*at - sw->pos), err)) != TW_OK)
        goto out;
    le64(buf, ne);
    tail = size;
    for (size_t i = 0; i < ne; i++) {
        uint8_t *p = buf + 8 + 20 * i;

        le16(p, e[i].tag);
        le16(p + 2, e[i].type);
        le64(p + 4, e[i].count);
        if (e[i].bytes <= 8) {
            memcpy(p + 12, e[i].data, e[i].bytes);
        } else {
            le64(p + 12, *at + tail);
            memcpy(buf + tail, e[i].data, e[i].bytes);
            tail += (e[i].bytes + 7) & ~(size_t)7;
        }
    }
    *next_at = *at + 8 + 20 * ne; /* left 0: the last directory */
    st = put(sw, buf, tail, err);
out:
    free(buf);
    free(offs);
    free(cnts);
    return st;
}

static void
sample_writer_free(sample_writer *sw)
{
    if (sw->lv) {
        for (int k = 0; k < sw->n_levels; k++) {
            free(sw->lv[k].off);
            free(sw->lv[k].cnt);
            free(sw->lv[k].row);
            free(sw->lv[k].nglass);
            free(sw->lv[k].gpx);
            free(sw->lv[k].gz);
        }
    }
    if (sw->tb) {
        for (int i = 0; i < sw->n_threads; i++) {
            free(sw->tb[i].px);
            free(sw->tb[i].z);
            ZSTD_freeCCtx(sw->tb[i].zc);
        }
    }
    free(sw->lv);
    free(sw->tb);
}

static tw_status
sample_writer_init(sample_writer *sw, const twi_sample_scene *sc, const tw_sample_opts *o,
                   tw_error *err)
{
    int64_t w = o->w, h = o->h;

    sw->sc = sc;
    sw->comp = o->compression;
    sw->tile = o->tile;
    sw->tile_bytes = (size_t)o->tile * (size_t)o->tile * 3;
    sw->zcap = sw->comp == TW_COMPRESS_ZSTD ? ZSTD_compressBound(sw->tile_bytes)
                                            : (size_t)compressBound((uLong)sw->tile_bytes);
    sw->n_levels = twi_sample_level_count(o->w, o->h, o->tile);
    sw->n_threads = omp_get_max_threads();
    if (!(sw->lv = calloc((size_t)sw->n_levels, sizeof *sw->lv)) ||
        !(sw->tb = calloc((size_t)sw->n_threads, sizeof *sw->tb)))
        return twi_error_set(err, TW_E_NOMEM, "sample: out of memory");
    for (int k = 0; k < sw->n_levels; k++) {
        pyr_level *lv = &sw->lv[k];

        lv->w = w;
        lv->h = h;
        lv->ntx = (w + o->tile - 1) / o->tile;
        lv->nty = (h + o->tile - 1) / o->tile;
        if (!(lv->off = calloc((size_t)(lv->ntx * lv->nty), sizeof *lv->off)) ||
            !(lv->cnt = calloc((size_t)(lv->ntx * lv->nty), sizeof *lv->cnt)))
            return twi_error_set(err, TW_E_NOMEM, "sample: out of memory for %lld tiles",
                                 (long long)(lv->ntx * lv->nty));
        if (k > 0) {
            lv->row_stride = (size_t)lv->ntx * (size_t)o->tile * 3;
            if (!(lv->row = malloc(lv->row_stride * (size_t)o->tile)) ||
                !(lv->nglass = calloc((size_t)lv->ntx, 1)))
                return twi_error_set(err, TW_E_NOMEM,
                                     "sample: out of memory for a %lld-pixel tile row of level %d",
                                     (long long)lv->w, k);
        }
        w = (w + 1) / 2;
        h = (h + 1) / 2;
    }
    for (int i = 0; i < sw->n_threads; i++) {
        thread_buf *tb = &sw->tb[i];

        if (!(tb->px = malloc(sw->tile_bytes)) || !(tb->z = malloc(sw->zcap)) ||
            (sw->comp == TW_COMPRESS_ZSTD && !(tb->zc = ZSTD_createCCtx())))
            return twi_error_set(err, TW_E_NOMEM, "sample: out of memory");
    }
    return TW_OK;
}

/* A file "<dir>/.<name>.tw-XXXXXX" beside path (one file system for the rename), mode 0644. */
static tw_status
create_temp(const char *path, char **tmp, int *fd, tw_error *err)
{
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0, n = dlen + strlen(base) + 16;
    char ebuf[128];

    *fd = -1;
    if (!*base)
        return twi_error_set(err, TW_E_INVALID, "sample: '%s' names a folder, not a file", path);
    if (!(*tmp = malloc(n)))
        return twi_error_set(err, TW_E_NOMEM, "sample: out of memory");
    snprintf(*tmp, n, "%.*s.%s.tw-XXXXXX", (int)dlen, path, base);
    if ((*fd = mkostemp(*tmp, O_CLOEXEC)) < 0) {
        int e = errno;

        free(*tmp);
        *tmp = NULL;
        return twi_error_set(err, TW_E_IO, "sample: cannot create '%s' (%s)", path,
                             twi_io_strerror(e, ebuf, sizeof ebuf));
    }
    if (fchmod(*fd, 0644) != 0) {
        int e = errno;

        return twi_error_set(err, TW_E_IO, "sample: cannot set the mode of '%s' (%s)", *tmp,
                             twi_io_strerror(e, ebuf, sizeof ebuf));
    }
    return TW_OK;
}
tw_status
tw_sample_write(const char *path, const tw_sample_opts *o, tw_error *err)
{
    tw_status st = TW_OK;
    twi_sample_scene sc;
    sample_writer sw;
    char desc[160], ebuf[128];
    char *tmp = NULL;
    uint8_t head[16] = {'I', 'I', 43, 0, 8, 0, 0, 0};
    uint64_t prev_next;
    struct stat sb;

    memset(&sw, 0, sizeof sw);
    sw.fd = -1;
    if (!path || !*path)
        return twi_error_set(err, TW_E_INVALID, "sample: no output path");
    if ((st = twi_sample_scene_init(&sc, o, err)) != TW_OK)
        return st;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return twi_error_set(err, TW_E_IO, "sample: cannot write '%s' (%s)", path,
                             twi_io_strerror(EISDIR, ebuf, sizeof ebuf));
    if ((st = sample_writer_init(&sw, &sc, o, err)) != TW_OK)
        goto out;
    if ((st = create_temp(path, &tmp, &sw.fd, err)) != TW_OK)
        goto out;
    sw.path = path;
    sw.tmp_path = tmp;
    snprintf(desc, sizeof desc, "tilewave sample %lldx%lld seed %llu", (long long)o->w,
             (long long)o->h, (unsigned long long)o->seed);

    /* the header; the first directory's offset is filled in at the end */
    if ((st = put(&sw, head, sizeof head, err)) != TW_OK ||
        (st = make_glass_tiles(&sw, err)) != TW_OK)
        goto out;
    for (int64_t ty = 0; ty < sw.lv[0].nty && st == TW_OK; ty++)
        st = write_row(&sw, 0, ty, err);
    prev_next = 8;
    for (int k = 0; k < sw.n_levels && st == TW_OK; k++) {
        uint64_t at = 0, next_at = 0;
        uint8_t b[8];

        st = write_ifd(&sw, k, k == 0 ? desc : NULL, k == 0 ? "tilewave " TW_VERSION_STRING : NULL,
                       &at, &next_at, err);
        le64(b, at);
        if (st == TW_OK)
            st = put_at(&sw, b, 8, prev_next, err);
        prev_next = next_at;
    }
    if (st != TW_OK)
        goto out;
    if (close(sw.fd) != 0) {
        int e = errno;

        sw.fd = -1;
        st = twi_error_set(err, TW_E_IO, "sample: cannot write '%s' (%s)", tmp,
                           twi_io_strerror(e, ebuf, sizeof ebuf));
        goto out;
    }
    sw.fd = -1;
    if (rename(tmp, path) != 0) {
        int e = errno;

        st = twi_error_set(err, TW_E_IO, "sample: cannot rename '%s' to '%s' (%s)", tmp, path,
                           twi_io_strerror(e, ebuf, sizeof ebuf));
        goto out;
    }
    free(tmp);
    tmp = NULL;
out:
    if (sw.fd >= 0)
        close(sw.fd);
    if (tmp) {
        unlink(tmp);
        free(tmp);
    }
    sample_writer_free(&sw);
    return st;
}
