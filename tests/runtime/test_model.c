/* SPDX-License-Identifier: MIT */
/* tilewave tests: cost models (fitting, outliers, buckets, fallback) and their model file. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "rt_core.h"
#include "twtest.h"
#include "twtest_rt.h"

#define MS_PER_MPIX 1e-9 /* seconds per pixel of 1 ms per megapixel */
#define MPIX 1000000     /* a megapixel: size bucket 19 */

static char *tmp;
static atomic_int n_warn;
static char first_warn[TW_ERROR_MAX];

static void
count_warn(tw_log_level level, const char *domain, const char *message, void *user)
{
    (void)domain;
    (void)user;
    if (level <= TW_LOG_WARN && atomic_fetch_add(&n_warn, 1) == 0)
        snprintf(first_warn, sizeof first_warn, "%s", message);
}

static void
setup(void)
{
    tmp = twtest_tmpdir();
    cr_assert(tmp != NULL);
    /* Nothing here may reach the real ~/.cache, whatever a test sets. */
    setenv("XDG_CACHE_HOME", tmp, 1);
    unsetenv("TILEWAVE_RUNTIME_MODELS");
    atomic_store(&n_warn, 0);
    first_warn[0] = '\0';
    tw_log_set_level(TW_LOG_WARN);
    tw_log_set_handler(count_warn, NULL);
}

static void
teardown(void)
{
    twtest_rmtree(tmp);
    free(tmp);
}

TestSuite(model, .init = setup, .fini = teardown, .timeout = TWTEST_TIMEOUT(60));

static const tw_task_kind kind_a = {.name = "test.a", .devices = TW_DEVICE_CPU};
static const tw_task_kind kind_b = {.name = "test.b", .devices = TW_DEVICE_CPU};
/* Another descriptor with kind_a's name: models are keyed by the name. */
static const tw_task_kind kind_a2 = {.name = "test.a", .devices = TW_DEVICE_CPU};

static twi_models *
new_models(int *cpu, int *gpu)
{
    twi_models *ms = NULL;

    cr_assert(eq(int, twi_models_create(&ms), TW_OK));
    *cpu = twi_models_device(ms, TW_DEVICE_CPU, "Test CPU 3000");
    if (gpu)
        *gpu = twi_models_device(ms, TW_DEVICE_CUDA, "Test GPU 9000");
    cr_assert(0 <= *cpu && (gpu == NULL || 0 <= *gpu));
    return ms;
}

static void
assert_near(double got, double want)
{
    cr_assert(fabs(got - want) <= 1e-5 * fabs(want), "got %.9g, want %.9g", got, want);
}

Test(model, exact_medians_of_synthetic_timings)
{
    /* Per unit: the median of the samples (odd count: the middle one; even: the mean of the
     * two middle ones), scaled by the units asked for within the bucket; only the last 32
     * samples count. */
    int cpu;
    twi_models *ms = new_models(&cpu, NULL);
    static const double odd[5] = {5, 1, 4, 2, 3};    /* ms per megapixel */

    for (int i = 0; i < 5; i++)
        twi_model_record(ms, &kind_a, cpu, MPIX, -1, odd[i] * MS_PER_MPIX * MPIX);
    assert_near(twi_model_estimate(ms, &kind_a, cpu, MPIX, -1), 3e-3);
    assert_near(twi_model_estimate(ms, &kind_a, cpu, MPIX + MPIX / 2, -1), 4.5e-3);
    twi_model_record(ms, &kind_a, cpu, MPIX, -1, 10.0 * MS_PER_MPIX * MPIX);
    assert_near(twi_model_estimate(ms, &kind_a, cpu, MPIX, -1), 3.5e-3); /* (3 + 4) / 2 */
    /* 32 new samples push every old one out of the ring */
    for (int i = 0; i < 32; i++)
        twi_model_record(ms, &kind_a, cpu, MPIX, -1, (i % 2 ? 7.0 : 9.0) * MS_PER_MPIX * MPIX);
    assert_near(twi_model_estimate(ms, &kind_a, cpu, MPIX, -1), 8e-3);
    /* the same name through another descriptor reads the same model */
    assert_near(twi_model_estimate(ms, &kind_a2, cpu, MPIX, -1), 8e-3);
    twi_models_destroy(ms);
}

Test(model, outliers_do_not_move_the_estimate)
{
    /* 30 samples of 1 ms/Mpix and 2 of 1000: still 1 ms/Mpix (a mean would say 63.4). */
    int cpu;
    twi_models *ms = new_models(&cpu, NULL);

    for (int i = 0; i < 30; i++)
        twi_model_record(ms, &kind_a, cpu, MPIX, -1, 1.0 * MS_PER_MPIX * MPIX);
    twi_model_record(ms, &kind_a, cpu, MPIX, -1, 1000.0 * MS_PER_MPIX * MPIX);
    twi_model_record(ms, &kind_a, cpu, MPIX, -1, 1000.0 * MS_PER_MPIX * MPIX);
    assert_near(twi_model_estimate(ms, &kind_a, cpu, MPIX, -1), 1e-3);
    twi_models_destroy(ms);
}

Test(model, unknown_below_three_samples)
{
    /* 0, 1, 2 samples: -1; the third makes it known. Other kinds and devices stay unknown;
     * bad samples (no units, negative or NaN time, no device) are ignored. */
    int cpu, gpu;
    twi_models *ms = new_models(&cpu, &gpu);

    cr_assert(twi_model_estimate(ms, &kind_a, cpu, 100, -1) < 0);
    twi_model_record(ms, &kind_a, cpu, 100, -1, 1.0);
    twi_model_record(ms, &kind_a, cpu, 0, -1, 1.0);
    twi_model_record(ms, &kind_a, cpu, 100, -1, -1.0);
    twi_model_record(ms, &kind_a, cpu, 100, -1, NAN);
    twi_model_record(ms, &kind_a, -1, 100, -1, 1.0);
    twi_model_record(ms, &kind_a, cpu, 100, -1, 1.0);
    cr_assert(eq(dbl, twi_model_estimate(ms, &kind_a, cpu, 100, -1), -1.0));
    twi_model_record(ms, &kind_a, cpu, 100, -1, 1.0);
    assert_near(twi_model_estimate(ms, &kind_a, cpu, 100, -1), 1.0);
    cr_assert(twi_model_estimate(ms, &kind_a, gpu, 100, -1) < 0);
    cr_assert(twi_model_estimate(ms, &kind_b, cpu, 100, -1) < 0);
    cr_assert(isnan(twi_model_speedup(ms, &kind_a, cpu, gpu, twi_model_size_bucket(100), 0)));
    twi_models_destroy(ms);
}

Test(model, nearest_size_bucket_scaled_per_unit)
{
    /* Models at 2^10 (2 ms/Mpix) and 2^20 pixels (1 ms/Mpix): a size with no model of its own
     * uses the nearest of them per pixel (2^12 -> 2^10, 2^18 -> 2^20, 2^15 is as near to both
     * and takes the larger); a bucket with under 3 samples of its own falls back too. */
    int cpu;
    twi_models *ms = new_models(&cpu, NULL);

    for (int i = 0; i < 3; i++) {
        twi_model_record(ms, &kind_a, cpu, 1024, -1, 2.0 * MS_PER_MPIX * 1024);
        twi_model_record(ms, &kind_a, cpu, MPIX, -1, 1.0 * MS_PER_MPIX * MPIX);
    }
    assert_near(twi_model_estimate(ms, &kind_a, cpu, 4096, -1), 2.0 * MS_PER_MPIX * 4096);
    assert_near(twi_model_estimate(ms, &kind_a, cpu, 1 << 18, -1),
                1.0 * MS_PER_MPIX * (1 << 18));
    assert_near(twi_model_estimate(ms, &kind_a, cpu, 1 << 15, -1),
                1.0 * MS_PER_MPIX * (1 << 15));
    assert_near(twi_model_estimate(ms, &kind_a, cpu, 1, -1), 2.0 * MS_PER_MPIX);
    assert_near(twi_model_estimate(ms, &kind_a, cpu, (int64_t)1 << 40, -1),
                1.0 * MS_PER_MPIX * (double)((int64_t)1 << 40));
    twi_model_record(ms, &kind_a, cpu, 1 << 12, -1, 50.0 * MS_PER_MPIX * 4096);
    twi_model_record(ms, &kind_a, cpu, 1 << 12, -1, 50.0 * MS_PER_MPIX * 4096);
    /* 2^12 has 2 samples of its own: its bucket (2 samples, 50) is not enough alone, but now
     * it is a candidate at distance 0 with the feature-blind rule only from 3 samples */
    assert_near(twi_model_estimate(ms, &kind_a, cpu, 4096, -1), 2.0 * MS_PER_MPIX * 4096);
    twi_model_record(ms, &kind_a, cpu, 1 << 12, -1, 50.0 * MS_PER_MPIX * 4096);
    assert_near(twi_model_estimate(ms, &kind_a, cpu, 4096, -1), 50.0 * MS_PER_MPIX * 4096);
    twi_models_destroy(ms);
}

Test(model, feature_buckets)
{
    /* The edges: 0, then (4^-k-1, 4^-k] up to (1/4, 1]; negative or NaN = none, above 1 = 1. */
    cr_assert(eq(int, twi_model_feature_bucket(-1), 0));
    cr_assert(eq(int, twi_model_feature_bucket(NAN), 0));
    cr_assert(eq(int, twi_model_feature_bucket(0), 1));
    cr_assert(eq(int, twi_model_feature_bucket(1e-12), 2));
    cr_assert(eq(int, twi_model_feature_bucket(1.0 / 65536), 2));
    cr_assert(eq(int, twi_model_feature_bucket(1.0 / 65536 * 1.0001), 3));
    cr_assert(eq(int, twi_model_feature_bucket(1.0 / 16), 8));
    cr_assert(eq(int, twi_model_feature_bucket(0.25), 9));
    cr_assert(eq(int, twi_model_feature_bucket(0.2500001), 10));
    cr_assert(eq(int, twi_model_feature_bucket(1), 10));
    cr_assert(eq(int, twi_model_feature_bucket(7), 10));
    cr_assert(eq(int, twi_model_size_bucket(1), 0));
    cr_assert(eq(int, twi_model_size_bucket(0), 0));
    cr_assert(eq(int, twi_model_size_bucket(1023), 9));
    cr_assert(eq(int, twi_model_size_bucket(1024), 10));
    cr_assert(eq(int, twi_model_size_bucket(INT64_MAX), 62));
}

Test(model, feature_buckets_are_separate_models)
{
    /* Same kind, device and size: feature 1/1000 runs at 1 ms/Mpix, feature 1 at 9; each
     * bucket answers its own median. A feature bucket with no model of its own takes the
     * size's feature-blind median: the median of the buckets' medians weighted by their
     * samples (3 at 1 and 5 at 9: 9). The speedup uses the task's buckets too. */
    int cpu, gpu, sb = twi_model_size_bucket(MPIX);
    twi_models *ms = new_models(&cpu, &gpu);

    for (int i = 0; i < 3; i++)
        twi_model_record(ms, &kind_a, cpu, MPIX, 0.001, 1.0 * MS_PER_MPIX * MPIX);
    for (int i = 0; i < 5; i++)
        twi_model_record(ms, &kind_a, cpu, MPIX, 1.0, 9.0 * MS_PER_MPIX * MPIX);
    assert_near(twi_model_estimate(ms, &kind_a, cpu, MPIX, 0.001), 1e-3);
    assert_near(twi_model_estimate(ms, &kind_a, cpu, MPIX, 0.002), 1e-3); /* same bucket */
    assert_near(twi_model_estimate(ms, &kind_a, cpu, MPIX, 0.9), 9e-3);
    assert_near(twi_model_estimate(ms, &kind_a, cpu, MPIX, 0.01), 9e-3);   /* no model */
    assert_near(twi_model_estimate(ms, &kind_a, cpu, MPIX, -1), 9e-3);     /* no feature */
    for (int i = 0; i < 3; i++) {
        twi_model_record(ms, &kind_a, gpu, MPIX, 0.001, 0.5 * MS_PER_MPIX * MPIX);
        twi_model_record(ms, &kind_a, gpu, MPIX, 1.0, 0.1 * MS_PER_MPIX * MPIX);
    }
    assert_near(twi_model_speedup(ms, &kind_a, cpu, gpu, sb, twi_model_feature_bucket(0.001)),
                2.0);
    assert_near(twi_model_speedup(ms, &kind_a, cpu, gpu, sb, twi_model_feature_bucket(1.0)),
                90.0);
    twi_models_destroy(ms);
}

/* ---- runtimes and their model file */

static double
feature_of_arg(const void *arg)
{
    return (double)(intptr_t)arg / 1000.0;
}

static tw_status
sleep_cpu(tw_task_ctx *ctx, void *arg)
{
    struct timespec ts = {0, 200000};

    (void)ctx;
    (void)arg;
    nanosleep(&ts, NULL);
    return TW_OK;
}

static const tw_task_kind kind_run = {.name = "test.run", .devices = TW_DEVICE_CPU,
                                      .cpu = sleep_cpu, .feature = feature_of_arg};

/* A runtime with one CPU worker, GPUs off, runtime.models = models and runtime.policy. */
static tw_runtime *
runtime_with(const char *models, const char *policy)
{
    return twtest_runtime_kv_ok(false, (const char *const[]){"runtime.cpu_workers", "1",
                                                             "runtime.gpus", "none",
                                                             "runtime.policy", policy,
                                                             "runtime.models", models, NULL});
}

/* Run n tasks of kind_run, each with one side x side tile and feature milli / 1000. */
static void
run_tasks(tw_runtime *rt, int n, int32_t side, int milli)
{
    tw_job *job = NULL;

    cr_assert(eq(int, twi_job_create(rt, "models", &job), TW_OK));
    for (int i = 0; i < n; i++) {
        tw_task *t = NULL;
        tw_tile *tile = NULL;

        cr_assert(eq(int, twi_tile_create(rt, side, side, 1, TW_U8, &tile), TW_OK));
        cr_assert(eq(int, twi_task_create(job, &kind_run, (void *)(intptr_t)milli, NULL, &t),
                     TW_OK));
        cr_assert(eq(int, twi_task_add_tile(t, tile, TW_RW), TW_OK));
        cr_assert(eq(int, twi_task_submit(t), TW_OK));
        twi_task_release(t);
        twi_tile_release(tile);
    }
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
}

static double
est(tw_runtime *rt, const tw_task_kind *k, int64_t units, double feature)
{
    return twi_model_estimate(rt->models, k, twi_models_local(rt->models, TW_DEVICE_CPU, -1),
                              units, feature);
}


static void
spit(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");

    cr_assert(fp != NULL);
    fputs(text, fp);
    fclose(fp);
}

static int
count_of(const char *hay, const char *needle)
{
    int n = 0;

    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

Test(model, round_trip_through_the_file)
{
    /* Runtime A (fcfs: persistence alone makes it record) runs tasks of two sizes and two
     * features and saves them at destroy; runtime B reads the file and gives the same
     * estimates; tw_models_read lists the same four models. */
    char *path = twtest_path(tmp, "m/models.tsv"); /* m/ does not exist yet */
    tw_runtime *a = runtime_with(path, "fcfs"), *b;
    double e[4];
    tw_model_info *m = NULL;
    size_t n = 0;
    char *text;

    cr_assert(a->models != NULL);
    run_tasks(a, 5, 32, 1);    /* 1024 px, feature 1/1000: bucket (1/1024, 1/256] */
    run_tasks(a, 4, 32, 500);  /* 1024 px, feature 1/2 */
    run_tasks(a, 3, 64, 1);    /* 4096 px */
    e[0] = est(a, &kind_run, 1024, 0.001);
    e[1] = est(a, &kind_run, 1024, 0.5);
    e[2] = est(a, &kind_run, 4096, 0.001);
    e[3] = est(a, &kind_run, 1 << 20, -1); /* from 4096 px, per pixel */
    for (int i = 0; i < 4; i++)
        cr_assert(e[i] > 0);
    cr_assert(twtest_exists(path) == 0);
    tw_runtime_destroy(a);
    cr_assert(twtest_exists(path));
    text = twtest_slurp(path);
    cr_assert(strncmp(text, "# tilewave cost models, version 1\n", 34) == 0, "%s", text);
    cr_assert(strstr(text, "kind\tdevice\tdevice_name\tsize_log2\tfeature\tsamples") != NULL);
    cr_assert(eq(int, count_of(text, "\ntest.run\tcpu\t"), 3), "%s", text);
    cr_assert(strstr(text, "\t10\t1/256\t5\t") != NULL, "%s", text);
    cr_assert(strstr(text, "\t10\t1\t4\t") != NULL, "%s", text);
    cr_assert(strstr(text, "\t12\t1/256\t3\t") != NULL, "%s", text);
    free(text);

    b = runtime_with(path, "pats");
    assert_near(est(b, &kind_run, 1024, 0.001), e[0]);
    assert_near(est(b, &kind_run, 1024, 0.5), e[1]);
    assert_near(est(b, &kind_run, 4096, 0.001), e[2]);
    assert_near(est(b, &kind_run, 1 << 20, -1), e[3]);
    tw_runtime_destroy(b);
    cr_assert(eq(int, atomic_load(&n_warn), 0), "%s", first_warn);

    cr_assert(eq(int, tw_models_read(path, &m, &n, NULL), TW_OK));
    cr_assert(eq(sz, n, 3));
    cr_assert(eq(str, m[0].kind, "test.run"));
    cr_assert(eq(int, m[0].device, TW_DEVICE_CPU));
    cr_assert(eq(int, m[0].size_log2, 10));
    cr_assert(eq(str, m[0].feature, "1/256"));
    cr_assert(eq(dbl, m[0].feature_max, 1.0 / 256));
    cr_assert(eq(int, m[0].samples, 5));
    assert_near(m[0].median_s_per_px * 1024, e[0]);
    cr_assert(m[0].mad_s_per_px >= 0);
    cr_assert(eq(str, m[1].feature, "1"));
    cr_assert(eq(int, m[2].size_log2, 12));
    tw_models_free(m);
    free(path);
}

Test(model, save_merges_with_the_file_on_disk)
{
    /* The file holds another machine's model, and this machine's model of test.run at 1024 px
     * with 2 samples of 1e9 ms/Mpix; while runtime A runs, another process adds a model of
     * test.other. At destroy the file keeps both foreign models as they were, and test.run's
     * model gets A's 3 new samples after the 2 old ones (5; the median is a new one: the old
     * ones say 1 s per pixel). */
    char *path = twtest_path(tmp, "models.tsv");
    tw_runtime *a;
    char line[1024], *text;
    const char *cpu_name = NULL;
    tw_model_info *m = NULL;
    size_t n = 0;

    a = runtime_with(path, "fcfs");
    tw_runtime_destroy(a);
    cr_assert(twtest_exists(path) == 0); /* nothing recorded, nothing written */

    /* this machine's CPU name as the runtime writes it: run once into a scratch file */
    {
        char *p2 = twtest_path(tmp, "probe.tsv");
        char *t2;
        char *tab1, *tab2, *nl;

        a = runtime_with(p2, "fcfs");
        run_tasks(a, 1, 8, 0);
        tw_runtime_destroy(a);
        t2 = twtest_slurp(p2);
        tab1 = strstr(t2, "\ntest.run\tcpu\t");
        cr_assert(tab1 != NULL, "%s", t2);
        tab1 += strlen("\ntest.run\tcpu\t");
        tab2 = strchr(tab1, '\t');
        nl = strchr(tab1, '\n');
        cr_assert(tab2 && nl && tab2 < nl);
        *tab2 = '\0';
        cpu_name = strdup(tab1);
        free(t2);
        free(p2);
    }
    snprintf(line, sizeof line,
             "# tilewave cost models, version 1\n"
             "test.run\tcpu\tSome Other CPU\t10\t1/1024\t3\t7\t0\t7,7,7\n"
             "test.run\tcpu\t%s\t10\t1/256\t2\t1e+09\t0\t1e+09,1e+09\n", cpu_name);
    spit(path, line);
    a = runtime_with(path, "fcfs");
    cr_assert(est(a, &kind_run, 1024, 0.001) < 0); /* 2 samples: unknown */
    run_tasks(a, 3, 32, 1);
    /* meanwhile, another process saves */
    snprintf(line, sizeof line,
             "# tilewave cost models, version 1\n"
             "test.run\tcpu\tSome Other CPU\t10\t1/1024\t3\t7\t0\t7,7,7\n"
             "test.other\tcuda\tSome GPU\t20\t-\t3\t2\t0\t1,2,3\n"
             "test.run\tcpu\t%s\t10\t1/256\t2\t1e+09\t0\t1e+09,1e+09\n", cpu_name);
    spit(path, line);
    tw_runtime_destroy(a);
    cr_assert(eq(int, atomic_load(&n_warn), 0), "%s", first_warn);
    text = twtest_slurp(path);
    cr_assert(strstr(text, "test.run\tcpu\tSome Other CPU\t10\t1/1024\t3\t7\t0\t7,7,7\n") != NULL,
              "%s", text);
    cr_assert(strstr(text, "test.other\tcuda\tSome GPU\t20\t-\t3\t2\t") != NULL, "%s", text);
    free(text);
    cr_assert(eq(int, tw_models_read(path, &m, &n, NULL), TW_OK));
    cr_assert(eq(sz, n, 3));
    for (size_t i = 0; i < n; i++) {
        if (strcmp(m[i].kind, "test.run") || strcmp(m[i].device_name, cpu_name))
            continue;
        cr_assert(eq(int, m[i].samples, 5));
        cr_assert(m[i].median_s_per_px < 1e9 * MS_PER_MPIX); /* 3 of 5 are this run's */
    }
    tw_models_free(m);
    free((void *)cpu_name);
    free(path);
}

Test(model, malformed_lines_are_skipped_with_one_warning)
{
    /* A model file with bad lines (wrong field count, unknown device, bad size, bad feature,
     * a sample count that does not match, a negative sample): the runtime starts, one warning
     * names the file, the good line is read, and the save drops the bad lines. */
    char *path = twtest_path(tmp, "models.tsv"), *text;
    tw_runtime *rt;

    spit(path, "# tilewave cost models, version 1\n"
               "kind\tdevice\tdevice_name\tsize_log2\tfeature\tsamples\tmedian_ms_per_mpix"
               "\tmad_ms_per_mpix\tms_per_mpix_oldest_first\n"
               "test.good\tcpu\tX\t10\t-\t3\t2\t0\t2,2,2\n"
               "test.bad\tcpu\tX\t10\t-\t3\t2\t0\n"
               "test.bad\tfpga\tX\t10\t-\t3\t2\t0\t2,2,2\n"
               "test.bad\tcpu\tX\t99\t-\t3\t2\t0\t2,2,2\n"
               "test.bad\tcpu\tX\t10\t1/3\t3\t2\t0\t2,2,2\n"
               "test.bad\tcpu\tX\t10\t-\t4\t2\t0\t2,2,2\n"
               "test.bad\tcpu\tX\t10\t-\t3\t2\t0\t2,-2,2\n"
               "garbage\n");
    rt = runtime_with(path, "fcfs");
    cr_assert(eq(int, atomic_load(&n_warn), 1));
    cr_assert(strstr(first_warn, "7 malformed lines") != NULL, "%s", first_warn);
    cr_assert(strstr(first_warn, path) != NULL, "%s", first_warn);
    run_tasks(rt, 3, 16, 0);
    tw_runtime_destroy(rt);
    cr_assert(eq(int, atomic_load(&n_warn), 1));
    text = twtest_slurp(path);
    cr_assert(strstr(text, "test.good\tcpu\tX\t10\t-\t3\t2\t0\t2,2,2\n") != NULL, "%s", text);
    cr_assert(strstr(text, "test.bad") == NULL, "%s", text);
    cr_assert(strstr(text, "\ntest.run\tcpu\t") != NULL, "%s", text);
    free(text);
    free(path);
}

Test(model, a_file_that_is_not_a_model_file_is_left_alone)
{
    /* No version line: one warning at start, the runtime runs, and the file is not replaced
     * at the end (it may be someone's data); tw_models_read says TW_E_FORMAT. */
    static const char *const notes = "my precious notes\n1\t2\t3\n";
    char *path = twtest_path(tmp, "notes.tsv"), *text;
    tw_runtime *rt;
    tw_model_info *m = NULL;
    size_t n = 0;
    tw_error err;

    spit(path, notes);
    rt = runtime_with(path, "fcfs");
    cr_assert(eq(int, atomic_load(&n_warn), 1));
    cr_assert(strstr(first_warn, "not a tilewave cost model file") != NULL, "%s", first_warn);
    run_tasks(rt, 3, 16, 0);
    tw_runtime_destroy(rt);
    cr_assert(eq(int, atomic_load(&n_warn), 1));
    text = twtest_slurp(path);
    cr_assert(eq(str, text, (char *)notes));
    free(text);
    cr_assert(eq(int, tw_models_read(path, &m, &n, &err), TW_E_FORMAT));
    cr_assert(strstr(err.message, "not a tilewave cost model file") != NULL, "%s", err.message);
    cr_assert(m == NULL && n == 0);
    free(path);
}

Test(model, an_unwritable_file_is_one_warning)
{
    /* The directory of the file is a regular file: the save fails with one warning and
     * nothing else happens. */
    char *blocker = twtest_path(tmp, "blocker"), *path = twtest_path(tmp, "blocker/m.tsv");
    tw_runtime *rt;

    spit(blocker, "x");
    rt = runtime_with(path, "fcfs");
    run_tasks(rt, 3, 16, 0);
    tw_runtime_destroy(rt);
    cr_assert(eq(int, atomic_load(&n_warn), 1));
    cr_assert(strstr(first_warn, "cannot save the cost models") != NULL, "%s", first_warn);
    free(blocker);
    free(path);
}

Test(model, none_writes_nothing_and_auto_uses_the_cache_dir)
{
    /* runtime.models=none: nothing is read or written anywhere (and fcfs keeps no models at
     * all); auto: $XDG_CACHE_HOME/tilewave/models.tsv, else ~/.cache/tilewave/models.tsv,
     * the directories created; no home at all: memory only. */
    char *want;
    char buf[4096];
    tw_config *cfg = NULL;
    tw_runtime *rt;

    rt = runtime_with("none", "fcfs");
    cr_assert(rt->models == NULL);
    run_tasks(rt, 3, 16, 0);
    tw_runtime_destroy(rt);
    rt = runtime_with("none", "pats");
    cr_assert(rt->models != NULL);
    run_tasks(rt, 3, 16, 0);
    tw_runtime_destroy(rt);
    cr_assert(eq(int, twtest_count_entries(tmp), 0));

    rt = runtime_with("auto", "fcfs");
    run_tasks(rt, 3, 16, 0);
    tw_runtime_destroy(rt);
    want = twtest_path(tmp, "tilewave/models.tsv");
    cr_assert(twtest_exists(want));
    free(want);

    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", tmp, 1);
    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    cr_assert(eq(int, tw_models_get_path(cfg, buf, sizeof buf), TW_OK));
    want = twtest_path(tmp, ".cache/tilewave/models.tsv");
    cr_assert(eq(str, buf, want));
    rt = runtime_with("auto", "fcfs");
    run_tasks(rt, 3, 16, 0);
    tw_runtime_destroy(rt);
    cr_assert(twtest_exists(want));
    free(want);

    unsetenv("HOME");
    cr_assert(eq(int, tw_models_get_path(cfg, buf, sizeof buf), TW_OK));
    cr_assert(eq(str, buf, ""));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.models", "none", TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_models_get_path(cfg, buf, sizeof buf), TW_OK));
    cr_assert(eq(str, buf, ""));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.models", "/x/y.tsv", TW_CONFIG_SET, NULL),
                 TW_OK));
    cr_assert(eq(int, tw_models_get_path(cfg, buf, sizeof buf), TW_OK));
    cr_assert(eq(str, buf, "/x/y.tsv"));
    cr_assert(eq(int, tw_models_get_path(cfg, buf, 4), TW_E_INVALID));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.models", "", TW_CONFIG_SET, NULL),
                 TW_E_INVALID));
    tw_config_destroy(cfg);
    cr_assert(eq(int, atomic_load(&n_warn), 0), "%s", first_warn);
}

/* ---- the policy uses the task's buckets */

static tw_status
never_cuda(tw_task_ctx *ctx, void *arg)
{
    (void)arg;
    return twi_ctx_fail(ctx, TW_E_INTERNAL, "test: the CUDA variant ran");
}

static tw_status
nop_cpu(tw_task_ctx *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return TW_OK;
}

static const tw_task_kind kind_feat = {.name = "test.feat",
                                       .devices = TW_DEVICE_CPU | TW_DEVICE_CUDA,
                                       .cpu = nop_cpu, .cuda = never_cuda,
                                       .feature = feature_of_arg};

Test(model, pats_ranks_by_the_tasks_own_buckets)
{
    /* One kind whose GPU speedup depends on the content: 2x at feature 1/1000, 50x at
     * feature 1; at 1/10 there is no model, so it takes the size's feature-blind medians
     * (4 samples at 2x against 3 at 50x: 2x). A GPU worker takes the feature-1 tasks first,
     * then the others in order; a CPU worker the 2x ones first. */
    tw_runtime *rt = runtime_with("none", "pats");
    tw_sched s = {.policy = &twi_sched_pats, .rt = rt, .data = NULL};
    int cpu = twi_models_local(rt->models, TW_DEVICE_CPU, -1);
    int gpu = twi_models_local(rt->models, TW_DEVICE_CUDA, -1);
    static const int milli[5] = {1, 1000, 100, 1, 1000};
    static const int gpu_order[5] = {1, 4, 0, 2, 3}, cpu_order[5] = {0, 2, 3, 1, 4};
    tw_worker w;
    tw_job *job = NULL;
    tw_task *tasks[5];

    for (int i = 0; i < 4; i++) {
        twi_model_record(rt->models, &kind_feat, cpu, 1, 0.001, 2.0);
        twi_model_record(rt->models, &kind_feat, gpu, 1, 0.001, 1.0);
    }
    for (int i = 0; i < 3; i++) {
        twi_model_record(rt->models, &kind_feat, cpu, 1, 1.0, 50.0);
        twi_model_record(rt->models, &kind_feat, gpu, 1, 1.0, 1.0);
    }
    memset(&w, 0, sizeof w);
    w.rt = rt;
    cr_assert(eq(int, twi_job_create(rt, "policy", &job), TW_OK));
    for (int pass = 0; pass < 2; pass++) {
        const int *order = pass == 0 ? gpu_order : cpu_order;

        w.type = pass == 0 ? TW_DEVICE_CUDA : TW_DEVICE_CPU;
        w.runs = (unsigned)w.type;
        cr_assert(eq(int, s.policy->init(&s), TW_OK));
        for (int i = 0; i < 5; i++) {
            cr_assert(eq(int, twi_task_create(job, &kind_feat, (void *)(intptr_t)milli[i], NULL,
                                              &tasks[i]), TW_OK));
            s.policy->push(&s, tasks[i]);
        }
        for (int k = 0; k < 5; k++) {
            tw_task *t = s.policy->pop(&s, &w);

            cr_assert(t != NULL);
            cr_assert(eq(ptr, t, tasks[order[k]]), "pass %d: position %d", pass, k);
        }
        s.policy->fini(&s);
        for (int i = 0; i < 5; i++)
            twi_task_release(tasks[i]);
    }
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

/* ---- reconstruction's feature */

Test(model, reconstruction_tp_tasks_carry_their_wavefront)
{
    /* A reconstruction whose marker floods across 16x16 tiles records mrecon.tp models in the
     * file: the full TPs in feature bucket 1 (the whole tile), the seeded ones in small
     * buckets (at most the perimeter: 60 seeds of 256 pixels is under 1/4). */
    char *path = twtest_path(tmp, "models.tsv");
    tw_runtime *rt = runtime_with(path, "fcfs");
    static uint8_t marker[64 * 64], mask[64 * 64], result[64 * 64];
    tw_mrecon_opts o;
    tw_job *job = NULL;
    tw_error err;
    tw_model_info *m = NULL;
    size_t n = 0;
    bool full = false, seeded = false;

    memset(mask, 200, sizeof mask);
    marker[0] = 200;
    tw_mrecon_opts_init(&o);
    o.marker_image = (tw_host_image){.data = marker, .w = 64, .h = 64, .type = TW_U8};
    o.mask_image = (tw_host_image){.data = mask, .w = 64, .h = 64, .type = TW_U8};
    o.result = (tw_host_image){.data = result, .w = 64, .h = 64, .type = TW_U8};
    o.tile_w = o.tile_h = 16;
    cr_assert(eq(int, tw_mrecon_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    for (int i = 0; i < 64 * 64; i++)
        cr_assert(eq(u8, result[i], 200));
    tw_runtime_destroy(rt);
    cr_assert(eq(int, tw_models_read(path, &m, &n, NULL), TW_OK));
    for (size_t i = 0; i < n; i++) {
        if (strcmp(m[i].kind, "mrecon.tp") != 0)
            continue;
        cr_assert(eq(int, m[i].size_log2, 9)); /* marker + mask (+ seeds): 512..767 px */
        if (m[i].feature_max == 1.0)
            full = true;
        else if (m[i].feature_max > 0 && m[i].feature_max <= 0.25)
            seeded = true;
    }
    cr_assert(full && seeded);
    tw_models_free(m);
    free(path);
}

Test(model, an_empty_file_holds_no_models_and_is_written)
{
    /* An empty file (touched by hand) is a model file without models: no warning, and the
     * run's models replace it. */
    char *path = twtest_path(tmp, "models.tsv"), *text;
    tw_runtime *rt;

    spit(path, "");
    rt = runtime_with(path, "fcfs");
    run_tasks(rt, 3, 16, 0);
    tw_runtime_destroy(rt);
    cr_assert(eq(int, atomic_load(&n_warn), 0), "%s", first_warn);
    text = twtest_slurp(path);
    cr_assert(strstr(text, "\ntest.run\tcpu\t") != NULL, "%s", text);
    free(text);
    free(path);
}
