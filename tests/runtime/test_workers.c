/* SPDX-License-Identifier: MIT */
/* tilewave tests: runtime start-up: worker layout, pinning, GPU selection, NODEV. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <hwloc.h>
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Criterion 2.4 assertions store into a 1-bit field, which -Wconversion flags at every use. */
#pragma GCC diagnostic ignored "-Wconversion"

#include "tw_internal.h"

/* ---- helpers */

static atomic_int warnings;
static char last_warning[1024];

static void
count_log(tw_log_level level, const char *domain, const char *message, void *user)
{
    (void)domain;
    (void)user;
    if (level <= TW_LOG_WARN) {
        atomic_fetch_add(&warnings, 1);
        snprintf(last_warning, sizeof last_warning, "%s", message);
    }
}

/* Create a runtime from key=value pairs (NULL-terminated); returns the status. */
static tw_status
create(tw_runtime **rt, tw_error *err, const char *const *kv)
{
    tw_config *cfg = NULL;
    tw_status st;

    tw_log_set_handler(count_log, NULL);
    cr_assert(eq(int, tw_config_create(&cfg), TW_OK));
    for (; kv && kv[0]; kv += 2)
        cr_assert(eq(int, tw_config_set(cfg, kv[0], kv[1], TW_CONFIG_SET, NULL), TW_OK),
                  "%s=%s", kv[0], kv[1]);
    st = tw_runtime_create(cfg, rt, err);
    tw_config_destroy(cfg);
    return st;
}

static int
machine_cores(void)
{
    hwloc_topology_t topo;
    int n;

    hwloc_topology_init(&topo);
    hwloc_topology_load(topo);
    n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    if (n <= 0)
        n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    hwloc_topology_destroy(topo);
    return n;
}

/* Cores of the machine wholly inside the cpuset written in list syntax. */
static int
cores_in(const char *list)
{
    hwloc_topology_t topo;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    int n, k = 0, i;

    hwloc_topology_init(&topo);
    hwloc_topology_load(topo);
    cr_assert(eq(int, hwloc_bitmap_list_sscanf(set, list), 0));
    n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    for (i = 0; i < n; i++) {
        hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (unsigned)i);
        if (hwloc_bitmap_isincluded(core->cpuset, set))
            k++;
    }
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(topo);
    return k;
}

static tw_status
noop_cpu(tw_task_ctx *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return TW_OK;
}

static tw_status
noop_cuda(tw_task_ctx *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return TW_OK;
}

/* ---- tests */

Test(workers, default_config_starts)
{
    /* tw_runtime_create(NULL) uses the built-in defaults and keeps its own copy of them; the
     * topology counts are plausible; every worker is described. */
    tw_runtime *rt = NULL;
    tw_error err = {0};
    tw_topology_info ti;
    tw_worker_info wi;

    tw_log_set_handler(count_log, NULL);
    cr_assert(eq(int, tw_runtime_create(NULL, &rt, &err), TW_OK), "%s", err.message);
    cr_assert(ne(ptr, (void *)tw_runtime_get_config(rt), NULL));
    cr_assert(eq(int, tw_runtime_get_topology(rt, &ti), TW_OK));
    cr_assert(ge(int, ti.n_packages, 1));
    cr_assert(ge(int, ti.n_cores, 1));
    cr_assert(ge(int, ti.n_pus, ti.n_cores));
    cr_assert(ge(int, tw_runtime_get_worker_count(rt), 1));
    cr_assert(eq(int, tw_runtime_get_worker(rt, tw_runtime_get_worker_count(rt), &wi),
                 TW_E_INVALID));
    cr_assert(eq(int, tw_runtime_get_worker(rt, -1, &wi), TW_E_INVALID));
    tw_runtime_destroy(rt);
}

Test(workers, zero_gpu_start)
{
    /* runtime.gpus=all uses every GPU present (none on CI: CPU workers only, no error) and
     * runtime.gpus=none uses none; the worker list matches. */
    const char *const all[] = {"runtime.gpus", "all", NULL};
    const char *const none[] = {"runtime.gpus", "none", NULL};
    tw_runtime *rt = NULL;
    tw_error err = {0};
    tw_topology_info ti;
    int i, n_cpu = 0, n_gpu = 0;

    cr_assert(eq(int, create(&rt, &err, all), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_runtime_get_topology(rt, &ti), TW_OK));
    cr_assert(eq(int, ti.n_gpus, ti.n_gpus_present));
    cr_assert(eq(int, twi_runtime_gpu_count(rt), ti.n_gpus));
    for (i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        tw_worker_info wi;
        cr_assert(eq(int, tw_runtime_get_worker(rt, i, &wi), TW_OK));
        if (wi.type == TW_DEVICE_CPU) {
            n_cpu++;
            cr_assert(eq(int, wi.gpu, -1));
        } else {
            n_gpu++;
        }
    }
    cr_assert(eq(int, n_gpu, ti.n_gpus));
    cr_assert(ge(int, n_cpu, 1));
    tw_runtime_destroy(rt);

    cr_assert(eq(int, create(&rt, &err, none), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_runtime_get_topology(rt, &ti), TW_OK));
    cr_assert(eq(int, ti.n_gpus, 0));
    cr_assert(eq(int, twi_runtime_gpu_count(rt), 0));
    for (i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        tw_worker_info wi;
        cr_assert(eq(int, tw_runtime_get_worker(rt, i, &wi), TW_OK));
        cr_assert(eq(int, wi.type, TW_DEVICE_CPU));
    }
    cr_assert(eq(int, tw_runtime_get_gpu(rt, 0, &(tw_gpu_info){0}), TW_E_INVALID));
    tw_runtime_destroy(rt);
}

Test(workers, missing_gpu_is_invalid)
{
    /* Naming a GPU that does not exist fails with TW_E_INVALID and a message naming it (or,
     * in a build without CUDA, saying so). */
    const char *const kv[] = {"runtime.gpus", "999", NULL};
    tw_runtime *rt = NULL;
    tw_error err = {0};

    cr_assert(eq(int, create(&rt, &err, kv), TW_E_INVALID));
    cr_assert(eq(ptr, (void *)rt, NULL));
#ifdef TW_HAVE_CUDA
    cr_assert(ne(ptr, strstr(err.message, "runtime.gpus names GPU 999 but"), NULL), "%s",
              err.message);
#else
    cr_assert(ne(ptr, strstr(err.message, "no CUDA support"), NULL), "%s", err.message);
#endif
}

Test(workers, no_worker_at_all_is_invalid)
{
    /* cpu_workers=0 without GPUs leaves nothing to run tasks: TW_E_INVALID. */
    const char *const kv[] = {"runtime.gpus", "none", "runtime.cpu_workers", "0", NULL};
    tw_runtime *rt = NULL;
    tw_error err = {0};

    cr_assert(eq(int, create(&rt, &err, kv), TW_E_INVALID));
    cr_assert(ne(ptr, strstr(err.message, "no workers"), NULL), "%s", err.message);
}

Test(workers, cuda_only_kind_without_gpu_is_nodev)
{
    /* With no GPU worker, a kind that has only a CUDA variant is refused with TW_E_NODEV and
     * not queued: the job still ends normally. A kind with both variants runs on the CPU. */
    static const tw_task_kind cuda_only = {.name = "test.cuda_only",
                                           .devices = TW_DEVICE_CUDA, .cuda = noop_cuda};
    static const tw_task_kind both = {.name = "test.both",
                                      .devices = TW_DEVICE_CPU | TW_DEVICE_CUDA,
                                      .cpu = noop_cpu, .cuda = noop_cuda};
    const char *const kv[] = {"runtime.gpus", "none", NULL};
    tw_runtime *rt = NULL;
    tw_error err = {0};
    tw_job *job = NULL;
    tw_task *t = NULL, *u = NULL;

    cr_assert(eq(int, create(&rt, &err, kv), TW_OK), "%s", err.message);
    cr_assert(eq(int, twi_job_create(rt, "nodev", &job), TW_OK));
    cr_assert(eq(int, twi_task_create(job, &cuda_only, NULL, NULL, &t), TW_OK));
    cr_assert(eq(int, twi_task_submit(t), TW_E_NODEV));
    cr_assert(eq(int, twi_task_create(job, &both, NULL, NULL, &u), TW_OK));
    cr_assert(eq(int, twi_task_submit(u), TW_OK));
    twi_task_release(t);
    twi_task_release(u);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

Test(workers, cpu_workers_three)
{
    /* runtime.cpu_workers=3 gives exactly 3 CPU workers (sharing cores when the machine has
     * fewer, with one warning, not one per worker). */
    const char *const kv[] = {"runtime.gpus", "none", "runtime.cpu_workers", "3", NULL};
    tw_runtime *rt = NULL;
    tw_error err = {0};
    int i;

    cr_assert(eq(int, create(&rt, &err, kv), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_runtime_get_worker_count(rt), 3));
    for (i = 0; i < 3; i++) {
        tw_worker_info wi;
        cr_assert(eq(int, tw_runtime_get_worker(rt, i, &wi), TW_OK));
        cr_assert(eq(int, wi.index, i));
        cr_assert(eq(int, wi.type, TW_DEVICE_CPU));
        cr_assert(eq(int, wi.team, 1));
        cr_assert(eq(int, cores_in(wi.cpuset), 1), "worker %d cpuset %s", i, wi.cpuset);
    }
    if (machine_cores() < 3)
        cr_assert(eq(int, atomic_load(&warnings), 1), "%s", last_warning);
    tw_runtime_destroy(rt);
}

Test(workers, cpu_share_takes_a_part_of_the_cores)
{
    /* runtime.cpu_share=K/N (processes sharing a node: MPI ranks) gives one worker per core of
     * part K of the cores cut into N, and the parts of one machine do not overlap; with more
     * parts than cores, part K gets core K % cores. */
    int cores = machine_cores();
    char seen[4096] = "", share[16];

    for (int k = 0; k < 2; k++) {
        tw_runtime *rt = NULL;
        tw_error err = {0};
        const char *kv[] = {"runtime.gpus", "none", "runtime.cpu_share", share, NULL};
        int want = cores >= 2 ? (k + 1) * cores / 2 - k * cores / 2 : 1;

        snprintf(share, sizeof share, "%d/2", k);
        cr_assert(eq(int, create(&rt, &err, kv), TW_OK), "%s", err.message);
        cr_assert(eq(int, tw_runtime_get_worker_count(rt), want), "part %s", share);
        for (int i = 0; i < want; i++) {
            tw_worker_info wi;

            cr_assert(eq(int, tw_runtime_get_worker(rt, i, &wi), TW_OK));
            cr_assert(eq(int, cores_in(wi.cpuset), 1));
            if (cores >= 2)
                cr_assert(strstr(seen, wi.cpuset) == NULL || strlen(wi.cpuset) == 0,
                          "cores %s are in both parts", wi.cpuset);
            strncat(seen, wi.cpuset, sizeof seen - strlen(seen) - 2);
            strcat(seen, ";");
        }
        tw_runtime_destroy(rt);
    }
    {
        tw_runtime *rt = NULL;
        tw_error err = {0};
        const char *const kv[] = {"runtime.gpus", "none", "runtime.cpu_share", "4095/4096",
                                  NULL};

        cr_assert(eq(int, create(&rt, &err, kv), TW_OK), "%s", err.message);
        cr_assert(eq(int, tw_runtime_get_worker_count(rt), 1));
        tw_runtime_destroy(rt);
    }
}

Test(workers, cpu_team_two)
{
    /* runtime.cpu_team=2 gives workers whose cpusets hold 2 cores each (when the machine has
     * 2 or more), team 2, and one worker per 2 cores by default. */
    const char *const kv[] = {"runtime.gpus", "none", "runtime.cpu_team", "2", NULL};
    tw_runtime *rt = NULL;
    tw_error err = {0};
    int i, cores = machine_cores();

    if (cores < 2)
        cr_skip_test("needs 2 cores, the machine has %d", cores);
    cr_assert(eq(int, create(&rt, &err, kv), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_runtime_get_worker_count(rt), cores / 2));
    for (i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        tw_worker_info wi;
        cr_assert(eq(int, tw_runtime_get_worker(rt, i, &wi), TW_OK));
        cr_assert(eq(int, wi.team, 2));
        cr_assert(eq(int, cores_in(wi.cpuset), 2), "worker %d cpuset %s", i, wi.cpuset);
    }
    tw_runtime_destroy(rt);
}

Test(workers, affinity_read_back_equals_assigned)
{
    /* Every worker thread reads back a binding equal to the core set it was assigned, and
     * distinct workers get disjoint sets when there are enough cores. */
    const char *const kv[] = {"runtime.gpus", "none", NULL};
    tw_runtime *rt = NULL;
    tw_error err = {0};
    int i, j, n;
    tw_worker_info wi[64];

    cr_assert(eq(int, create(&rt, &err, kv), TW_OK), "%s", err.message);
    n = tw_runtime_get_worker_count(rt);
    cr_assert(le(int, n, 64));
    for (i = 0; i < n; i++) {
        cr_assert(eq(int, tw_runtime_get_worker(rt, i, &wi[i]), TW_OK));
        if (!wi[i].bound_cpuset[0]) {
            tw_runtime_destroy(rt);
            cr_skip_test("thread binding read-back unsupported here");
        }
        cr_assert(eq(str, wi[i].bound_cpuset, wi[i].cpuset), "worker %d", i);
    }
    for (i = 0; i < n; i++)
        for (j = i + 1; j < n; j++)
            cr_assert(ne(str, wi[i].cpuset, wi[j].cpuset));
    tw_runtime_destroy(rt);
}

/* A task that records its team size, OpenMP's idea of it, and whether every thread of a
 * parallel region ran inside the worker's cpuset. */
typedef struct team_probe {
    int team;
    int omp_max;
    int threads_seen;
    atomic_int outside;
    char cpuset[256];
} team_probe;

static tw_status
team_cpu(tw_task_ctx *ctx, void *arg)
{
    team_probe *p = arg;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    int seen = 0;

    hwloc_bitmap_list_sscanf(set, p->cpuset);
    p->team = twi_ctx_team(ctx);
    p->omp_max = omp_get_max_threads();
#pragma omp parallel num_threads(p->team) reduction(+ : seen)
    {
        int cpu = sched_getcpu();
        seen++;
        if (cpu >= 0 && !hwloc_bitmap_isset(set, (unsigned)cpu))
            atomic_fetch_add(&p->outside, 1);
    }
    p->threads_seen = seen;
    hwloc_bitmap_free(set);
    return TW_OK;
}

Test(workers, openmp_team_confined_to_worker_cores)
{
    /* With cpu_team=2, a CPU variant sees twi_ctx_team() == 2, OpenMP defaults to 2 threads
     * on that worker, and every thread of its parallel region runs inside the worker's
     * cpuset (libgomp threads inherit the worker's binding). */
    static const tw_task_kind team_kind = {.name = "test.team", .devices = TW_DEVICE_CPU,
                                           .cpu = team_cpu};
    const char *const kv[] = {"runtime.gpus", "none", "runtime.cpu_team", "2",
                              "runtime.cpu_workers", "1", NULL};
    tw_runtime *rt = NULL;
    tw_error err = {0};
    tw_worker_info wi;
    tw_job *job = NULL;
    tw_task *t = NULL;
    team_probe p = {0};

    if (machine_cores() < 2)
        cr_skip_test("needs 2 cores");
    cr_assert(eq(int, create(&rt, &err, kv), TW_OK), "%s", err.message);
    cr_assert(eq(int, tw_runtime_get_worker(rt, 0, &wi), TW_OK));
    snprintf(p.cpuset, sizeof p.cpuset, "%s", wi.cpuset);
    cr_assert(eq(int, twi_job_create(rt, "team", &job), TW_OK));
    cr_assert(eq(int, twi_task_create(job, &team_kind, &p, NULL, &t), TW_OK));
    cr_assert(eq(int, twi_task_submit(t), TW_OK));
    twi_task_release(t);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    cr_assert(eq(int, p.team, 2));
    cr_assert(eq(int, p.omp_max, 2));
    cr_assert(eq(int, p.threads_seen, 2));
    if (wi.bound_cpuset[0])
        cr_assert(eq(int, atomic_load(&p.outside), 0), "OpenMP threads outside %s", wi.cpuset);
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

Test(workers, tasks_run_counts_per_worker)
{
    /* tasks_run sums to the number of tasks that ran, over all workers. */
    static const tw_task_kind k = {.name = "test.noop", .devices = TW_DEVICE_CPU,
                                   .cpu = noop_cpu};
    const char *const kv[] = {"runtime.gpus", "none", "runtime.cpu_workers", "2", NULL};
    tw_runtime *rt = NULL;
    tw_error err = {0};
    tw_job *job = NULL;
    uint64_t sum = 0;
    int i;

    cr_assert(eq(int, create(&rt, &err, kv), TW_OK), "%s", err.message);
    cr_assert(eq(int, twi_job_create(rt, "count", &job), TW_OK));
    for (i = 0; i < 1000; i++) {
        tw_task *t = NULL;
        cr_assert(eq(int, twi_task_create(job, &k, NULL, NULL, &t), TW_OK));
        cr_assert(eq(int, twi_task_submit(t), TW_OK));
        twi_task_release(t);
    }
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    for (i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        tw_worker_info wi;
        cr_assert(eq(int, tw_runtime_get_worker(rt, i, &wi), TW_OK));
        sum += wi.tasks_run;
    }
    cr_assert(eq(u64, sum, 1000));
    tw_job_destroy(job);
    tw_runtime_destroy(rt);
}

/* A task that takes scratch blocks of the sizes in its argument (0 ends the list), records
 * their addresses and whether each held `mark` in every byte (a block an earlier task filled,
 * not a new one), then fills each with its own mark. */
typedef struct scratch_probe {
    size_t sizes[4];
    unsigned char mark;
    void *got[4];
    bool held[4];
} scratch_probe;

static tw_status
scratch_cpu(tw_task_ctx *ctx, void *arg)
{
    scratch_probe *p = arg;

    for (int i = 0; i < 4 && p->sizes[i]; i++) {
        const unsigned char *b;
        size_t k = 0;

        if (!(p->got[i] = twi_ctx_scratch(ctx, p->sizes[i])))
            return TW_E_NOMEM;
        cr_assert(eq(u64, (uintptr_t)p->got[i] % 64, 0));
        for (b = p->got[i]; k < p->sizes[i] && b[k] == 0xA1; k++)
            ;
        p->held[i] = k == p->sizes[i];
    }
    for (int i = 0; i < 4 && p->sizes[i]; i++)
        memset(p->got[i], p->mark, p->sizes[i]);
    return TW_OK;
}

/* Run one scratch_probe task on rt and wait for it. */
static void
run_probe(tw_runtime *rt, scratch_probe *p)
{
    static const tw_task_kind k = {.name = "test.scratch", .devices = TW_DEVICE_CPU,
                                   .cpu = scratch_cpu};
    tw_job *job = NULL;
    tw_task *t = NULL;

    cr_assert(eq(int, twi_job_create(rt, "scratch", &job), TW_OK));
    cr_assert(eq(int, twi_task_create(job, &k, p, NULL, &t), TW_OK));
    cr_assert(eq(int, twi_task_submit(t), TW_OK));
    twi_task_release(t);
    twi_job_seal(job);
    cr_assert(eq(int, tw_job_wait(job, -1), TW_OK));
    tw_job_destroy(job);
}

Test(workers, scratch_blocks_serve_the_next_tasks)
{
    /* One worker: the blocks of a task serve the next (the smallest that fits each request:
     * no page faults again), never two requests of one task at once; a block over the keep
     * limit (64 MiB) is not kept; a request larger than every kept block gets a new one. */
    const char *const kv[] = {"runtime.gpus", "none", "runtime.cpu_workers", "1", NULL};
    tw_runtime *rt = NULL;
    tw_error err = {0};
    scratch_probe a = {.sizes = {1 << 20, 4 << 20}, .mark = 0xA1};
    scratch_probe b = {.sizes = {3 << 20, 1 << 20}, .mark = 0xA1};
    scratch_probe c = {.sizes = {5 << 20}, .mark = 0xA1};
    scratch_probe big = {.sizes = {(size_t)65 << 20}, .mark = 0xA1};
    scratch_probe again = {.sizes = {(size_t)65 << 20}, .mark = 0};

    cr_assert(eq(int, create(&rt, &err, kv), TW_OK), "%s", err.message);
    run_probe(rt, &a);
    cr_assert(a.got[0] != a.got[1]);
    run_probe(rt, &b);
    /* the smallest block that fits each request, with a's bytes still in it */
    cr_assert(b.got[0] == a.got[1] && b.held[0], "3 MiB: a's 4 MiB block");
    cr_assert(b.got[1] == a.got[0] && b.held[1], "1 MiB: a's 1 MiB block");
    run_probe(rt, &c);
    cr_assert(c.held[0] == false, "5 MiB: no kept block is that large");
    run_probe(rt, &big);
    run_probe(rt, &again);
    cr_assert(again.held[0] == false, "a 65 MiB block is not kept");
    tw_runtime_destroy(rt);
}

Test(workers, tiles_are_aligned_and_packed)
{
    /* A tile's host view is 64-byte aligned with packed rows and carries its origin; the
     * last reference frees it. */
    const char *const kv[] = {"runtime.gpus", "none", "runtime.cpu_workers", "1", NULL};
    tw_runtime *rt = NULL;
    tw_error err = {0};
    tw_tile *t = NULL;
    tw_tile_view v;

    cr_assert(eq(int, create(&rt, &err, kv), TW_OK), "%s", err.message);
    cr_assert(eq(int, twi_tile_create(rt, 0, 5, 1, TW_U8, &t), TW_E_INVALID));
    cr_assert(eq(int, twi_tile_create(rt, 33, 7, 3, TW_U16, &t), TW_OK));
    twi_tile_set_origin(t, 1000, 2000);
    v = twi_tile_host_view(t);
    cr_assert(eq(u64, (uintptr_t)v.data % 64, 0));
    cr_assert(eq(i64, v.stride, 33 * 3 * 2));
    cr_assert(eq(int, v.w, 33));
    cr_assert(eq(int, v.h, 7));
    cr_assert(eq(int, v.channels, 3));
    cr_assert(eq(int, v.type, TW_U16));
    cr_assert(eq(i64, v.x0, 1000));
    cr_assert(eq(i64, v.y0, 2000));
    memset(v.data, 0xab, (size_t)(v.stride * v.h));
    twi_tile_acquire(t);
    twi_tile_release(t);
    twi_tile_release(t);
    twi_tile_release(NULL);
    tw_runtime_destroy(rt);
}
