/* SPDX-License-Identifier: MIT */
/* tilewave tests: cost models (median of recent runs) and the pats policy's choices. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "rt_core.h"
#include "twtest.h"
#include "twtest_rt.h"
#include "twtest_sched.h"

static const tw_task_kind kind_a = {.name = "test.a", .devices = TW_DEVICE_CPU};

Test(model, median_of_recent_runs_ignores_outliers)
{
    /* Unknown below 3 samples; then the median per unit, scaled by the units asked for,
     * unmoved by two huge outliers among nine; the last 32 samples only. (Units 10, 5 and 1
     * fall in size buckets 3, 2 and 0: the fallback to the nearest size scales per unit.) */
    twi_models *ms = NULL;
    int cpu, gpu;

    cr_assert(eq(int, twi_models_create(&ms), TW_OK));
    cpu = twi_models_device(ms, TW_DEVICE_CPU, "test cpu");
    gpu = twi_models_device(ms, TW_DEVICE_CUDA, "test gpu");
    cr_assert(cpu >= 0 && gpu >= 0 && cpu != gpu);
    cr_assert(twi_model_estimate(ms, &kind_a, cpu, 10, -1) < 0);
    twi_model_record(ms, &kind_a, cpu, 10, -1, 10.0);
    twi_model_record(ms, &kind_a, cpu, 10, -1, 10.0);
    cr_assert(twi_model_estimate(ms, &kind_a, cpu, 10, -1) < 0);
    for (int i = 0; i < 7; i++)
        twi_model_record(ms, &kind_a, cpu, 10, -1, 10.0);
    twi_model_record(ms, &kind_a, cpu, 8, -1, 1e4);
    twi_model_record(ms, &kind_a, cpu, 8, -1, 1e4);
    cr_assert(eq(dbl, twi_model_estimate(ms, &kind_a, cpu, 10, -1), 10.0));
    cr_assert(eq(dbl, twi_model_estimate(ms, &kind_a, cpu, 5, -1), 5.0));
    /* other device, other kind: unknown; bad samples: ignored */
    cr_assert(twi_model_estimate(ms, &kind_a, gpu, 5, -1) < 0);
    twi_model_record(ms, &kind_a, cpu, 0, -1, 1.0);
    twi_model_record(ms, &kind_a, cpu, 10, -1, -1.0);
    twi_model_record(ms, &kind_a, -1, 10, -1, 1.0);
    cr_assert(eq(dbl, twi_model_estimate(ms, &kind_a, cpu, 10, -1), 10.0));
    for (int i = 0; i < 32; i++)
        twi_model_record(ms, &kind_a, cpu, 12, -1, 24.0);
    cr_assert(eq(dbl, twi_model_estimate(ms, &kind_a, cpu, 10, -1), 20.0));
    twi_models_destroy(ms);
}

/* ---- pats on one CPU worker: the order in which tasks run */

static const tw_task_kind gate_kind = {.name = "test.gate", .devices = TW_DEVICE_CPU,
                                       .cpu = twtest_gate_cpu};
static const tw_task_kind cpu_only = {.name = "test.cpu", .devices = TW_DEVICE_CPU,
                                      .cpu = twtest_log_cpu};
static const tw_task_kind fast_on_gpu = {.name = "test.x100",
                                         .devices = TW_DEVICE_CPU | TW_DEVICE_CUDA,
                                         .cpu = twtest_log_cpu, .cuda = twtest_never_cuda};
static const tw_task_kind slow_on_gpu = {.name = "test.x2",
                                         .devices = TW_DEVICE_CPU | TW_DEVICE_CUDA,
                                         .cpu = twtest_log_cpu, .cuda = twtest_never_cuda};
static const tw_task_kind unknown_a = {.name = "test.ua",
                                       .devices = TW_DEVICE_CPU | TW_DEVICE_CUDA,
                                       .cpu = twtest_log_cpu, .cuda = twtest_never_cuda};

static tw_runtime *
pats_runtime(void)
{
    tw_runtime *rt = twtest_runtime_kv_ok(false, (const char *const[]){"runtime.cpu_workers", "1",
                                                                       "runtime.gpus", "none",
                                                                       "runtime.policy", "pats",
                                                                       "runtime.models", "none",
                                                                       NULL});

    cr_assert(rt->models != NULL);
    return rt;
}

/* This machine's CPU and "the GPU" of a runtime without one (a placeholder slot): what the
 * runtime records into and what a CPU worker's speedups compare. */
#define CPU_DEV(rt) twi_models_local((rt)->models, TW_DEVICE_CPU, -1)
#define GPU_DEV(rt) twi_models_local((rt)->models, TW_DEVICE_CUDA, -1)

/* Hold the worker with a gate task, queue `n` tasks of kinds[i] tagged i, open the gate and
 * return the tags in the order the tasks ran. */
static void
run_behind_gate(tw_runtime *rt, const tw_task_kind *const *kinds, int n)
{
    tw_job *job = NULL;
    tw_task *t = NULL;

    atomic_store(&twtest_gate_open, 0);
    atomic_store(&twtest_n_ran, 0);
    cr_assert(eq(int, twi_job_create(rt, "policy", &job), TW_OK));
    cr_assert(eq(int, twi_task_create(job, &gate_kind, NULL, NULL, &t), TW_OK));
    cr_assert(eq(int, twi_task_submit(t), TW_OK));
    twi_task_release(t);
    for (int i = 0; i < n; i++) {
        cr_assert(eq(int, twi_task_create(job, kinds[i], (void *)(intptr_t)i, NULL, &t), TW_OK));
        cr_assert(eq(int, twi_task_submit(t), TW_OK));
        twi_task_release(t);
    }
    twi_job_seal(job);
    atomic_store(&twtest_gate_open, 1);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    cr_assert(eq(int, atomic_load(&twtest_n_ran), n));
}

Test(pats, cpu_worker_takes_the_lowest_speedup_first)
{
    /* Models say test.x100 runs 100x faster on a GPU and test.x2 2x: a CPU worker runs the
     * CPU-only tasks (speedup 0) first, then every x2 task, then the x100 ones, each group in
     * submission order. */
    tw_runtime *rt = pats_runtime();
    const tw_task_kind *kinds[12];

    for (int i = 0; i < 31; i++) {
        twi_model_record(rt->models, &fast_on_gpu, CPU_DEV(rt), 1, -1, 100.0);
        twi_model_record(rt->models, &fast_on_gpu, GPU_DEV(rt), 1, -1, 1.0);
        twi_model_record(rt->models, &slow_on_gpu, CPU_DEV(rt), 1, -1, 2.0);
        twi_model_record(rt->models, &slow_on_gpu, GPU_DEV(rt), 1, -1, 1.0);
    }
    for (int i = 0; i < 12; i++)
        kinds[i] = i % 3 == 0 ? &fast_on_gpu : i % 3 == 1 ? &slow_on_gpu : &cpu_only;
    run_behind_gate(rt, kinds, 12);
    for (int k = 0; k < 12; k++) {
        int want = k < 4 ? 3 * k + 2 : k < 8 ? 3 * (k - 4) + 1 : 3 * (k - 8);

        cr_assert(eq(int, twtest_ran_order[k], want), "position %d ran task %d, want %d", k,
                  twtest_ran_order[k], want);
    }
    tw_runtime_destroy(rt);
}

Test(pats, kinds_without_models_run_in_submission_order)
{
    /* Nothing is known about test.ua yet: its tasks, mixed with a calibrated kind's, keep
     * their FCFS order among themselves and the run is complete. */
    tw_runtime *rt = pats_runtime();
    const tw_task_kind *kinds[10];

    for (int i = 0; i < 10; i++)
        kinds[i] = &unknown_a;
    run_behind_gate(rt, kinds, 10);
    for (int k = 0; k < 10; k++)
        cr_assert(eq(int, twtest_ran_order[k], k));
    /* After these runs the CPU side of test.ua is known, the GPU side still is not: still
     * FCFS. */
    cr_assert(twi_model_estimate(rt->models, &unknown_a, CPU_DEV(rt), 1, -1) >= 0);
    cr_assert(twi_model_estimate(rt->models, &unknown_a, GPU_DEV(rt), 1, -1) < 0);
    run_behind_gate(rt, kinds, 10);
    for (int k = 0; k < 10; k++)
        cr_assert(eq(int, twtest_ran_order[k], k));
    tw_runtime_destroy(rt);
}

Test(pats, gpu_worker_takes_the_highest_speedup_first)
{
    /* The policy alone, with a GPU worker as the runtime would have one: of alternating x2
     * and x100 tasks it hands out the x100 ones first (in order), then the x2 ones; a
     * CPU-only task is never offered to it. */
    tw_runtime *rt = pats_runtime();
    tw_sched s = {.policy = &twi_sched_pats, .rt = rt, .data = NULL};
    tw_worker gw;
    tw_job *job = NULL;
    tw_task *tasks[7];

    for (int i = 0; i < 31; i++) {
        twi_model_record(rt->models, &fast_on_gpu, CPU_DEV(rt), 1, -1, 100.0);
        twi_model_record(rt->models, &fast_on_gpu, GPU_DEV(rt), 1, -1, 1.0);
        twi_model_record(rt->models, &slow_on_gpu, CPU_DEV(rt), 1, -1, 2.0);
        twi_model_record(rt->models, &slow_on_gpu, GPU_DEV(rt), 1, -1, 1.0);
    }
    memset(&gw, 0, sizeof gw);
    gw.rt = rt;
    gw.type = TW_DEVICE_CUDA;
    gw.runs = TW_DEVICE_CUDA;
    cr_assert(eq(int, s.policy->init(&s), TW_OK));
    cr_assert(eq(int, twi_job_create(rt, "policy", &job), TW_OK));
    for (int i = 0; i < 7; i++) {
        const tw_task_kind *k = i == 6 ? &cpu_only : i % 2 ? &fast_on_gpu : &slow_on_gpu;

        cr_assert(eq(int, twi_task_create(job, k, (void *)(intptr_t)i, NULL, &tasks[i]), TW_OK));
        s.policy->push(&s, tasks[i]);
    }
    static const int want[6] = {1, 3, 5, 0, 2, 4};
    for (int k = 0; k < 6; k++) {
        tw_task *t = s.policy->pop(&s, &gw);

        cr_assert(t != NULL);
        cr_assert(eq(int, (int)(intptr_t)t->arg, want[k]));
    }
    cr_assert(s.policy->pop(&s, &gw) == NULL); /* only the CPU-only task is left */
    gw.type = TW_DEVICE_CPU;
    gw.runs = TW_DEVICE_CPU;
    cr_assert(s.policy->pop(&s, &gw) == tasks[6]);
    s.policy->fini(&s);
    for (int i = 0; i < 7; i++)
        twi_task_release(tasks[i]);
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}
