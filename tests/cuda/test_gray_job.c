/* SPDX-License-Identifier: MIT */
/* tilewave tests: the whole gray job on GPU workers only equals the CPU-only job. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "tilewave.h"
#include "twtest.h"

#ifdef TW_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static bool
have_gpu(void)
{
#ifdef TW_HAVE_CUDA
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
    return false;
#endif
}

/* Run gray on `in` with the given runtime keys and return the decoded output. */
static uint8_t *
run_gray(const char *in, const char *out, const char *gpus, const char *cpu_workers,
         const char *tile, int64_t *w, int64_t *h)
{
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_job *job = NULL;
    tw_gray_opts o;
    tw_error err;
    tw_slide *s = NULL;
    tw_level_info li;
    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.gpus", gpus, TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.cpu_workers", cpu_workers, TW_CONFIG_SET, NULL),
                 TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "tile.size", tile, TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_runtime_create(cfg, &rt, &err), TW_OK), "%s", err.message);
    tw_gray_opts_init(&o);
    o.input.path = in;
    o.output.path = out;
    cr_assert(eq(int, tw_gray_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
    tw_config_destroy(cfg);

    cr_assert(eq(int, tw_slide_open(out, TW_READER_TIFF, &s, NULL), TW_OK));
    cr_assert(eq(int, tw_slide_get_level(s, 0, &li), TW_OK));
    uint8_t *buf = malloc((size_t)(li.w * li.h));
    cr_assert(eq(int, tw_slide_read_region(s, 0, 0, 0, li.w, li.h, buf, (size_t)li.w, NULL),
                 TW_OK));
    tw_slide_close(s);
    *w = li.w;
    *h = li.h;
    return buf;
}

Test(gray_job, gpu_only_equals_cpu_only, .timeout = TWTEST_TIMEOUT(300))
{
    /* The gray job with GPU workers only (the GPU worker also runs the I/O tasks), with CPU
     * workers only, and with both at an odd tile size gives identical pixels. */
    if (!have_gpu())
        cr_skip_test("no CUDA device");
    char *dir = twtest_tmpdir();
    char *in = twtest_path(dir, "s.tif"), *a = twtest_path(dir, "a.tif"),
         *b = twtest_path(dir, "b.tif"), *c = twtest_path(dir, "c.tif");
    tw_sample_opts so;
    tw_sample_opts_init(&so);
    so.w = 3000;
    so.h = 2000;
    cr_assert(eq(int, tw_sample_write(in, &so, NULL), TW_OK));
    int64_t w1, h1, w2, h2, w3, h3;
    uint8_t *g1 = run_gray(in, a, "all", "0", "1024x1024", &w1, &h1);
    uint8_t *g2 = run_gray(in, b, "none", "-1", "512x512", &w2, &h2);
    uint8_t *g3 = run_gray(in, c, "all", "-1", "333x217", &w3, &h3);
    cr_assert(eq(i64, w1, 3000));
    cr_assert(eq(i64, w2, w1));
    cr_assert(eq(i64, h2, h1));
    cr_assert(eq(i64, w3, w1));
    cr_assert(eq(i64, h3, h1));
    cr_assert(memcmp(g1, g2, (size_t)(w1 * h1)) == 0, "GPU-only differs from CPU-only");
    cr_assert(memcmp(g3, g2, (size_t)(w1 * h1)) == 0, "CPU+GPU differs from CPU-only");
    free(g1);
    free(g2);
    free(g3);
    twtest_rmtree(dir);
    free(dir);
    free(in);
    free(a);
    free(b);
    free(c);
}
