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
 * How it stays identical everywhere. Level 0 is a point-sampled rendering of the scene: pixel
 * i samples it at its centre, i + 1/2 in level-0 units, so each pixel depends on nothing but
 * its own position, never on the tile, the order of work or the thread that renders it. The
 * file's reduced levels are 2x2 means of the level above (see "Writing" below), as in every
 * pyramid tilewave writes; twi_sample_render() still renders any level k point-sampled (pixel
 * i at (i + 1/2) 2^k), which the tests use. All arithmetic is integer (positions in 1/256
 * pixel, noise values in 1/65536, bilinear weights in 1/256); random numbers come from a
 * 64-bit mixing hash (the splitmix64 finaliser) of the seed, the layer and the cell
 * coordinates. There is no floating point, no rand(), and no right shift of a negative number
 * (the one place that needs a floored shift spells it out), so the bytes are the same on any
 * compiler and machine.
 *
 * How it stays fast. The slow-varying fields (tissue, density, fibre warp, holes) are defined
 * as the bilinear interpolation of their values on a 16-pixel lattice; a render of a block at
 * levels 0-4 computes the lattice points it needs once, deeper levels evaluate the four
 * corners of each pixel directly, and both give the same numbers. Nuclei are painted per
 * block by visiting the grid cells that can reach it, in global cell order, so overlaps
 * resolve the same way in every block. Tiles are rendered in parallel, one OpenMP thread
 * per tile.
 */
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "sample_internal.h"
#include "tilewave/version.h"
#include "tw_io.h"

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
 * the period, so all tiles of pure glass in a level hold the same pixels: they are made once,
 * not rendered, and most of a slide is glass. */
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
    if (o->struct_size != sizeof *o)
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
 * Writing, through tw_writer (libtiff). Level 0 streams tile row by tile row. Level k >= 1 is
 * the 2x2 mean of level k - 1 (twi_pyr_reduce with TWI_PYR_MEAN, the rule of every tilewave
 * pyramid), assembled in a buffer one tile row high: each tile of level k - 1 is reduced into
 * it as soon as it is made, and once the two rows of level k - 1 above it are done, its tiles
 * go to the writer, which keeps them in its scratch file until level k's directory is open
 * (libtiff writes one directory at a time). Memory: one tile row per level below 0 (about
 * 3 * w * tile bytes together: 77 MiB for a 100K-wide slide with 256-pixel tiles), one tile
 * per thread, and the writer's few bytes per tile.
 *
 * Each row goes to the OpenMP threads a tile at a time: a thread renders its tile (level 0) or
 * finds it in the row buffer, reduces it into the next level's row and hands it to
 * twi_writer_encode(), which compresses it on that thread. The append is an `ordered` region,
 * in tile order: libtiff lays tiles out in the order they are appended, so this keeps the
 * file's bytes the same whatever the number of threads; only the append (a write() of the
 * compressed bytes) is serialised.
 *
 * Glass. Tiles of pure glass (known without rendering) are not rendered and their reduction is
 * copied, not computed: all glass tiles of a level hold the same pixels, made once (level 0
 * from the periodic grain; level k as four copies of the reduced glass tile of level k - 1,
 * which is what reducing four glass tiles gives). Most of a slide is glass.
 */

/* microns per level-0 pixel */
#define SAMPLE_MPP 0.25

typedef struct pyr_level {
    int64_t w, h, ntx, nty;
    uint8_t *row;         /* k >= 1: the tile row being assembled, `tile` rows of w pixels */
    size_t row_stride;
    uint8_t *nglass;      /* k >= 1: per tile of that row, how many of its children were glass */
    uint8_t *gpx;         /* the glass tile of this level, tile x tile pixels */
    uint8_t *gred;        /* its 2x2 reduction, tile / 2 x tile / 2 pixels */
} pyr_level;

typedef struct sample_writer {
    const twi_sample_scene *sc;
    tw_writer *wr;
    int32_t tile;
    int n_levels;
    pyr_level *lv;
    int n_threads;
    uint8_t **tbuf;       /* one tile of pixels per thread */
} sample_writer;

/* Make tile row ty of level k, reduce it into the next level's row and write its tiles; then,
 * when it completes a row of the next level, that row (and so on down). */
static tw_status
write_row(sample_writer *sw, int k, int64_t ty, tw_error *err)
{
    pyr_level *lv = &sw->lv[k], *next = k + 1 < sw->n_levels ? &sw->lv[k + 1] : NULL;
    const int32_t t = sw->tile;
    const size_t tstride = (size_t)t * 3, hstride = (size_t)(t / 2) * 3;
    tw_status st = TW_OK; /* the first failure in tile order: touched in `ordered` only */

#pragma omp parallel for ordered schedule(dynamic, 1)
    for (int64_t tx = 0; tx < lv->ntx; tx++) {
        int64_t x = tx * t, y = ty * t;
        int32_t w = (int32_t)(lv->w - x < t ? lv->w - x : t);
        int32_t h = (int32_t)(lv->h - y < t ? lv->h - y : t);
        bool full = w == t && h == t, glass;
        const uint8_t *px;
        size_t stride;
        tw_status ts = TW_OK;
        twi_wr_tile enc = {0};
        tw_error terr;

        if (k == 0)
            glass = full && twi_sample_block_is_glass(sw->sc, x, y, t, t);
        else
            glass = full && lv->nglass[tx] == 4;
        if (glass) {
            px = lv->gpx;
            stride = tstride;
        } else if (k == 0) {
            uint8_t *buf = sw->tbuf[omp_get_thread_num()];

            ts = twi_sample_render(sw->sc, 0, x, y, w, h, buf, tstride);
            px = buf;
            stride = tstride;
        } else {
            px = lv->row + (size_t)x * 3;
            stride = lv->row_stride;
        }
        /* tile sides are even: the 2x2 blocks of a tile's pixels never straddle two tiles */
        if (next && ts == TW_OK) {
            uint8_t *dst = next->row + (size_t)(ty % 2) * (size_t)(t / 2) * next->row_stride +
                           (size_t)(x / 2) * 3;

            if (glass)
                for (int32_t j = 0; j < t / 2; j++)
                    memcpy(dst + (size_t)j * next->row_stride, lv->gred + (size_t)j * hstride,
                           hstride);
            else
                twi_pyr_reduce(px, stride, w, h, 3, TW_U8, TWI_PYR_MEAN, dst, next->row_stride);
        }
        if (ts != TW_OK)
            twi_error_set(&terr, ts, "sample: cannot render tile (%lld, %lld) of level %d (%s)",
                          (long long)tx, (long long)ty, k,
                          ts == TW_E_NOMEM ? "out of memory" : "invalid region");
        else
            ts = twi_writer_encode(sw->wr, k, tx, ty, px, stride, &enc, &terr);
#pragma omp ordered
        {
            if (st == TW_OK && ts != TW_OK)
                st = twi_error_set(err, ts, "%s", terr.message);
            if (st == TW_OK)
                st = twi_writer_append(sw->wr, &enc, err);
            else
                twi_writer_tile_discard(sw->wr, &enc);
            if (next && glass)
                next->nglass[tx / 2]++;
        }
        TWI_OMP_TSAN_RELEASE(sw); /* the thread buffers are freed after the region */
    }
    TWI_OMP_TSAN_ACQUIRE(sw);
    if (st == TW_OK && next && (ty % 2 == 1 || ty == lv->nty - 1)) {
        st = write_row(sw, k + 1, ty / 2, err);
        memset(next->nglass, 0, (size_t)next->ntx);
    }
    return st;
}

static void
sample_writer_free(sample_writer *sw)
{
    if (sw->lv) {
        for (int k = 0; k < sw->n_levels; k++) {
            free(sw->lv[k].row);
            free(sw->lv[k].nglass);
            free(sw->lv[k].gpx);
            free(sw->lv[k].gred);
        }
    }
    if (sw->tbuf)
        for (int i = 0; i < sw->n_threads; i++)
            free(sw->tbuf[i]);
    free(sw->lv);
    free(sw->tbuf);
}

/* Levels, row buffers, thread buffers and the glass tiles of every level. */
static tw_status
sample_writer_init(sample_writer *sw, const twi_sample_scene *sc, const tw_sample_opts *o,
                   tw_error *err)
{
    const int32_t t = o->tile;
    const size_t tile_bytes = (size_t)t * (size_t)t * 3, tstride = (size_t)t * 3;
    const size_t hstride = (size_t)(t / 2) * 3;
    int64_t w = o->w, h = o->h;

    sw->sc = sc;
    sw->tile = t;
    sw->n_levels = twi_sample_level_count(o->w, o->h, t);
    sw->n_threads = omp_get_max_threads();
    if (!(sw->lv = calloc((size_t)sw->n_levels, sizeof *sw->lv)) ||
        !(sw->tbuf = calloc((size_t)sw->n_threads, sizeof *sw->tbuf)))
        return twi_error_set(err, TW_E_NOMEM, "sample: out of memory");
    for (int i = 0; i < sw->n_threads; i++)
        if (!(sw->tbuf[i] = malloc(tile_bytes)))
            return twi_error_set(err, TW_E_NOMEM, "sample: out of memory");
    for (int k = 0; k < sw->n_levels; k++) {
        pyr_level *lv = &sw->lv[k];

        lv->w = w;
        lv->h = h;
        lv->ntx = (w + t - 1) / t;
        lv->nty = (h + t - 1) / t;
        if (k > 0) {
            lv->row_stride = (size_t)lv->ntx * tstride;
            if (!(lv->row = malloc(lv->row_stride * (size_t)t)) ||
                !(lv->nglass = calloc((size_t)lv->ntx, 1)))
                return twi_error_set(err, TW_E_NOMEM,
                                     "sample: out of memory for a %lld-pixel tile row of level %d",
                                     (long long)lv->w, k);
        }
        if (!(lv->gpx = malloc(tile_bytes)) || !(lv->gred = malloc(hstride * (size_t)(t / 2))))
            return twi_error_set(err, TW_E_NOMEM, "sample: out of memory");
        for (int32_t j = 0; j < t; j++) {
            uint8_t *d = lv->gpx + (size_t)j * tstride;

            if (k == 0) {
                for (int32_t i = 0; i < t; i++)
                    glass_pixel(sc, i, j, d + 3 * (size_t)i);
            } else {
                const uint8_t *s = sw->lv[k - 1].gred + (size_t)(j % (t / 2)) * hstride;

                memcpy(d, s, hstride);
                memcpy(d + hstride, s, hstride);
            }
        }
        twi_pyr_reduce(lv->gpx, tstride, t, t, 3, TW_U8, TWI_PYR_MEAN, lv->gred, hstride);
        w = (w + 1) / 2;
        h = (h + 1) / 2;
    }
    return TW_OK;
}

tw_status
tw_sample_write(const char *path, const tw_sample_opts *o, tw_error *err)
{
    tw_status st = TW_OK;
    twi_sample_scene sc;
    sample_writer sw;
    tw_writer_opts wo;
    char desc[160];

    memset(&sw, 0, sizeof sw);
    if (!path || !*path)
        return twi_error_set(err, TW_E_INVALID, "sample: no output path");
    if ((st = twi_sample_scene_init(&sc, o, err)) != TW_OK)
        return st;
    if ((st = sample_writer_init(&sw, &sc, o, err)) != TW_OK)
        goto out;
    snprintf(desc, sizeof desc, "tilewave sample %lldx%lld seed %llu", (long long)o->w,
             (long long)o->h, (unsigned long long)o->seed);
    tw_writer_opts_init(&wo);
    wo.w = o->w;
    wo.h = o->h;
    wo.channels = 3;
    wo.type = TW_U8;
    wo.tile_w = wo.tile_h = o->tile;
    wo.n_levels = sw.n_levels;
    wo.compression = o->compression;
    wo.level_of_compression = o->compression == TW_COMPRESS_DEFLATE ? TWI_SAMPLE_DEFLATE_LEVEL
                              : o->compression == TW_COMPRESS_ZSTD  ? TWI_SAMPLE_ZSTD_LEVEL
                                                                    : 0;
    wo.mpp_x = wo.mpp_y = SAMPLE_MPP;
    wo.description = desc;
    wo.software = "tilewave " TW_VERSION_STRING;
    if ((st = tw_writer_open(path, &wo, &sw.wr, err)) != TW_OK)
        goto out;
    for (int64_t ty = 0; ty < sw.lv[0].nty && st == TW_OK; ty++)
        st = write_row(&sw, 0, ty, err);
    if (st == TW_OK) {
        /* close frees the writer and removes its file on failure */
        st = tw_writer_close(sw.wr, err);
        sw.wr = NULL;
    }
out:
    tw_writer_abort(sw.wr); /* nothing is left at the path on failure */
    sample_writer_free(&sw);
    return st;
}
