/* SPDX-License-Identifier: MIT */
/* tilewave tests: allocation failures of the run labeller (omp/label_runs.c) and of the label
 * job's whole-image path on the CPU workers, injected by wrapping malloc and calloc (this test
 * alone links with --wrap=malloc,--wrap=calloc: tests/CMakeLists.txt). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "omp_kernels.h"
#include "tilewave.h"
#include "twtest.h"
#include "twtest_label.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);

/* fail_nth >= 0: the allocation that many from now fails (0: the next), once; fail_size: the
 * first allocation of exactly that many bytes fails, once. injected counts the failures. */
static atomic_llong fail_nth = -1;
static atomic_size_t fail_size = 0;
static atomic_int injected = 0;

static int
should_fail(size_t bytes)
{
    size_t want = atomic_load(&fail_size);
    long long n;

    if (want && bytes == want && atomic_compare_exchange_strong(&fail_size, &want, 0)) {
        atomic_fetch_add(&injected, 1);
        return 1;
    }
    if ((n = atomic_load(&fail_nth)) >= 0 && atomic_fetch_sub(&fail_nth, 1) == 0) {
        atomic_fetch_add(&injected, 1);
        return 1;
    }
    return 0;
}

void *
__wrap_malloc(size_t n)
{
    return should_fail(n) ? NULL : __real_malloc(n);
}

void *
__wrap_calloc(size_t n, size_t size)
{
    return should_fail(n * size) ? NULL : __real_calloc(n, size);
}

static void
arm_nth(long long k)
{
    atomic_store(&injected, 0);
    atomic_store(&fail_nth, k);
}

static void
disarm(void)
{
    atomic_store(&fail_nth, -1);
    atomic_store(&fail_size, 0);
}

static uint64_t rng = 0x2545f4914f6cdd1dull;

/* Every allocation of twi_omp_label_runs_alloc failing in turn: TW_E_NOMEM, r empty (nothing
 * to free, nothing leaked: LeakSanitizer in the sanitizer builds), then the labels once none
 * fails. twi_label_runs_border's two allocations likewise: TW_E_NOMEM, b empty. */
Test(label_runs_nomem, each_allocation_fails_cleanly)
{
    int w = 150, h = 70;
    uint8_t *m = malloc((size_t)(w * h));
    uint64_t *want = malloc((size_t)(w * h) * 8), nw;
    uint32_t *got = malloc((size_t)(w * h) * 4);
    tw_tile_view mv = {m, w, w, h, 1, TW_U8, 0, 0}, lv = {got, w * 4, w, h, 1, TW_U32, 0, 0};
    twi_label_runs r;
    twi_label_border b;
    tw_status st;
    long long k;

    twtest_label_mask(m, w, h, 1, 30, &rng);
    nw = twtest_label_naive(m, w, h, 8, want);
    for (k = 0;; k++) {
        arm_nth(k);
        st = twi_omp_label_runs_alloc(&mv, 8, &r, 2, NULL);
        disarm();
        if (st == TW_OK)
            break;
        cr_assert(eq(int, st, TW_E_NOMEM), "allocation %lld", k);
        cr_assert(eq(int, atomic_load(&injected), 1));
        cr_assert(r.own == NULL && r.run == NULL && r.rs == NULL, "allocation %lld", k);
        twi_label_runs_free(&r); /* harmless on an empty r */
    }
    cr_assert(ge(i64, k, 4), "only %lld allocations", k); /* base, bits, the runs, counts */
    cr_assert(eq(i64, r.n, (int64_t)nw));
    cr_assert(eq(int, twi_label_runs_write(&r, NULL, &lv, 2), TW_OK));
    for (int64_t i = 0; i < (int64_t)w * h; i++)
        cr_assert(eq(u64, got[i], want[i]), "pixel %lld", (long long)i);
    for (k = 0; k < 2; k++) {
        memset(&b, 0x7f, sizeof b);
        arm_nth(k);
        st = twi_label_runs_border(&r, 15, &b);
        disarm();
        cr_assert(eq(int, st, TW_E_NOMEM), "border allocation %lld", k);
        cr_assert(b.n == 0 && b.rows == NULL && b.lab == NULL && b.side[0] == NULL);
    }
    cr_assert(eq(int, twi_label_runs_border(&r, 15, &b), TW_OK));
    twi_label_border_free(&b);
    twi_label_runs_free(&r);
    free(m);
    free(want);
    free(got);
}

/* An image in memory labelled whole on the CPU workers whose runs find no room: the job falls
 * back to the tile passes (bounded memory, the same labels; the report then counts the
 * tiles), as after a failed GPU attempt, instead of failing. A checkerboard of 1100 x 64 has
 * 550 runs a row: its runs take exactly 64 * 8 + 16 + 64 * 550 * 16 bytes, an allocation
 * nothing else in the job makes (the default tiles are 1024 x 1024: two of them). */
Test(label_runs_nomem, whole_image_falls_back_to_tiles)
{
    int w = 1100, h = 64;
    uint8_t *m = malloc((size_t)(w * h));
    uint64_t *want = malloc((size_t)(w * h) * 8), nw;
    uint32_t *got = calloc((size_t)(w * h), 4);
    tw_error err;
    tw_runtime *rt = twtest_runtime(2, "none", &err);
    tw_label_opts o;
    tw_label_report rep;
    tw_job *job = NULL;
    tw_status st;

    cr_assert(rt != NULL, "runtime: %s", err.message);
    for (int64_t i = 0; i < (int64_t)w * h; i++)
        m[i] = (uint8_t)((i % w + i / w) % 2 == 0);
    for (int conn = 4; conn <= 8; conn += 4) {
        nw = twtest_label_naive(m, w, h, conn, want);
        tw_label_opts_init(&o);
        tw_label_report_init(&rep);
        o.image = (tw_host_image){m, w, h, 0, TW_U8};
        o.result = (tw_host_image){got, w, h, 0, TW_U32};
        o.connectivity = conn;
        o.report = &rep;
        memset(got, 0xab, (size_t)(w * h) * 4);
        atomic_store(&injected, 0);
        atomic_store(&fail_size, (size_t)h * 8 + 16 + (size_t)h * 550 * 16);
        cr_assert(eq(int, tw_label_submit(rt, &o, &job, &err), TW_OK), "%s", err.message);
        st = tw_job_wait(job, -1);
        disarm();
        cr_assert(eq(int, st, TW_OK), "conn %d: %s", conn, tw_job_get_error(job));
        tw_job_destroy(job);
        cr_assert(eq(int, atomic_load(&injected), 1), "conn %d: the runs' allocation", conn);
        cr_assert(eq(u64, rep.objects, nw));
        cr_assert(eq(i64, rep.tiles, 2), "conn %d: the tile passes", conn);
        for (int64_t i = 0; i < (int64_t)w * h; i++)
            cr_assert(eq(u64, got[i], want[i]), "conn %d pixel %lld", conn, (long long)i);
    }
    tw_runtime_destroy(rt);
    free(m);
    free(want);
    free(got);
}
