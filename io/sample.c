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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample_internal.h"
#include "tilewave/version.h"

#define QB 8               /* positions are in 1/256 of a level-0 pixel */
#define LAT_SHIFT 4        /* lattice of the slow fields: 16 level-0 pixels */
#define LAT_MAX_LEVEL 4    /* up to this level a block caches its lattice points */
#define NUC_SHIFT 5        /* nucleus grid cell: 32 level-0 pixels */
#define NUC_REACH 48       /* a nucleus never reaches further than this beyond its cell */
#define CACHE_MARGIN 96    /* lattice cached around a block: covers every candidate's centre */
#define BLOCK 256          /* render in blocks of at most this many pixels a side */

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

static lattice_value
lattice_point(const twi_sample_scene *sc, uint64_t gx, uint64_t gy)
{
    uint64_t x = gx << (LAT_SHIFT + QB), y = gy << (LAT_SHIFT + QB);
    int64_t px = (int64_t)(gx << LAT_SHIFT), py = (int64_t)(gy << LAT_SHIFT);
    int64_t edge, pen = 0;
    lattice_value v;

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
    v.tissue = (int32_t)((int64_t)fbm(sc->key[KEY_TISSUE], x, y, sc->tissue_shift, 4) + PEN_MAX -
                         pen);
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

/* Glass, stroma and their blend at one pixel. */
static void
background_pixel(const twi_sample_scene *sc, const lattice_cache *c, uint64_t x, uint64_t y,
                 uint8_t *px)
{
    uint64_t g = hash2(sc->key[KEY_GRAIN], x >> QB, y >> QB);
    /* faint grain: -1, 0, 0, +1; stronger grain costs deflate time and file size */
    int64_t noise = (int64_t)(g & 1) + (int64_t)((g >> 1) & 1) - 1;
    int64_t glass[3] = {240 + noise, 239 + noise, 242 + noise};
    int64_t a, tis[3];
    fields f;

    fields_at(sc, c, x, y, &f);
    a = tissue_alpha(sc, &f);
    if (a == 0) {
        px[0] = u8(glass[0]);
        px[1] = u8(glass[1]);
        px[2] = u8(glass[2]);
        return;
    }
    {
        /* Fibres: ridges of anisotropic noise (long along, thin across the fibre direction),
         * in coordinates rotated to the slide's fibre angle and warped by a slow field so
         * that the bundles wave. The offset keeps the rotated coordinates positive. */
        const int64_t ca = angles[sc->fiber_angle][0], sa = angles[sc->fiber_angle][1];
        const int64_t off = (int64_t)1 << 42;
        int64_t sx = (int64_t)x, sy = (int64_t)y;
        int64_t u = floor_shift(sx * ca + sy * sa, 14) + off;
        int64_t v = floor_shift(sy * ca - sx * sa, 14) + off + (f.warp - 32768) * 3 / 8;
        uint64_t f1 = vnoise(sc->key[KEY_FIBER], (uint64_t)u, (uint64_t)v, 6, 3);
        uint64_t f2 = vnoise(sc->key[KEY_FIBER] + 1, (uint64_t)u, (uint64_t)v, 4, 2);
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

        for (int32_t i = 0; i < w; i++)
            background_pixel(sc, c, centre(x0 + i, k), y, row + 3 * (size_t)i);
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

/* Keep the first failure (with its message) and tell the other threads to stop. The thread
 * that raises the flag owns `first` and `err`; they are read after the parallel region. (No
 * named critical section: it would export a .gomp_critical_user_* symbol.) */
static void
record_failure(tw_status st, const tw_error *terr, tw_status *first, tw_error *err, int *failed)
{
    int was;

#pragma omp atomic capture
    {
        was = *failed;
        *failed = 1;
    }
    if (!was) {
        *first = st;
        if (err)
            *err = *terr;
    }
}

/*
 * Render and write every tile of one level. Tiles are rendered in parallel, one OpenMP
 * thread per tile, but handed to the writer in tile order (the ordered region): the writer
 * appends tiles as they arrive, and arrival in a fixed order is what makes two runs give the
 * same file. Compression, inside tw_writer_write_tile(), is thereby serialised; with rendering
 * overlapping it, the default slide takes about as long on 2 cores as fully parallel writes.
 */
static tw_status
write_level(const twi_sample_scene *sc, tw_writer *wr, int k, int32_t tile, tw_error *err)
{
    int64_t lw = ((sc->w - 1) >> k) + 1, lh = ((sc->h - 1) >> k) + 1;
    int64_t ntx = (lw + tile - 1) / tile, nty = (lh + tile - 1) / tile, n = ntx * nty;
    size_t stride = (size_t)tile * 3;
    tw_status first = TW_OK;
    int failed = 0;

#pragma omp parallel
    {
        uint8_t *buf = malloc(stride * (size_t)tile);
        tw_error terr;

        if (!buf) {
            twi_error_set(&terr, TW_E_NOMEM, "sample: out of memory for a %dx%d tile",
                          (int)tile, (int)tile);
            record_failure(TW_E_NOMEM, &terr, &first, err, &failed);
        }
#pragma omp for schedule(dynamic, 1) ordered
        for (int64_t t = 0; t < n; t++) {
            int64_t tx = t % ntx, ty = t / ntx, x = tx * tile, y = ty * tile;
            int32_t w = (int32_t)(lw - x < tile ? lw - x : tile);
            int32_t h = (int32_t)(lh - y < tile ? lh - y : tile);
            tw_status st = TW_OK;
            int stop;

#pragma omp atomic read
            stop = failed;
            /* only the part inside the level is rendered; the writer pads edge tiles */
            if (!stop) {
                st = twi_sample_render(sc, k, x, y, w, h, buf, stride);
                if (st != TW_OK) {
                    twi_error_set(&terr, st, "sample: cannot render tile (%lld, %lld) of level %d",
                                  (long long)tx, (long long)ty, k);
                    record_failure(st, &terr, &first, err, &failed);
                }
            }
#pragma omp ordered
            {
#pragma omp atomic read
                stop = failed;
                if (!stop)
                    st = tw_writer_write_tile(wr, k, tx, ty, buf, stride, &terr);
                if (!stop && st != TW_OK)
                    record_failure(st, &terr, &first, err, &failed);
            }
        }
        free(buf);
    }
    return first;
}

tw_status
tw_sample_write(const char *path, const tw_sample_opts *o, tw_error *err)
{
    tw_status st = TW_OK;
    twi_sample_scene sc;
    tw_writer_opts wo;
    tw_writer *wr = NULL;
    char desc[160];

    if (!path || !*path)
        return twi_error_set(err, TW_E_INVALID, "sample: no output path");
    if ((st = twi_sample_scene_init(&sc, o, err)) != TW_OK)
        return st;

    tw_writer_opts_init(&wo);
    wo.w = o->w;
    wo.h = o->h;
    wo.channels = 3;
    wo.type = TW_U8;
    wo.tile_w = wo.tile_h = o->tile;
    wo.n_levels = twi_sample_level_count(o->w, o->h, o->tile);
    wo.compression = o->compression;
    wo.level_of_compression = o->compression == TW_COMPRESS_DEFLATE ? TWI_SAMPLE_DEFLATE_LEVEL
                              : o->compression == TW_COMPRESS_ZSTD  ? TWI_SAMPLE_ZSTD_LEVEL
                                                                    : 0;
    wo.mpp_x = wo.mpp_y = 0.25;
    snprintf(desc, sizeof desc, "tilewave sample %lldx%lld seed %llu", (long long)o->w,
             (long long)o->h, (unsigned long long)o->seed);
    wo.description = desc;
    wo.software = "tilewave " TW_VERSION_STRING;

    if ((st = tw_writer_open(path, &wo, &wr, err)) != TW_OK)
        goto out;
    for (int k = 0; k < wo.n_levels; k++)
        if ((st = write_level(&sc, wr, k, o->tile, err)) != TW_OK)
            goto out;
    st = tw_writer_close(wr, err);
    wr = NULL; /* close frees the writer whatever it returns */
out:
    tw_writer_abort(wr);
    return st;
}
