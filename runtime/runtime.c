/* SPDX-License-Identifier: MIT */
/* tilewave: the runtime: configuration, creation and destruction, public queries. The scheduler
 * is runtime/sched.c, the worker threads runtime/worker.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_core.h"

static const tw_sched_policy *const policies[] = {&twi_sched_fcfs, &twi_sched_fair,
                                                  &twi_sched_pats, &twi_sched_locality};

static tw_status
get_int(const tw_config *cfg, const char *key, int64_t *v, tw_error *err)
{
    if (tw_config_get_int(cfg, key, v) != TW_OK)
        return twi_error_set(err, TW_E_INTERNAL, "runtime: config key %s is missing", key);
    return TW_OK;
}

static tw_status
get_string(const tw_config *cfg, const char *key, const char **v, tw_error *err)
{
    if (tw_config_get_string(cfg, key, v) != TW_OK || !*v)
        return twi_error_set(err, TW_E_INTERNAL, "runtime: config key %s is missing", key);
    return TW_OK;
}

/* Parse runtime.gpus ("all", "none", "0,2") into CUDA ordinals. */
static tw_status
parse_gpus(const char *s, int n_present, int **out, int *n_out, tw_error *err)
{
    tw_status st = TW_OK;
    int *ord = NULL;
    int n = 0, i;
    const char *p;

    *out = NULL;
    *n_out = 0;
    if (strcmp(s, "none") == 0)
        return TW_OK;
    if (strcmp(s, "all") == 0) {
        if (n_present == 0)
            return TW_OK;
        if (!(ord = calloc((size_t)n_present, sizeof *ord)))
            return twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        for (i = 0; i < n_present; i++)
            ord[i] = i;
        *out = ord;
        *n_out = n_present;
        return TW_OK;
    }
#ifndef TW_HAVE_CUDA
    return twi_error_set(err, TW_E_INVALID,
                         "runtime: runtime.gpus=%s but this build has no CUDA support", s);
#endif
    if (!*s)
        return twi_error_set(err, TW_E_INVALID,
                             "runtime: runtime.gpus is empty (use all, none or a list like 0,1)");
    if (!(ord = calloc(strlen(s) / 2 + 1, sizeof *ord)))
        return twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
    for (p = s;;) {
        char tok[32];
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int64_t v;

        while (len > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len == 0 || len >= sizeof tok) {
            st = twi_error_set(err, TW_E_INVALID,
                               "runtime: bad GPU list runtime.gpus=%s (use all, none or 0,1)", s);
            goto out;
        }
        memcpy(tok, p, len);
        tok[len] = '\0';
        if (twi_parse_i64(tok, 0, 1 << 20, &v) != TW_OK) {
            st = twi_error_set(err, TW_E_INVALID,
                               "runtime: bad GPU ordinal '%s' in runtime.gpus=%s", tok, s);
            goto out;
        }
        if (v >= n_present) {
            st = twi_error_set(err, TW_E_INVALID,
                               "runtime: runtime.gpus names GPU %d but %d %s present", (int)v,
                               n_present, n_present == 1 ? "is" : "are");
            goto out;
        }
        for (i = 0; i < n; i++) {
            if (ord[i] == (int)v) {
                st = twi_error_set(err, TW_E_INVALID, "runtime: runtime.gpus names GPU %d twice",
                                   (int)v);
                goto out;
            }
        }
        ord[n++] = (int)v;
        if (!e)
            break;
        p = e + 1;
    }
    *out = ord;
    *n_out = n;
    ord = NULL;
out:
    free(ord);
    return st;
}

/* runtime.pinned_cache in bytes; 0 picks 1/16 of the host's memory, at least 1 GiB. Bands of
 * the EDT and other large tiles are freed and made again job after job (and within a job):
 * each new one would pin its pages again (cudaHostAlloc, about 0.4 s a GB) when the pool kept
 * too little. */
static size_t
pinned_cache_bytes(const tw_config *cfg)
{
    int64_t v = 0;
    size_t cap = (size_t)1 << 30;

    if (tw_config_get_int(cfg, "runtime.pinned_cache", &v) == TW_OK && v > 0)
        return (size_t)v;
    if ((size_t)(twi_phys_bytes() / 16) > cap)
        cap = (size_t)(twi_phys_bytes() / 16);
    return cap;
}

/* Fill the workers' device roles and core sets. */
static tw_status
plan_workers(tw_runtime *rt, int64_t cpu_workers, int team, tw_error *err)
{
    tw_status st = TW_OK;
    int *gpu_unit = NULL;
    hwloc_bitmap_t taken = NULL, *cpu_sets = NULL;
    int n_cpu, i, n_reserved;
    bool oversub = false;

    if (rt->n_gpus > 0 && (!(gpu_unit = calloc((size_t)rt->n_gpus, sizeof *gpu_unit)) ||
                           !(taken = hwloc_bitmap_alloc()))) {
        st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        goto out;
    }
    for (i = 0; i < rt->n_gpus; i++) {
        gpu_unit[i] = twi_topo_pick_gpu_unit(&rt->topo, rt->gpus[i].near, taken);
        hwloc_bitmap_or(taken, taken, rt->topo.unit[gpu_unit[i]]);
    }
    /* Auto: one worker per `team` cores not reserved for a GPU manager, at least one. */
    if (cpu_workers < 0) {
        int64_t n = (rt->topo.n_units - rt->n_gpus) / team;
        n_cpu = n < 1 ? 1 : (int)n;
    } else {
        n_cpu = (int)cpu_workers;
    }
    if (n_cpu == 0 && rt->n_gpus == 0) {
        st = twi_error_set(err, TW_E_INVALID,
                           "runtime: no workers (runtime.cpu_workers=0 and no GPU is used)");
        goto out;
    }
    rt->n_cpu_workers = n_cpu;
    rt->n_workers = n_cpu + rt->n_gpus;
    if (!(rt->workers = calloc((size_t)rt->n_workers, sizeof *rt->workers)) ||
        !(rt->idle = calloc((size_t)rt->n_workers, sizeof *rt->idle)) ||
        (n_cpu > 0 && !(cpu_sets = calloc((size_t)n_cpu, sizeof *cpu_sets)))) {
        st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        goto out;
    }
    /* GPU managers keep a core of their own only when the machine has cores to spare. */
    n_reserved = rt->topo.n_units > rt->n_gpus ? rt->n_gpus : 0;
    if (n_cpu > 0) {
        if (twi_topo_assign_cpu(&rt->topo, n_cpu, team, gpu_unit, n_reserved, cpu_sets,
                                &oversub) != TW_OK) {
            st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
            goto out;
        }
    }
    if (oversub)
        TW_WARN("runtime",
                "%d CPU workers with teams of %d need %d cores but %d are available; "
                "cores are shared", n_cpu, team, n_cpu * team, rt->topo.n_units);
    rt->runs = 0;
    for (i = 0; i < rt->n_workers; i++) {
        tw_worker *w = &rt->workers[i];

        w->rt = rt;
        w->index = i;
        atomic_init(&w->tasks_run, 0);
        atomic_init(&w->busy_ns, 0);
        atomic_init(&w->bytes_up, 0);
        atomic_init(&w->bytes_down, 0);
        atomic_init(&w->bytes_hit, 0);
        atomic_init(&w->tasks_retried, 0);
        w->start_ns = twi_trace_now();
        if (!(w->lent = calloc((size_t)rt->n_workers, sizeof *w->lent))) {
            st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
            goto out;
        }
        if (i < n_cpu) {
            w->type = TW_DEVICE_CPU;
            w->gpu = -1;
            w->team = w->team_now = team;
            w->runs = TW_DEVICE_CPU;
            w->cpuset = cpu_sets[i];
            cpu_sets[i] = NULL;
        } else {
            w->type = TW_DEVICE_CUDA;
            w->g = &rt->gpus[i - n_cpu];
            w->gpu = w->g->ordinal;
            w->team = w->team_now = 1;
            /* With no CPU worker, GPU managers also run CPU-only kinds (e.g. I/O tasks) on
             * their host thread, so such jobs still complete. */
            w->runs = TW_DEVICE_CUDA | (n_cpu == 0 ? TW_DEVICE_CPU : 0u);
            if (!(w->cpuset = hwloc_bitmap_dup(rt->topo.unit[gpu_unit[i - n_cpu]]))) {
                st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
                goto out;
            }
        }
        hwloc_bitmap_list_snprintf(w->cpuset_str, sizeof w->cpuset_str, w->cpuset);
        rt->runs |= w->runs;
    }
out:
    if (cpu_sets) {
        for (i = 0; i < n_cpu; i++)
            hwloc_bitmap_free(cpu_sets[i]);
        free(cpu_sets);
    }
    hwloc_bitmap_free(taken);
    free(gpu_unit);
    return st;
}

tw_status
tw_runtime_create(const tw_config *cfg, tw_runtime **out, tw_error *err)
{
    tw_status st = TW_OK;
    tw_runtime *rt = NULL;
    int64_t cpu_workers = 0, team = 1;
    const char *gpus = NULL, *policy = NULL, *trace = NULL, *downloads = NULL, *share = NULL;
    const char *pinned = NULL, *caller = NULL;
    int *ordinals = NULL;
    size_t i;
    int g;

    if (!out)
        return twi_error_set(err, TW_E_INVALID, "runtime: no place for the runtime (out is NULL)");
    if (!(rt = calloc(1, sizeof *rt)))
        return twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
    if ((cfg ? tw_config_clone(cfg, &rt->cfg) : tw_config_create(&rt->cfg)) != TW_OK) {
        st = twi_error_set(err, TW_E_NOMEM, "runtime: cannot copy the configuration");
        goto out;
    }
    if ((st = get_int(rt->cfg, "runtime.cpu_workers", &cpu_workers, err)) != TW_OK ||
        (st = get_int(rt->cfg, "runtime.cpu_team", &team, err)) != TW_OK ||
        (st = get_string(rt->cfg, "runtime.gpus", &gpus, err)) != TW_OK ||
        (st = get_string(rt->cfg, "runtime.policy", &policy, err)) != TW_OK ||
        (st = get_string(rt->cfg, "runtime.trace", &trace, err)) != TW_OK ||
        (st = get_string(rt->cfg, "runtime.gpu_downloads", &downloads, err)) != TW_OK ||
        (st = get_string(rt->cfg, "runtime.caller_memory", &caller, err)) != TW_OK)
        goto out;
    if (cpu_workers < -1 || cpu_workers > 4096 || team < 1 || team > 4096) {
        st = twi_error_set(err, TW_E_INVALID,
                           "runtime: bad worker layout (runtime.cpu_workers=%" PRId64
                           ", runtime.cpu_team=%" PRId64 ")", cpu_workers, team);
        goto out;
    }
    for (i = 0; i < sizeof policies / sizeof policies[0]; i++)
        if (strcmp(policies[i]->name, policy) == 0)
            rt->sched.policy = policies[i];
    if (!rt->sched.policy) {
        st = twi_error_set(err, TW_E_INVALID,
                           "runtime: unknown runtime.policy '%s' (fcfs, fair, pats, locality)",
                           policy);
        goto out;
    }
    if ((st = twi_fault_setup(rt, err)) != TW_OK)
        goto out;
    if ((st = twi_topo_load(&rt->topo, err)) != TW_OK)
        goto out;
    /* runtime.cpu_share: processes sharing a node (MPI ranks) take a part of its cores each. */
    if (tw_config_get_string(rt->cfg, "runtime.cpu_share", &share) == TW_OK && *share) {
        int64_t k, parts;

        if (twi_parse_share(share, &k, &parts) != TW_OK) {
            st = twi_error_set(err, TW_E_INVALID, "runtime: bad runtime.cpu_share '%s'", share);
            goto out;
        }
        twi_topo_restrict(&rt->topo, k, parts);
    }
    if (*trace && (st = twi_trace_open(rt, trace, err)) != TW_OK)
        goto out;

    rt->n_gpus_present = twi_cuda_device_count();
    if ((st = parse_gpus(gpus, rt->n_gpus_present, &ordinals, &rt->n_gpus, err)) != TW_OK)
        goto out;
    if (rt->n_gpus > 0) {
        if (!(rt->gpus = calloc((size_t)rt->n_gpus, sizeof *rt->gpus))) {
            st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
            goto out;
        }
        for (g = 0; g < rt->n_gpus; g++) {
            rt->gpus[g].ordinal = ordinals[g];
            if ((st = twi_cuda_describe(rt->topo.topo, ordinals[g], &rt->gpus[g], err)) != TW_OK)
                goto out;
        }
    }
    /* Host tiles are pinned when GPUs take part, so their copies run asynchronously (unless
     * runtime.pinned_tiles = no). */
    if (rt->n_gpus > 0 && tw_config_get_string(rt->cfg, "runtime.pinned_tiles", &pinned) == TW_OK &&
        strcmp(pinned, "yes") == 0 &&
        twi_hostpool_create(rt->gpus[0].ordinal, pinned_cache_bytes(rt->cfg), &rt->host_pool) !=
            TW_OK)
        rt->host_pool = NULL;
    if ((st = plan_workers(rt, cpu_workers, (int)team, err)) != TW_OK ||
        (st = twi_budget_create(rt, err)) != TW_OK)
        goto out;

    if (pthread_mutex_init(&rt->lock, NULL) != 0) {
        st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        goto out;
    }
    if (pthread_cond_init(&rt->ctl, NULL) != 0) {
        pthread_mutex_destroy(&rt->lock);
        st = twi_error_set(err, TW_E_NOMEM, "runtime: out of memory");
        goto out;
    }
    for (i = 0; i < sizeof rt->sync_lock / sizeof rt->sync_lock[0]; i++)
        (void)pthread_mutex_init(&rt->sync_lock[i], NULL); /* default attributes: cannot fail */
    rt->lock_init = true;
    /* Lazy downloads need the host copy of a tile to be where a sync can write it; under a
     * host budget it may be spilled instead, so downloads stay eager there. */
    rt->lazy_down = rt->n_gpus > 0 && !rt->budget && strcmp(downloads, "lazy") == 0;
    rt->caller_mode = rt->budget                           ? TWI_CALLER_COPY
                      : strcmp(caller, "wrap") == 0     ? TWI_CALLER_WRAP
                      : strcmp(caller, "register") == 0 ? TWI_CALLER_REGISTER
                      : strcmp(caller, "copy") == 0     ? TWI_CALLER_COPY
                                                        : TWI_CALLER_AUTO;
    rt->register_caller = rt->caller_mode == TWI_CALLER_REGISTER;
    rt->sched.rt = rt;
    if ((st = twi_models_open(rt, err)) != TW_OK)
        goto out;
    if ((st = rt->sched.policy->init(&rt->sched)) != TW_OK) {
        st = twi_error_set(err, st, "runtime: cannot start the %s policy", rt->sched.policy->name);
        goto out;
    }
    rt->sched_init = true;
    if ((st = twi_workers_start(rt, err)) != TW_OK)
        goto out;
    TW_INFO("runtime", "started %d CPU workers (team %d) and %d GPU managers (%d GPUs present)",
            rt->n_cpu_workers, (int)team, rt->n_gpus, rt->n_gpus_present);
    rt->started = true;
    *out = rt;
    rt = NULL;
out:
    free(ordinals);
    tw_runtime_destroy(rt);
    return st;
}

tw_status
tw_runtime_finish(tw_runtime *rt, tw_error *err)
{
    if (!rt)
        return twi_error_set(err, TW_E_INVALID, "runtime: tw_runtime_finish: NULL runtime");
    twi_workers_stop(rt);
    rt->trace_reported = true;
    return twi_trace_close(rt, err);
}

void
tw_runtime_destroy(tw_runtime *rt)
{
    tw_error err;
    int i;

    if (!rt)
        return;
    twi_workers_stop(rt);
    /* tw_runtime_destroy() returns nothing: the log is the only way to say it, when
     * tw_runtime_finish() did not. */
    if (twi_trace_close(rt, &err) != TW_OK && !rt->trace_reported)
        TW_LOG(TW_LOG_ERROR, "runtime", "%s", err.message);
    twi_trace_free(rt);
    if (rt->sched_init)
        rt->sched.policy->fini(&rt->sched);
    twi_models_close(rt);
    for (i = 0; i < rt->n_workers; i++) {
        if (rt->workers[i].cond_init)
            pthread_cond_destroy(&rt->workers[i].cond);
        hwloc_bitmap_free(rt->workers[i].cpuset);
        free(rt->workers[i].lent);
    }
    if (rt->lock_init) {
        pthread_cond_destroy(&rt->ctl);
        pthread_mutex_destroy(&rt->lock);
        for (i = 0; i < (int)(sizeof rt->sync_lock / sizeof rt->sync_lock[0]); i++)
            pthread_mutex_destroy(&rt->sync_lock[i]);
    }
    for (i = 0; i < rt->n_gpus && rt->gpus; i++)
        hwloc_bitmap_free(rt->gpus[i].near);
    free(rt->gpus);
    free(rt->workers);
    free(rt->idle);
    twi_budget_destroy(rt);
    twi_devpool_destroy(rt->host_pool);
    twi_topo_fini(&rt->topo);
    tw_config_destroy(rt->cfg);
    free(rt);
}

const tw_config *
tw_runtime_get_config(const tw_runtime *rt)
{
    return rt ? rt->cfg : NULL;
}

tw_status
tw_runtime_get_topology(const tw_runtime *rt, tw_topology_info *out)
{
    if (!rt || !out)
        return TW_E_INVALID;
    memset(out, 0, sizeof *out);
    out->n_packages = rt->topo.n_packages;
    out->n_numa_nodes = rt->topo.n_numa_nodes;
    out->n_cores = rt->topo.n_cores;
    out->n_pus = rt->topo.n_pus;
    out->n_gpus = rt->n_gpus;
    out->n_gpus_present = rt->n_gpus_present;
    return TW_OK;
}

tw_status
tw_runtime_get_gpu(const tw_runtime *rt, int i, tw_gpu_info *out)
{
    if (!rt || !out || i < 0 || i >= rt->n_gpus)
        return TW_E_INVALID;
    *out = rt->gpus[i].info;
    return TW_OK;
}

int
tw_runtime_get_worker_count(const tw_runtime *rt)
{
    return rt ? rt->n_workers : 0;
}

tw_status
tw_runtime_get_worker(const tw_runtime *rt, int i, tw_worker_info *out)
{
    const tw_worker *w;

    if (!rt || !out || i < 0 || i >= rt->n_workers)
        return TW_E_INVALID;
    w = &rt->workers[i];
    memset(out, 0, sizeof *out);
    out->index = w->index;
    out->type = w->type;
    out->gpu = w->gpu;
    out->team = w->team;
    snprintf(out->cpuset, sizeof out->cpuset, "%s", w->cpuset_str);
    snprintf(out->bound_cpuset, sizeof out->bound_cpuset, "%s", w->bound_str);
    out->tasks_run = (uint64_t)atomic_load_explicit(&w->tasks_run, memory_order_relaxed);
    out->busy_s = 1e-9 * (double)atomic_load_explicit(&w->busy_ns, memory_order_relaxed);
    out->alive_s = 1e-9 * (double)(twi_trace_now() - w->start_ns);
    out->bytes_to_gpu = (uint64_t)atomic_load_explicit(&w->bytes_up, memory_order_relaxed);
    out->bytes_from_gpu = (uint64_t)atomic_load_explicit(&w->bytes_down, memory_order_relaxed);
    out->bytes_gpu_resident =
        (uint64_t)atomic_load_explicit(&w->bytes_hit, memory_order_relaxed);
    out->tasks_retried = (uint64_t)atomic_load_explicit(&w->tasks_retried, memory_order_relaxed);
    return TW_OK;
}

bool
twi_runtime_registers_caller(const tw_runtime *rt)
{
    return rt->register_caller && rt->n_gpus > 0;
}

int
twi_runtime_gpu_count(const tw_runtime *rt)
{
    return rt ? rt->n_gpus : 0;
}

int
twi_runtime_cpu_count(const tw_runtime *rt)
{
    return rt ? rt->n_cpu_workers : 0;
}

bool
twi_runtime_host_pinned(const void *p)
{
    return twi_host_pinned(p);
}

int64_t
twi_runtime_gpu_budget(const tw_runtime *rt)
{
    int64_t n = 0;

    for (int i = 0; rt && i < rt->n_gpus; i++)
        if (i == 0 || (int64_t)rt->gpus[i].budget < n)
            n = rt->gpus[i].budget > (size_t)INT64_MAX ? INT64_MAX : (int64_t)rt->gpus[i].budget;
    return n;
}

int64_t
twi_runtime_keep_gpu_bytes(const tw_runtime *rt)
{
    int64_t n = 0;

    if (!rt || !rt->lazy_down)
        return 0;
    for (int i = 0; i < rt->n_gpus; i++)
        n += (int64_t)(rt->gpus[i].budget / 2);
    return n;
}

int64_t
twi_runtime_keep_host_bytes(const tw_runtime *rt)
{
    int64_t budget = 0;

    if (!rt)
        return 0;
    if (tw_config_get_int(rt->cfg, "runtime.host_mem", &budget) == TW_OK && budget > 0)
        return budget / 4;
    return twi_phys_bytes() / 8;
}

int64_t
twi_phys_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

    return pages > 0 && page > 0 ? (int64_t)pages * page : 0;
}
