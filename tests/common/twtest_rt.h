/* SPDX-License-Identifier: MIT */
/* tilewave tests: runtimes from key=value pairs, waiting for a submitted job, clock and sleep. */
#ifndef TWTEST_RT_H
#define TWTEST_RT_H

#include <stdbool.h>

#include "tilewave.h"

/* A runtime from a fresh config: runtime.models = none as a file source (as twtest_runtime: the
 * suite never writes models to ~/.cache unless told), then the TILEWAVE_* environment when
 * `env`, then the pairs of kv ("key", "value", ..., NULL) set over both; a pair whose value is
 * NULL is left out. Asserts that the environment and every pair are accepted; returns
 * tw_runtime_create's status, the reason in err. Logs are the caller's to set beforehand. */
tw_status twtest_runtime_kv(bool env, const char *const *kv, tw_runtime **rt, tw_error *err);
/* As twtest_runtime_kv, asserting that the runtime starts. */
tw_runtime *twtest_runtime_kv_ok(bool env, const char *const *kv);

/* The end of a job just submitted with status `st` (*job is set only when st is TW_OK): st when
 * the submission failed, else the job's status after waiting for it; the job is destroyed. */
tw_status twtest_job_finish(tw_status st, tw_job **job);

/* Seconds on the monotonic clock. */
double twtest_now_s(void);
/* Sleep `ms` milliseconds. */
void twtest_sleep_ms(int ms);

#endif /* TWTEST_RT_H */
