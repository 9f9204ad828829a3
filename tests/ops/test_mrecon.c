/* SPDX-License-Identifier: MIT */
/* tilewave tests: reconstruction across tiles and the filters built on it, vs naive references. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilewave.h"
#include "twtest.h"

/*
 * Images are handled here as uint16_t arrays whatever their sample type (8-bit values stay
 * below 256) and packed into u8 or u16 buffers, with padded strides now and then, for the API.
 * The references are deliberately naive: sweeps of the pixel update over the whole image until
 * nothing changes, flood fills, window minima by brute force.
 */

/* ---- one stream of the tests' generator (twtest_rnd.h) for the whole file */
static uint64_t rng_state;

static uint64_t
rnd(void)
{
    return twtest_xorshift(&rng_state);
}

/* Uniform in [lo, hi]. */
static int64_t
rndi(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

/* ---- naive references */

static const int NB8[8][2] = {{-1, -1}, {0, -1}, {1, -1}, {-1, 0}, {1, 0}, {-1, 1}, {0, 1}, {1, 1}};
static const int NB4[4][2] = {{0, -1}, {-1, 0}, {1, 0}, {0, 1}};

/* Reconstruction by dilation (erode = false) or erosion, in place on j, by sweeps of
 * j(p) = min(max(j over p and its neighbours), i(p)) (dual for erosion) until stable. */
static void
naive_recon(uint16_t *j, const uint16_t *im, int64_t w, int64_t h, int conn, bool erode)
{
    const int(*nb)[2] = conn == 8 ? NB8 : NB4;
    bool changed = true;

    while (changed) {
        changed = false;
        for (int pass = 0; pass < 2; pass++) {
            for (int64_t k = 0; k < w * h; k++) {
                int64_t p = pass ? w * h - 1 - k : k, x = p % w, y = p / w;
                unsigned v = j[p], e = v;

                for (int n = 0; n < conn; n++) {
                    int64_t qx = x + nb[n][0], qy = y + nb[n][1];
                    if (qx < 0 || qy < 0 || qx >= w || qy >= h)
                        continue;
                    unsigned q = j[qy * w + qx];
                    if (erode ? q < e : q > e)
                        e = q;
                }
                if (erode ? e < im[p] : e > im[p])
                    e = im[p];
                if (e != v) {
                    j[p] = (uint16_t)e;
                    changed = true;
                }
            }
        }
    }
}

/* Minimum (or maximum) over the (2r+1)-square clipped to the image, by brute force. */
static void
naive_square(const uint16_t *in, uint16_t *out, int64_t w, int64_t h, int r, bool max)
{
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
            unsigned e = in[y * w + x];
            for (int64_t yy = y - r; yy <= y + r; yy++)
                for (int64_t xx = x - r; xx <= x + r; xx++) {
                    if (xx < 0 || yy < 0 || xx >= w || yy >= h)
                        continue;
                    unsigned v = in[yy * w + xx];
                    if (max ? v > e : v < e)
                        e = v;
                }
            out[y * w + x] = (uint16_t)e;
        }
}

/* Binary fill holes: background pixels (0) not reached from the border through background
 * (conn-connected) become v. */
static void
naive_fill_binary(const uint16_t *in, uint16_t *out, int64_t w, int64_t h, int conn, unsigned v)
{
    const int(*nb)[2] = conn == 8 ? NB8 : NB4;
    int64_t n = w * h, head = 0, tail = 0;
    int64_t *q = malloc((size_t)n * sizeof *q);
    char *seen = calloc((size_t)n, 1);

    for (int64_t p = 0; p < n; p++) {
        int64_t x = p % w, y = p / w;
        if (in[p] == 0 && (x == 0 || y == 0 || x == w - 1 || y == h - 1)) {
            seen[p] = 1;
            q[tail++] = p;
        }
    }
    while (head < tail) {
        int64_t p = q[head++], x = p % w, y = p / w;
        for (int k = 0; k < conn; k++) {
            int64_t qx = x + nb[k][0], qy = y + nb[k][1];
            if (qx < 0 || qy < 0 || qx >= w || qy >= h)
                continue;
            int64_t r = qy * w + qx;
            if (!seen[r] && in[r] == 0) {
                seen[r] = 1;
                q[tail++] = r;
            }
        }
    }
    for (int64_t p = 0; p < n; p++)
        out[p] = in[p] == 0 && !seen[p] ? (uint16_t)v : in[p];
    free(q);
    free(seen);
}

/* Regional maxima by flooding each plateau: 1 where the plateau has no neighbour >= it... that
 * is, no neighbour of equal value outside it (impossible) and none higher. */
static void
naive_regional_max(const uint16_t *in, uint8_t *out, int64_t w, int64_t h, int conn)
{
    const int(*nb)[2] = conn == 8 ? NB8 : NB4;
    int64_t n = w * h;
    int64_t *q = malloc((size_t)n * sizeof *q);
    char *seen = calloc((size_t)n, 1);
    unsigned lo = 65535, hi = 0;

    for (int64_t p = 0; p < n; p++) {
        lo = in[p] < lo ? in[p] : lo;
        hi = in[p] > hi ? in[p] : hi;
    }
    memset(out, 0, (size_t)n);
    for (int64_t s = 0; s < n; s++) {
        if (seen[s])
            continue;
        int64_t head = 0, tail = 0;
        bool is_max = true;
        seen[s] = 1;
        q[tail++] = s;
        while (head < tail) {
            int64_t p = q[head++], x = p % w, y = p / w;
            for (int k = 0; k < conn; k++) {
                int64_t qx = x + nb[k][0], qy = y + nb[k][1];
                if (qx < 0 || qy < 0 || qx >= w || qy >= h)
                    continue;
                int64_t r = qy * w + qx;
                if (in[r] > in[s])
                    is_max = false;
                else if (in[r] == in[s] && !seen[r]) {
                    seen[r] = 1;
                    q[tail++] = r;
                }
            }
        }
        if (is_max && lo != hi)
            for (int64_t k = 0; k < tail; k++)
                out[q[k]] = 1;
    }
    free(q);
    free(seen);
}

/* ---- images for the API */

typedef struct packed {
    void *buf;
    tw_host_image img;
} packed;

/* Options of a job on packed images: marker pj, mask pi, result pr, stats s (initialised). */
static void
opts_for(tw_mrecon_opts *o, const packed *pj, const packed *pi, const packed *pr, bool erode,
         int conn, int32_t tw, int32_t th, tw_mrecon_stats *s)
{
    tw_mrecon_opts_init(o);
    tw_mrecon_stats_init(s);
    o->marker_image = pj->img;
    o->mask_image = pi->img;
    o->result = pr->img;
    o->method = erode ? TW_MRECON_EROSION : TW_MRECON_DILATION;
    o->conn = conn;
    o->tile_w = tw;
    o->tile_h = th;
    o->stats = s;
}

/* Pack v (w x h) into a buffer of `type`, with a padded stride one time in three. */
static packed
pack(const uint16_t *v, int64_t w, int64_t h, tw_sample_type type)
{
    size_t ss = tw_sample_size(type), pad = rnd() % 3 == 0 ? (size_t)rndi(1, 7) * ss : 0;
    size_t stride = (size_t)w * ss + pad;
    packed p;

    p.buf = malloc(stride * (size_t)h + 1);
    memset(p.buf, 0xab, stride * (size_t)h + 1);
    p.img.data = p.buf;
    p.img.w = w;
    p.img.h = h;
    p.img.stride = pad || rnd() % 2 ? stride : 0;
    p.img.type = type;
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
            char *row = (char *)p.buf + (size_t)y * stride;
            if (type == TW_U8)
                ((uint8_t *)row)[x] = (uint8_t)v[y * w + x];
            else
                memcpy(row + x * 2, &v[y * w + x], 2);
        }
    return p;
}

static uint16_t *
unpack(const packed *p)
{
    int64_t w = p->img.w, h = p->img.h;
    size_t ss = tw_sample_size(p->img.type);
    size_t stride = p->img.stride ? p->img.stride : (size_t)w * ss;
    uint16_t *v = malloc((size_t)(w * h) * 2);

    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
            const char *row = (const char *)p->buf + (size_t)y * stride;
            if (p->img.type == TW_U8)
                v[y * w + x] = ((const uint8_t *)row)[x];
            else
                memcpy(&v[y * w + x], row + x * 2, 2);
        }
    return v;
}

static packed
blank(int64_t w, int64_t h, tw_sample_type type)
{
    uint16_t *z = calloc((size_t)(w * h), 2);
    packed p = pack(z, w, h, type);

    free(z);
    return p;
}

static tw_runtime *
make_runtime_team(int workers, int team)
{
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_error err;
    char n[16], t[16];

    snprintf(n, sizeof n, "%d", workers);
    snprintf(t, sizeof t, "%d", team);
    /* Four workers on a two-core machine share cores: expected, not worth a warning. */
    tw_log_set_level(TW_LOG_ERROR);
    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.gpus", "none", TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.cpu_workers", n, TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.cpu_team", t, TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_runtime_create(cfg, &rt, &err), TW_OK), "%s", err.message);
    tw_config_destroy(cfg);
    return rt;
}

static tw_runtime *
make_runtime(int workers)
{
    return make_runtime_team(workers, 1);
}

/* ---- random content */

/* A mask with structure: plain noise, smooth relief, two levels, a few levels, corridors. */
static void
gen_mask(uint16_t *im, int64_t w, int64_t h, unsigned maxv)
{
    int kind = (int)rndi(0, 4);
    int64_t n = w * h;

    for (int64_t p = 0; p < n; p++)
        im[p] = (uint16_t)rndi(0, maxv);
    if (kind == 1) {
        /* Box blurs turn noise into hills and valleys with long monotone paths. */
        uint16_t *t = malloc((size_t)n * 2);
        for (int it = 0; it < 3; it++) {
            for (int64_t y = 0; y < h; y++)
                for (int64_t x = 0; x < w; x++) {
                    uint64_t s = 0, c = 0;
                    for (int64_t yy = y - 2; yy <= y + 2; yy++)
                        for (int64_t xx = x - 2; xx <= x + 2; xx++)
                            if (xx >= 0 && yy >= 0 && xx < w && yy < h) {
                                s += im[yy * w + xx];
                                c++;
                            }
                    t[y * w + x] = (uint16_t)(s / c);
                }
            memcpy(im, t, (size_t)n * 2);
        }
        free(t);
    } else if (kind == 2) {
        unsigned v = (unsigned)rndi(1, maxv);
        int64_t density = rndi(20, 80);
        for (int64_t p = 0; p < n; p++)
            im[p] = rndi(0, 99) < density ? (uint16_t)v : 0;
    } else if (kind == 3) {
        for (int64_t p = 0; p < n; p++)
            im[p] = (uint16_t)(rndi(0, 3) * (maxv / 3));
    } else if (kind == 4) {
        /* Walls every k pixels with gaps: propagation snakes through many tiles. */
        int64_t k = rndi(2, 6);
        for (int64_t y = 0; y < h; y++)
            for (int64_t x = 0; x < w; x++) {
                bool wall = (y % k == 0 && rndi(0, 9) > 0) || (x % k == 0 && rndi(0, 9) > 0);
                im[y * w + x] = wall ? (uint16_t)rndi(0, maxv / 8) : (uint16_t)rndi(maxv / 2, maxv);
            }
    }
}

/* A marker below the mask (above it for erosion). */
static void
gen_marker(uint16_t *j, const uint16_t *im, int64_t w, int64_t h, unsigned maxv, bool erode)
{
    int kind = (int)rndi(0, 3);
    int64_t n = w * h;
    unsigned d = (unsigned)rndi(1, maxv);

    for (int64_t p = 0; p < n; p++) {
        unsigned i = im[p], v;
        switch (kind) {
        case 0: /* sparse seeds at the mask's value */
            v = erode ? maxv : 0;
            break;
        case 1: /* the mask shifted by d */
            v = erode ? (i + d > maxv ? maxv : i + d) : (i > d ? i - d : 0);
            break;
        case 2: /* anything on the right side of the mask */
            v = erode ? (unsigned)rndi(i, maxv) : (unsigned)rndi(0, i);
            break;
        default: /* constant */
            v = erode ? (d > i ? d : i) : (d < i ? d : i);
            break;
        }
        j[p] = (uint16_t)v;
    }
    if (kind == 0) {
        int64_t k = rndi(1, 1 + n / 50);
        for (int64_t s = 0; s < k; s++) {
            int64_t p = rndi(0, n - 1);
            j[p] = im[p];
        }
    }
}

/* A tile size for a w x h image: 1x1, 1xN, Nx1, anything up to beyond the image; at most
 * about 2000 tiles so that big images stay quick. */
static void
gen_tile(int64_t w, int64_t h, int32_t *tw, int32_t *th)
{
    for (;;) {
        int kind = (int)rndi(0, 5);
        int64_t a, b;
        switch (kind) {
        case 0: a = b = 1; break;
        case 1: a = 1; b = rndi(1, h + 3); break;
        case 2: a = rndi(1, w + 3); b = 1; break;
        case 3: a = rndi(w, w + 40); b = rndi(h, h + 40); break;
        default: a = rndi(1, w + 3); b = rndi(1, h + 3); break;
        }
        if (((w + a - 1) / a) * ((h + b - 1) / b) <= 2000) {
            *tw = (int32_t)a;
            *th = (int32_t)b;
            return;
        }
    }
}

static void
gen_size(int64_t *w, int64_t *h)
{
    switch (rndi(0, 9)) {
    case 0: *w = 1; *h = rndi(1, 200); break;
    case 1: *w = rndi(1, 300); *h = 1; break;
    case 2:
    case 3:
    case 4: *w = rndi(1, 12); *h = rndi(1, 12); break;
    case 5:
    case 6:
    case 7: *w = rndi(2, 80); *h = rndi(2, 80); break;
    default: *w = rndi(100, 300); *h = rndi(100, 200); break;
    }
}

/* ---- running jobs */

static tw_status
run_mrecon(tw_runtime *rt, tw_mrecon_opts *o, char *msg, size_t n)
{
    tw_job *job = NULL;
    tw_error err;
    tw_status st = tw_mrecon_submit(rt, o, &job, &err);

    if (st != TW_OK) {
        snprintf(msg, n, "%s", err.message);
        return st;
    }
    st = tw_job_wait(job, -1);
    if (st != TW_OK)
        snprintf(msg, n, "%s", tw_job_get_error(job) ? tw_job_get_error(job) : "?");
    tw_job_destroy(job);
    return st;
}

/* One random case: returns after asserting identical bytes. */
static void
random_case(tw_runtime *rt, int index)
{
    int64_t w, h;
    gen_size(&w, &h);
    tw_sample_type type = rnd() % 2 ? TW_U8 : TW_U16;
    unsigned maxv = type == TW_U8 ? 255 : 65535;
    int conn = rnd() % 2 ? 8 : 4;
    bool erode = rnd() % 2;
    int32_t tw, th;
    gen_tile(w, h, &tw, &th);
    uint16_t *im = malloc((size_t)(w * h) * 2), *j = malloc((size_t)(w * h) * 2);
    gen_mask(im, w, h, maxv);
    gen_marker(j, im, w, h, maxv, erode);

    packed pj = pack(j, w, h, type), pi = pack(im, w, h, type);
    /* Now and then the result goes into the marker's own buffer. */
    bool in_place = rnd() % 4 == 0;
    packed pr = in_place ? pj : blank(w, h, type);
    /* the inputs as given: a job never writes them (its tiles may be windows of them) */
    size_t mask_bytes = (pi.img.stride ? pi.img.stride : (size_t)w * tw_sample_size(type)) *
                        (size_t)h;
    size_t marker_bytes = (pj.img.stride ? pj.img.stride : (size_t)w * tw_sample_size(type)) *
                          (size_t)h;
    void *mask_before = malloc(mask_bytes), *marker_before = malloc(marker_bytes);
    memcpy(mask_before, pi.buf, mask_bytes);
    memcpy(marker_before, pj.buf, marker_bytes);
    tw_mrecon_opts o;
    tw_mrecon_stats stats;
    char msg[512] = "";
    opts_for(&o, &pj, &pi, &pr, erode, conn, tw, th, &stats);
    tw_status st = run_mrecon(rt, &o, msg, sizeof msg);
    cr_assert(eq(int, st, TW_OK), "case %d: %s", index, msg);
    cr_assert(memcmp(mask_before, pi.buf, mask_bytes) == 0, "case %d: the mask was written",
              index);
    cr_assert(in_place || memcmp(marker_before, pj.buf, marker_bytes) == 0,
              "case %d: the marker was written", index);
    free(mask_before);
    free(marker_before);

    naive_recon(j, im, w, h, conn, erode);
    uint16_t *got = unpack(&pr);
    for (int64_t p = 0; p < w * h; p++)
        if (got[p] != j[p])
            cr_assert(got[p] == j[p], "case %d: %lldx%lld %s conn %d %s tiles %dx%d: pixel (%lld, %lld) is "
                           "%u, want %u",
                           index, (long long)w, (long long)h, tw_sample_type_name(type), conn,
                           erode ? "erosion" : "dilation", tw, th, (long long)(p % w),
                           (long long)(p / w), got[p], j[p]);
    int64_t tiles = ((w + tw - 1) / tw) * ((h + th - 1) / th);
    cr_assert(eq(i64, stats.tiles, tiles));
    cr_assert(stats.rounds >= 1);
    cr_assert(eq(i64, stats.tp_tasks, stats.tp_cpu));
    cr_assert(stats.tp_tasks >= tiles);
    cr_assert(eq(i64, stats.tp_per_round[0], tiles));
    free(got);
    free(im);
    free(j);
    free(pj.buf);
    free(pi.buf);
    if (!in_place)
        free(pr.buf);
}

static void
random_cases(uint64_t seed, int workers, int n)
{
    tw_runtime *rt = make_runtime(workers);

    rng_state = seed;
    for (int i = 0; i < n; i++)
        random_case(rt, i);
    tw_runtime_destroy(rt);
}

TestSuite(mrecon, .timeout = TWTEST_TIMEOUT(300));

/* Each of these runs 300 random cases (sizes 1x1 to 300x200, 8 and 16 bits, 4 and 8
 * connectivity, dilation and erosion, tiles from 1x1 to beyond the image) on 1 to 4 CPU
 * workers through the in-memory API and checks the bytes against the naive reference:
 * 2,400 cases in all. */
Test(mrecon, random_cases_one_worker_a)
{
    random_cases(101, 1, 300);
}

Test(mrecon, random_cases_one_worker_b)
{
    random_cases(102, 1, 300);
}

Test(mrecon, random_cases_two_workers_a)
{
    random_cases(201, 2, 300);
}

Test(mrecon, random_cases_two_workers_b)
{
    random_cases(202, 2, 300);
}

Test(mrecon, random_cases_three_workers_a)
{
    random_cases(301, 3, 300);
}

Test(mrecon, random_cases_three_workers_b)
{
    random_cases(302, 3, 300);
}

Test(mrecon, random_cases_four_workers_a)
{
    random_cases(401, 4, 300);
}

Test(mrecon, random_cases_four_workers_b)
{
    random_cases(402, 4, 300);
}

Test(mrecon, openmp_teams_inside_large_tiles_give_the_same_bytes)
{
    /* Workers with a team of 2 cores run the kernel's micro-tile mode on tiles of 256x256 and
     * more; across tiles and inside them the result equals the naive reference. */
    tw_runtime *rt = make_runtime_team(1, 2);
    int32_t tiles[][2] = {{512, 512}, {700, 500}, {300, 400}, {256, 300}};

    rng_state = 17;
    for (int k = 0; k < 8; k++) {
        int64_t w = 700, h = 500, n = w * h;
        tw_sample_type type = k % 2 ? TW_U16 : TW_U8;
        unsigned maxv = type == TW_U8 ? 255 : 65535;
        int conn = (k / 2) % 2 ? 4 : 8;
        bool erode = k >= 4;
        uint16_t *im = malloc((size_t)n * 2), *j = malloc((size_t)n * 2);
        gen_mask(im, w, h, maxv);
        gen_marker(j, im, w, h, maxv, erode);
        packed pj = pack(j, w, h, type), pi = pack(im, w, h, type), pr = blank(w, h, type);
        tw_mrecon_opts o;
        char msg[512];
        tw_mrecon_opts_init(&o);
        o.marker_image = pj.img;
        o.mask_image = pi.img;
        o.result = pr.img;
        o.method = erode ? TW_MRECON_EROSION : TW_MRECON_DILATION;
        o.conn = conn;
        o.tile_w = tiles[k % 4][0];
        o.tile_h = tiles[k % 4][1];
        cr_assert(eq(int, run_mrecon(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
        naive_recon(j, im, w, h, conn, erode);
        uint16_t *got = unpack(&pr);
        cr_assert(memcmp(got, j, (size_t)n * 2) == 0, "case %d differs", k);
        free(got);
        free(im);
        free(j);
        free(pj.buf);
        free(pi.buf);
        free(pr.buf);
    }
    tw_runtime_destroy(rt);
}

Test(mrecon, any_tiling_gives_the_same_bytes)
{
    /* One structured 16-bit case under every tile shape family, 1x1 included, gives the same
     * bytes as the whole image in one tile. */
    tw_runtime *rt = make_runtime(3);
    int64_t w = 37, h = 23;
    uint16_t im[37 * 23], j[37 * 23];
    int32_t tiles[][2] = {{1, 1}, {1, 23}, {37, 1}, {1, 7}, {5, 1}, {4, 4}, {10, 7}, {36, 22},
                          {37, 23}, {100, 100}, {2, 23}, {37, 2}};

    rng_state = 7;
    gen_mask(im, w, h, 65535);
    for (int64_t p = 0; p < w * h; p++)
        j[p] = 0;
    j[0] = im[0];
    j[w * h - 1] = im[w * h - 1];
    naive_recon(j, im, w, h, 8, false);
    for (size_t k = 0; k < sizeof tiles / sizeof tiles[0]; k++) {
        uint16_t z[37 * 23] = {0};
        z[0] = im[0];
        z[w * h - 1] = im[w * h - 1];
        packed pj = pack(z, w, h, TW_U16), pi = pack(im, w, h, TW_U16), pr = blank(w, h, TW_U16);
        tw_mrecon_opts o;
        char msg[512];
        tw_mrecon_opts_init(&o);
        o.marker_image = pj.img;
        o.mask_image = pi.img;
        o.result = pr.img;
        o.tile_w = tiles[k][0];
        o.tile_h = tiles[k][1];
        cr_assert(eq(int, run_mrecon(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
        uint16_t *got = unpack(&pr);
        cr_assert(memcmp(got, j, sizeof j) == 0, "tiles %dx%d differ", tiles[k][0], tiles[k][1]);
        free(got);
        free(pj.buf);
        free(pi.buf);
        free(pr.buf);
    }
    tw_runtime_destroy(rt);
}

/* One reconstruction of random images on rt: the result and the statistics. */
static uint16_t *
team_case(tw_runtime *rt, const uint16_t *j, const uint16_t *im, int64_t w, int64_t h,
          tw_sample_type type, int conn, bool erode, int32_t tw, int32_t th, tw_mrecon_stats *s)
{
    packed pj = pack(j, w, h, type), pi = pack(im, w, h, type), pr = blank(w, h, type);
    tw_mrecon_opts o;
    char msg[512];
    uint16_t *got;

    opts_for(&o, &pj, &pi, &pr, erode, conn, tw, th, s);
    cr_assert(eq(int, run_mrecon(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
    got = unpack(&pr);
    free(pj.buf);
    free(pi.buf);
    free(pr.buf);
    return got;
}

Test(mrecon, border_propagation_on_a_team_gives_the_same_bytes_and_seeds)
{
    /* BP runs on the cores of the idle workers (its kind is a team kind): with 4 workers and
     * grids of many small tiles (7x5 tiles, up to 80x60 tiles of 3x3 to 9x9 pixels), random
     * images, 8- and 4-connectivity, the result equals the naive reference, and the rounds,
     * seeds and pairs compared equal those of one worker: BP's order does not depend on the
     * size of its team. */
    tw_runtime *rt1 = make_runtime(1), *rt4 = make_runtime(4);

    rng_state = 2501;
    for (int k = 0; k < 24; k++) {
        bool big = k % 3 == 2;
        int32_t tw = (int32_t)rndi(3, 9), th = (int32_t)rndi(3, 9);
        int64_t w = (big ? rndi(40, 80) : 7) * tw - rndi(0, tw - 1);
        int64_t h = (big ? rndi(30, 60) : 5) * th - rndi(0, th - 1), n = w * h;
        tw_sample_type type = k % 2 ? TW_U16 : TW_U8;
        unsigned maxv = type == TW_U8 ? 255 : 65535;
        int conn = k % 4 < 3 ? 8 : 4;
        bool erode = k % 5 == 4;
        uint16_t *im = malloc((size_t)n * 2), *j = malloc((size_t)n * 2), *a, *b;
        tw_mrecon_stats sa, sb;

        gen_mask(im, w, h, maxv);
        gen_marker(j, im, w, h, maxv, erode);
        a = team_case(rt1, j, im, w, h, type, conn, erode, tw, th, &sa);
        b = team_case(rt4, j, im, w, h, type, conn, erode, tw, th, &sb);
        naive_recon(j, im, w, h, conn, erode);
        cr_assert(memcmp(a, j, (size_t)n * 2) == 0, "case %d: one worker differs", k);
        cr_assert(memcmp(b, j, (size_t)n * 2) == 0, "case %d: 4 workers differ (%lldx%lld, "
                  "tiles %dx%d, conn %d)", k, (long long)w, (long long)h, tw, th, conn);
        cr_assert(eq(i64, sb.rounds, sa.rounds), "case %d", k);
        cr_assert(eq(i64, sb.seeds, sa.seeds), "case %d", k);
        cr_assert(eq(i64, sb.pairs_compared, sa.pairs_compared), "case %d", k);
        cr_assert(eq(i64, sb.tp_tasks, sa.tp_tasks), "case %d", k);
        free(a);
        free(b);
        free(im);
        free(j);
    }
    tw_runtime_destroy(rt1);
    tw_runtime_destroy(rt4);
}

/* A 20x10 case with two marker pixels above the mask, the later one in its own tile. */
static void
violation_case(bool erode, bool clamp, char *msg, size_t n, tw_status *st, uint16_t *out)
{
    tw_runtime *rt = make_runtime(2);
    uint16_t im[200], j[200];
    for (int p = 0; p < 200; p++) {
        im[p] = (uint16_t)(100 + p % 50);
        j[p] = erode ? 255 : 0;
    }
    /* (12, 7) and (3, 8): raster order puts (12, 7) first. */
    j[7 * 20 + 12] = erode ? 50 : 200;
    j[8 * 20 + 3] = erode ? 10 : 250;
    packed pj = pack(j, 20, 10, TW_U8), pi = pack(im, 20, 10, TW_U8), pr = blank(20, 10, TW_U8);
    tw_mrecon_opts o;
    tw_mrecon_opts_init(&o);
    o.marker_image = pj.img;
    o.mask_image = pi.img;
    o.result = pr.img;
    o.method = erode ? TW_MRECON_EROSION : TW_MRECON_DILATION;
    o.clamp_marker = clamp;
    o.tile_w = 4;
    o.tile_h = 3;
    *st = run_mrecon(rt, &o, msg, n);
    if (out) {
        uint16_t *got = unpack(&pr);
        memcpy(out, got, sizeof im);
        free(got);
        for (int p = 0; p < 200; p++)
            j[p] = erode ? (j[p] < im[p] ? im[p] : j[p]) : (j[p] > im[p] ? im[p] : j[p]);
        naive_recon(j, im, 20, 10, 8, erode);
        cr_assert(memcmp(out, j, sizeof j) == 0, "clamped result differs");
    }
    free(pj.buf);
    free(pi.buf);
    free(pr.buf);
    tw_runtime_destroy(rt);
}

Test(mrecon, the_caller_images_are_the_tiles_when_they_can_be)
{
    /* Reconstruction on caller buffers: the tiles are windows of the mask and result images
     * (runtime/tile.c, "Wrapped tiles"), so the runtime's tile memory stays under one image;
     * the cases that cannot wrap copy as before (the result in the mask's buffer, a 16-bit
     * image with an odd stride, erosion's complemented tiles, a host budget,
     * runtime.caller_memory = copy). Every case
     * equals the naive reference and leaves its inputs as they were. */
    const int64_t w = 301, h = 203;
    uint16_t *im = malloc((size_t)(w * h) * 2), *j = malloc((size_t)(w * h) * 2);

    rng_state = 77;
    for (int c = 0; c < 7; c++) {
        bool u16 = c == 2 || c == 5, erode = c == 3, on_mask = c == 1, budget = c >= 4 && c != 5;
        tw_sample_type type = u16 ? TW_U16 : TW_U8;
        size_t ss = tw_sample_size(type), stride = (size_t)w * ss + (c == 2 ? 1 : 6);
        unsigned maxv = u16 ? 65535 : 255;
        char *buf[3], *before[2];
        tw_runtime *rt;

        if (budget) {
            tw_config *cfg = NULL;
            tw_error err;

            cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
            cr_assert(eq(int, tw_config_set(cfg, "runtime.gpus", "none", TW_CONFIG_SET, NULL),
                         TW_OK));
            cr_assert(eq(int, tw_config_set(cfg, "runtime.cpu_workers", "2", TW_CONFIG_SET,
                                            NULL), TW_OK));
            cr_assert(eq(int, tw_config_set(cfg, c == 4 ? "runtime.host_mem"
                                                        : "runtime.caller_memory",
                                            c == 4 ? "64M" : "copy", TW_CONFIG_SET, NULL),
                         TW_OK));
            cr_assert(eq(int, tw_runtime_create(cfg, &rt, &err), TW_OK), "%s", err.message);
            tw_config_destroy(cfg);
        } else {
            rt = make_runtime(2);
        }
        gen_mask(im, w, h, maxv);
        gen_marker(j, im, w, h, maxv, erode);
        for (int b = 0; b < 3; b++) {
            buf[b] = calloc(stride * (size_t)h, 1);
            for (int64_t y = 0; y < h; y++)
                for (int64_t x = 0; x < w && b < 2; x++) {
                    uint16_t v = b == 0 ? j[y * w + x] : im[y * w + x];

                    if (u16)
                        memcpy(buf[b] + (size_t)y * stride + (size_t)x * 2, &v, 2);
                    else
                        buf[b][(size_t)y * stride + (size_t)x] = (char)v;
                }
        }
        for (int b = 0; b < 2; b++) {
            before[b] = malloc(stride * (size_t)h);
            memcpy(before[b], buf[b], stride * (size_t)h);
        }
        tw_mrecon_opts o;
        char msg[512] = "";
        tw_memory_info mi;

        tw_mrecon_opts_init(&o);
        o.marker_image = (tw_host_image){buf[0], w, h, stride, type};
        o.mask_image = (tw_host_image){buf[1], w, h, stride, type};
        o.result = (tw_host_image){on_mask ? buf[1] : buf[2], w, h, stride, type};
        o.method = erode ? TW_MRECON_EROSION : TW_MRECON_DILATION;
        o.tile_w = 64;
        o.tile_h = 48;
        cr_assert(eq(int, run_mrecon(rt, &o, msg, sizeof msg), TW_OK), "case %d: %s", c, msg);
        cr_assert(eq(int, tw_runtime_get_memory(rt, &mi), TW_OK));
        naive_recon(j, im, w, h, 8, erode);
        for (int64_t y = 0; y < h; y++)
            for (int64_t x = 0; x < w; x++) {
                const char *p = (on_mask ? buf[1] : buf[2]) + (size_t)y * stride + (size_t)x * ss;
                uint16_t got = 0;

                if (u16)
                    memcpy(&got, p, 2);
                else
                    got = (uint8_t)*p;
                if (got != j[y * w + x])
                    cr_assert(got == j[y * w + x], "case %d: pixel (%lld, %lld) is %u, want %u", c,
                              (long long)x, (long long)y, got, j[y * w + x]);
            }
        cr_assert(memcmp(before[0], buf[0], stride * (size_t)h) == 0, "case %d: marker written",
                  c);
        cr_assert(on_mask || memcmp(before[1], buf[1], stride * (size_t)h) == 0,
                  "case %d: mask written", c);
        /* wrapped: only the small tiles of border seeds; copied: marker and mask tiles */
        if (c == 0 || c == 5)
            cr_assert(mi.host_peak < w * h, "case %d: host_peak %lld", c, (long long)mi.host_peak);
        else if (c != 4)
            cr_assert(mi.host_peak >= 2 * w * h * (int64_t)ss, "case %d: host_peak %lld", c,
                      (long long)mi.host_peak);
        for (int b = 0; b < 3; b++)
            free(buf[b]);
        free(before[0]);
        free(before[1]);
        tw_runtime_destroy(rt);
    }
    free(im);
    free(j);
}

Test(mrecon, marker_above_mask_names_the_first_pixel)
{
    /* A marker above the mask fails the job naming the first such pixel in raster order
     * (below, for erosion), with the original values. */
    char msg[512] = "";
    tw_status st;

    violation_case(false, false, msg, sizeof msg, &st, NULL);
    cr_assert(eq(int, st, TW_E_INVALID));
    cr_assert(eq(str, msg, "mrecon: marker 200 above mask 102 at (12, 7)"));
    violation_case(true, false, msg, sizeof msg, &st, NULL);
    cr_assert(eq(int, st, TW_E_INVALID));
    cr_assert(eq(str, msg, "mrecon: marker 50 below mask 102 at (12, 7)"));
}

Test(mrecon, clamp_marker_clamps_instead)
{
    /* With clamp_marker the same inputs succeed and give the reconstruction of the clamped
     * marker. */
    char msg[512] = "";
    tw_status st;
    uint16_t out[200];

    violation_case(false, true, msg, sizeof msg, &st, out);
    cr_assert(eq(int, st, TW_OK), "%s", msg);
    violation_case(true, true, msg, sizeof msg, &st, out);
    cr_assert(eq(int, st, TW_OK), "%s", msg);
}

Test(mrecon, bad_arguments_are_refused)
{
    /* Different sizes, different types, a bad connectivity, a result of the wrong size or
     * type, no output, options not initialised: TW_E_INVALID with a message. */
    tw_runtime *rt = make_runtime(1);
    uint16_t z[12] = {0};
    packed a = pack(z, 4, 3, TW_U8), b = pack(z, 3, 4, TW_U8), c = pack(z, 4, 3, TW_U16);
    packed r = blank(4, 3, TW_U8);
    tw_mrecon_opts o;
    tw_job *job = NULL;
    tw_error err;

    tw_mrecon_opts_init(&o);
    o.marker_image = a.img;
    o.mask_image = b.img;
    o.result = r.img;
    cr_assert(eq(int, tw_mrecon_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(eq(str, err.message, "mrecon: marker is 4x3 but mask is 3x4"));
    o.mask_image = c.img;
    cr_assert(eq(int, tw_mrecon_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(eq(str, err.message, "mrecon: marker is u8 but mask is u16"));
    o.mask_image = a.img;
    o.conn = 5;
    cr_assert(eq(int, tw_mrecon_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(eq(str, err.message, "mrecon: connectivity 5 (4 or 8)"));
    o.conn = 8;
    o.result = c.img;
    cr_assert(eq(int, tw_mrecon_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "result image") != NULL, "%s", err.message);
    o.result.data = NULL;
    cr_assert(eq(int, tw_mrecon_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "no output") != NULL, "%s", err.message);
    o.marker_image.data = NULL;
    o.result = r.img;
    cr_assert(eq(int, tw_mrecon_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "no marker") != NULL, "%s", err.message);
    o.struct_size = 0;
    cr_assert(eq(int, tw_mrecon_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(job == NULL);
    free(a.buf);
    free(b.buf);
    free(c.buf);
    free(r.buf);
    tw_runtime_destroy(rt);
}

/* ---- the filters */

typedef tw_status (*filter_fn)(tw_runtime *, const tw_mrecon_filter_opts *, tw_job **, tw_error *);

/* Run a filter on v (w x h of `type`), result of out_type; returns the unpacked result. */
static uint16_t *
run_filter(tw_runtime *rt, filter_fn fn, const uint16_t *v, int64_t w, int64_t h,
           tw_sample_type type, tw_sample_type out_type, int conn, int64_t hh, bool dome,
           int radius, int32_t tw, int32_t th)
{
    packed pi = pack(v, w, h, type), pr = blank(w, h, out_type);
    tw_mrecon_filter_opts o;
    tw_job *job = NULL;
    tw_error err;

    tw_mrecon_filter_opts_init(&o);
    o.image = pi.img;
    o.result = pr.img;
    o.conn = conn;
    o.h = hh;
    o.dome = dome;
    o.radius = radius;
    o.tile_w = tw;
    o.tile_h = th;
    cr_assert(eq(int, fn(rt, &o, &job, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    uint16_t *got = unpack(&pr);
    free(pi.buf);
    free(pr.buf);
    return got;
}

static void
assert_same(const uint16_t *got, const uint16_t *want, int64_t n, const char *what, int k)
{
    for (int64_t p = 0; p < n; p++)
        if (got[p] != want[p])
            cr_assert(got[p] == want[p], "%s case %d: pixel %lld is %u, want %u", what, k, (long long)p, got[p],
                           want[p]);
}

Test(mrecon, fill_holes_equals_a_flood_fill_from_the_border)
{
    /* Binary images: fill-holes equals a background flood fill from the border (4- and
     * 8-connected); gray images: the naive reconstruction by erosion of the border marker. */
    tw_runtime *rt = make_runtime(2);

    rng_state = 11;
    for (int k = 0; k < 120; k++) {
        int64_t w, h;
        gen_size(&w, &h);
        if (w * h > 20000) {
            w = rndi(1, 120);
            h = rndi(1, 120);
        }
        tw_sample_type type = k % 3 == 0 ? TW_U16 : TW_U8;
        unsigned maxv = type == TW_U8 ? 255 : 65535;
        int conn = k % 2 ? 8 : 4;
        int32_t tw, th;
        gen_tile(w, h, &tw, &th);
        uint16_t *im = malloc((size_t)(w * h) * 2), *want = malloc((size_t)(w * h) * 2);
        bool binary = k % 4 != 3;
        unsigned v = binary ? (unsigned)rndi(1, maxv) : 0;
        int64_t density = rndi(30, 70);
        if (binary) {
            for (int64_t p = 0; p < w * h; p++)
                im[p] = rndi(0, 99) < density ? (uint16_t)v : 0;
            naive_fill_binary(im, want, w, h, conn, v);
        } else {
            gen_mask(im, w, h, maxv);
            for (int64_t p = 0; p < w * h; p++) {
                int64_t x = p % w, y = p / w;
                want[p] = (x == 0 || y == 0 || x == w - 1 || y == h - 1) ? im[p] : (uint16_t)maxv;
            }
            naive_recon(want, im, w, h, conn, true);
        }
        uint16_t *got = run_filter(rt, tw_fill_holes_submit, im, w, h, type, type, conn, 0, false,
                                   0, tw, th);
        assert_same(got, want, w * h, "fill-holes", k);
        free(got);
        free(im);
        free(want);
    }
    tw_runtime_destroy(rt);
}

Test(mrecon, the_names_before_0_6_still_build_and_run)
{
    /* tw_rfilter_opts and tw_rfilter_opts_init(), deprecated in 0.6, are the same struct and
     * the same defaults: a ring of 9s around a hole of 0s fills to all 9s */
    tw_runtime *rt = make_runtime(1);
    uint8_t im[5 * 5], res[5 * 5];
    tw_rfilter_opts o;
    tw_job *job = NULL;
    tw_error err;

    for (int p = 0; p < 25; p++)
        im[p] = (p % 5 == 2 && p / 5 == 2) ? 0 : 9;
    memset(&o, 0xAB, sizeof o);
    tw_rfilter_opts_init(&o);
    cr_assert(eq(sz, o.struct_size, sizeof(tw_mrecon_filter_opts)));
    cr_assert(eq(int, o.conn, 0));
    cr_assert(o.stats == NULL);
    o.image = (tw_host_image){.data = im, .w = 5, .h = 5, .type = TW_U8};
    o.result = (tw_host_image){.data = res, .w = 5, .h = 5, .type = TW_U8};
    cr_assert(eq(int, tw_fill_holes_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    for (int p = 0; p < 25; p++)
        cr_assert(eq(u8, res[p], 9), "pixel %d is %u", p, res[p]);
    tw_runtime_destroy(rt);
}

Test(mrecon, hmax_dome_and_regional_max_equal_their_definitions)
{
    /* h-dome = image - naive reconstruction of max(image - h, 0); h-maxima = (h-dome >= h),
     * all 0 when h exceeds the range; regional maxima = plateaus with only lower neighbours,
     * found by flooding. */
    tw_runtime *rt = make_runtime(2);

    rng_state = 12;
    for (int k = 0; k < 150; k++) {
        int64_t w, h;
        gen_size(&w, &h);
        if (w * h > 20000) {
            w = rndi(1, 120);
            h = rndi(1, 120);
        }
        tw_sample_type type = k % 3 == 0 ? TW_U16 : TW_U8;
        unsigned maxv = type == TW_U8 ? 255 : 65535;
        int conn = k % 2 ? 8 : 4;
        int32_t tw, th;
        gen_tile(w, h, &tw, &th);
        int64_t n = w * h, hh = rndi(1, k % 10 == 0 ? maxv : maxv / 4 + 1);
        uint16_t *im = malloc((size_t)n * 2), *rec = malloc((size_t)n * 2),
                 *dome = malloc((size_t)n * 2), *maxima = malloc((size_t)n * 2);
        unsigned lo = maxv, hi = 0;
        gen_mask(im, w, h, maxv);
        for (int64_t p = 0; p < n; p++) {
            rec[p] = im[p] >= hh ? (uint16_t)(im[p] - hh) : 0;
            lo = im[p] < lo ? im[p] : lo;
            hi = im[p] > hi ? im[p] : hi;
        }
        naive_recon(rec, im, w, h, conn, false);
        for (int64_t p = 0; p < n; p++) {
            dome[p] = (uint16_t)(im[p] - rec[p]);
            maxima[p] = hh <= (int64_t)(hi - lo) && dome[p] >= hh;
        }
        uint16_t *got = run_filter(rt, tw_hmax_submit, im, w, h, type, type, conn, hh, true, 0,
                                   tw, th);
        assert_same(got, dome, n, "h-dome", k);
        free(got);
        got = run_filter(rt, tw_hmax_submit, im, w, h, type, TW_U8, conn, hh, false, 0, tw, th);
        assert_same(got, maxima, n, "h-maxima", k);
        free(got);

        uint8_t *rm = malloc((size_t)n);
        naive_regional_max(im, rm, w, h, conn);
        for (int64_t p = 0; p < n; p++)
            maxima[p] = rm[p];
        got = run_filter(rt, tw_regional_max_submit, im, w, h, type, TW_U8, conn, 0, false, 0,
                         tw, th);
        assert_same(got, maxima, n, "regional-max", k);
        free(got);
        free(rm);
        free(im);
        free(rec);
        free(dome);
        free(maxima);
    }
    tw_runtime_destroy(rt);
}

Test(mrecon, open_and_close_by_reconstruction_equal_naive)
{
    /* open-rec = naive reconstruction by dilation of the brute-force square erosion; close-rec
     * = naive reconstruction by erosion of the brute-force square dilation; radii from 0 to
     * beyond the tiles and the image. */
    tw_runtime *rt = make_runtime(3);

    rng_state = 13;
    for (int k = 0; k < 120; k++) {
        int64_t w = rndi(1, 60), h = rndi(1, 60), n = w * h;
        tw_sample_type type = k % 3 == 0 ? TW_U16 : TW_U8;
        unsigned maxv = type == TW_U8 ? 255 : 65535;
        int conn = k % 2 ? 8 : 4, radius = (int)(k % 7 == 0 ? rndi(10, 70) : rndi(0, 4));
        bool closing = k % 2 == 0;
        int32_t tw, th;
        gen_tile(w, h, &tw, &th);
        uint16_t *im = malloc((size_t)n * 2), *want = malloc((size_t)n * 2);
        gen_mask(im, w, h, maxv);
        naive_square(im, want, w, h, radius, closing);
        naive_recon(want, im, w, h, conn, closing);
        uint16_t *got = run_filter(rt, closing ? tw_close_rec_submit : tw_open_rec_submit, im, w,
                                   h, type, type, conn, 0, false, radius, tw, th);
        assert_same(got, want, n, closing ? "close-rec" : "open-rec", k);
        free(got);
        free(im);
        free(want);
    }
    tw_runtime_destroy(rt);
}

Test(mrecon, filters_refuse_bad_parameters)
{
    /* h < 1, a negative radius, a result of the wrong type (hmax writes u8): TW_E_INVALID. */
    tw_runtime *rt = make_runtime(1);
    uint16_t z[12] = {0};
    packed a = pack(z, 4, 3, TW_U16), r16 = blank(4, 3, TW_U16);
    tw_mrecon_filter_opts o;
    tw_job *job = NULL;
    tw_error err;

    tw_mrecon_filter_opts_init(&o);
    o.image = a.img;
    o.result = r16.img;
    o.h = 0;
    cr_assert(eq(int, tw_hmax_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(eq(str, err.message, "hmax: h = 0 (at least 1)"));
    o.h = 3;
    cr_assert(eq(int, tw_hmax_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(strstr(err.message, "u8 needed") != NULL, "%s", err.message);
    o.radius = -1;
    cr_assert(eq(int, tw_open_rec_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(eq(str, err.message, "open-rec: radius -1 is negative"));
    o.conn = 6;
    cr_assert(eq(int, tw_fill_holes_submit(rt, &o, &job, &err), TW_E_INVALID));
    cr_assert(eq(str, err.message, "fill-holes: connectivity 6 (4 or 8)"));
    cr_assert(job == NULL);
    free(a.buf);
    free(r16.buf);
    tw_runtime_destroy(rt);
}

Test(mrecon, files_in_and_out_match_memory)
{
    /* The same reconstruction from TIFF files (RGB marker converted to luminance) into a
     * tiled BigTIFF equals the in-memory run on the converted marker; nothing is left behind
     * when the job fails. */
    char *dir = twtest_tmpdir();
    char *fj = twtest_path(dir, "j.tif"), *fi = twtest_path(dir, "i.tif"),
         *fo = twtest_path(dir, "o.tif");
    int64_t w = 333, h = 217, n = w * h;
    uint16_t *im = malloc((size_t)n * 2), *j = malloc((size_t)n * 2);
    uint8_t *rgb = malloc((size_t)n * 3), *g8 = malloc((size_t)n);
    tw_writer_opts wo;
    tw_writer *wr = NULL;
    tw_error err;
    tw_runtime *rt = make_runtime(2);

    rng_state = 21;
    gen_mask(im, w, h, 255);
    for (int64_t p = 0; p < n; p++) {
        /* A gray marker below the mask written as RGB whose luminance is that gray. */
        unsigned v = rndi(0, 20) == 0 ? im[p] : 0;
        rgb[3 * p] = rgb[3 * p + 1] = rgb[3 * p + 2] = (uint8_t)v;
        j[p] = (uint16_t)v;
        g8[p] = (uint8_t)im[p];
    }
    tw_writer_opts_init(&wo);
    wo.w = w;
    wo.h = h;
    wo.channels = 3;
    wo.type = TW_U8;
    wo.tile_w = wo.tile_h = 64;
    cr_assert(eq(int, tw_writer_open(fj, &wo, &wr, &err), TW_OK), "%s", err.message);
    for (int64_t ty = 0; ty * 64 < h; ty++)
        for (int64_t tx = 0; tx * 64 < w; tx++) {
            uint8_t tile[64 * 64 * 3] = {0};
            for (int64_t y = 0; y < 64 && ty * 64 + y < h; y++)
                for (int64_t x = 0; x < 64 && tx * 64 + x < w; x++)
                    memcpy(&tile[(y * 64 + x) * 3], &rgb[((ty * 64 + y) * w + tx * 64 + x) * 3], 3);
            cr_assert(eq(int, tw_writer_write_tile(wr, 0, tx, ty, tile, 64 * 3, &err), TW_OK));
        }
    cr_assert(eq(int, tw_writer_close(wr, &err), TW_OK), "%s", err.message);
    wo.channels = 1;
    cr_assert(eq(int, tw_writer_open(fi, &wo, &wr, &err), TW_OK), "%s", err.message);
    for (int64_t ty = 0; ty * 64 < h; ty++)
        for (int64_t tx = 0; tx * 64 < w; tx++) {
            uint8_t tile[64 * 64] = {0};
            for (int64_t y = 0; y < 64 && ty * 64 + y < h; y++)
                for (int64_t x = 0; x < 64 && tx * 64 + x < w; x++)
                    tile[y * 64 + x] = g8[(ty * 64 + y) * w + tx * 64 + x];
            cr_assert(eq(int, tw_writer_write_tile(wr, 0, tx, ty, tile, 64, &err), TW_OK));
        }
    cr_assert(eq(int, tw_writer_close(wr, &err), TW_OK), "%s", err.message);

    tw_mrecon_opts o;
    char msg[512];
    tw_mrecon_opts_init(&o);
    o.marker.path = fj;
    o.mask.path = fi;
    o.output.path = fo;
    o.tile_w = 50;
    o.tile_h = 70;
    cr_assert(eq(int, run_mrecon(rt, &o, msg, sizeof msg), TW_OK), "%s", msg);
    naive_recon(j, im, w, h, 8, false);
    tw_slide *s = NULL;
    uint8_t *got = malloc((size_t)n);
    cr_assert(eq(int, tw_slide_open(fo, TW_READER_TIFF, &s, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_slide_get_channels(s), 1));
    cr_assert(eq(int, tw_slide_read_region(s, 0, 0, 0, w, h, got, (size_t)w, &err), TW_OK));
    tw_slide_close(s);
    for (int64_t p = 0; p < n; p++)
        if (got[p] != j[p])
            cr_assert(got[p] == j[p], "pixel %lld is %u, want %u", (long long)p, got[p], j[p]);

    /* The marker file as the mask of an RGB marker above it: the job fails, no output. */
    char *fo2 = twtest_path(dir, "o2.tif");
    o.marker.path = fi;
    o.mask.path = fj;
    o.output.path = fo2;
    cr_assert(eq(int, run_mrecon(rt, &o, msg, sizeof msg), TW_E_INVALID));
    cr_assert(strstr(msg, "above mask") != NULL, "%s", msg);
    cr_assert(0 == twtest_exists(fo2), "output left behind");
    o.output.path = fj;
    cr_assert(eq(int, run_mrecon(rt, &o, msg, sizeof msg), TW_E_INVALID));
    cr_assert(strstr(msg, "would overwrite") != NULL, "%s", msg);

    tw_runtime_destroy(rt);
    free(got);
    free(im);
    free(j);
    free(rgb);
    free(g8);
    free(fj);
    free(fi);
    free(fo);
    free(fo2);
    twtest_rmtree(dir);
    free(dir);
}
