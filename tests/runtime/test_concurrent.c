/* SPDX-License-Identifier: MIT */
/* tilewave tests: 8 operation jobs from 8 threads on one runtime, against naive references. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "tilewave.h"
#include "twtest.h"
#include "twtest_filter.h"
#include "twtest_rt.h"

/*
 * What a service embedding tilewave does: one runtime, request threads each submitting an
 * operation through the public API (reconstruction, distance transform, area opening on
 * in-memory images a few hundred pixels square, each with its own tile size) and waiting for
 * it. Every result must equal a naive reference computed here (sweeps for reconstruction,
 * brute force per row for the squared EDT, level-by-level flooding for the area opening) and
 * the result of the same job run alone on that runtime. A job canceled while the others run
 * ends canceled, promptly, and leaves the others exact.
 */

#define N_THREADS 8
#define ROUNDS 3

typedef enum op { OP_MRECON, OP_EDT, OP_AREA } op;

typedef struct job_case {
    op op;
    tw_sample_type type; /* of the input */
    int w, h, tile_w, tile_h, conn;
    uint64_t seed;
    void *img, *marker;  /* inputs (marker: reconstruction only) */
    void *want;          /* the naive reference */
    size_t out_bytes;
} job_case;

/* w, h, tiles and parameters of the 8 cases, one per thread. */
static job_case cases[N_THREADS] = {
    {OP_MRECON, TW_U8, 300, 220, 64, 64, 8, 1, NULL, NULL, NULL, 0},
    {OP_EDT, TW_U8, 256, 256, 48, 40, 0, 2, NULL, NULL, NULL, 0},
    {OP_AREA, TW_U8, 200, 180, 50, 50, 4, 3, NULL, NULL, NULL, 0},
    {OP_MRECON, TW_U16, 257, 199, 32, 48, 4, 4, NULL, NULL, NULL, 0},
    {OP_EDT, TW_U8, 301, 199, 64, 32, 0, 5, NULL, NULL, NULL, 0},
    {OP_AREA, TW_U8, 240, 160, 33, 41, 8, 6, NULL, NULL, NULL, 0},
    {OP_MRECON, TW_U8, 180, 300, 100, 77, 4, 7, NULL, NULL, NULL, 0},
    {OP_EDT, TW_U8, 220, 220, 220, 220, 0, 8, NULL, NULL, NULL, 0},
};

#define AREA_THRESHOLD 40

/* ---- naive references */

static const int NB8[8][2] = {{-1, -1}, {0, -1}, {1, -1}, {-1, 0}, {1, 0}, {-1, 1}, {0, 1}, {1, 1}};
static const int NB4[4][2] = {{0, -1}, {-1, 0}, {1, 0}, {0, 1}};

/* Reconstruction by dilation in place on j under im: forward and backward sweeps of
 * j(p) = min(max of j over p and its neighbours, im(p)) until nothing changes. */
static void
naive_recon(uint32_t *j, const uint32_t *im, int w, int h, int conn)
{
    const int(*nb)[2] = conn == 8 ? NB8 : NB4;
    bool changed = true;

    while (changed) {
        changed = false;
        for (int pass = 0; pass < 2; pass++) {
            for (int64_t k = 0; k < (int64_t)w * h; k++) {
                int64_t p = pass ? (int64_t)w * h - 1 - k : k;
                int x = (int)(p % w), y = (int)(p / w);
                uint32_t e = j[p];

                for (int n = 0; n < conn; n++) {
                    int qx = x + nb[n][0], qy = y + nb[n][1];

                    if (qx >= 0 && qy >= 0 && qx < w && qy < h && j[(int64_t)qy * w + qx] > e)
                        e = j[(int64_t)qy * w + qx];
                }
                if (e > im[p])
                    e = im[p];
                if (e != j[p]) {
                    j[p] = e;
                    changed = true;
                }
            }
        }
    }
}

/* Squared Euclidean distance to the nearest zero pixel: per column the distance to the
 * nearest zero in that column, then per pixel the minimum over all columns. */
static void
naive_edt_sq(const uint8_t *img, int w, int h, uint32_t *out)
{
    int64_t *g = malloc((size_t)w * (size_t)h * sizeof *g);
    const int64_t inf = INT64_C(1) << 40;

    for (int x = 0; x < w; x++) {
        for (int y = 0; y < h; y++) {
            int64_t best = inf;

            for (int yy = 0; yy < h; yy++)
                if (img[(int64_t)yy * w + x] == 0 && llabs(yy - y) < best)
                    best = llabs(yy - y);
            g[(int64_t)y * w + x] = best;
        }
    }
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            int64_t best = -1;

            for (int xx = 0; xx < w; xx++) {
                int64_t gy = g[(int64_t)y * w + xx], d;

                if (gy >= inf)
                    continue;
                d = (int64_t)(x - xx) * (x - xx) + gy * gy;
                if (best < 0 || d < best)
                    best = d;
            }
            out[(int64_t)y * w + x] = (uint32_t)best;
        }
    }
    free(g);
}

/* ---- inputs */

/* The inputs of c and, with `reference`, its naive result. */
static void
make_inputs(job_case *c, bool reference)
{
    uint64_t s = twtest_rnd_stream((uint64_t)c->seed);
    int64_t n = (int64_t)c->w * c->h;
    size_t ss = tw_sample_size(c->type);

    c->img = malloc((size_t)n * ss);
    cr_assert(c->img != NULL);
    switch (c->op) {
    case OP_MRECON: {
        /* Mask: smooth blobs plus noise; marker: the mask lowered, with a few seeds. */
        uint32_t vmax = c->type == TW_U8 ? 255 : 65535;
        uint32_t *mask = malloc((size_t)n * 4), *marker = malloc((size_t)n * 4);

        c->marker = malloc((size_t)n * ss);
        c->out_bytes = (size_t)n * ss;
        c->want = malloc(c->out_bytes);
        for (int y = 0; y < c->h; y++) {
            for (int x = 0; x < c->w; x++) {
                int64_t p = (int64_t)y * c->w + x;
                uint32_t v = (uint32_t)(((x / 23 + y / 17) % 5) * (vmax / 6)) +
                             twtest_rnd(&s, vmax / 6);

                mask[p] = v;
                marker[p] = twtest_rnd(&s, 50) == 0 ? v : v > vmax / 3 ? v - vmax / 3 : 0;
            }
        }
        for (int64_t p = 0; p < n; p++) {
            if (c->type == TW_U8) {
                ((uint8_t *)c->img)[p] = (uint8_t)mask[p];
                ((uint8_t *)c->marker)[p] = (uint8_t)marker[p];
            } else {
                ((uint16_t *)c->img)[p] = (uint16_t)mask[p];
                ((uint16_t *)c->marker)[p] = (uint16_t)marker[p];
            }
        }
        if (reference)
            naive_recon(marker, mask, c->w, c->h, c->conn);
        for (int64_t p = 0; p < n; p++) {
            if (c->type == TW_U8)
                ((uint8_t *)c->want)[p] = (uint8_t)marker[p];
            else
                ((uint16_t *)c->want)[p] = (uint16_t)marker[p];
        }
        free(mask);
        free(marker);
        break;
    }
    case OP_EDT: {
        uint8_t *img = c->img;

        /* About 3% background, in specks and one empty band, so distances reach tens. */
        for (int64_t p = 0; p < n; p++)
            img[p] = twtest_rnd(&s, 33) == 0 ? 0 : (uint8_t)(1 + twtest_rnd(&s, 255));
        for (int y = c->h / 3; y < c->h / 3 + 40 && y < c->h; y++)
            for (int x = 0; x < c->w; x++)
                img[(int64_t)y * c->w + x] = 200;
        c->out_bytes = (size_t)n * sizeof(uint32_t);
        c->want = malloc(c->out_bytes);
        if (reference)
            naive_edt_sq(img, c->w, c->h, c->want);
        break;
    }
    case OP_AREA: {
        uint8_t *img = c->img;

        /* 16 levels, so that the flooding reference stays quick. */
        for (int y = 0; y < c->h; y++)
            for (int x = 0; x < c->w; x++)
                img[(int64_t)y * c->w + x] =
                    (uint8_t)(16 * ((((x / 9) ^ (y / 7)) + twtest_rnd(&s, 4)) % 16));
        c->out_bytes = (size_t)n;
        c->want = malloc(c->out_bytes);
        if (reference)
            twtest_attr_filter_naive(img, TW_U8, c->w, c->h, c->conn, TWTEST_AREA,
                                     AREA_THRESHOLD, 0, c->want);
        break;
    }
    }
}

static void
free_inputs(void)
{
    for (int i = 0; i < N_THREADS; i++) {
        free(cases[i].img);
        free(cases[i].marker);
        free(cases[i].want);
        cases[i].img = cases[i].marker = cases[i].want = NULL;
    }
}

/* ---- submitting */

/* Submit case c writing into out; TW_OK and *job on success, else the message in msg. */
static tw_status
submit_case(tw_runtime *rt, const job_case *c, void *out, tw_job **job, char *msg, size_t n)
{
    tw_host_image img = {c->img, c->w, c->h, 0, c->type};
    tw_error err = {0};
    tw_status st = TW_E_INVALID;

    switch (c->op) {
    case OP_MRECON: {
        tw_mrecon_opts o;

        tw_mrecon_opts_init(&o);
        o.marker_image = (tw_host_image){c->marker, c->w, c->h, 0, c->type};
        o.mask_image = img;
        o.result = (tw_host_image){out, c->w, c->h, 0, c->type};
        o.conn = c->conn;
        o.tile_w = c->tile_w;
        o.tile_h = c->tile_h;
        st = tw_mrecon_submit(rt, &o, job, &err);
        break;
    }
    case OP_EDT: {
        tw_edt_opts o;

        tw_edt_opts_init(&o);
        o.image = img;
        o.result = (tw_host_image){out, c->w, c->h, 0, TW_U32};
        o.format = TW_EDT_SQ32;
        o.tile_w = c->tile_w;
        o.tile_h = c->tile_h;
        st = tw_edt_submit(rt, &o, job, &err);
        break;
    }
    case OP_AREA: {
        tw_attr_filter_opts o;

        tw_attr_filter_opts_init(&o);
        o.image = img;
        o.result = (tw_host_image){out, c->w, c->h, 0, TW_U8};
        o.filter = TW_AREA_OPENING;
        o.threshold = AREA_THRESHOLD;
        o.connectivity = c->conn;
        o.tile_w = c->tile_w;
        o.tile_h = c->tile_h;
        st = tw_attr_filter_submit(rt, &o, job, &err);
        break;
    }
    }
    if (st != TW_OK)
        snprintf(msg, n, "submit: %.400s", err.message);
    return st;
}

static const char *const op_names[] = {"reconstruction", "edt", "area opening"};

/* Run case c and compare with its reference; false with a message on any difference. */
static bool
run_and_check(tw_runtime *rt, const job_case *c, char *msg, size_t n)
{
    void *out = malloc(c->out_bytes);
    tw_job *job = NULL;
    bool ok = false;
    tw_status st;

    if (!out) {
        snprintf(msg, n, "out of memory");
        return false;
    }
    memset(out, 0xa5, c->out_bytes);
    if (submit_case(rt, c, out, &job, msg, n) != TW_OK)
        goto out;
    st = tw_job_wait(job, -1);
    if (st != TW_OK) {
        snprintf(msg, n, "%s %dx%d: job failed (%s): %.400s", op_names[c->op], c->w, c->h,
                 tw_status_string(st), tw_job_get_error(job));
        goto out;
    }
    if (memcmp(out, c->want, c->out_bytes) != 0) {
        size_t b = 0;

        while (((const char *)out)[b] == ((const char *)c->want)[b])
            b++;
        snprintf(msg, n, "%s %dx%d tiles %dx%d: differs from the reference at byte %zu",
                 op_names[c->op], c->w, c->h, c->tile_w, c->tile_h, b);
        goto out;
    }
    ok = true;
out:
    tw_job_destroy(job);
    free(out);
    return ok;
}

static tw_runtime *
policy_runtime(const char *policy, int workers)
{
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_error err = {0};
    char v[16];

    twtest_quiet_logs();
    snprintf(v, sizeof v, "%d", workers);
    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    cr_assert(eq(int, tw_config_load_env(cfg, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_config_set(cfg, "runtime.cpu_workers", v, TW_CONFIG_SET, &err), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.policy", policy, TW_CONFIG_SET, &err), TW_OK),
              "%s", err.message);
    cr_assert(eq(int, tw_runtime_create(cfg, &rt, &err), TW_OK), "%s", err.message);
    tw_config_destroy(cfg);
    return rt;
}

/* ---- the threads */

typedef struct request {
    tw_runtime *rt;
    const job_case *c;
    pthread_barrier_t *start;
    bool cancel;        /* submit the big job and cancel it instead */
    const job_case *big;
    bool ok;
    char msg[512];
    double cancel_s;    /* from tw_job_cancel() to the end of tw_job_wait() */
    tw_status cancel_status;
} request;

static void *
serve(void *arg)
{
    request *r = arg;

    pthread_barrier_wait(r->start);
    if (!r->cancel) {
        r->ok = run_and_check(r->rt, r->c, r->msg, sizeof r->msg);
        return NULL;
    }
    {
        void *out = malloc(r->big->out_bytes);
        tw_job *job = NULL;
        tw_progress p;
        double t0, end = twtest_now_s() + 10.0;

        if (!out || submit_case(r->rt, r->big, out, &job, r->msg, sizeof r->msg) != TW_OK) {
            free(out);
            return NULL;
        }
        /* Cancel once it has started working, while the other jobs run. */
        for (;;) {
            struct timespec ms = {0, 1000000};

            tw_job_get_progress(job, &p);
            if (p.done > 0 || p.finished || twtest_now_s() > end)
                break;
            nanosleep(&ms, NULL);
        }
        t0 = twtest_now_s();
        tw_job_cancel(job);
        r->cancel_status = tw_job_wait(job, -1);
        r->cancel_s = twtest_now_s() - t0;
        tw_job_destroy(job);
        free(out);
        r->ok = true;
    }
    return NULL;
}

/* ROUNDS rounds of the 8 cases at once from 8 threads; with `cancel`, thread 0 runs a big
 * reconstruction instead and cancels it. */
static void
run_concurrent(tw_runtime *rt, const char *policy, const job_case *big)
{
    for (int round = 0; round < ROUNDS; round++) {
        request req[N_THREADS];
        pthread_t tid[N_THREADS];
        pthread_barrier_t start;

        cr_assert(eq(int, pthread_barrier_init(&start, NULL, N_THREADS), 0));
        for (int i = 0; i < N_THREADS; i++) {
            memset(&req[i], 0, sizeof req[i]);
            req[i].rt = rt;
            /* Rotate the cases between rounds so each thread runs several operations. */
            req[i].c = &cases[(i + round) % N_THREADS];
            req[i].start = &start;
            req[i].cancel = big && i == 0;
            req[i].big = big;
            cr_assert(eq(int, pthread_create(&tid[i], NULL, serve, &req[i]), 0));
        }
        for (int i = 0; i < N_THREADS; i++)
            pthread_join(tid[i], NULL);
        pthread_barrier_destroy(&start);
        for (int i = 0; i < N_THREADS; i++)
            cr_assert(req[i].ok, "%s, round %d, thread %d: %s", policy, round, i, req[i].msg);
        if (big) {
            /* Canceled (or, on a very fast machine, finished first); either way quickly. */
            cr_assert(req[0].cancel_status == TW_E_CANCELED || req[0].cancel_status == TW_OK,
                      "%s: canceled job ended with %s", policy,
                      tw_status_string(req[0].cancel_status));
            cr_assert(lt(dbl, req[0].cancel_s, 5.0 * TWTEST_SLOWDOWN), "%s: cancel took %.2f s",
                      policy, req[0].cancel_s);
            cr_log_info("%s: cancel took %.3f s (%s)", policy, req[0].cancel_s,
                        tw_status_string(req[0].cancel_status));
        }
    }
}

/* Inputs and references, and each case run alone on rt. */
static void
prepare(tw_runtime *rt)
{
    char msg[512];

    for (int i = 0; i < N_THREADS; i++) {
        make_inputs(&cases[i], true);
        cr_assert(run_and_check(rt, &cases[i], msg, sizeof msg), "alone, case %d: %s", i, msg);
    }
}

static void
concurrent_jobs_under(const char *policy)
{
    tw_runtime *rt = policy_runtime(policy, 3);

    prepare(rt);
    run_concurrent(rt, policy, NULL);
    tw_runtime_destroy(rt);
    free_inputs();
}

Test(concurrent, eight_jobs_from_eight_threads_fcfs, .timeout = TWTEST_TIMEOUT(240))
{
    /* fcfs, 3 CPU workers: 3 rounds of 8 jobs (3 reconstructions, 3 EDTs, 2 area openings of
     * 160-300 px images, 8 tile sizes) submitted at once from 8 threads, each equal to its
     * naive reference and to the same job run alone first. */
    concurrent_jobs_under("fcfs");
}

Test(concurrent, eight_jobs_from_eight_threads_fair, .timeout = TWTEST_TIMEOUT(240))
{
    /* The same under the fair policy (jobs served in turn). */
    concurrent_jobs_under("fair");
}

Test(concurrent, cancel_one_job_while_seven_run, .timeout = TWTEST_TIMEOUT(240))
{
    /* Under fcfs and fair: one thread submits a reconstruction of 600x600 16-bit pixels in
     * 16x16 tiles (about 1400 tiles) and cancels it once it has made progress; it ends
     * canceled within 5 s, and the 7 jobs running beside it are exact. */
    static const char *const policies[] = {"fcfs", "fair"};
    job_case big = {OP_MRECON, TW_U16, 600, 600, 16, 16, 8, 99, NULL, NULL, NULL, 0};

    make_inputs(&big, false);
    for (int p = 0; p < 2; p++) {
        tw_runtime *rt = policy_runtime(policies[p], 3);

        if (p == 0)
            prepare(rt);
        run_concurrent(rt, policies[p], &big);
        tw_runtime_destroy(rt);
    }
    free_inputs();
    free(big.img);
    free(big.marker);
    free(big.want);
}
