/* SPDX-License-Identifier: MIT */
/* tilewave tests: API misuse (NULL, wrong sizes, unknown names) returns the documented codes. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "twtest.h"
#include "twtest_rt.h"

/*
 * The error contract (include/tilewave/common.h): a failing call returns the documented
 * tw_status, fills the tw_error it was given with that status and one non-empty line naming the
 * problem, and leaves its out-parameters untouched.
 */

/* An out-pointer value no function would ever store. */
#define SENTINEL ((void *)(uintptr_t)0x5e5e5e50u)

/* Checks the status, and the message of the tw_error `terr` that the call filled. */
static void
check_err(tw_status got, tw_status want, const tw_error *e, const char *needle, const char *call,
          int line)
{
    cr_expect_eq(got, want, "line %d: %s returned %s, expected %s", line, call,
                 tw_status_string(got), tw_status_string(want));
    if (!e)
        return;
    /* TW_API_SHOW=1 lists every message, to review them */
    if (getenv("TW_API_SHOW"))
        fprintf(stderr, "%d: %s -> %s: %s\n", line, call, tw_status_string(got), e->message);
    cr_expect_eq(e->status, want, "line %d: %s: tw_error.status %s, expected %s", line, call,
                 tw_status_string(e->status), tw_status_string(want));
    cr_expect(e->message[0] != '\0', "line %d: %s: empty message", line, call);
    cr_expect(strchr(e->message, '\n') == NULL, "line %d: %s: message is not one line: '%s'",
              line, call, e->message);
    if (needle)
        cr_expect(strstr(e->message, needle) != NULL,
                  "line %d: %s: message '%s' does not name '%s'", line, call, e->message, needle);
}

/* FAILS(TW_E_X, "needle", call using &terr): the status, and terr's message naming needle. */
#define FAILS(want, needle, call)                                                              \
    do {                                                                                       \
        tw_error terr;                                                                         \
        memset(&terr, 0, sizeof terr);                                                         \
        tw_status st_ = (call);                                                                \
        check_err(st_, (want), &terr, (needle), #call, __LINE__);                              \
    } while (0)

/* The same for functions without a tw_error: the status only. */
#define FAILS_NOMSG(want, call) check_err((call), (want), NULL, NULL, #call, __LINE__)

/* A fixture folder with a small 8-bit image. */
static char *dir;
static char *img8;

static void
setup_dir(void)
{
    uint8_t px[40 * 30];

    tw_log_set_level(TW_LOG_ERROR);
    twtest_quiet_logs();
    dir = twtest_tmpdir();
    img8 = twtest_path(dir, "in8.tif");
    for (int i = 0; i < 40 * 30; i++)
        px[i] = (uint8_t)(i * 7);
    tw_error err;
    cr_assert_eq(twtest_write_image(img8, px, 40, 30, TW_U8, &err), TW_OK, "%s", err.message);
}

static void
teardown_dir(void)
{
    twtest_rmtree(dir);
    free(img8);
    free(dir);
}

/* ---- common.h */

Test(api_common, out_of_range_enums_have_safe_answers)
{
    /* status and sample-type names never return NULL; unknown types have size 0 */
    cr_expect_str_eq(tw_status_string((tw_status)99), "TW_E_UNKNOWN");
    cr_expect_str_eq(tw_status_string((tw_status)-1), "TW_E_UNKNOWN");
    cr_expect_eq(tw_sample_size((tw_sample_type)0), 0);
    cr_expect_eq(tw_sample_size((tw_sample_type)99), 0);
    cr_expect_str_eq(tw_sample_type_name((tw_sample_type)0), "?");
    cr_expect_str_eq(tw_sample_type_name((tw_sample_type)99), "?");
    /* an unknown log level is ignored, NULL restores the default handler, NULL frees nothing */
    tw_log_set_level((tw_log_level)99);
    tw_log_set_level((tw_log_level)-1);
    tw_log_set_handler(NULL, NULL);
    tw_free(NULL);
    cr_expect(tw_version_string() != NULL && tw_version_string()[0] != '\0');
    cr_expect(tw_build_has_cuda() == 0 || tw_build_has_cuda() == 1);
}

/* ---- config.h */

Test(api_config, null_arguments)
{
    /* every pointer argument of the config functions, NULL in turn */
    tw_config *cfg = NULL, *out = SENTINEL;
    int64_t i = 42, w = 42, h = 42;
    const char *s = SENTINEL;
    tw_config_entry ent;

    FAILS_NOMSG(TW_E_INVALID, tw_config_create(NULL));
    cr_assert_eq(tw_config_create(&cfg), TW_OK);
    FAILS_NOMSG(TW_E_INVALID, tw_config_clone(NULL, &out));
    FAILS_NOMSG(TW_E_INVALID, tw_config_clone(cfg, NULL));
    cr_expect_eq(out, SENTINEL);
    tw_config_destroy(NULL);
    FAILS(TW_E_INVALID, "config", tw_config_load_file(NULL, "x.ini", &terr));
    FAILS(TW_E_INVALID, "config", tw_config_load_file(cfg, NULL, &terr));
    FAILS(TW_E_INVALID, "config", tw_config_load_env(NULL, &terr));
    FAILS(TW_E_INVALID, "tw_config_set", tw_config_set(NULL, "tile.size", "64x64",
                                                       TW_CONFIG_SET, &terr));
    FAILS(TW_E_INVALID, "tw_config_set", tw_config_set(cfg, NULL, "64x64", TW_CONFIG_SET, &terr));
    FAILS(TW_E_INVALID, "tw_config_set", tw_config_set(cfg, "tile.size", NULL, TW_CONFIG_SET,
                                                       &terr));
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_int(NULL, "runtime.cpu_workers", &i));
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_int(cfg, NULL, &i));
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_int(cfg, "runtime.cpu_workers", NULL));
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_dims(NULL, "tile.size", &w, &h));
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_dims(cfg, NULL, &w, &h));
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_dims(cfg, "tile.size", NULL, &h));
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_dims(cfg, "tile.size", &w, NULL));
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_string(NULL, "io.reader", &s));
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_string(cfg, NULL, &s));
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_string(cfg, "io.reader", NULL));
    FAILS_NOMSG(TW_E_INVALID, tw_config_describe(NULL, 0, &ent));
    FAILS_NOMSG(TW_E_INVALID, tw_config_describe(cfg, 0, NULL));
    cr_expect(i == 42 && w == 42 && h == 42 && s == SENTINEL, "an out-parameter was written");
    tw_config_destroy(cfg);
}

Test(api_config, unknown_keys_types_and_values)
{
    /* unknown keys, keys of another type, bad values and sources, an index past the table */
    tw_config *cfg = NULL;
    int64_t i = 42, w = 42, h = 42;
    const char *s = SENTINEL;
    tw_config_entry ent;

    cr_assert_eq(tw_config_create(&cfg), TW_OK);
    FAILS(TW_E_INVALID, "unknown key 'tile.sise'",
          tw_config_set(cfg, "tile.sise", "64x64", TW_CONFIG_SET, &terr));
    FAILS(TW_E_INVALID, "", tw_config_set(cfg, "", "1", TW_CONFIG_SET, &terr));
    FAILS(TW_E_INVALID, "bad value '0x0' for tile.size",
          tw_config_set(cfg, "tile.size", "0x0", TW_CONFIG_SET, &terr));
    FAILS(TW_E_INVALID, "tile.size", tw_config_set(cfg, "tile.size", "-16x16", TW_CONFIG_SET,
                                                   &terr));
    FAILS(TW_E_INVALID, "io.reader", tw_config_set(cfg, "io.reader", "bogus", TW_CONFIG_SET,
                                                   &terr));
    FAILS(TW_E_INVALID, "runtime.cpu_workers",
          tw_config_set(cfg, "runtime.cpu_workers", "12abc", TW_CONFIG_SET, &terr));
    FAILS(TW_E_INVALID, "tw_config_set",
          tw_config_set(cfg, "tile.size", "64x64", (tw_config_source)99, &terr));
    FAILS(TW_E_INVALID, "tw_config_set",
          tw_config_set(cfg, "tile.size", "64x64", (tw_config_source)-1, &terr));
    /* nothing of the failed calls was applied */
    cr_assert_eq(tw_config_get_dims(cfg, "tile.size", &w, &h), TW_OK);
    cr_expect(w > 0 && h > 0);
    w = h = 42;
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_int(cfg, "bogus.key", &i));
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_int(cfg, "tile.size", &i));   /* DIMS */
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_dims(cfg, "runtime.cpu_workers", &w, &h)); /* INT */
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_dims(cfg, "bogus.key", &w, &h));
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_string(cfg, "tile.size", &s));
    FAILS_NOMSG(TW_E_INVALID, tw_config_get_string(cfg, "bogus.key", &s));
    FAILS_NOMSG(TW_E_INVALID, tw_config_describe(cfg, tw_config_count(), &ent));
    FAILS_NOMSG(TW_E_INVALID, tw_config_describe(cfg, SIZE_MAX, &ent));
    cr_expect(i == 42 && w == 42 && h == 42 && s == SENTINEL, "an out-parameter was written");
    tw_config_destroy(cfg);
}

Test(api_config, bad_files_and_environment, .init = setup_dir, .fini = teardown_dir)
{
    /* a missing file is TW_E_IO; unknown keys and bad values in a file or variable are
     * TW_E_INVALID naming the place; the config is left unchanged */
    tw_config *cfg = NULL;
    char *ini = twtest_path(dir, "bad.ini"), *missing = twtest_path(dir, "missing.ini");
    int64_t w = 0, h = 0, w0 = 0, h0 = 0;
    FILE *f;

    cr_assert_eq(tw_config_create(&cfg), TW_OK);
    cr_assert_eq(tw_config_get_dims(cfg, "tile.size", &w0, &h0), TW_OK);
    FAILS(TW_E_IO, "missing.ini", tw_config_load_file(cfg, missing, &terr));
    cr_assert((f = fopen(ini, "w")) != NULL);
    fputs("[tile]\nsize = 64x64\nsise = 32x32\n", f);
    fclose(f);
    FAILS(TW_E_INVALID, "unknown key 'tile.sise'", tw_config_load_file(cfg, ini, &terr));
    FAILS(TW_E_INVALID, ":3:", tw_config_load_file(cfg, ini, &terr));
    cr_assert((f = fopen(ini, "w")) != NULL);
    fputs("tile.size = 64x64\ntile.size = banana\n", f);
    fclose(f);
    FAILS(TW_E_INVALID, "bad value 'banana' for tile.size", tw_config_load_file(cfg, ini, &terr));
    cr_assert((f = fopen(ini, "w")) != NULL);
    fputs("[tile\n", f);
    fclose(f);
    FAILS(TW_E_INVALID, "syntax error", tw_config_load_file(cfg, ini, &terr));
    FAILS(TW_E_IO, "config", tw_config_load_file(cfg, dir, &terr)); /* a folder */
    setenv("TILEWAVE_TILE_SIZE", "0x0", 1);
    FAILS(TW_E_INVALID, "TILEWAVE_TILE_SIZE", tw_config_load_env(cfg, &terr));
    unsetenv("TILEWAVE_TILE_SIZE");
    cr_assert_eq(tw_config_get_dims(cfg, "tile.size", &w, &h), TW_OK);
    cr_expect(w == w0 && h == h0, "a failed load changed tile.size to %lldx%lld", (long long)w,
              (long long)h);
    tw_config_destroy(cfg);
    free(ini);
    free(missing);
}

/* ---- runtime.h */

Test(api_runtime, null_arguments_and_indices)
{
    /* NULL runtime or out-pointer, worker and GPU indices out of range */
    tw_runtime *rt = twtest_runtime_with("none", "2"), *out = SENTINEL;
    tw_topology_info topo;
    tw_gpu_info gpu;
    tw_worker_info wk;
    tw_memory_info mem;

    twtest_quiet_logs();
    FAILS(TW_E_INVALID, "runtime", tw_runtime_create(NULL, NULL, &terr));
    tw_runtime_destroy(NULL);
    cr_expect_null(tw_runtime_get_config(NULL));
    cr_expect_not_null(tw_runtime_get_config(rt));
    memset(&topo, 0xab, sizeof topo);
    FAILS_NOMSG(TW_E_INVALID, tw_runtime_get_topology(NULL, &topo));
    FAILS_NOMSG(TW_E_INVALID, tw_runtime_get_topology(rt, NULL));
    cr_expect_eq(topo.n_cores, (int)0xabababab);
    memset(&gpu, 0xab, sizeof gpu);
    FAILS_NOMSG(TW_E_INVALID, tw_runtime_get_gpu(NULL, 0, &gpu));
    FAILS_NOMSG(TW_E_INVALID, tw_runtime_get_gpu(rt, 0, NULL));
    FAILS_NOMSG(TW_E_INVALID, tw_runtime_get_gpu(rt, 0, &gpu)); /* runtime.gpus = none */
    FAILS_NOMSG(TW_E_INVALID, tw_runtime_get_gpu(rt, -1, &gpu));
    cr_expect_eq(gpu.ordinal, (int)0xabababab);
    cr_expect_eq(tw_runtime_get_worker_count(NULL), 0);
    cr_expect_eq(tw_runtime_get_worker_count(rt), 2);
    memset(&wk, 0xab, sizeof wk);
    FAILS_NOMSG(TW_E_INVALID, tw_runtime_get_worker(NULL, 0, &wk));
    FAILS_NOMSG(TW_E_INVALID, tw_runtime_get_worker(rt, 0, NULL));
    FAILS_NOMSG(TW_E_INVALID, tw_runtime_get_worker(rt, -1, &wk));
    FAILS_NOMSG(TW_E_INVALID, tw_runtime_get_worker(rt, 2, &wk));
    FAILS_NOMSG(TW_E_INVALID, tw_runtime_get_worker(rt, INT32_MAX, &wk));
    cr_expect_eq(wk.index, (int)0xabababab);
    memset(&mem, 0xab, sizeof mem);
    FAILS_NOMSG(TW_E_INVALID, tw_runtime_get_memory(NULL, &mem));
    FAILS_NOMSG(TW_E_INVALID, tw_runtime_get_memory(rt, NULL));
    cr_expect_eq(mem.spills, 0xababababababababull);
    (void)out;
    tw_runtime_destroy(rt);
}

Test(api_runtime, bad_config_fails_create)
{
    /* a runtime.gpus naming a GPU that does not exist is TW_E_INVALID; *out untouched */
    tw_config *cfg = NULL;
    tw_runtime *out = SENTINEL;

    twtest_quiet_logs();
    cr_assert_eq(tw_config_create(&cfg), TW_OK);
    cr_assert_eq(tw_config_set(cfg, "runtime.models", "none", TW_CONFIG_SET, NULL), TW_OK);
    cr_assert_eq(tw_config_set(cfg, "runtime.gpus", "7", TW_CONFIG_SET, NULL), TW_OK);
    cr_assert_eq(tw_config_set(cfg, "runtime.cpu_workers", "1", TW_CONFIG_SET, NULL), TW_OK);
    FAILS(TW_E_INVALID, "7", tw_runtime_create(cfg, &out, &terr));
    cr_expect_eq(out, SENTINEL);
    tw_config_destroy(cfg);
}

Test(api_runtime, models_path_and_file, .init = setup_dir, .fini = teardown_dir)
{
    /* tw_models_get_path: NULL, n = 0 and a buffer too small leave buf as it was;
     * tw_models_read: NULL arguments, a file that is not a model file */
    tw_config *cfg = NULL;
    char buf[16], big[4096];
    tw_model_info *models = SENTINEL;
    size_t n = 42;

    cr_assert_eq(tw_config_create(&cfg), TW_OK);
    cr_assert_eq(tw_config_set(cfg, "runtime.models", "/a/path/longer/than/sixteen/models.tsv",
                               TW_CONFIG_SET, NULL), TW_OK);
    memset(buf, 'x', sizeof buf);
    FAILS_NOMSG(TW_E_INVALID, tw_models_get_path(NULL, buf, sizeof buf));
    FAILS_NOMSG(TW_E_INVALID, tw_models_get_path(cfg, NULL, sizeof buf));
    FAILS_NOMSG(TW_E_INVALID, tw_models_get_path(cfg, buf, 0));
    FAILS_NOMSG(TW_E_INVALID, tw_models_get_path(cfg, buf, sizeof buf));
    for (size_t i = 0; i < sizeof buf; i++)
        cr_expect_eq(buf[i], 'x', "tw_models_get_path wrote buf[%zu] on failure", i);
    cr_expect_eq(tw_models_get_path(cfg, big, sizeof big), TW_OK);
    cr_expect_str_eq(big, "/a/path/longer/than/sixteen/models.tsv");

    FAILS(TW_E_INVALID, "models", tw_models_read(NULL, &models, &n, &terr));
    FAILS(TW_E_INVALID, "models", tw_models_read(img8, NULL, &n, &terr));
    FAILS(TW_E_INVALID, "models", tw_models_read(img8, &models, NULL, &terr));
    FAILS(TW_E_FORMAT, "in8.tif", tw_models_read(img8, &models, &n, &terr));
    FAILS(TW_E_IO, "models", tw_models_read(dir, &models, &n, &terr)); /* a folder */
    cr_expect(models == SENTINEL && n == 42, "tw_models_read wrote its out-parameters");
    tw_models_free(NULL);
    tw_config_destroy(cfg);
}

/* ---- jobs */

static void
progress_fn(tw_job *job, const tw_progress *p, void *user)
{
    (void)job;
    (void)p;
    (void)user;
}

Test(api_job, null_job_and_bad_interval, .init = setup_dir, .fini = teardown_dir)
{
    /* NULL job everywhere; a negative or overflowing progress interval */
    tw_runtime *rt = twtest_runtime_with("none", "2");
    tw_gray_opts o;
    tw_job *job = NULL;
    tw_progress p;
    tw_error err;
    char *outp = twtest_path(dir, "g.tif");

    FAILS_NOMSG(TW_E_INVALID, tw_job_wait(NULL, -1));
    FAILS_NOMSG(TW_E_INVALID, tw_job_wait(NULL, 0));
    tw_job_cancel(NULL);
    cr_expect_null(tw_job_get_error(NULL));
    memset(&p, 0xab, sizeof p);
    tw_job_get_progress(NULL, &p);
    cr_expect(p.done == 0 && p.total == 0 && !p.finished, "NULL job: progress not zeroed");
    FAILS_NOMSG(TW_E_INVALID, tw_job_set_progress_callback(NULL, progress_fn, NULL, 0));
    tw_job_destroy(NULL);

    tw_gray_opts_init(&o);
    o.input.path = img8;
    o.output.path = outp;
    cr_assert_eq(tw_gray_submit(rt, &o, &job, &err), TW_OK, "%s", err.message);
    FAILS_NOMSG(TW_E_INVALID, tw_job_set_progress_callback(job, progress_fn, NULL, -1));
    FAILS_NOMSG(TW_E_INVALID, tw_job_set_progress_callback(job, progress_fn, NULL, INT64_MAX));
    tw_job_get_progress(job, NULL); /* no-op */
    cr_expect_eq(tw_job_wait(job, -1), TW_OK);
    cr_expect_null(tw_job_get_error(job));
    tw_job_destroy(job);
    free(outp);
    tw_runtime_destroy(rt);
}

/* ---- image.h: slides */

Test(api_slide, open_misuse, .init = setup_dir, .fini = teardown_dir)
{
    /* NULL path or out, unknown reader kind, a missing file, a file that is not an image */
    tw_slide *s = SENTINEL;
    char *missing = twtest_path(dir, "missing.tif"), *txt = twtest_path(dir, "notes.txt");
    FILE *f;

    FAILS(TW_E_INVALID, "NULL", tw_slide_open(NULL, TW_READER_AUTO, &s, &terr));
    FAILS(TW_E_INVALID, "NULL", tw_slide_open(img8, TW_READER_AUTO, NULL, &terr));
    FAILS(TW_E_INVALID, "reader kind 99", tw_slide_open(img8, (tw_reader_kind)99, &s, &terr));
    FAILS(TW_E_INVALID, "reader kind -1", tw_slide_open(img8, (tw_reader_kind)-1, &s, &terr));
    FAILS(TW_E_IO, "missing.tif", tw_slide_open(missing, TW_READER_AUTO, &s, &terr));
    FAILS(TW_E_IO, "missing.tif", tw_slide_open(missing, TW_READER_TIFF, &s, &terr));
    cr_assert((f = fopen(txt, "w")) != NULL);
    fputs("not an image at all, just some text that is long enough\n", f);
    fclose(f);
    FAILS(TW_E_FORMAT, "notes.txt", tw_slide_open(txt, TW_READER_AUTO, &s, &terr));
    FAILS(TW_E_FORMAT, "notes.txt", tw_slide_open(txt, TW_READER_TIFF, &s, &terr));
    cr_expect_eq(s, SENTINEL);
    tw_slide_close(NULL);
    free(missing);
    free(txt);
}

Test(api_slide, getters_with_null_and_bad_levels, .init = setup_dir, .fini = teardown_dir)
{
    /* the getters' documented answers for a NULL slide, levels out of range */
    tw_slide *s = NULL;
    tw_level_info lv;
    double mx = 1, my = 1;
    tw_error err;

    cr_expect_null(tw_slide_get_format(NULL));
    cr_expect_eq(tw_slide_get_reader(NULL), TW_READER_AUTO);
    cr_expect_eq(tw_slide_get_level_count(NULL), 0);
    cr_expect_eq(tw_slide_get_channels(NULL), 0);
    cr_expect_eq(tw_slide_get_sample_type(NULL), TW_U8);
    tw_slide_get_mpp(NULL, &mx, &my);
    cr_expect(mx == 0 && my == 0);
    tw_slide_get_mpp(NULL, NULL, NULL);
    cr_expect_null(tw_slide_get_property(NULL, "tiff.Software"));
    cr_expect_null(tw_slide_get_property_names(NULL));

    cr_assert_eq(tw_slide_open(img8, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    cr_expect_null(tw_slide_get_property(s, NULL));
    cr_expect_null(tw_slide_get_property(s, "no.such.property"));
    tw_slide_get_mpp(s, NULL, NULL);
    memset(&lv, 0xab, sizeof lv);
    FAILS_NOMSG(TW_E_INVALID, tw_slide_get_level(NULL, 0, &lv));
    FAILS_NOMSG(TW_E_INVALID, tw_slide_get_level(s, 0, NULL));
    FAILS_NOMSG(TW_E_INVALID, tw_slide_get_level(s, -1, &lv));
    FAILS_NOMSG(TW_E_INVALID, tw_slide_get_level(s, tw_slide_get_level_count(s), &lv));
    cr_expect_eq(lv.tile_w, (int32_t)0xabababab);
    /* channels (@since 0.7): none on a gray image, NULL arguments refused */
    cr_expect_eq(tw_slide_get_channel_count(NULL), 0);
    cr_expect_eq(tw_slide_get_channel_count(s), 0);
    cr_expect_null(tw_slide_get_channel_name(NULL, 0));
    cr_expect_null(tw_slide_get_channel_name(s, 0));
    cr_expect_null(tw_slide_get_channel_name(s, -1));
    cr_expect_eq(tw_slide_get_channel(NULL), -1);
    cr_expect_eq(tw_slide_get_channel(s), -1);
    FAILS(TW_E_INVALID, "NULL", tw_slide_set_channel(NULL, "0", &terr));
    FAILS(TW_E_INVALID, "NULL", tw_slide_set_channel(s, NULL, &terr));
    FAILS(TW_E_INVALID, "has no channels to choose from", tw_slide_set_channel(s, "0", &terr));
    tw_slide_close(s);
}

Test(api_slide, read_region_misuse, .init = setup_dir, .fini = teardown_dir)
{
    /* NULL slide or buffer, levels out of range, empty and outside regions, a short stride;
     * the buffer is left as it was */
    tw_slide *s = NULL;
    uint8_t buf[40 * 30];
    tw_error err;

    cr_assert_eq(tw_slide_open(img8, TW_READER_AUTO, &s, &err), TW_OK, "%s", err.message);
    memset(buf, 0xab, sizeof buf);
    FAILS(TW_E_INVALID, "NULL", tw_slide_read_region(NULL, 0, 0, 0, 4, 4, buf, 4, &terr));
    FAILS(TW_E_INVALID, "NULL", tw_slide_read_region(s, 0, 0, 0, 4, 4, NULL, 4, &terr));
    FAILS(TW_E_INVALID, "level -1", tw_slide_read_region(s, -1, 0, 0, 4, 4, buf, 4, &terr));
    FAILS(TW_E_INVALID, "level 7", tw_slide_read_region(s, 7, 0, 0, 4, 4, buf, 4, &terr));
    FAILS(TW_E_INVALID, "empty", tw_slide_read_region(s, 0, 0, 0, 0, 4, buf, 4, &terr));
    FAILS(TW_E_INVALID, "empty", tw_slide_read_region(s, 0, 0, 0, 4, -1, buf, 4, &terr));
    FAILS(TW_E_INVALID, "outside", tw_slide_read_region(s, 0, 38, 0, 4, 4, buf, 4, &terr));
    FAILS(TW_E_INVALID, "outside", tw_slide_read_region(s, 0, -1, 0, 4, 4, buf, 4, &terr));
    FAILS(TW_E_INVALID, "outside",
          tw_slide_read_region(s, 0, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, buf, 4, &terr));
    FAILS(TW_E_INVALID, "outside",
          tw_slide_read_region(s, 0, 1, 1, INT64_MAX, 2, buf, SIZE_MAX, &terr));
    FAILS(TW_E_INVALID, "stride 3", tw_slide_read_region(s, 0, 0, 0, 4, 4, buf, 3, &terr));
    FAILS(TW_E_INVALID, "stride 0", tw_slide_read_region(s, 0, 0, 0, 4, 4, buf, 0, &terr));
    for (size_t i = 0; i < sizeof buf; i++)
        cr_assert_eq(buf[i], 0xab, "byte %zu of the buffer written by a failed read", i);
    tw_slide_close(s);
}

/* ---- image.h: names */

Test(api_names, unknown_names_fail)
{
    /* every *_parse with NULL and with an unknown name; *out untouched */
    tw_compression c = (tw_compression)77;
    tw_layout l = (tw_layout)77;
    tw_gray_mode g = (tw_gray_mode)77;
    tw_mrecon_method m = (tw_mrecon_method)77;
    tw_edt_format ef = (tw_edt_format)77;
    tw_edt_method em = (tw_edt_method)77;
    tw_attr_filter af = (tw_attr_filter)77;

    FAILS_NOMSG(TW_E_INVALID, tw_compression_parse("bogus", &c));
    FAILS_NOMSG(TW_E_INVALID, tw_compression_parse("", &c));
    FAILS_NOMSG(TW_E_INVALID, tw_compression_parse("DEFLATE", &c));
    FAILS_NOMSG(TW_E_INVALID, tw_compression_parse(NULL, &c));
    FAILS_NOMSG(TW_E_INVALID, tw_compression_parse("zstd", NULL));
    FAILS_NOMSG(TW_E_INVALID, tw_layout_parse("bogus", &l));
    FAILS_NOMSG(TW_E_INVALID, tw_layout_parse(NULL, &l));
    FAILS_NOMSG(TW_E_INVALID, tw_layout_parse("ome", NULL));
    FAILS_NOMSG(TW_E_INVALID, tw_gray_mode_parse("bogus", &g));
    FAILS_NOMSG(TW_E_INVALID, tw_gray_mode_parse(NULL, &g));
    FAILS_NOMSG(TW_E_INVALID, tw_gray_mode_parse("r", NULL));
    FAILS_NOMSG(TW_E_INVALID, tw_mrecon_method_parse("bogus", &m));
    FAILS_NOMSG(TW_E_INVALID, tw_mrecon_method_parse(NULL, &m));
    FAILS_NOMSG(TW_E_INVALID, tw_mrecon_method_parse("erosion", NULL));
    FAILS_NOMSG(TW_E_INVALID, tw_edt_format_parse("bogus", &ef));
    FAILS_NOMSG(TW_E_INVALID, tw_edt_format_parse(NULL, &ef));
    FAILS_NOMSG(TW_E_INVALID, tw_edt_format_parse("u16", NULL));
    FAILS_NOMSG(TW_E_INVALID, tw_edt_method_parse("bogus", &em));
    FAILS_NOMSG(TW_E_INVALID, tw_edt_method_parse(NULL, &em));
    FAILS_NOMSG(TW_E_INVALID, tw_edt_method_parse("exact", NULL));
    FAILS_NOMSG(TW_E_INVALID, tw_attr_filter_parse("bogus", &af));
    FAILS_NOMSG(TW_E_INVALID, tw_attr_filter_parse(NULL, &af));
    FAILS_NOMSG(TW_E_INVALID, tw_attr_filter_parse("area-open", NULL));
    cr_expect(c == 77 && l == 77 && g == 77 && m == 77 && ef == 77 && em == 77 && af == 77,
              "a failed parse wrote its out-parameter");
}

Test(api_names, init_functions_accept_null)
{
    /* every *_init is a no-op on NULL */
    tw_writer_opts_init(NULL);
    tw_sample_opts_init(NULL);
    tw_gray_opts_init(NULL);
    tw_convert_opts_init(NULL);
    tw_mrecon_stats_init(NULL);
    tw_mrecon_opts_init(NULL);
    tw_mrecon_filter_opts_init(NULL);
    tw_edt_report_init(NULL);
    tw_edt_opts_init(NULL);
    tw_maxtree_opts_init(NULL);
    tw_attr_filter_report_init(NULL);
    tw_attr_filter_opts_init(NULL);
}

/* ---- image.h: the writer */

static void
writer_opts(tw_writer_opts *o)
{
    tw_writer_opts_init(o);
    o->w = 40;
    o->h = 30;
    o->tile_w = o->tile_h = 16;
}

/* The writer refuses the options `o` with TW_E_INVALID naming `needle`; nothing is written. */
static void
writer_refuses(const tw_writer_opts *o, const char *needle, int line)
{
    char *p = twtest_path(dir, "w.tif");
    tw_writer *wr = SENTINEL;
    tw_error terr;
    tw_status st;

    memset(&terr, 0, sizeof terr);
    st = tw_writer_open(p, o, &wr, &terr);
    check_err(st, TW_E_INVALID, &terr, needle, "tw_writer_open", line);
    cr_expect_eq(wr, SENTINEL, "line %d: *out written", line);
    cr_expect_eq(twtest_count_entries(dir), 1, "line %d: a file was left behind", line);
    free(p);
}

Test(api_writer, open_misuse, .init = setup_dir, .fini = teardown_dir)
{
    /* NULL arguments, struct_size 0 / huge, every option out of range */
    tw_writer_opts o;
    tw_writer *wr = SENTINEL;
    char *p = twtest_path(dir, "w.tif"), *nodir = twtest_path(dir, "no/such/dir/w.tif");

    writer_opts(&o);
    FAILS(TW_E_INVALID, "NULL", tw_writer_open(NULL, &o, &wr, &terr));
    FAILS(TW_E_INVALID, "NULL", tw_writer_open(p, NULL, &wr, &terr));
    FAILS(TW_E_INVALID, "NULL", tw_writer_open(p, &o, NULL, &terr));
    o.struct_size = 0;
    writer_refuses(&o, "tw_writer_opts_init", __LINE__);
    o.struct_size = SIZE_MAX;
    writer_refuses(&o, "tw_writer_opts_init", __LINE__);
    writer_opts(&o);
    o.w = 0;
    writer_refuses(&o, "image size", __LINE__);
    writer_opts(&o);
    o.h = -5;
    writer_refuses(&o, "image size", __LINE__);
    writer_opts(&o);
    o.channels = 4;
    writer_refuses(&o, "channels", __LINE__);
    writer_opts(&o);
    o.type = (tw_sample_type)99;
    writer_refuses(&o, "sample type 99", __LINE__);
    writer_opts(&o);
    o.tile_w = 0;
    writer_refuses(&o, "tile size", __LINE__);
    writer_opts(&o);
    o.tile_h = 17;
    writer_refuses(&o, "tile size", __LINE__);
    writer_opts(&o);
    o.tile_w = -16;
    writer_refuses(&o, "tile size", __LINE__);
    writer_opts(&o);
    o.n_levels = 0;
    writer_refuses(&o, "levels", __LINE__);
    writer_opts(&o);
    o.n_levels = 99;
    writer_refuses(&o, "levels", __LINE__);
    writer_opts(&o);
    o.compression = (tw_compression)99;
    writer_refuses(&o, "compression 99", __LINE__);
    writer_opts(&o);
    o.level_of_compression = -1;
    writer_refuses(&o, "deflate level -1", __LINE__);
    writer_opts(&o);
    o.compression = TW_COMPRESS_JPEG;
    o.quality = 101;
    writer_refuses(&o, "quality 101", __LINE__);
    writer_opts(&o);
    o.layout = (tw_layout)99;
    writer_refuses(&o, "layout 99", __LINE__);
    writer_opts(&o);
    o.mpp_x = -1;
    writer_refuses(&o, "mpp", __LINE__);
    writer_opts(&o);
    FAILS(TW_E_IO, "no/such/dir", tw_writer_open(nodir, &o, &wr, &terr));
    cr_expect_eq(wr, SENTINEL);
    free(p);
    free(nodir);
}

Test(api_writer, tile_and_close_misuse, .init = setup_dir, .fini = teardown_dir)
{
    /* NULL writer or data, tiles and levels out of range, a short stride, a tile written twice,
     * closing with tiles missing: nothing is left at the output path */
    tw_writer_opts o;
    tw_writer *wr = NULL;
    uint8_t tile[16 * 16] = {0};
    char *p = twtest_path(dir, "w.tif");
    tw_error err;

    writer_opts(&o);
    cr_assert_eq(tw_writer_open(p, &o, &wr, &err), TW_OK, "%s", err.message);
    FAILS(TW_E_INVALID, "NULL", tw_writer_write_tile(NULL, 0, 0, 0, tile, 16, &terr));
    FAILS(TW_E_INVALID, "NULL", tw_writer_write_tile(wr, 0, 0, 0, NULL, 16, &terr));
    FAILS(TW_E_INVALID, "level -1", tw_writer_write_tile(wr, -1, 0, 0, tile, 16, &terr));
    FAILS(TW_E_INVALID, "level 1", tw_writer_write_tile(wr, 1, 0, 0, tile, 16, &terr));
    FAILS(TW_E_INVALID, "outside", tw_writer_write_tile(wr, 0, 3, 0, tile, 16, &terr));
    FAILS(TW_E_INVALID, "outside", tw_writer_write_tile(wr, 0, 0, -1, tile, 16, &terr));
    FAILS(TW_E_INVALID, "outside",
          tw_writer_write_tile(wr, 0, INT64_MAX, INT64_MAX, tile, 16, &terr));
    FAILS(TW_E_INVALID, "stride 15", tw_writer_write_tile(wr, 0, 0, 0, tile, 15, &terr));
    cr_assert_eq(tw_writer_write_tile(wr, 0, 0, 0, tile, 16, &err), TW_OK, "%s", err.message);
    FAILS(TW_E_INVALID, "twice", tw_writer_write_tile(wr, 0, 0, 0, tile, 16, &terr));
    /* the misuse above did not poison the writer: the other tiles still go in */
    cr_assert_eq(tw_writer_write_tile(wr, 0, 1, 0, tile, 16, &err), TW_OK, "%s", err.message);
    FAILS(TW_E_INVALID, "never written", tw_writer_close(wr, &terr));
    cr_expect(!twtest_exists(p), "a failed close left the output");
    cr_expect_eq(twtest_count_entries(dir), 1, "a failed close left a file behind");
    FAILS(TW_E_INVALID, "NULL", tw_writer_close(NULL, &terr));
    tw_writer_abort(NULL);
    free(p);
}

/* ---- image.h: the sample slide */

Test(api_sample, write_misuse, .init = setup_dir, .fini = teardown_dir)
{
    /* NULL arguments, struct_size 0, sizes, tiles and compressions out of range */
    tw_sample_opts o;
    char *p = twtest_path(dir, "s.tif");

    tw_sample_opts_init(&o);
    FAILS(TW_E_INVALID, "sample", tw_sample_write(NULL, &o, &terr));
    FAILS(TW_E_INVALID, "sample", tw_sample_write(p, NULL, &terr));
    o.struct_size = 0;
    FAILS(TW_E_INVALID, "tw_sample_opts_init", tw_sample_write(p, &o, &terr));
    tw_sample_opts_init(&o);
    o.w = 0;
    FAILS(TW_E_INVALID, "size", tw_sample_write(p, &o, &terr));
    tw_sample_opts_init(&o);
    o.h = -1;
    FAILS(TW_E_INVALID, "size", tw_sample_write(p, &o, &terr));
    tw_sample_opts_init(&o);
    o.tile = 0;
    FAILS(TW_E_INVALID, "tile", tw_sample_write(p, &o, &terr));
    tw_sample_opts_init(&o);
    o.tile = 24;
    FAILS(TW_E_INVALID, "tile", tw_sample_write(p, &o, &terr));
    tw_sample_opts_init(&o);
    o.compression = (tw_compression)99;
    FAILS(TW_E_INVALID, "compression 99", tw_sample_write(p, &o, &terr));
    cr_expect_eq(twtest_count_entries(dir), 1, "a failed sample write left a file behind");
    free(p);
}

Test(api_sample, struct_size_too_large, .init = setup_dir, .fini = teardown_dir)
{
    /* a struct_size larger than the library knows is TW_E_INVALID, and writes nothing */
    tw_sample_opts o;
    char *p = twtest_path(dir, "s.tif");

    tw_sample_opts_init(&o);
    o.struct_size = SIZE_MAX;
    FAILS(TW_E_INVALID, "tw_sample_opts_init", tw_sample_write(p, &o, &terr));
    o.struct_size = sizeof o + 8;
    FAILS(TW_E_INVALID, "tw_sample_opts_init", tw_sample_write(p, &o, &terr));
    cr_expect_eq(twtest_count_entries(dir), 1, "a failed sample write left a file behind");
    free(p);
}

/* ---- ops.h: the submit functions */

/* A runtime with 2 CPU workers, no GPU, and the fixture folder. */
static tw_runtime *rt;

static void
setup_ops(void)
{
    setup_dir();
    rt = twtest_runtime_with("none", "2");
}

static void
teardown_ops(void)
{
    tw_runtime_destroy(rt);
    teardown_dir();
}

/* The call failed with `want`, its message naming `needle`; *job untouched; nothing written. */
#define SUBMIT_FAILS(want, needle, call)                                                       \
    do {                                                                                       \
        tw_job *job = SENTINEL;                                                                \
        FAILS(want, needle, call);                                                             \
        cr_expect_eq(job, SENTINEL, "line %d: *out written by a failed submit", __LINE__);   \
        cr_expect_eq(twtest_count_entries(dir), 1, "line %d: a file was left behind",         \
                     __LINE__);                                                                \
    } while (0)

Test(api_ops, gray_misuse, .init = setup_ops, .fini = teardown_ops)
{
    /* NULL arguments, struct_size, unknown mode, tile sizes, missing and bad inputs/outputs */
    tw_gray_opts o;
    char *outp = twtest_path(dir, "o.tif"), *missing = twtest_path(dir, "missing.tif");

#define G(...) tw_gray_submit(__VA_ARGS__)
    tw_gray_opts_init(&o);
    o.input.path = img8;
    o.output.path = outp;
    SUBMIT_FAILS(TW_E_INVALID, "NULL", G(NULL, &o, &job, &terr));
    SUBMIT_FAILS(TW_E_INVALID, "NULL", G(rt, NULL, &job, &terr));
    SUBMIT_FAILS(TW_E_INVALID, "NULL", G(rt, &o, NULL, &terr));
    o.struct_size = 0;
    SUBMIT_FAILS(TW_E_INVALID, "tw_gray_opts_init", G(rt, &o, &job, &terr));
    o.struct_size = SIZE_MAX;
    SUBMIT_FAILS(TW_E_INVALID, "tw_gray_opts_init", G(rt, &o, &job, &terr));
    o.struct_size = sizeof o;
    o.mode = (tw_gray_mode)99;
    SUBMIT_FAILS(TW_E_INVALID, "mode 99", G(rt, &o, &job, &terr));
    o.mode = TW_GRAY_LUMINANCE;
    o.tile_w = -16;
    o.tile_h = 16;
    SUBMIT_FAILS(TW_E_INVALID, "tile size", G(rt, &o, &job, &terr));
    o.tile_w = 0;
    SUBMIT_FAILS(TW_E_INVALID, "tile size", G(rt, &o, &job, &terr)); /* 0x16 */
    o.tile_h = 0;
    o.input.path = missing;
    SUBMIT_FAILS(TW_E_IO, "missing.tif", G(rt, &o, &job, &terr));
    o.input.path = NULL;
    SUBMIT_FAILS(TW_E_INVALID, "gray", G(rt, &o, &job, &terr));
    o.input.path = img8;
    o.input.level = 5;
    SUBMIT_FAILS(TW_E_INVALID, "level 5", G(rt, &o, &job, &terr));
    o.input.level = -1;
    SUBMIT_FAILS(TW_E_INVALID, "level -1", G(rt, &o, &job, &terr));
    o.input.level = 0;
    o.input.reader = (tw_reader_kind)99;
    SUBMIT_FAILS(TW_E_INVALID, "99", G(rt, &o, &job, &terr));
    o.input.reader = TW_READER_AUTO;
    o.input.x = 30;
    o.input.w = 20;
    o.input.h = 10;
    SUBMIT_FAILS(TW_E_INVALID, "outside", G(rt, &o, &job, &terr));
    o.input.x = 0;
    o.input.w = -4;
    SUBMIT_FAILS(TW_E_INVALID, "region 0,0,-4x10 is empty", G(rt, &o, &job, &terr));
    o.input.w = 0;
    SUBMIT_FAILS(TW_E_INVALID, "region 0,0,0x10 is empty", G(rt, &o, &job, &terr));
    o.input.w = o.input.h = 0;
    o.input.threshold_mode = (tw_threshold_mode)99;
    SUBMIT_FAILS(TW_E_INVALID, "99", G(rt, &o, &job, &terr));
    o.input.threshold_mode = TW_THRESHOLD_NONE;
    o.output.path = NULL;
    SUBMIT_FAILS(TW_E_INVALID, "gray", G(rt, &o, &job, &terr));
    o.output.path = outp;
    o.output.compression = (tw_compression)99;
    o.output.compression_set = true;
    SUBMIT_FAILS(TW_E_INVALID, "compression 99", G(rt, &o, &job, &terr));
    o.output.compression_set = false;
    o.output.layout = (tw_layout)99;
    o.output.layout_set = true;
    SUBMIT_FAILS(TW_E_INVALID, "layout 99", G(rt, &o, &job, &terr));
    o.output.layout_set = false;
    o.output.quality = 50; /* without JPEG */
    SUBMIT_FAILS(TW_E_INVALID, "quality", G(rt, &o, &job, &terr));
    o.output.quality = 0;
    o.output.path = img8; /* over its own input */
    {
        tw_job *job = SENTINEL;
        FAILS(TW_E_INVALID, "in8.tif", G(rt, &o, &job, &terr));
        cr_expect_eq(job, SENTINEL);
        cr_expect(twtest_exists(img8));
    }
#undef G
    free(outp);
    free(missing);
}

Test(api_ops, convert_misuse, .init = setup_ops, .fini = teardown_ops)
{
    /* NULL arguments, struct_size, pixel-changing input options, an overlay */
    tw_convert_opts o;
    char *outp = twtest_path(dir, "o.tif");

#define C(...) tw_convert_submit(__VA_ARGS__)
    tw_convert_opts_init(&o);
    o.input.path = img8;
    o.output.path = outp;
    SUBMIT_FAILS(TW_E_INVALID, "NULL", C(NULL, &o, &job, &terr));
    SUBMIT_FAILS(TW_E_INVALID, "NULL", C(rt, NULL, &job, &terr));
    SUBMIT_FAILS(TW_E_INVALID, "NULL", C(rt, &o, NULL, &terr));
    o.struct_size = 0;
    SUBMIT_FAILS(TW_E_INVALID, "tw_convert_opts_init", C(rt, &o, &job, &terr));
    o.struct_size = SIZE_MAX;
    SUBMIT_FAILS(TW_E_INVALID, "tw_convert_opts_init", C(rt, &o, &job, &terr));
    o.struct_size = sizeof o;
    o.input.gray = TW_GRAY_R;
    SUBMIT_FAILS(TW_E_INVALID, "gray mode", C(rt, &o, &job, &terr));
    o.input.gray = TW_GRAY_LUMINANCE;
    o.input.tissue = true;
    SUBMIT_FAILS(TW_E_INVALID, "tissue", C(rt, &o, &job, &terr));
    o.input.tissue = false;
    o.output.overlay = outp;
    SUBMIT_FAILS(TW_E_INVALID, "overlay", C(rt, &o, &job, &terr));
    o.output.overlay = NULL;
    o.tile_w = 16;
    o.tile_h = -16;
    SUBMIT_FAILS(TW_E_INVALID, "tile size", C(rt, &o, &job, &terr));
    o.tile_h = 16;
    o.output.path = NULL;
    SUBMIT_FAILS(TW_E_INVALID, "convert", C(rt, &o, &job, &terr));
#undef C
    free(outp);
}

Test(api_ops, mrecon_misuse, .init = setup_ops, .fini = teardown_ops)
{
    /* NULL arguments, struct_size, unknown method, connectivity, images of bad sizes/types,
     * stats not initialised */
    tw_mrecon_opts o;
    tw_mrecon_stats stats;
    uint8_t a[8 * 8] = {0}, b[8 * 8] = {0}, r[8 * 8] = {0};
    const tw_host_image img = {.data = a, .w = 8, .h = 8, .type = TW_U8};

#define M(...) tw_mrecon_submit(__VA_ARGS__)
    tw_mrecon_opts_init(&o);
    o.marker_image = img;
    o.mask_image = img;
    o.mask_image.data = b;
    o.result = img;
    o.result.data = r;
    SUBMIT_FAILS(TW_E_INVALID, "NULL", M(NULL, &o, &job, &terr));
    SUBMIT_FAILS(TW_E_INVALID, "NULL", M(rt, NULL, &job, &terr));
    SUBMIT_FAILS(TW_E_INVALID, "NULL", M(rt, &o, NULL, &terr));
    o.struct_size = 0;
    SUBMIT_FAILS(TW_E_INVALID, "tw_mrecon_opts_init", M(rt, &o, &job, &terr));
    o.struct_size = SIZE_MAX;
    SUBMIT_FAILS(TW_E_INVALID, "tw_mrecon_opts_init", M(rt, &o, &job, &terr));
    o.struct_size = sizeof o;
    o.method = (tw_mrecon_method)99;
    SUBMIT_FAILS(TW_E_INVALID, "method 99", M(rt, &o, &job, &terr));
    o.method = TW_MRECON_DILATION;
    o.conn = 5;
    SUBMIT_FAILS(TW_E_INVALID, "5", M(rt, &o, &job, &terr));
    o.conn = 8;
    o.mask_image.w = 0;
    SUBMIT_FAILS(TW_E_INVALID, "mrecon", M(rt, &o, &job, &terr));
    o.mask_image.w = -8;
    SUBMIT_FAILS(TW_E_INVALID, "mrecon", M(rt, &o, &job, &terr));
    o.mask_image.w = 8;
    o.mask_image.type = (tw_sample_type)99;
    SUBMIT_FAILS(TW_E_INVALID, "mrecon", M(rt, &o, &job, &terr));
    o.mask_image.type = TW_F32;
    SUBMIT_FAILS(TW_E_INVALID, "mrecon", M(rt, &o, &job, &terr));
    o.mask_image.type = TW_U8;
    o.mask_image.stride = 4; /* below a row */
    SUBMIT_FAILS(TW_E_INVALID, "stride", M(rt, &o, &job, &terr));
    o.mask_image.stride = 0;
    o.marker_image.w = 4; /* not the mask's size */
    SUBMIT_FAILS(TW_E_INVALID, "marker", M(rt, &o, &job, &terr));
    o.marker_image.w = 8;
    o.result.h = 4;
    SUBMIT_FAILS(TW_E_INVALID, "result", M(rt, &o, &job, &terr));
    o.result.h = 8;
    o.tile_w = o.tile_h = -1;
    SUBMIT_FAILS(TW_E_INVALID, "tile size", M(rt, &o, &job, &terr));
    o.tile_w = o.tile_h = 0;
    memset(&stats, 0, sizeof stats);
    o.stats = &stats;
    SUBMIT_FAILS(TW_E_INVALID, "tw_mrecon_stats_init", M(rt, &o, &job, &terr));
    o.stats = NULL;
    o.marker_image.data = NULL; /* no marker at all */
    SUBMIT_FAILS(TW_E_INVALID, "marker", M(rt, &o, &job, &terr));
#undef M
}

typedef tw_status (*mrecon_filter_fn)(tw_runtime *, const tw_mrecon_filter_opts *, tw_job **,
                                      tw_error *);

Test(api_ops, mrecon_filter_misuse, .init = setup_ops, .fini = teardown_ops)
{
    /* the five filters built on reconstruction: NULL arguments, struct_size, connectivity,
     * h < 1 (hmax), radius < 0 (open-rec, close-rec), a result of the wrong size */
    static const struct {
        mrecon_filter_fn fn;
        const char *name;
    } ops[] = {{tw_fill_holes_submit, "fill-holes"}, {tw_hmax_submit, "hmax"},
               {tw_regional_max_submit, "regional-max"}, {tw_open_rec_submit, "open-rec"},
               {tw_close_rec_submit, "close-rec"}};
    uint8_t a[8 * 8] = {0}, r[8 * 8] = {0};

    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        mrecon_filter_fn F = ops[k].fn;
        const char *nm = ops[k].name;
        tw_mrecon_filter_opts o;
        tw_mrecon_stats stats;

        tw_mrecon_filter_opts_init(&o);
        o.image = (tw_host_image){.data = a, .w = 8, .h = 8, .type = TW_U8};
        o.result = (tw_host_image){.data = r, .w = 8, .h = 8, .type = TW_U8};
        o.h = 1;
        SUBMIT_FAILS(TW_E_INVALID, nm, F(NULL, &o, &job, &terr));
        SUBMIT_FAILS(TW_E_INVALID, nm, F(rt, NULL, &job, &terr));
        SUBMIT_FAILS(TW_E_INVALID, nm, F(rt, &o, NULL, &terr));
        o.struct_size = 0;
        SUBMIT_FAILS(TW_E_INVALID, "tw_mrecon_filter_opts_init", F(rt, &o, &job, &terr));
        o.struct_size = SIZE_MAX;
        SUBMIT_FAILS(TW_E_INVALID, "tw_mrecon_filter_opts_init", F(rt, &o, &job, &terr));
        o.struct_size = sizeof o;
        o.conn = 6;
        SUBMIT_FAILS(TW_E_INVALID, nm, F(rt, &o, &job, &terr));
        o.conn = 0;
        o.result.w = 7;
        SUBMIT_FAILS(TW_E_INVALID, "result", F(rt, &o, &job, &terr));
        o.result.w = 8;
        o.image.data = NULL; /* no input at all */
        SUBMIT_FAILS(TW_E_INVALID, nm, F(rt, &o, &job, &terr));
        o.image.data = a;
        memset(&stats, 0, sizeof stats);
        o.stats = &stats;
        SUBMIT_FAILS(TW_E_INVALID, "tw_mrecon_stats_init", F(rt, &o, &job, &terr));
        o.stats = NULL;
        if (F == tw_hmax_submit) {
            o.h = 0;
            SUBMIT_FAILS(TW_E_INVALID, nm, F(rt, &o, &job, &terr));
            o.h = -3;
            SUBMIT_FAILS(TW_E_INVALID, nm, F(rt, &o, &job, &terr));
            o.h = 1;
        }
        if (F == tw_open_rec_submit || F == tw_close_rec_submit) {
            o.radius = -1;
            SUBMIT_FAILS(TW_E_INVALID, nm, F(rt, &o, &job, &terr));
            o.radius = 0;
        }
    }
}

Test(api_ops, edt_misuse, .init = setup_ops, .fini = teardown_ops)
{
    /* NULL arguments, struct_size, unknown format and method, bad spacing, report not
     * initialised, outputs missing or doubled, images of bad sizes/types */
    tw_edt_opts o;
    tw_edt_report rep;
    uint8_t a[8 * 8] = {0};
    float r[8 * 8] = {0};
    uint32_t idx[8 * 8 * 2];
    char *outp = twtest_path(dir, "o.tif");

#define E(...) tw_edt_submit(__VA_ARGS__)
    tw_edt_opts_init(&o);
    o.image = (tw_host_image){.data = a, .w = 8, .h = 8, .type = TW_U8};
    o.result = (tw_host_image){.data = r, .w = 8, .h = 8, .type = TW_F32};
    SUBMIT_FAILS(TW_E_INVALID, "NULL", E(NULL, &o, &job, &terr));
    SUBMIT_FAILS(TW_E_INVALID, "NULL", E(rt, NULL, &job, &terr));
    SUBMIT_FAILS(TW_E_INVALID, "NULL", E(rt, &o, NULL, &terr));
    o.struct_size = 0;
    SUBMIT_FAILS(TW_E_INVALID, "tw_edt_opts_init", E(rt, &o, &job, &terr));
    o.struct_size = SIZE_MAX;
    SUBMIT_FAILS(TW_E_INVALID, "tw_edt_opts_init", E(rt, &o, &job, &terr));
    o.struct_size = sizeof o;
    o.format = (tw_edt_format)99;
    SUBMIT_FAILS(TW_E_INVALID, "format 99", E(rt, &o, &job, &terr));
    o.format = TW_EDT_F32;
    o.method = (tw_edt_method)99;
    SUBMIT_FAILS(TW_E_INVALID, "method 99", E(rt, &o, &job, &terr));
    o.method = TW_EDT_EXACT;
    o.spacing_x = 0;
    SUBMIT_FAILS(TW_E_INVALID, "spacing", E(rt, &o, &job, &terr));
    o.spacing_x = 1;
    o.spacing_y = -1;
    SUBMIT_FAILS(TW_E_INVALID, "spacing", E(rt, &o, &job, &terr));
    o.spacing_y = 1;
    memset(&rep, 0, sizeof rep);
    o.report = &rep;
    SUBMIT_FAILS(TW_E_INVALID, "tw_edt_report_init", E(rt, &o, &job, &terr));
    o.report = NULL;
    o.result.data = NULL;
    SUBMIT_FAILS(TW_E_INVALID, "no output", E(rt, &o, &job, &terr));
    o.output.path = outp;
    o.result.data = r;
    SUBMIT_FAILS(TW_E_INVALID, "both", E(rt, &o, &job, &terr));
    o.output.path = NULL;
    o.result.type = TW_U8; /* not the format's type */
    SUBMIT_FAILS(TW_E_INVALID, "result", E(rt, &o, &job, &terr));
    o.result.type = TW_F32;
    o.image.w = 0;
    SUBMIT_FAILS(TW_E_INVALID, "edt", E(rt, &o, &job, &terr));
    o.image.w = 8;
    o.image.type = (tw_sample_type)99;
    SUBMIT_FAILS(TW_E_INVALID, "edt", E(rt, &o, &job, &terr));
    o.image.type = TW_U8;
    o.indices = (tw_host_image){.data = idx, .w = 4, .h = 8, .type = TW_U32};
    SUBMIT_FAILS(TW_E_INVALID, "indices", E(rt, &o, &job, &terr));
    o.indices.data = NULL;
    o.tile_w = -16;
    o.tile_h = 16;
    SUBMIT_FAILS(TW_E_INVALID, "tile size", E(rt, &o, &job, &terr));
#undef E
    free(outp);
}

Test(api_ops, maxtree_misuse, .init = setup_ops, .fini = teardown_ops)
{
    /* NULL arguments, struct_size, connectivity, index bits, a parent image of the wrong type */
    tw_maxtree_opts o;
    uint8_t a[8 * 8] = {0};
    uint32_t par[8 * 8] = {0};

#define X(...) tw_maxtree_submit(__VA_ARGS__)
    tw_maxtree_opts_init(&o);
    o.image = (tw_host_image){.data = a, .w = 8, .h = 8, .type = TW_U8};
    o.parent = (tw_host_image){.data = par, .w = 8, .h = 8, .type = TW_U32};
    SUBMIT_FAILS(TW_E_INVALID, "NULL", X(NULL, &o, &job, &terr));
    SUBMIT_FAILS(TW_E_INVALID, "NULL", X(rt, NULL, &job, &terr));
    SUBMIT_FAILS(TW_E_INVALID, "NULL", X(rt, &o, NULL, &terr));
    o.struct_size = 0;
    SUBMIT_FAILS(TW_E_INVALID, "tw_maxtree_opts_init", X(rt, &o, &job, &terr));
    o.struct_size = SIZE_MAX;
    SUBMIT_FAILS(TW_E_INVALID, "tw_maxtree_opts_init", X(rt, &o, &job, &terr));
    o.struct_size = sizeof o;
    o.connectivity = 6;
    SUBMIT_FAILS(TW_E_INVALID, "6", X(rt, &o, &job, &terr));
    o.connectivity = 4;
    o.index_bits = 16;
    SUBMIT_FAILS(TW_E_INVALID, "16", X(rt, &o, &job, &terr));
    o.index_bits = 0;
    o.parent.type = TW_U8;
    SUBMIT_FAILS(TW_E_INVALID, "parent", X(rt, &o, &job, &terr));
    o.parent.type = TW_U32;
    o.image.type = TW_F32;
    SUBMIT_FAILS(TW_E_INVALID, "maxtree", X(rt, &o, &job, &terr));
#undef X
}

Test(api_ops, attr_filter_misuse, .init = setup_ops, .fini = teardown_ops)
{
    /* NULL arguments, struct_size, unknown filter, connectivity, area 0, report not
     * initialised, outputs missing */
    tw_attr_filter_opts o;
    tw_attr_filter_report rep;
    uint8_t a[8 * 8] = {0}, r[8 * 8] = {0};

#define A(...) tw_attr_filter_submit(__VA_ARGS__)
    tw_attr_filter_opts_init(&o);
    o.image = (tw_host_image){.data = a, .w = 8, .h = 8, .type = TW_U8};
    o.result = (tw_host_image){.data = r, .w = 8, .h = 8, .type = TW_U8};
    SUBMIT_FAILS(TW_E_INVALID, "NULL", A(NULL, &o, &job, &terr));
    SUBMIT_FAILS(TW_E_INVALID, "NULL", A(rt, NULL, &job, &terr));
    SUBMIT_FAILS(TW_E_INVALID, "NULL", A(rt, &o, NULL, &terr));
    o.struct_size = 0;
    SUBMIT_FAILS(TW_E_INVALID, "tw_attr_filter_opts_init", A(rt, &o, &job, &terr));
    o.struct_size = SIZE_MAX;
    SUBMIT_FAILS(TW_E_INVALID, "tw_attr_filter_opts_init", A(rt, &o, &job, &terr));
    o.struct_size = sizeof o;
    o.filter = (tw_attr_filter)99;
    SUBMIT_FAILS(TW_E_INVALID, "filter 99", A(rt, &o, &job, &terr));
    o.filter = (tw_attr_filter)-1;
    SUBMIT_FAILS(TW_E_INVALID, "filter -1", A(rt, &o, &job, &terr));
    o.filter = TW_AREA_OPENING;
    o.connectivity = 6;
    SUBMIT_FAILS(TW_E_INVALID, "6", A(rt, &o, &job, &terr));
    o.connectivity = 4;
    o.threshold = 0;
    SUBMIT_FAILS(TW_E_INVALID, "area", A(rt, &o, &job, &terr));
    o.threshold = 1;
    memset(&rep, 0, sizeof rep);
    o.report = &rep;
    SUBMIT_FAILS(TW_E_INVALID, "tw_attr_filter_report_init", A(rt, &o, &job, &terr));
    o.report = NULL;
    o.result.data = NULL;
    SUBMIT_FAILS(TW_E_INVALID, "no output", A(rt, &o, &job, &terr));
    o.result.data = r;
    o.result.w = 9;
    SUBMIT_FAILS(TW_E_INVALID, "result", A(rt, &o, &job, &terr));
    o.result.w = 8;
    o.tile_w = o.tile_h = -16;
    SUBMIT_FAILS(TW_E_INVALID, "tile size", A(rt, &o, &job, &terr));
#undef A
}
