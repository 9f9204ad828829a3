/* SPDX-License-Identifier: MIT */
/* tilewave tests: the CPU reconstruction kernel against a naive iterate-until-stable reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "omp_kernels.h"
#include "twtest_rnd.h"

#define PAD_BYTE 0xA5

/* ---- the reference ------------------------------------------------------------------------ */

/*
 * Naive reconstruction by dilation: mrk(p) <- min(max{mrk(q), q in N[p]}, msk(p)) over the whole
 * tile until nothing changes. Updates are in place and the sweep direction alternates, which
 * only changes how many sweeps it takes: the iteration is monotone and its fixpoint above the
 * marker is unique. Written independently of the kernel (no scans split into N+ / N-, no queue).
 */
static void
ref_recon(uint32_t *mrk, const uint32_t *msk, int32_t w, int32_t h, int conn)
{
    int64_t n = (int64_t)w * h;
    bool changed;
    int pass = 0;

    do {
        changed = false;
        for (int64_t k = 0; k < n; k++) {
            int64_t idx = (pass & 1) ? n - 1 - k : k;
            int32_t y = (int32_t)(idx / w), x = (int32_t)(idx % w);
            uint32_t m = mrk[idx];

            for (int dy = -1; dy <= 1; dy++) {
                for (int dx = -1; dx <= 1; dx++) {
                    int32_t xx = x + dx, yy = y + dy;

                    if ((dx == 0 && dy == 0) || (conn == 4 && dx != 0 && dy != 0))
                        continue;
                    if (xx < 0 || xx >= w || yy < 0 || yy >= h)
                        continue;
                    if (mrk[(int64_t)yy * w + xx] > m)
                        m = mrk[(int64_t)yy * w + xx];
                }
            }
            if (m > msk[idx])
                m = msk[idx];
            if (m != mrk[idx]) {
                mrk[idx] = m;
                changed = true;
            }
        }
        pass++;
    } while (changed);
}

/* ---- views with padded rows ----------------------------------------------------------------- */

typedef struct image {
    uint8_t *buf;
    size_t bytes;
    tw_tile_view v;
} image;

/* A w x h view of `px` with `extra` padding samples after each row, filled with PAD_BYTE. */
static image
image_make(int32_t w, int32_t h, tw_sample_type t, int64_t extra, const uint32_t *px)
{
    image im;
    size_t ss = tw_sample_size(t);

    im.v.stride = (int64_t)(((size_t)w + (size_t)extra) * ss);
    im.bytes = (size_t)im.v.stride * (size_t)h + 1;
    im.buf = malloc(im.bytes);
    cr_assert_not_null(im.buf);
    memset(im.buf, PAD_BYTE, im.bytes);
    im.v.data = im.buf;
    im.v.w = w;
    im.v.h = h;
    im.v.channels = 1;
    im.v.type = t;
    im.v.x0 = 0;
    im.v.y0 = 0;
    for (int32_t y = 0; y < h; y++) {
        uint8_t *row = im.buf + (size_t)y * (size_t)im.v.stride;

        for (int32_t x = 0; x < w; x++) {
            uint32_t v = px[(size_t)y * (size_t)w + (size_t)x];

            if (t == TW_U8) {
                row[x] = (uint8_t)v;
            } else {
                uint16_t s = (uint16_t)v;
                memcpy(row + 2 * (size_t)x, &s, 2);
            }
        }
    }
    return im;
}

static uint32_t
image_at(const image *im, int32_t x, int32_t y)
{
    const uint8_t *row = im->buf + (size_t)y * (size_t)im->v.stride;
    uint16_t s;

    if (im->v.type == TW_U8)
        return row[x];
    memcpy(&s, row + 2 * (size_t)x, 2);
    return s;
}

/* Every pixel equals want[] and the padding after each row is untouched. */
static void
image_check(const image *im, const uint32_t *want, const char *what)
{
    size_t ss = tw_sample_size(im->v.type);

    for (int32_t y = 0; y < im->v.h; y++) {
        const uint8_t *row = im->buf + (size_t)y * (size_t)im->v.stride;

        for (int32_t x = 0; x < im->v.w; x++) {
            uint32_t got = image_at(im, x, y), exp = want[(size_t)y * (size_t)im->v.w + (size_t)x];

            if (got != exp)
                cr_fatal("%s: %dx%d %s pixel (%d,%d) got %u want %u", what, im->v.w, im->v.h,
                         tw_sample_type_name(im->v.type), x, y, got, exp);
        }
        for (size_t i = (size_t)im->v.w * ss; i < (size_t)im->v.stride; i++)
            cr_assert(eq(u8, row[i], PAD_BYTE), "%s: padding written at row %d byte %zu", what,
                      y, i);
    }
    cr_assert(eq(u8, im->buf[im->bytes - 1], PAD_BYTE), "%s: byte after the last row written",
              what);
}

/* ---- generated masks and markers ---------------------------------------------------------- */

enum { MASK_NOISE, MASK_LEVELS, MASK_BLOBS, MASK_BINARY, MASK_SERPENTINE, N_MASK_KINDS };
enum { MARK_SPARSE, MARK_SINGLE, MARK_SHIFT, MARK_ZERO, MARK_EQUAL, N_MARK_KINDS };

/* Smooth bumps scaled to [0, maxv]: tissue-like blobs with gentle slopes. */
static void
gen_blobs(uint32_t *msk, int32_t w, int32_t h, uint32_t maxv, uint64_t *rng)
{
    int nb = 1 + (int)twtest_rnd(rng, 6);
    double cx[6], cy[6], r2[6], a[6], hi = 0;
    double *f = malloc((size_t)w * (size_t)h * sizeof *f);

    cr_assert_not_null(f);
    for (int b = 0; b < nb; b++) {
        cx[b] = twtest_rnd(rng, (uint32_t)w);
        cy[b] = twtest_rnd(rng, (uint32_t)h);
        r2[b] = 1.0 + twtest_rnd(rng, (uint32_t)(w + h));
        r2[b] *= r2[b] / 4;
        a[b] = 0.3 + twtest_rnd(rng, 1000) / 1000.0;
    }
    for (int32_t y = 0; y < h; y++) {
        for (int32_t x = 0; x < w; x++) {
            double v = 0;

            for (int b = 0; b < nb; b++)
                v += a[b] * exp(-((x - cx[b]) * (x - cx[b]) + (y - cy[b]) * (y - cy[b])) / r2[b]);
            f[(size_t)y * (size_t)w + (size_t)x] = v;
            if (v > hi)
                hi = v;
        }
    }
    for (size_t k = 0; k < (size_t)w * (size_t)h; k++)
        msk[k] = hi > 0 ? (uint32_t)(f[k] / hi * maxv) : 0;
    free(f);
}

static void
gen_mask(uint32_t *msk, int32_t w, int32_t h, uint32_t maxv, int kind, uint64_t *rng)
{
    size_t n = (size_t)w * (size_t)h;

    switch (kind) {
    case MASK_NOISE:
        for (size_t k = 0; k < n; k++)
            msk[k] = twtest_rnd(rng, maxv + 1);
        break;
    case MASK_LEVELS: {
        /* plateaus: random rectangles painted with four levels, extremes included */
        uint32_t lv[4] = {0, maxv / 3, 2 * (maxv / 3), maxv};
        int nr = 1 + (int)twtest_rnd(rng, 12);

        for (size_t k = 0; k < n; k++)
            msk[k] = lv[twtest_rnd(rng, 2)];
        for (int r = 0; r < nr; r++) {
            int32_t x0 = (int32_t)twtest_rnd(rng, (uint32_t)w);
            int32_t y0 = (int32_t)twtest_rnd(rng, (uint32_t)h);
            int32_t x1 = x0 + 1 + (int32_t)twtest_rnd(rng, (uint32_t)(w - x0));
            int32_t y1 = y0 + 1 + (int32_t)twtest_rnd(rng, (uint32_t)(h - y0));
            uint32_t v = lv[twtest_rnd(rng, 4)];

            for (int32_t y = y0; y < y1; y++)
                for (int32_t x = x0; x < x1; x++)
                    msk[(size_t)y * (size_t)w + (size_t)x] = v;
        }
        break;
    }
    case MASK_BLOBS:
        gen_blobs(msk, w, h, maxv, rng);
        break;
    case MASK_BINARY: {
        /* 0 / max: thresholded blobs or salt noise */
        uint32_t thr = twtest_rnd(rng, 2) ? maxv / 2 : 0;

        if (thr) {
            gen_blobs(msk, w, h, maxv, rng);
            for (size_t k = 0; k < n; k++)
                msk[k] = msk[k] > thr ? maxv : 0;
        } else {
            uint32_t dens = 30 + twtest_rnd(rng, 50);

            for (size_t k = 0; k < n; k++)
                msk[k] = twtest_rnd(rng, 100) < dens ? maxv : 0;
        }
        break;
    }
    case MASK_SERPENTINE:
        /* a 1-pixel corridor snaking through the tile: one long dependency chain, crossing
         * every micro-tile border many times; walls carry random low values */
        for (int32_t y = 0; y < h; y++) {
            for (int32_t x = 0; x < w; x++) {
                bool open = y % 2 == 0 || (y % 4 == 1 && x == w - 1) || (y % 4 == 3 && x == 0);

                msk[(size_t)y * (size_t)w + (size_t)x] =
                    open ? maxv - twtest_rnd(rng, 3) : twtest_rnd(rng, maxv / 8 + 1);
            }
        }
        break;
    }
}

static void
gen_marker(uint32_t *mrk, const uint32_t *msk, int32_t w, int32_t h, uint32_t maxv, int kind,
           uint64_t *rng)
{
    size_t n = (size_t)w * (size_t)h;

    switch (kind) {
    case MARK_SPARSE: {
        uint32_t frac = 1 + twtest_rnd(rng, 30); /* percent of pixels that carry a value */

        for (size_t k = 0; k < n; k++)
            mrk[k] = twtest_rnd(rng, 100) < frac
                         ? (twtest_rnd(rng, 2) ? msk[k] : twtest_rnd(rng, msk[k] + 1))
                         : 0;
        break;
    }
    case MARK_SINGLE: {
        size_t p = twtest_rnd(rng, (uint32_t)n);

        memset(mrk, 0, n * sizeof *mrk);
        mrk[p] = msk[p];
        break;
    }
    case MARK_SHIFT: {
        uint32_t hh = twtest_rnd(rng, maxv / 4 + 1);

        for (size_t k = 0; k < n; k++)
            mrk[k] = msk[k] > hh ? msk[k] - hh : 0;
        break;
    }
    case MARK_ZERO:
        memset(mrk, 0, n * sizeof *mrk);
        break;
    case MARK_EQUAL:
        memcpy(mrk, msk, n * sizeof *mrk);
        break;
    }
}

/* ---- running the kernel ------------------------------------------------------------------- */

typedef struct run_cfg {
    int nthreads;
    int32_t gx, gy;  /* 0: the public entry point picks the grid */
    int64_t pad_j, pad_i;
} run_cfg;

/* Run the kernel on copies of J0 / msk with cfg's strides; check against want and that the
 * mask is untouched. Seeds NULL: full mode. */
static void
run_and_check(const uint32_t *J0, const uint32_t *msk, int32_t w, int32_t h, tw_sample_type t,
              int conn, const uint32_t *seeds, int64_t n_seeds, const run_cfg *cfg,
              const uint32_t *want, const char *what)
{
    image mj = image_make(w, h, t, cfg->pad_j, J0);
    image mi = image_make(w, h, t, cfg->pad_i, msk);
    char label[256];
    tw_status st;

    snprintf(label, sizeof label, "%s conn %d threads %d grid %dx%d pads %d/%d%s", what, conn,
             cfg->nthreads, cfg->gx, cfg->gy, (int)cfg->pad_j, (int)cfg->pad_i,
             seeds ? " seeded" : "");
    if (cfg->gx > 0)
        st = twi_omp_mrecon_grid(&mj.v, &mi.v, conn, seeds, n_seeds, cfg->nthreads, cfg->gx,
                                 cfg->gy);
    else
        st = twi_omp_mrecon(&mj.v, &mi.v, conn, seeds, n_seeds, cfg->nthreads);
    cr_assert(eq(int, st, TW_OK), "%s", label);
    image_check(&mj, want, label);
    image_check(&mi, msk, label);
    free(mj.buf);
    free(mi.buf);
}

static void
random_cfg(run_cfg *c, uint64_t *rng, bool forced_grid)
{
    /* Forced grids run a real team in one case of four: on a loaded machine (ctest -j) every
     * barrier of the border rounds can cost a scheduler slice. A team of one exercises the
     * same exchange code. Small tiles on the public path are serial whatever nthreads says. */
    if (forced_grid)
        c->nthreads = twtest_rnd(rng, 4) ? 1 : 2 + (int)twtest_rnd(rng, 2);
    else
        c->nthreads = 1 + (int)twtest_rnd(rng, 3);
    c->gx = forced_grid ? 1 + (int32_t)twtest_rnd(rng, 6) : 0;
    c->gy = forced_grid ? 1 + (int32_t)twtest_rnd(rng, 6) : 0;
    c->pad_j = twtest_rnd(rng, 3) ? 0 : 1 + twtest_rnd(rng, 7);
    c->pad_i = twtest_rnd(rng, 3) ? 0 : 1 + twtest_rnd(rng, 7);
}

/* Shapes: mostly small, with lines, columns and primes; one case in eight up to 300 x 200. */
static void
random_shape(uint64_t *rng, int32_t *w, int32_t *h)
{
    static const int32_t odd[] = {1, 2, 3, 5, 7, 13, 17, 31, 61, 97, 127};
    uint32_t pick = twtest_rnd(rng, 8);

    if (pick == 0) {
        *w = 1 + (int32_t)twtest_rnd(rng, 300);
        *h = 1 + (int32_t)twtest_rnd(rng, 200);
    } else if (pick <= 2) {
        *w = odd[twtest_rnd(rng, sizeof odd / sizeof odd[0])];
        *h = odd[twtest_rnd(rng, sizeof odd / sizeof odd[0])];
    } else if (pick == 3) {
        *w = 1;
        *h = 1 + (int32_t)twtest_rnd(rng, 200);
        if (twtest_rnd(rng, 2)) {
            *w = *h;
            *h = 1;
        }
    } else {
        *w = 1 + (int32_t)twtest_rnd(rng, 40);
        *h = 1 + (int32_t)twtest_rnd(rng, 40);
    }
}

/* n random full-mode cases of type t and connectivity conn, each run through the public
 * entry point (1 to 3 threads) and through a random forced micro-tile grid. */
static void
random_full_cases(int n, tw_sample_type t, int conn, uint64_t seed)
{
    uint64_t rng = seed;
    uint32_t maxv = t == TW_U8 ? 255 : 65535;

    for (int c = 0; c < n; c++) {
        int32_t w, h;
        int mk, kk;
        uint32_t *msk, *J0, *want;
        size_t npx;
        char what[96];
        run_cfg cfg;

        random_shape(&rng, &w, &h);
        npx = (size_t)w * (size_t)h;
        mk = (int)twtest_rnd(&rng, N_MASK_KINDS);
        kk = (int)twtest_rnd(&rng, N_MARK_KINDS);
        msk = malloc(npx * sizeof *msk);
        J0 = malloc(npx * sizeof *J0);
        want = malloc(npx * sizeof *want);
        cr_assert(msk && J0 && want);
        gen_mask(msk, w, h, maxv, mk, &rng);
        gen_marker(J0, msk, w, h, maxv, kk, &rng);
        memcpy(want, J0, npx * sizeof *want);
        ref_recon(want, msk, w, h, conn);
        snprintf(what, sizeof what, "case %d mask %d marker %d", c, mk, kk);

        random_cfg(&cfg, &rng, false);
        run_and_check(J0, msk, w, h, t, conn, NULL, 0, &cfg, want, what);
        random_cfg(&cfg, &rng, true);
        run_and_check(J0, msk, w, h, t, conn, NULL, 0, &cfg, want, what);
        free(msk);
        free(J0);
        free(want);
    }
}

Test(mrecon_omp, full_u8_conn8_matches_reference)
{
    /* 700 random 8-bit cases, 8-connectivity: shapes 1x1 to 300x200, five mask kinds, five
     * marker kinds, 1-3 threads, forced micro-tile grids, padded strides: identical bytes. */
    random_full_cases(700, TW_U8, 8, 0x9E3779B97F4A7C15ull);
}

Test(mrecon_omp, full_u8_conn4_matches_reference)
{
    /* The same sweep with 4-connectivity (700 cases). */
    random_full_cases(700, TW_U8, 4, 0xD1B54A32D192ED03ull);
}

Test(mrecon_omp, full_u16_conn8_matches_reference)
{
    /* The same sweep on 16-bit samples, full range up to 65535 (400 cases). */
    random_full_cases(400, TW_U16, 8, 0x8CB92BA72F3D8DD7ull);
}

Test(mrecon_omp, full_u16_conn4_matches_reference)
{
    /* 16-bit, 4-connectivity (400 cases). */
    random_full_cases(400, TW_U16, 4, 0xABC98388FB8FAC03ull);
}

/* ---- seeded mode ---------------------------------------------------------------------------- */

/* n cases: a stable tile (the reference result), some pixels raised (still <= mask), then the
 * seeded kernel must equal a full recompute from the raised marker. border_only raises only
 * pixels on the tile border, as BP does; otherwise a few pixels anywhere. */
static void
random_seeded_cases(int n, tw_sample_type t, bool border_only, uint64_t seed)
{
    uint64_t rng = seed;
    uint32_t maxv = t == TW_U8 ? 255 : 65535;

    for (int c = 0; c < n; c++) {
        int conn = twtest_rnd(&rng, 2) ? 8 : 4;
        int32_t w, h;
        int mk, kk;
        uint32_t *msk, *S, *want, *seeds;
        size_t npx, ns = 0, cap;
        char what[96];
        run_cfg cfg;

        random_shape(&rng, &w, &h);
        npx = (size_t)w * (size_t)h;
        mk = (int)twtest_rnd(&rng, N_MASK_KINDS);
        kk = (int)twtest_rnd(&rng, N_MARK_KINDS);
        cap = 2 * npx + 16;
        msk = malloc(npx * sizeof *msk);
        S = malloc(npx * sizeof *S);
        want = malloc(npx * sizeof *want);
        seeds = malloc(cap * sizeof *seeds);
        cr_assert(msk && S && want && seeds);
        gen_mask(msk, w, h, maxv, mk, &rng);
        gen_marker(S, msk, w, h, maxv, kk, &rng);
        ref_recon(S, msk, w, h, conn); /* stable */

        if (border_only) {
            uint32_t prob = 5 + twtest_rnd(&rng, 60);

            for (int32_t y = 0; y < h; y++) {
                for (int32_t x = 0; x < w; x++) {
                    size_t p = (size_t)y * (size_t)w + (size_t)x;

                    if ((x == 0 || y == 0 || x == w - 1 || y == h - 1) &&
                        twtest_rnd(&rng, 100) < prob) {
                        S[p] += twtest_rnd(&rng, msk[p] - S[p] + 1);
                        seeds[ns++] = (uint32_t)p;
                    }
                }
            }
        } else {
            int k = 1 + (int)twtest_rnd(&rng, 5);

            for (int i = 0; i < k; i++) {
                size_t p = twtest_rnd(&rng, (uint32_t)npx);

                S[p] += twtest_rnd(&rng, 2) ? msk[p] - S[p] : twtest_rnd(&rng, msk[p] - S[p] + 1);
                seeds[ns++] = (uint32_t)p;
            }
        }
        /* duplicates and unordered lists are allowed */
        if (ns && twtest_rnd(&rng, 2)) {
            uint32_t dup = seeds[twtest_rnd(&rng, (uint32_t)ns)];

            seeds[ns++] = dup;
        }
        memcpy(want, S, npx * sizeof *want);
        ref_recon(want, msk, w, h, conn);
        snprintf(what, sizeof what, "seeded case %d mask %d marker %d seeds %zu", c, mk, kk, ns);

        random_cfg(&cfg, &rng, false);
        run_and_check(S, msk, w, h, t, conn, seeds, (int64_t)ns, &cfg, want, what);
        random_cfg(&cfg, &rng, true);
        run_and_check(S, msk, w, h, t, conn, seeds, (int64_t)ns, &cfg, want, what);
        free(msk);
        free(S);
        free(want);
        free(seeds);
    }
}

Test(mrecon_omp, seeded_from_raised_pixels_matches_full_recompute)
{
    /* Stable tile, 1-5 pixels raised anywhere (u8 and u16, 4/8-conn): propagating from the seeds
     * only gives the same bytes as a full reconstruction of the raised marker. */
    random_seeded_cases(250, TW_U8, false, 0x1234567887654321ull);
    random_seeded_cases(150, TW_U16, false, 0x0F1E2D3C4B5A6978ull);
}

Test(mrecon_omp, seeded_from_border_pixels_matches_full_recompute)
{
    /* What a BP task does: raise a random share of the tile's border pixels and seed with
     * exactly those; the result equals the full recompute. */
    random_seeded_cases(250, TW_U8, true, 0xCAFEF00DDEADBEEFull);
    random_seeded_cases(150, TW_U16, true, 0x0BADC0FFEE0DDF00ull);
}

Test(mrecon_omp, seeded_touches_only_what_seeds_reach)
{
    /* A flat stable tile split by a wall: raising a pixel on the left side changes the left
     * region only, the right region and the wall keep their bytes (seeded mode does not
     * recompute the tile). */
    enum { W = 41, H = 17 };
    uint32_t msk[W * H], S[W * H], want[W * H], seed = 3 * W + 2;
    run_cfg cfg = {1, 0, 0, 0, 0};

    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            msk[y * W + x] = x == 20 ? 10 : 200;
    for (int k = 0; k < W * H; k++)
        S[k] = k % W < 20 ? 50 : k % W == 20 ? 10 : 70;
    ref_recon(S, msk, W, H, 8);
    S[seed] = 180;
    for (int k = 0; k < W * H; k++)
        want[k] = k % W < 20 ? 180 : S[k];
    for (int nt = 1; nt <= 3; nt++) {
        cfg.nthreads = nt;
        run_and_check(S, msk, W, H, TW_U8, 8, &seed, 1, &cfg, want, "wall");
        run_and_check(S, msk, W, H, TW_U16, 4, &seed, 1, &cfg, want, "wall");
    }
    /* no seeds: nothing happens */
    run_and_check(S, msk, W, H, TW_U8, 8, &seed, 0, &cfg, S, "no seeds");
}

/* ---- large tiles: the team with micro-tiles through the public entry point ------------------ */

Test(mrecon_omp, large_tiles_parallel_equals_serial_and_reference)
{
    /* Tiles above the team threshold (700x500, 1x70000, 70000x1, 301x260) for every mask kind:
     * nthreads 2 and 3 (micro-tiles with border exchange) give the same bytes as nthreads 1,
     * which equals the reference; also in seeded mode from raised border pixels. */
    static const int32_t shapes[][2] = {{700, 500}, {1, 70000}, {70000, 1}, {301, 260}};
    uint64_t rng = 0x5DEECE66Dull;

    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int mk = 0; mk < N_MASK_KINDS; mk++) {
            int32_t w = shapes[s][0], h = shapes[s][1];
            size_t npx = (size_t)w * (size_t)h, ns = 0;
            tw_sample_type t = mk % 2 ? TW_U16 : TW_U8;
            uint32_t maxv = t == TW_U8 ? 255 : 65535;
            int conn = (mk + (int)s) % 2 ? 4 : 8;
            int kk = mk == MASK_BLOBS ? MARK_SHIFT : MARK_SPARSE;
            uint32_t *msk = malloc(npx * sizeof *msk), *J0 = malloc(npx * sizeof *J0);
            uint32_t *want = malloc(npx * sizeof *want);
            uint32_t *seeds = malloc(npx * sizeof *seeds);
            char what[64];

            cr_assert(msk && J0 && want && seeds);
            gen_mask(msk, w, h, maxv, mk, &rng);
            gen_marker(J0, msk, w, h, maxv, kk, &rng);
            memcpy(want, J0, npx * sizeof *want);
            ref_recon(want, msk, w, h, conn);
            snprintf(what, sizeof what, "large %dx%d mask %d", w, h, mk);
            for (int nt = 1; nt <= 3; nt++) {
                run_cfg cfg = {nt, 0, 0, nt == 2 ? 3 : 0, nt == 3 ? 5 : 0};

                run_and_check(J0, msk, w, h, t, conn, NULL, 0, &cfg, want, what);
            }
            /* seeded: the stable result with border pixels raised */
            memcpy(J0, want, npx * sizeof *J0);
            for (int32_t y = 0; y < h; y++) {
                for (int32_t x = 0; x < w; x++) {
                    size_t p = (size_t)y * (size_t)w + (size_t)x;

                    if ((x == 0 || y == 0 || x == w - 1 || y == h - 1) &&
                        twtest_rnd(&rng, 8) == 0) {
                        J0[p] = msk[p];
                        seeds[ns++] = (uint32_t)p;
                    }
                }
            }
            memcpy(want, J0, npx * sizeof *want);
            ref_recon(want, msk, w, h, conn);
            for (int nt = 1; nt <= 3; nt++) {
                run_cfg cfg = {nt, 0, 0, 0, nt == 2 ? 1 : 0};

                run_and_check(J0, msk, w, h, t, conn, seeds, (int64_t)ns, &cfg, want, what);
            }
            free(msk);
            free(J0);
            free(want);
            free(seeds);
        }
    }
}

/* Binary flood fill from one pixel (explicit stack): the reconstruction of a single seed in
 * a 0 / v mask, computed independently of any wavefront order. */
static void
flood_fill(uint32_t *out, const uint32_t *msk, int32_t w, int32_t h, int conn, size_t seed)
{
    size_t npx = (size_t)w * (size_t)h, top = 0;
    size_t *stack = malloc(npx * sizeof *stack);

    cr_assert_not_null(stack);
    memset(out, 0, npx * sizeof *out);
    out[seed] = msk[seed];
    stack[top++] = seed;
    while (top) {
        size_t p = stack[--top];
        int32_t x = (int32_t)(p % (size_t)w), y = (int32_t)(p / (size_t)w);

        for (int dy = -1; dy <= 1; dy++) {
            for (int dx = -1; dx <= 1; dx++) {
                int32_t xx = x + dx, yy = y + dy;
                size_t qq;

                if ((dx == 0 && dy == 0) || (conn == 4 && dx != 0 && dy != 0))
                    continue;
                if (xx < 0 || xx >= w || yy < 0 || yy >= h)
                    continue;
                qq = (size_t)yy * (size_t)w + (size_t)xx;
                if (msk[qq] && !out[qq]) {
                    out[qq] = msk[qq];
                    stack[top++] = qq;
                }
            }
        }
    }
    free(stack);
}

Test(mrecon_omp, single_seed_in_a_large_maze_matches_flood_fill)
{
    /* One seed in a 1500x1500 random binary maze just above the percolation threshold (seeded
     * mode, so no scans help; most pixels are reached through a single path): the result
     * equals a flood fill of the seed's component, with 4- and 8-connectivity. */
    for (int c = 0; c < 2; c++) {
        int32_t n = 1500;
        int conn = c ? 4 : 8;
        uint32_t dens = c ? 62 : 45; /* percent open: thresholds 59.3 (4-conn), 40.7 (8-conn) */
        size_t npx = (size_t)n * (size_t)n, seed = npx / 2 + (size_t)n / 2;
        uint32_t *msk = malloc(npx * sizeof *msk), *mrk = calloc(npx, sizeof *mrk);
        uint32_t *want = malloc(npx * sizeof *want), s32;
        uint64_t rng = 4242 + (uint64_t)c;
        run_cfg cfg = {1, 0, 0, 0, 0};
        size_t reached = 0;

        cr_assert(msk && mrk && want);
        for (size_t k = 0; k < npx; k++)
            msk[k] = twtest_rnd(&rng, 100) < dens ? 200 : 0;
        msk[seed] = 200;
        flood_fill(want, msk, n, n, conn, seed);
        for (size_t k = 0; k < npx; k++)
            reached += want[k] != 0;
        cr_assert(gt(sz, reached, npx / 10), "the seed's component is too small to test");
        mrk[seed] = 200;
        s32 = (uint32_t)seed;
        run_and_check(mrk, msk, n, n, TW_U8, conn, &s32, 1, &cfg, want, "maze wave");
        free(msk);
        free(mrk);
        free(want);
    }
}

Test(mrecon_omp, queue_grows_while_wrapped_without_dropping)
{
    /* 4200 one-pixel corridors, each seeded at its top and forking in two halfway down: the
     * queue starts with 4200 pixels (capacity 8192), the fork doubles the wavefront to 8400
     * while the ring has wrapped, so the queue grows mid-flight. Every pixel has a single
     * path from its seed: a pixel lost in the growth would leave a corridor at zero. */
    enum { K = 4200, W = 4 * K, H = 40, FORK = 10 };
    size_t npx = (size_t)W * H;
    uint32_t *msk = calloc(npx, sizeof *msk), *mrk = calloc(npx, sizeof *mrk);
    uint32_t *seeds = malloc(K * sizeof *seeds);

    cr_assert(msk && mrk && seeds);
    for (int k = 0; k < K; k++) {
        for (int y = 0; y < H; y++) {
            msk[(size_t)y * W + 4 * (size_t)k] = 200;
            if (y >= FORK)
                msk[(size_t)y * W + 4 * (size_t)k + 2] = 200;
        }
        msk[(size_t)FORK * W + 4 * (size_t)k + 1] = 200;
        mrk[4 * (size_t)k] = 200;
        seeds[k] = 4 * (uint32_t)k;
    }
    for (int conn = 4; conn <= 8; conn += 4) {
        run_cfg cfg = {1, 0, 0, 0, 0};

        /* every open pixel is reached: the result is the mask itself */
        run_and_check(mrk, msk, W, H, TW_U8, conn, seeds, K, &cfg, msk, "forking corridors");
        run_and_check(mrk, msk, W, H, TW_U16, conn, seeds, K, &cfg, msk, "forking corridors");
    }
    free(msk);
    free(mrk);
    free(seeds);
}

Test(mrecon_omp, fine_grids_cross_many_borders)
{
    /* Serpentine and noise masks on grids of 1-pixel-wide micro-tiles up to 40x40 grids:
     * propagation crosses micro-tile borders (and 8-connected corners) in many rounds and
     * still gives the reference bytes. */
    uint64_t rng = 77;

    for (int c = 0; c < 40; c++) {
        int32_t w = 2 + (int32_t)twtest_rnd(&rng, 40), h = 2 + (int32_t)twtest_rnd(&rng, 40);
        size_t npx = (size_t)w * (size_t)h;
        int conn = c % 2 ? 4 : 8, mk = c % 4 < 2 ? MASK_SERPENTINE : MASK_NOISE;
        tw_sample_type t = c % 3 ? TW_U8 : TW_U16;
        uint32_t maxv = t == TW_U8 ? 255 : 65535;
        uint32_t *msk = malloc(npx * sizeof *msk), *J0 = malloc(npx * sizeof *J0);
        uint32_t *want = malloc(npx * sizeof *want);
        /* one thread for the many-round 1-pixel grids: a team on an oversubscribed machine
         * (ctest -j) pays a scheduler slice per barrier */
        run_cfg cfg = {1, w, h, 0, 0};

        cr_assert(msk && J0 && want);
        gen_mask(msk, w, h, maxv, mk, &rng);
        gen_marker(J0, msk, w, h, maxv, MARK_SINGLE, &rng);
        memcpy(want, J0, npx * sizeof *want);
        ref_recon(want, msk, w, h, conn);
        run_and_check(J0, msk, w, h, t, conn, NULL, 0, &cfg, want, "1-pixel micro-tiles");
        cfg.nthreads = 2 + c % 2;
        cfg.gx = 1 + (int32_t)twtest_rnd(&rng, 6);
        cfg.gy = 1 + (int32_t)twtest_rnd(&rng, 6);
        run_and_check(J0, msk, w, h, t, conn, NULL, 0, &cfg, want, "random grid");
        free(msk);
        free(J0);
        free(want);
    }
}

Test(mrecon_omp, hand_checked_small_cases)
{
    /* Tiny cases worked out by hand: a 1x5 line, a 3x3 cross where 4- and 8-connectivity
     * differ (the diagonal pixel is reached only with 8), and a 1x1 tile. */
    uint32_t line_i[5] = {9, 7, 3, 8, 8}, line_j[5] = {0, 0, 0, 0, 6};
    uint32_t line_want[5] = {3, 3, 3, 6, 6};
    /* mask: centre column and row low except a diagonal path */
    uint32_t sq_i[9] = {5, 0, 0,
                        0, 5, 0,
                        0, 0, 5};
    uint32_t sq_j[9] = {5, 0, 0,
                        0, 0, 0,
                        0, 0, 0};
    uint32_t sq_want8[9] = {5, 0, 0,
                            0, 5, 0,
                            0, 0, 5};
    uint32_t one_i[1] = {4}, one_j[1] = {2};
    run_cfg cfg = {1, 0, 0, 0, 0};

    run_and_check(line_j, line_i, 5, 1, TW_U8, 4, NULL, 0, &cfg, line_want, "line");
    run_and_check(line_j, line_i, 1, 5, TW_U16, 8, NULL, 0, &cfg, line_want, "column");
    run_and_check(sq_j, sq_i, 3, 3, TW_U8, 8, NULL, 0, &cfg, sq_want8, "diagonal 8");
    run_and_check(sq_j, sq_i, 3, 3, TW_U8, 4, NULL, 0, &cfg, sq_j, "diagonal 4");
    run_and_check(one_j, one_i, 1, 1, TW_U8, 8, NULL, 0, &cfg, one_j, "1x1");
    cfg.gx = 3;
    cfg.gy = 3;
    cfg.nthreads = 2;
    run_and_check(sq_j, sq_i, 3, 3, TW_U16, 8, NULL, 0, &cfg, sq_want8, "diagonal 8, 3x3 grid");
    run_and_check(sq_j, sq_i, 3, 3, TW_U16, 4, NULL, 0, &cfg, sq_j, "diagonal 4, 3x3 grid");
}

/* ---- arguments ------------------------------------------------------------------------------ */

Test(mrecon_omp, rejects_bad_arguments)
{
    /* NULL views, mismatched sizes / types, channels != 1, unsupported types, bad conn,
     * out-of-range or negative seed counts, strides too small or misaligned: TW_E_INVALID,
     * and the marker is left alone. Empty tiles are a no-op. */
    uint16_t j[4 * 3], i[4 * 3];
    tw_tile_view vj = {j, 8, 4, 3, 1, TW_U16, 0, 0};
    tw_tile_view vi = {i, 8, 4, 3, 1, TW_U16, 0, 0};
    tw_tile_view a, b;
    uint32_t good_seed = 11, bad_seed = 12;

    for (int k = 0; k < 12; k++) {
        j[k] = 1;
        i[k] = 9;
    }
    cr_assert(eq(int, twi_omp_mrecon(NULL, &vi, 8, NULL, 0, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_mrecon(&vj, NULL, 8, NULL, 0, 1), TW_E_INVALID));
    for (int conn = -1; conn <= 9; conn++) {
        if (conn != 4 && conn != 8)
            cr_assert(eq(int, twi_omp_mrecon(&vj, &vi, conn, NULL, 0, 1), TW_E_INVALID),
                      "conn %d", conn);
    }
    b = vi, b.w = 3;
    cr_assert(eq(int, twi_omp_mrecon(&vj, &b, 8, NULL, 0, 1), TW_E_INVALID));
    b = vi, b.h = 2;
    cr_assert(eq(int, twi_omp_mrecon(&vj, &b, 8, NULL, 0, 1), TW_E_INVALID));
    b = vi, b.type = TW_U8;
    cr_assert(eq(int, twi_omp_mrecon(&vj, &b, 8, NULL, 0, 1), TW_E_INVALID));
    b = vi, b.channels = 3;
    cr_assert(eq(int, twi_omp_mrecon(&vj, &b, 8, NULL, 0, 1), TW_E_INVALID));
    a = vj, a.channels = 2, b = vi, b.channels = 2;
    cr_assert(eq(int, twi_omp_mrecon(&a, &b, 8, NULL, 0, 1), TW_E_INVALID));
    a = vj, a.type = TW_U32, a.w = 2, b = vi, b.type = TW_U32, b.w = 2;
    cr_assert(eq(int, twi_omp_mrecon(&a, &b, 8, NULL, 0, 1), TW_E_INVALID));
    a = vj, a.type = TW_F32, a.w = 2, b = vi, b.type = TW_F32, b.w = 2;
    cr_assert(eq(int, twi_omp_mrecon(&a, &b, 8, NULL, 0, 1), TW_E_INVALID));
    a = vj, a.type = (tw_sample_type)0, b = vi, b.type = (tw_sample_type)0;
    cr_assert(eq(int, twi_omp_mrecon(&a, &b, 8, NULL, 0, 1), TW_E_INVALID));
    a = vj, a.stride = 6;
    cr_assert(eq(int, twi_omp_mrecon(&a, &vi, 8, NULL, 0, 1), TW_E_INVALID)); /* too small */
    b = vi, b.stride = 9;
    cr_assert(eq(int, twi_omp_mrecon(&vj, &b, 8, NULL, 0, 1), TW_E_INVALID)); /* misaligned */
    a = vj, a.data = (uint8_t *)(void *)j + 1;
    cr_assert(eq(int, twi_omp_mrecon(&a, &vi, 8, NULL, 0, 1), TW_E_INVALID));
    a = vj, a.data = NULL;
    cr_assert(eq(int, twi_omp_mrecon(&a, &vi, 8, NULL, 0, 1), TW_E_INVALID));
    b = vi, b.data = NULL;
    cr_assert(eq(int, twi_omp_mrecon(&vj, &b, 8, NULL, 0, 1), TW_E_INVALID));
    a = vj, a.w = -1, b = vi, b.w = -1;
    cr_assert(eq(int, twi_omp_mrecon(&a, &b, 8, NULL, 0, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_mrecon(&vj, &vi, 8, &bad_seed, 1, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_mrecon(&vj, &vi, 8, &good_seed, -1, 1), TW_E_INVALID));
    cr_assert(eq(int, twi_omp_mrecon_grid(&vj, &vi, 8, NULL, 0, 2, 0, 2), TW_E_INVALID));
    for (int k = 0; k < 12; k++)
        cr_assert(eq(u16, j[k], 1), "marker changed by a rejected call at %d", k);

    /* a valid seed list works, and so does the whole tile */
    cr_assert(eq(int, twi_omp_mrecon(&vj, &vi, 8, &good_seed, 1, 1), TW_OK));
    cr_assert(eq(int, twi_omp_mrecon(&vj, &vi, 4, NULL, 0, 2), TW_OK));
    /* empty tiles: no-op, data may be NULL */
    a = vj, a.w = 0, a.data = NULL, b = vi, b.w = 0, b.data = NULL;
    cr_assert(eq(int, twi_omp_mrecon(&a, &b, 8, NULL, 0, 2), TW_OK));
    a = vj, a.h = 0, b = vi, b.h = 0;
    cr_assert(eq(int, twi_omp_mrecon(&a, &b, 4, NULL, 0, 1), TW_OK));
    cr_assert(eq(int, twi_omp_mrecon(&a, &b, 4, &good_seed, 1, 1), TW_E_INVALID));
}
