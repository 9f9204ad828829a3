/* SPDX-License-Identifier: MIT */
/* tilewave tests: runtimes from key=value pairs, waiting for a submitted job, clock and sleep. */
#include "twtest_rt.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <time.h>

tw_status
twtest_runtime_kv(bool env, const char *const *kv, tw_runtime **rt, tw_error *err)
{
    tw_config *cfg = NULL;
    tw_status st;

    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.models", "none", TW_CONFIG_FILE, err), TW_OK),
              "%s", err->message);
    if (env)
        cr_assert(eq(int, tw_config_load_env(cfg, err), TW_OK), "%s", err->message);
    for (; kv && kv[0]; kv += 2)
        if (kv[1])
            cr_assert(eq(int, tw_config_set(cfg, kv[0], kv[1], TW_CONFIG_SET, err), TW_OK),
                      "%s=%s: %s", kv[0], kv[1], err->message);
    st = tw_runtime_create(cfg, rt, err);
    tw_config_destroy(cfg);
    return st;
}

tw_runtime *
twtest_runtime_kv_ok(bool env, const char *const *kv)
{
    tw_runtime *rt = NULL;
    tw_error err = {0};

    cr_assert(eq(int, twtest_runtime_kv(env, kv, &rt, &err), TW_OK), "%s", err.message);
    return rt;
}

tw_status
twtest_job_finish(tw_status st, tw_job **job)
{
    if (st != TW_OK)
        return st;
    st = tw_job_wait(*job, -1);
    tw_job_destroy(*job);
    *job = NULL;
    return st;
}

double
twtest_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void
twtest_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}
