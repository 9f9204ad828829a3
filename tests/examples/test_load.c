/* SPDX-License-Identifier: MIT */
/* tilewave tests: an embedded runtime under load: many jobs, 8 at a time, flat memory. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <dirent.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tilewave.h"
#include "twtest.h"
#include "twtest_rt.h"

/*
 * What a service embedding tilewave does for days, compressed: one runtime (2 CPU workers, a
 * host-memory budget small enough that tiles spill to its scratch file, the scratch folder a
 * private one), 8 request threads each submitting a job, waiting for it, checking it and
 * destroying it, until N jobs have run. N is TILEWAVE_LOAD_JOBS (default 400, about 3 s on
 * 2 cores; the documented long runs are 1,000 and 10,000, docs/reliability.md "Load"). The
 * jobs cycle through: EDT, reconstruction and area opening on small in-memory images; gray
 * and convert of a small sample slide into files of the output folder (read back, compared,
 * removed); a submission with a missing input (fails at once); a reconstruction whose marker
 * is above its mask (fails while running, output to a file); and jobs canceled right after
 * submission (an area opening in memory, a convert to a file).
 *
 * Checked: every successful result is byte-identical to a reference run of the same job made
 * alone before the load; every failure is the expected one with its message; a canceled job
 * ends TW_E_CANCELED (or TW_OK with the exact result when it won the race) and leaves nothing
 * at its output path; no wait runs out (60 s per job: the deadlock guard, with the suite's
 * timeout behind it).
 *
 * Resources, measured after a warm-up of the first 20% of the jobs (the process then holds
 * its malloc arenas, the runtime's pools and every OpenMP team it will use) while nothing
 * runs, and again at the end while nothing runs: the same number of open file descriptors
 * (/proc/self/fd) and of threads (/proc/self/task); the output and scratch folders empty;
 * the heap in use (mallinfo2: bytes malloc'd and not freed, in every arena) within HEAP_MARGIN
 * of the warm-up's. That is the leak check proper: it does not see memory the allocator keeps
 * after a free, so it can be tight; leaking the 36 KB image of each area opening (3 jobs in
 * 16) exceeds it at the default N. Measured: +0.06 MiB over 160 jobs, +0.08 MiB over 3,200, the
 * same few caches filling, not growing with N.
 * RSS (/proc/self/statm), sampled after every job, catches what the heap count cannot
 * (mmaps, libraries' own allocators): the maximum over the last 20% of the jobs must not
 * exceed the maximum over the first 20% after the warm-up by more than RSS_MARGIN. Maxima over
 * windows of jobs, not single samples, since a sample depends on which jobs are in flight at
 * that instant; the margin is wide (glibc's per-thread arenas, 8 request threads and 2
 * workers, keep fragmenting for a while: +4 to +10 MiB between the windows of 200- and
 * 400-job runs, +2.6 MiB between those of a 10,000-job run). Under a sanitizer (the ci-asan
 * preset runs this test too) both memory checks are left to LeakSanitizer, see below.
 */

#define N_THREADS 8
#define RSS_MARGIN (24 << 20)
#define HEAP_MARGIN (1 << 20)
#define WAIT_MS 60000

typedef enum kind {
    K_EDT = 0,   /* in memory, squared distances */
    K_MRECON,    /* in memory, reconstruction by dilation */
    K_AREA,      /* in memory, area opening */
    K_GRAY,      /* sample slide -> file */
    K_CONVERT,   /* sample slide -> file */
    K_MISSING,   /* gray of a missing file: the submission fails */
    K_BAD,       /* reconstruction with the marker above the mask: the job fails */
    K_CANCEL,    /* area opening of a larger image, canceled at once */
    K_CANCEL_FILE, /* convert to a file, canceled at once */
    K_COUNT
} kind;

static const char *const kind_name[K_COUNT] = {"edt",     "mrecon",  "area",   "gray",
                                               "convert", "missing", "bad",    "cancel",
                                               "cancel-file"};

/* The order in which jobs take their kinds, cycled: mostly real work, one in 16 of each
 * failure and of each cancel. */
static const kind cycle[] = {K_EDT,  K_MRECON, K_GRAY, K_AREA,    K_CONVERT, K_EDT,
                             K_MISSING, K_MRECON, K_AREA, K_CANCEL, K_GRAY,  K_EDT,
                             K_BAD,  K_MRECON, K_AREA, K_CANCEL_FILE};
#define CYCLE_LEN (sizeof cycle / sizeof cycle[0])

#define EDT_W 256
#define EDT_H 240
#define REC_W 300
#define REC_H 220
#define AREA_W 200
#define AREA_H 180
#define BIG_W 1024
#define BIG_H 1024
#define SLIDE_W 1024
#define SLIDE_H 768

static char *dir;     /* the slide */
static char *out_dir; /* outputs of file jobs */
static char *scratch; /* runtime.scratch_dir */
static char *slide;
static tw_runtime *rt;

static uint8_t *edt_img, *rec_mask, *rec_marker, *bad_marker, *area_img, *big_img;
static void *want[K_COUNT];   /* the reference results */
static size_t want_bytes[K_COUNT];

static atomic_int next_job;
static int jobs_end;
static int64_t *rss_after; /* RSS after each job, bytes */
static int n_status[K_COUNT][2]; /* [kind][0]: ended as planned, [1]: canceled job that won */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char failure[1024];  /* the first failure of a request thread */
static atomic_int failed;   /* set with it: the request threads stop */

static void
fail(const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&lock);
    if (!failure[0]) {
        va_start(ap, fmt);
        vsnprintf(failure, sizeof failure, fmt, ap);
        va_end(ap);
        atomic_store(&failed, 1);
    }
    pthread_mutex_unlock(&lock);
}

static int64_t
rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, res = 0;

    if (!f)
        return -1;
    if (fscanf(f, "%lld %lld", &size, &res) != 2)
        res = -1;
    fclose(f);
    return res < 0 ? -1 : (int64_t)res * sysconf(_SC_PAGESIZE);
}

/* Heap bytes in use (every malloc arena, mmapped blocks included): unlike RSS, free memory
 * kept by the allocator does not count. */
static int64_t
heap_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();

    return (int64_t)(mi.uordblks + mi.hblkhd);
}

/* Entries of /proc/self/fd or /proc/self/task (the directory's own fd is excluded). */
static int
count_proc(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;

    if (!d)
        return -1;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return strcmp(path, "/proc/self/fd") == 0 ? n - 1 : n;
}

/* ---- inputs */

static uint8_t *
random_image(int w, int h, uint64_t seed, int zero_one_in)
{
    uint8_t *p = malloc((size_t)w * (size_t)h);
    uint64_t s = twtest_rnd_stream((uint64_t)seed);

    cr_assert_not_null(p);
    for (int64_t i = 0; i < (int64_t)w * h; i++) {
        int64_t x = i % w, y = i / w;

        if (zero_one_in)
            p[i] = twtest_rnd(&s, (uint32_t)zero_one_in) == 0 ? 0 : 200;
        else /* blocks of levels plus noise: plateaus and small peaks for the area opening */
            p[i] = (uint8_t)(((x / 19 + y / 13) % 6) * 36 + twtest_rnd(&s, 30));
    }
    return p;
}

static void
make_inputs(void)
{
    edt_img = random_image(EDT_W, EDT_H, 1, 40);
    area_img = random_image(AREA_W, AREA_H, 2, 0);
    big_img = random_image(BIG_W, BIG_H, 3, 0);
    rec_mask = random_image(REC_W, REC_H, 4, 0);
    rec_marker = malloc((size_t)REC_W * REC_H);
    bad_marker = malloc((size_t)REC_W * REC_H);
    cr_assert(rec_marker && bad_marker);
    for (int64_t i = 0; i < (int64_t)REC_W * REC_H; i++) {
        rec_marker[i] = i % 97 == 0 ? rec_mask[i] : rec_mask[i] / 3;
        bad_marker[i] = rec_marker[i];
    }
    /* one pixel above the mask, late in raster order */
    for (int64_t i = (int64_t)REC_W * REC_H - 1; i >= 0; i--)
        if (rec_mask[i] < 255) {
            bad_marker[i] = (uint8_t)(rec_mask[i] + 1);
            break;
        }
}

/* ---- one job */

/* The output file of job i of kind k (malloc'd). */
static char *
out_path(kind k, int i)
{
    char name[64];

    snprintf(name, sizeof name, "%s-%d.tif", kind_name[k], i);
    return twtest_path(out_dir, name);
}

/* Submit job i of kind k; *res (malloc'd) receives an in-memory result. Returns the submit
 * status; err holds its message. */
static tw_status
submit(kind k, const char *path, void **res, tw_job **job, tw_error *err)
{
    tw_status st = TW_E_INVALID;

    *res = NULL;
    switch (k) {
    case K_EDT: {
        tw_edt_opts o;

        tw_edt_opts_init(&o);
        *res = malloc((size_t)EDT_W * EDT_H * 4);
        o.image = (tw_host_image){edt_img, EDT_W, EDT_H, 0, TW_U8};
        o.result = (tw_host_image){*res, EDT_W, EDT_H, 0, TW_U32};
        o.format = TW_EDT_SQ32;
        o.tile_w = 64;
        o.tile_h = 48;
        st = tw_edt_submit(rt, &o, job, err);
        break;
    }
    case K_MRECON:
    case K_BAD: {
        tw_mrecon_opts o;

        tw_mrecon_opts_init(&o);
        o.mask_image = (tw_host_image){rec_mask, REC_W, REC_H, 0, TW_U8};
        o.marker_image =
            (tw_host_image){k == K_BAD ? bad_marker : rec_marker, REC_W, REC_H, 0, TW_U8};
        if (k == K_MRECON) {
            *res = malloc((size_t)REC_W * REC_H);
            o.result = (tw_host_image){*res, REC_W, REC_H, 0, TW_U8};
        } else {
            o.output.path = path;
        }
        o.tile_w = o.tile_h = 64;
        st = tw_mrecon_submit(rt, &o, job, err);
        break;
    }
    case K_AREA:
    case K_CANCEL: {
        tw_attr_filter_opts o;
        int w = k == K_AREA ? AREA_W : BIG_W, h = k == K_AREA ? AREA_H : BIG_H;

        tw_attr_filter_opts_init(&o);
        *res = malloc((size_t)w * (size_t)h);
        o.image = (tw_host_image){k == K_AREA ? area_img : big_img, w, h, 0, TW_U8};
        o.result = (tw_host_image){*res, w, h, 0, TW_U8};
        o.threshold = 40;
        o.tile_w = o.tile_h = k == K_AREA ? 50 : 128;
        st = tw_attr_filter_submit(rt, &o, job, err);
        break;
    }
    case K_GRAY:
    case K_MISSING: {
        tw_gray_opts o;
        char *missing = twtest_path(dir, "missing.tif");

        tw_gray_opts_init(&o);
        o.input.path = k == K_GRAY ? slide : missing;
        o.output.path = path;
        st = tw_gray_submit(rt, &o, job, err);
        free(missing);
        break;
    }
    case K_CONVERT:
    case K_CANCEL_FILE: {
        tw_convert_opts o;

        tw_convert_opts_init(&o);
        o.input.path = slide;
        o.output.path = path;
        o.tile_w = o.tile_h = 256;
        st = tw_convert_submit(rt, &o, job, err);
        break;
    }
    default:
        break;
    }
    return st;
}

/* The result of a finished job as bytes (in memory, or the file read back); malloc'd. */
static void *
result_bytes(kind k, const char *path, void *res, size_t *n)
{
    if (k == K_GRAY || k == K_CONVERT || k == K_CANCEL_FILE) {
        int64_t w = 0, h = 0;
        int ch = 0;
        tw_sample_type t = TW_U8;
        void *px = twtest_read_image(path, &w, &h, &ch, &t);

        *n = (size_t)w * (size_t)h * (size_t)ch * tw_sample_size(t);
        return px;
    }
    *n = k == K_EDT ? (size_t)EDT_W * EDT_H * 4
       : k == K_MRECON ? (size_t)REC_W * REC_H
       : k == K_AREA ? (size_t)AREA_W * AREA_H
                     : (size_t)BIG_W * BIG_H;
    return res;
}

/* Run job i to its end and check it; false (with the reason kept) on a failure. */
static bool
run_job(int i, bool reference)
{
    kind k = reference ? (kind)i : cycle[(size_t)i % CYCLE_LEN];
    kind ref = k == K_CANCEL_FILE ? K_CONVERT : k;
    char *path = out_path(k, i);
    tw_error err = {0};
    tw_job *job = NULL;
    void *res = NULL, *got = NULL;
    size_t n = 0;
    tw_status st;
    bool ok = false;

    st = submit(k, path, &res, &job, &err);
    if (k == K_MISSING) {
        if (st == TW_OK || !strstr(err.message, "missing.tif"))
            fail("job %d (%s): submission %s '%s', want TW_E_IO naming missing.tif", i,
                 kind_name[k], tw_status_string(st), err.message);
        else if (twtest_exists(path))
            fail("job %d (%s): output left at %s", i, kind_name[k], path);
        else
            ok = true;
        if (st == TW_OK)
            tw_job_destroy(job);
        goto out;
    }
    if (st != TW_OK) {
        fail("job %d (%s): submission failed: %s", i, kind_name[k], err.message);
        goto out;
    }
    if (!reference && (k == K_CANCEL || k == K_CANCEL_FILE))
        tw_job_cancel(job);
    st = tw_job_wait(job, WAIT_MS);
    if (st == TW_E_TIMEOUT) {
        fail("job %d (%s): still running after %d ms (deadlock?)", i, kind_name[k], WAIT_MS);
        tw_job_cancel(job);
        tw_job_wait(job, -1);
        tw_job_destroy(job);
        goto out;
    }
    if (k == K_BAD) {
        const char *msg = tw_job_get_error(job);

        if (st == TW_OK || !msg || !strstr(msg, "above mask"))
            fail("job %d (bad): ended %s '%s', want a failure 'marker ... above mask'", i,
                 tw_status_string(st), msg ? msg : "");
        else if (twtest_exists(path))
            fail("job %d (bad): output left at %s", i, path);
        else
            ok = true;
        tw_job_destroy(job);
        goto out;
    }
    if (st == TW_E_CANCELED && !reference && (k == K_CANCEL || k == K_CANCEL_FILE)) {
        tw_job_destroy(job);
        if (twtest_exists(path))
            fail("job %d (%s): canceled, yet %s exists", i, kind_name[k], path);
        else
            ok = true;
        pthread_mutex_lock(&lock);
        n_status[k][0]++;
        pthread_mutex_unlock(&lock);
        goto out;
    }
    if (st != TW_OK) {
        const char *msg = tw_job_get_error(job);

        fail("job %d (%s): ended %s '%s'", i, kind_name[k], tw_status_string(st),
             msg ? msg : "");
        tw_job_destroy(job);
        goto out;
    }
    tw_job_destroy(job);
    got = result_bytes(k, path, res, &n);
    if (!got) {
        fail("job %d (%s): cannot read back %s", i, kind_name[k], path);
    } else if (reference) {
        want[k] = got == res ? res : got;
        want_bytes[k] = n;
        if (got == res)
            res = NULL;
        got = NULL;
        ok = true;
    } else if (n != want_bytes[ref] || memcmp(got, want[ref], n) != 0) {
        fail("job %d (%s): result differs from the reference run", i, kind_name[k]);
    } else {
        ok = true;
        if (k == K_CANCEL || k == K_CANCEL_FILE) {
            pthread_mutex_lock(&lock);
            n_status[k][1]++;
            pthread_mutex_unlock(&lock);
        }
    }
    unlink(path);
out:
    if (got && got != res)
        free(got);
    free(res);
    free(path);
    return ok;
}

static void *
request_thread(void *arg)
{
    (void)arg;
    for (;;) {
        int i = atomic_fetch_add(&next_job, 1);

        if (i >= jobs_end || atomic_load(&failed))
            break;
        if (!run_job(i, false))
            break;
        rss_after[i] = rss_bytes();
    }
    return NULL;
}

/* Jobs [from, to) on N_THREADS request threads; returns once all have ended. */
static void
run_jobs(int from, int to)
{
    pthread_t th[N_THREADS];

    atomic_store(&next_job, from);
    jobs_end = to;
    for (int t = 0; t < N_THREADS; t++)
        cr_assert(eq(int, pthread_create(&th[t], NULL, request_thread, NULL), 0));
    for (int t = 0; t < N_THREADS; t++)
        pthread_join(th[t], NULL);
    cr_assert(failure[0] == 0, "%s", failure);
}

static int64_t
max_rss(int from, int to)
{
    int64_t m = 0;

    for (int i = from; i < to; i++)
        if (rss_after[i] > m)
            m = rss_after[i];
    return m;
}

static void
setup(void)
{
    tw_sample_opts so;
    tw_error err = {0};

    dir = twtest_tmpdir();
    out_dir = twtest_tmpdir();
    scratch = twtest_tmpdir();
    cr_assert(dir && out_dir && scratch);
    slide = twtest_path(dir, "slide.tif");
    tw_sample_opts_init(&so);
    so.w = SLIDE_W;
    so.h = SLIDE_H;
    cr_assert(eq(int, tw_sample_write(slide, &so, &err), TW_OK), "%s", err.message);
}

static void
teardown(void)
{
    if (rt)
        tw_runtime_destroy(rt);
    twtest_rmtree(dir);
    twtest_rmtree(out_dir);
    twtest_rmtree(scratch);
    free(dir);
    free(out_dir);
    free(scratch);
    free(slide);
}

/* 900 s: a long run (10,000 jobs, about 95 s on 2 cores) with room; the per-job wait of 60 s
 * names a stuck job first. */
TestSuite(load, .init = setup, .fini = teardown, .timeout = TWTEST_TIMEOUT(900));

Test(load, many_jobs_eight_at_a_time_flat_memory)
{
    /* N jobs of every kind, 8 at a time, on one runtime: exact results, expected failures,
     * clean cancels, then flat RSS, no fd or thread growth, empty output and scratch folders
     * (what is checked and why: the comment at the top of this file). */
    const char *env = getenv("TILEWAVE_LOAD_JOBS");
    int64_t n_jobs = 400;
    int warm, win, fd0, fd1, th0, th1;
    int64_t rss0, rss1, first, last, heap0, heap1;
    double t0, t1;

    if (env && *env)
        n_jobs = strtoll(env, NULL, 10);
    cr_assert(n_jobs >= 50 && n_jobs <= 1000000, "TILEWAVE_LOAD_JOBS=%s: want 50 or more", env);
    warm = (int)(n_jobs / 5);
    win = (int)(n_jobs / 5);
    twtest_quiet_logs();
    make_inputs();
    rt = twtest_runtime_kv_ok(true, (const char *const[]){"runtime.cpu_workers", "2",
                                                          "runtime.host_mem", "8M",
                                                          "runtime.scratch_dir", scratch, NULL});
    /* the reference runs, one job at a time */
    for (int k = 0; k < K_COUNT; k++)
        if (k != K_MISSING && k != K_BAD && k != K_CANCEL_FILE)
            cr_assert(run_job(k, true), "reference run of %s: %s", kind_name[k], failure);
    rss_after = calloc((size_t)n_jobs, sizeof *rss_after);
    cr_assert_not_null(rss_after);

    t0 = twtest_now_s();
    run_jobs(0, warm);
    fd0 = count_proc("/proc/self/fd");
    th0 = count_proc("/proc/self/task");
    rss0 = rss_bytes();
    heap0 = heap_bytes();
    run_jobs(warm, (int)n_jobs);
    t1 = twtest_now_s();
    fd1 = count_proc("/proc/self/fd");
    th1 = count_proc("/proc/self/task");
    rss1 = rss_bytes();
    heap1 = heap_bytes();
    first = max_rss(warm, warm + win);
    last = max_rss((int)n_jobs - win, (int)n_jobs);

    cr_log_info("load: %lld jobs, 8 at a time, in %.1f s (%.1f jobs/s); canceled jobs that "
                "ended canceled %d + %d, finished first %d + %d",
                (long long)n_jobs, t1 - t0, (double)n_jobs / (t1 - t0),
                n_status[K_CANCEL][0], n_status[K_CANCEL_FILE][0], n_status[K_CANCEL][1],
                n_status[K_CANCEL_FILE][1]);
    cr_log_info("load: RSS after warm-up %.1f MiB, end %.1f MiB; max over jobs %d..%d %.1f MiB, "
                "over the last %d %.1f MiB; fds %d -> %d; threads %d -> %d",
                (double)rss0 / 1048576, (double)rss1 / 1048576, warm, warm + win,
                (double)first / 1048576, win, (double)last / 1048576, fd0, fd1, th0, th1);
    if (getenv("TILEWAVE_LOAD_REPORT"))
        fprintf(stderr,
                "load: %lld jobs in %.1f s; RSS warm-up %.1f MiB end %.1f MiB; window max "
                "%.1f -> %.1f MiB; heap in use %.2f -> %.2f MiB; fds %d -> %d; threads %d -> %d\n",
                (long long)n_jobs, t1 - t0, (double)rss0 / 1048576, (double)rss1 / 1048576,
                (double)first / 1048576, (double)last / 1048576, (double)heap0 / 1048576,
                (double)heap1 / 1048576, fd0, fd1, th0, th1);
    cr_assert(fd0 > 0 && th0 > 0 && rss0 > 0);
    cr_assert(eq(int, fd1, fd0), "open file descriptors grew from %d to %d", fd0, fd1);
    cr_assert(eq(int, th1, th0), "threads changed from %d to %d", th0, th1);
    /* Under a sanitizer the allocator is the sanitizer's (mallinfo2 sees none of it) and
     * AddressSanitizer's quarantine holds up to 256 MiB of freed memory, so RSS grows by
     * design; LeakSanitizer checks for leaks at exit instead. */
    if (TWTEST_SLOWDOWN == 1.0) {
        cr_assert(heap1 <= heap0 + HEAP_MARGIN, "heap in use grew from %.2f to %.2f MiB",
                  (double)heap0 / 1048576, (double)heap1 / 1048576);
        cr_assert(last <= first + RSS_MARGIN,
                  "RSS grew: max %.1f MiB over the last %d jobs, %.1f MiB over jobs %d..%d",
                  (double)last / 1048576, win, (double)first / 1048576, warm, warm + win);
    }
    cr_assert(eq(int, twtest_count_entries(out_dir), 0), "files left in the output folder");
    cr_assert(eq(int, twtest_count_entries(scratch), 0), "files left in the scratch folder");
    for (int k = 0; k < K_COUNT; k++)
        free(want[k]);
    free(rss_after);
    free(edt_img);
    free(area_img);
    free(big_img);
    free(rec_mask);
    free(rec_marker);
    free(bad_marker);
}
