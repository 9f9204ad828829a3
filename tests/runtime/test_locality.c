/* SPDX-License-Identifier: MIT */
/* tilewave tests: the locality policy and tile versions without a GPU; runtime.gpu_mem. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "rt_core.h"
#include "twtest.h"
#include "twtest_rt.h"
#include "twtest_sched.h"

static const tw_task_kind gate_kind = {.name = "test.gate", .devices = TW_DEVICE_CPU,
                                       .cpu = twtest_gate_cpu};
static const tw_task_kind both_kind = {.name = "test.both",
                                       .devices = TW_DEVICE_CPU | TW_DEVICE_CUDA,
                                       .cpu = twtest_log_cpu, .cuda = twtest_never_cuda};

static tw_runtime *
locality_runtime(void)
{
    twtest_quiet_logs();
    return twtest_runtime_kv_ok(false, (const char *const[]){"runtime.cpu_workers", "1",
                                                             "runtime.gpus", "none",
                                                             "runtime.policy", "locality",
                                                             "runtime.models", "none", NULL});
}

Test(locality, cpu_workers_run_tasks_in_fcfs_order)
{
    /* Without a GPU the locality policy is FCFS: one CPU worker, held by a gate task while 40
     * tasks (each with a tile) are submitted, then runs them in submission order. */
    tw_runtime *rt = locality_runtime();
    tw_job *job = NULL;
    tw_task *t = NULL;
    tw_tile *tile = NULL;

    atomic_store(&twtest_gate_open, 0);
    atomic_store(&twtest_n_ran, 0);
    cr_assert(eq(int, twi_tile_create(rt, 8, 8, 1, TW_U8, &tile), TW_OK));
    cr_assert(eq(int, twi_job_create(rt, "order", &job), TW_OK));
    cr_assert(eq(int, twi_task_create(job, &gate_kind, NULL, NULL, &t), TW_OK));
    cr_assert(eq(int, twi_task_submit(t), TW_OK));
    twi_task_release(t);
    for (int i = 0; i < 40; i++) {
        cr_assert(eq(int, twi_task_create(job, &both_kind, (void *)(intptr_t)i, NULL, &t), TW_OK));
        cr_assert(eq(int, twi_task_add_tile(t, tile, TW_R), TW_OK));
        cr_assert(eq(int, twi_task_submit(t), TW_OK));
        twi_task_release(t);
    }
    atomic_store(&twtest_gate_open, 1);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
    tw_job_destroy(job);
    cr_assert(eq(int, atomic_load(&twtest_n_ran), 40));
    for (int i = 0; i < 40; i++)
        cr_assert(eq(int, twtest_ran_order[i], i));
    twi_tile_release(tile);
    tw_runtime_destroy(rt);
}

Test(locality, gpu_worker_prefers_resident_tiles)
{
    /* The policy itself, on a stand-in GPU (no device needed): tiles made while the runtime
     * counts one GPU get a replica slot; with tile X current there, a GPU worker pops the
     * task reading X before older ones, then the oldest of the rest (a task whose replica went
     * stale after twi_tile_host_written counts as nothing resident); a CPU worker pops the
     * oldest. Only R/RW tiles count. */
    tw_runtime *rt = locality_runtime();
    twi_gpu *fake = calloc(1, sizeof *fake);
    tw_tile *x = NULL, *y = NULL, *z = NULL;
    tw_task *t[4] = {NULL};
    tw_job *job = NULL;
    tw_sched s = {.policy = &twi_sched_locality, .rt = rt};
    tw_worker *gw = calloc(1, sizeof *gw), *cw = calloc(1, sizeof *cw);

    cr_assert(fake && gw && cw);
    /* A runtime with no GPU keeps gpus NULL: stand one in while the tiles are made. */
    rt->gpus = fake;
    rt->n_gpus = 1;
    cr_assert(eq(int, twi_tile_create(rt, 16, 16, 1, TW_U8, &x), TW_OK));
    cr_assert(eq(int, twi_tile_create(rt, 32, 16, 1, TW_U8, &y), TW_OK));
    cr_assert(eq(int, twi_tile_create(rt, 16, 16, 1, TW_U8, &z), TW_OK));
    cr_assert(eq(int, x->n_rep, 1));
    atomic_store(&x->rep[0].version, atomic_load(&x->version)); /* X resident, current */
    atomic_store(&y->rep[0].version, atomic_load(&y->version));
    twi_tile_host_written(y);                                    /* Y's copy now stale */
    cr_assert(eq(int, twi_job_create(rt, "pick", &job), TW_OK));
    for (int i = 0; i < 4; i++)
        cr_assert(eq(int, twi_task_create(job, &both_kind, NULL, NULL, &t[i]), TW_OK));
    cr_assert(eq(int, twi_task_add_tile(t[0], y, TW_R), TW_OK));  /* oldest: stale */
    cr_assert(eq(int, twi_task_add_tile(t[1], x, TW_W), TW_OK));  /* X, but written only */
    cr_assert(eq(int, twi_task_add_tile(t[2], z, TW_R), TW_OK));
    cr_assert(eq(int, twi_task_add_tile(t[3], z, TW_R), TW_OK));
    cr_assert(eq(int, twi_task_add_tile(t[3], x, TW_R), TW_OK));  /* newest: reads X */
    cr_assert(eq(i64, twi_task_resident_bytes(t[3], 0), (int64_t)x->bytes));
    cr_assert(eq(i64, twi_task_resident_bytes(t[0], 0), 0));
    cr_assert(eq(i64, twi_task_resident_bytes(t[1], 0), 0));

    gw->rt = cw->rt = rt;
    gw->type = TW_DEVICE_CUDA;
    gw->runs = TW_DEVICE_CUDA;
    gw->g = fake;
    gw->gpu = 0;
    cw->type = TW_DEVICE_CPU;
    cw->runs = TW_DEVICE_CPU;
    cw->gpu = -1;
    cr_assert(eq(int, s.policy->init(&s), TW_OK));
    for (int i = 0; i < 4; i++)
        s.policy->push(&s, t[i]);
    cr_assert(eq(ptr, s.policy->pop(&s, gw), t[3]));
    cr_assert(eq(ptr, s.policy->pop(&s, cw), t[0]));
    cr_assert(eq(ptr, s.policy->pop(&s, gw), t[1]));
    cr_assert(eq(ptr, s.policy->pop(&s, gw), t[2]));
    cr_assert(eq(ptr, s.policy->pop(&s, gw), NULL));
    s.policy->fini(&s);

    for (int i = 0; i < 4; i++)
        twi_task_release(t[i]); /* never submitted: freed here, with their tile references */
    atomic_store(&x->rep[0].version, 0);
    atomic_store(&y->rep[0].version, 0);
    twi_tile_release(x);
    twi_tile_release(y);
    twi_tile_release(z);
    rt->gpus = NULL;
    rt->n_gpus = 0;
    free(fake);
    free(gw);
    free(cw);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

static const tw_task_kind cuda_kind = {.name = "test.cuda", .devices = TW_DEVICE_CUDA,
                                       .cuda = twtest_never_cuda};

Test(locality, prefetch_leaves_tasks_to_idle_workers)
{
    /* A GPU manager's prefetch (twi_worker_prefetch's pop) does not take a task an idle
     * worker could start now: with the CPU worker idle, a task with a CPU variant is refused
     * to the prefetching stand-in GPU worker but not to its ordinary pop, and a CUDA-only
     * task is taken either way. */
    tw_runtime *rt = locality_runtime();
    twi_gpu *fake = calloc(1, sizeof *fake);
    tw_worker *gw = calloc(1, sizeof *gw);
    struct timespec ts = {0, 1000000};
    tw_task *both = NULL, *gpu_only = NULL;
    tw_job *job = NULL;
    int idle = 0;

    cr_assert(fake && gw);
    for (int i = 0; i < 5000 && !idle; i++) {
        pthread_mutex_lock(&rt->lock);
        idle = rt->n_idle;
        pthread_mutex_unlock(&rt->lock);
        if (!idle)
            nanosleep(&ts, NULL);
    }
    cr_assert(eq(int, idle, 1), "the CPU worker never went idle");
    cr_assert(eq(int, twi_job_create(rt, "pf", &job), TW_OK));
    cr_assert(eq(int, twi_task_create(job, &both_kind, NULL, NULL, &both), TW_OK));
    cr_assert(eq(int, twi_task_create(job, &cuda_kind, NULL, NULL, &gpu_only), TW_OK));
    gw->rt = rt;
    gw->type = TW_DEVICE_CUDA;
    gw->runs = TW_DEVICE_CUDA;
    gw->g = fake;
    pthread_mutex_lock(&rt->lock);
    cr_assert(eq(u32, twi_worker_variant(gw, both), (unsigned)TW_DEVICE_CUDA));
    gw->prefetching = true;
    cr_assert(eq(u32, twi_worker_variant(gw, both), 0u));
    cr_assert(eq(u32, twi_worker_variant(gw, gpu_only), (unsigned)TW_DEVICE_CUDA));
    gw->prefetching = false;
    pthread_mutex_unlock(&rt->lock);
    twi_task_release(both);
    twi_task_release(gpu_only);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    tw_job_destroy(job);
    free(fake);
    free(gw);
    tw_runtime_destroy(rt);
}

static tw_status
write_cpu(tw_task_ctx *ctx, void *arg)
{
    tw_tile_view v = twi_ctx_view(ctx, 0);

    (void)arg;
    memset(v.data, 7, (size_t)v.stride * (size_t)v.h);
    return TW_OK;
}

static const tw_task_kind write_kind = {.name = "test.write", .devices = TW_DEVICE_CPU,
                                        .cpu = write_cpu};

Test(locality, tile_versions_follow_writes)
{
    /* A tile starts at version 1; a task that declares it W (or RW) bumps it, one that only
     * reads it does not; twi_tile_host_written() bumps it. */
    tw_runtime *rt = locality_runtime();
    tw_tile *tile = NULL;
    tw_job *job = NULL;
    tw_task *t = NULL;
    tw_access modes[3] = {TW_W, TW_R, TW_RW};
    uint64_t v;

    cr_assert(eq(int, twi_tile_create(rt, 8, 4, 1, TW_U8, &tile), TW_OK));
    cr_assert(eq(u64, atomic_load(&tile->version), 1));
    cr_assert(eq(int, tile->n_rep, 0));
    for (int i = 0; i < 3; i++) {
        v = atomic_load(&tile->version);
        cr_assert(eq(int, twi_job_create(rt, "v", &job), TW_OK));
        cr_assert(eq(int, twi_task_create(job, modes[i] == TW_R ? &both_kind : &write_kind,
                                          NULL, NULL, &t), TW_OK));
        cr_assert(eq(int, twi_task_add_tile(t, tile, modes[i]), TW_OK));
        cr_assert(eq(int, twi_task_submit(t), TW_OK));
        twi_task_release(t);
        twi_job_seal(job);
        cr_assert(eq(int, tw_job_wait(job, -1), TW_OK), "%s", tw_job_get_error(job));
        tw_job_destroy(job);
        cr_assert(eq(u64, atomic_load(&tile->version), modes[i] & TW_W ? v + 1 : v), "mode %d",
                  (int)modes[i]);
    }
    v = atomic_load(&tile->version);
    twi_tile_host_written(tile);
    cr_assert(eq(u64, atomic_load(&tile->version), v + 1));
    twi_tile_release(tile);
    tw_runtime_destroy(rt);
}

Test(locality, gpu_mem_key_takes_byte_counts)
{
    /* runtime.gpu_mem defaults to 0 (automatic), takes K/M/G/T suffixes and rejects signs and
     * junk; runtime.policy accepts locality. */
    tw_config *cfg = NULL;
    int64_t v = -1;

    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    cr_assert(eq(int, tw_config_get_int(cfg, "runtime.gpu_mem", &v), TW_OK));
    cr_assert(eq(i64, v, 0));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.gpu_mem", "8G", TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_get_int(cfg, "runtime.gpu_mem", &v), TW_OK));
    cr_assert(eq(i64, v, (int64_t)8 << 30));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.gpu_mem", "1536", TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_get_int(cfg, "runtime.gpu_mem", &v), TW_OK));
    cr_assert(eq(i64, v, 1536));
    cr_assert(ne(int, tw_config_set(cfg, "runtime.gpu_mem", "-1", TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(ne(int, tw_config_set(cfg, "runtime.gpu_mem", "4X", TW_CONFIG_SET, NULL), TW_OK));
    cr_assert(eq(int, tw_config_set(cfg, "runtime.policy", "locality", TW_CONFIG_SET, NULL),
                 TW_OK));
    tw_config_destroy(cfg);
}
