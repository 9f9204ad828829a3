/* SPDX-License-Identifier: MIT */
/* tilewave bench: empty-task throughput and per-task overhead through the real runtime. */
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tw_internal.h"

static const char help[] =
    "Usage: tw_bench runtime [--workers N] [--tasks M] [--repeat R] [--policy LIST]\n"
    "\n"
    "Run empty tasks through the runtime (CPU workers only) in four patterns, each a fresh\n"
    "job, one warm-up then R timed runs, and print the median per pattern:\n"
    "  independent  M tasks with no dependencies, created and submitted by the main thread\n"
    "  chain        M tasks, each depending on the one before (dependency hand-off latency)\n"
    "  fanin        M tasks in groups of 16 independent tasks and a 17th depending on all 16\n"
    "               (edges beyond a task's 4 inline ones are allocated: the join pattern)\n"
    "  spawn        a binary tree of about M tasks, each submitting its two children from\n"
    "               inside the running task (the Border Propagation re-submission pattern)\n"
    "Time covers create + submit + run + wait. us_per_task is wall time per task;\n"
    "cpu_us_per_task is the process CPU time per task (all threads).\n"
    "\n"
    "  --workers N    CPU workers, -1 = one per core (default -1)\n"
    "  --tasks M      tasks per run (default 200000)\n"
    "  --repeat R     timed runs per pattern (default 5)\n"
    "  --policy LIST  scheduling policies to run in turn, a fresh runtime each: a comma list\n"
    "                 (fcfs,fair) or all (every runtime.policy value); default: the config's\n"
    "  --help         this help\n";

typedef enum pattern { P_INDEPENDENT, P_CHAIN, P_FANIN, P_SPAWN } pattern;
static const char *const pattern_names[] = {"independent", "chain", "fanin", "spawn"};

#define FANIN 16 /* leaves per join in the fanin pattern */
#define MAX_POLICIES 16

static tw_status
empty_cpu(tw_task_ctx *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return TW_OK;
}

static const tw_task_kind empty_kind = {
    .name = "bench.empty",
    .devices = TW_DEVICE_CPU,
    .cpu = empty_cpu,
};

/* Depth of this node's subtree still to spawn, carried in the argument pointer itself so
 * that no allocation per task distorts the overhead being measured. */
static tw_status spawn_cpu(tw_task_ctx *ctx, void *arg);

static const tw_task_kind spawn_kind = {
    .name = "bench.spawn",
    .devices = TW_DEVICE_CPU,
    .cpu = spawn_cpu,
};

static tw_status
spawn_cpu(tw_task_ctx *ctx, void *arg)
{
    uintptr_t left = (uintptr_t)arg;
    tw_status st = TW_OK;

    if (left == 0)
        return TW_OK;
    for (int i = 0; i < 2 && st == TW_OK; i++) {
        tw_task *t = NULL;

        if ((st = twi_task_create(twi_ctx_job(ctx), &spawn_kind, (void *)(left - 1), NULL,
                                  &t)) == TW_OK)
            st = twi_task_submit(t);
        twi_task_release(t);
    }
    if (st != TW_OK)
        return twi_ctx_fail(ctx, st, "bench: cannot submit a child task");
    return TW_OK;
}

static uint64_t
tasks_run(const tw_runtime *rt)
{
    uint64_t n = 0;

    for (int i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        tw_worker_info wi;

        if (tw_runtime_get_worker(rt, i, &wi) == TW_OK)
            n += wi.tasks_run;
    }
    return n;
}

/* Levels below the root of the largest full binary tree with at most m nodes. */
static unsigned
tree_depth(int64_t m)
{
    unsigned d = 0;

    while (((int64_t)1 << (d + 2)) - 1 <= m)
        d++;
    return d;
}

/* M tasks (rounded down to whole groups, at least one) as groups of FANIN independent tasks
 * and a join depending on them all. */
static tw_status
submit_fanin(tw_job *job, int64_t m, int64_t *n_tasks)
{
    int64_t groups = m / (FANIN + 1) > 0 ? m / (FANIN + 1) : 1;
    tw_status st = TW_OK;
    tw_task *join = NULL, *leaf = NULL;

    *n_tasks = groups * (FANIN + 1);
    for (int64_t g = 0; g < groups && st == TW_OK; g++) {
        if ((st = twi_task_create(job, &empty_kind, NULL, NULL, &join)) != TW_OK)
            break;
        for (int k = 0; k < FANIN && st == TW_OK; k++) {
            if ((st = twi_task_create(job, &empty_kind, NULL, NULL, &leaf)) == TW_OK &&
                (st = twi_task_depend(join, leaf)) == TW_OK)
                st = twi_task_submit(leaf);
            twi_task_release(leaf);
            leaf = NULL;
        }
        if (st == TW_OK)
            st = twi_task_submit(join);
        twi_task_release(join);
        join = NULL;
    }
    return st;
}

/* One run of `p`: build a job, wait for it; *n_tasks = the tasks it holds. */
static tw_status
run_once(tw_runtime *rt, pattern p, int64_t m, int64_t *n_tasks, tw_error *err)
{
    tw_status st = TW_OK;
    tw_job *job = NULL;
    tw_task *prev = NULL, *t = NULL;

    if ((st = twi_job_create(rt, pattern_names[p], &job)) != TW_OK)
        goto out;
    if (p == P_SPAWN) {
        unsigned d = tree_depth(m);

        *n_tasks = ((int64_t)1 << (d + 1)) - 1;
        if ((st = twi_task_create(job, &spawn_kind, (void *)(uintptr_t)d, NULL, &t)) != TW_OK ||
            (st = twi_task_submit(t)) != TW_OK)
            goto out;
        twi_task_release(t);
        t = NULL;
    } else if (p == P_FANIN) {
        if ((st = submit_fanin(job, m, n_tasks)) != TW_OK)
            goto out;
    } else {
        *n_tasks = m;
        for (int64_t i = 0; i < m; i++) {
            if ((st = twi_task_create(job, &empty_kind, NULL, NULL, &t)) != TW_OK)
                goto out;
            if (p == P_CHAIN && prev && (st = twi_task_depend(t, prev)) != TW_OK)
                goto out;
            if ((st = twi_task_submit(t)) != TW_OK)
                goto out;
            twi_task_release(prev);
            prev = NULL;
            if (p == P_CHAIN)
                prev = t;
            else
                twi_task_release(t);
            t = NULL;
        }
    }
out:
    twi_task_release(t);
    twi_task_release(prev);
    if (job) {
        tw_status wst;

        twi_job_seal(job);
        wst = tw_job_wait(job, -1);
        if (st == TW_OK && wst != TW_OK) {
            const char *msg = tw_job_get_error(job);

            st = twi_error_set(err, wst, "%s", msg ? msg : tw_status_string(wst));
        } else if (st != TW_OK) {
            twi_error_set(err, st, "bench: building the %s job failed (%s)", pattern_names[p],
                          tw_status_string(st));
        }
        tw_job_destroy(job);
    } else {
        twi_error_set(err, st, "bench: cannot create a job (%s)", tw_status_string(st));
    }
    return st;
}

/* Split --policy into names; "all" = every value runtime.policy accepts. Returns the count,
 * or 0 after printing a usage error. */
static int
policy_list(const char *arg, char names[MAX_POLICIES][32])
{
    tw_config *cfg = NULL;
    tw_config_entry e;
    const char *p = arg;
    int n = 0;

    if (strcmp(arg, "all") == 0) {
        p = "";
        if (tw_config_create(&cfg) == TW_OK)
            for (size_t i = 0; i < tw_config_count(); i++)
                if (tw_config_describe(cfg, i, &e) == TW_OK &&
                    strcmp(e.key, "runtime.policy") == 0)
                    p = e.range; /* "fcfs|fair|pats" */
    }
    while (*p && n < MAX_POLICIES) {
        size_t len = strcspn(p, ",|");

        if (len == 0 || len >= sizeof names[0]) {
            n = 0;
            break;
        }
        memcpy(names[n], p, len);
        names[n++][len] = '\0';
        p += len;
        if (*p)
            p++;
    }
    tw_config_destroy(cfg);
    if (n == 0)
        bench_usage("--policy: expected a list such as fcfs,fair or all, got '%s'", arg);
    return n;
}

/* Every pattern on a fresh runtime of `workers` CPU workers under `policy` (NULL: the
 * config's). */
static int
run_policy(const char *policy, int64_t workers, int64_t m, int64_t repeat, double *wall,
           double *cpu)
{
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_error err = {0};
    const char *used = NULL;
    char v[32];
    int rc = BENCH_OK;

    snprintf(v, sizeof v, "%lld", (long long)workers);
    /* TILEWAVE_* variables apply (TILEWAVE_RUNTIME_MODELS=none keeps the user's cost models
     * out of it); the options override them. */
    if (tw_config_create(&cfg) != TW_OK || tw_config_load_env(cfg, &err) != TW_OK ||
        tw_config_set(cfg, "runtime.gpus", "none", TW_CONFIG_SET, &err) != TW_OK ||
        tw_config_set(cfg, "runtime.cpu_workers", v, TW_CONFIG_SET, &err) != TW_OK ||
        (policy && tw_config_set(cfg, "runtime.policy", policy, TW_CONFIG_SET, &err) != TW_OK) ||
        tw_runtime_create(cfg, &rt, &err) != TW_OK) {
        rc = bench_fail("%s", err.message[0] ? err.message : "cannot create the runtime");
        goto out;
    }
    if (tw_config_get_string(tw_runtime_get_config(rt), "runtime.policy", &used) != TW_OK)
        used = "?";
    for (int p = P_INDEPENDENT; p <= P_SPAWN; p++) {
        int64_t n = 0;

        for (int64_t r = -1; r < repeat; r++) { /* r = -1: warm-up */
            uint64_t before = tasks_run(rt);
            double c0 = bench_cpu_seconds(), t0 = bench_now();

            if (run_once(rt, (pattern)p, m, &n, &err) != TW_OK) {
                rc = bench_fail("%s", err.message);
                goto out;
            }
            if (r >= 0) {
                wall[r] = bench_now() - t0;
                cpu[r] = bench_cpu_seconds() - c0;
            }
            /* A sanity check on the measurement: every task ran exactly once. */
            if (tasks_run(rt) - before != (uint64_t)n) {
                rc = bench_fail("%s: %llu tasks ran, expected %lld", pattern_names[p],
                                (unsigned long long)(tasks_run(rt) - before), (long long)n);
                goto out;
            }
        }
        {
            double lo = bench_min(wall, (int)repeat), hi = bench_max(wall, (int)repeat);
            double med = bench_median(wall, (int)repeat);
            double cmed = bench_median(cpu, (int)repeat);

            printf("{\"bench\": \"runtime\", \"pattern\": \"%s\", \"policy\": \"%s\", "
                   "\"workers\": %d, \"tasks\": %lld, \"repeat\": %lld, \"median_s\": %.6f, "
                   "\"min_s\": %.6f, \"max_s\": %.6f, \"tasks_per_s\": %.1f, "
                   "\"us_per_task\": %.4f, \"cpu_us_per_task\": %.4f}\n",
                   pattern_names[p], used, tw_runtime_get_worker_count(rt), (long long)n,
                   (long long)repeat, med, lo, hi, (double)n / med, med / (double)n * 1e6,
                   cmed / (double)n * 1e6);
            fflush(stdout);
        }
    }
out:
    tw_runtime_destroy(rt);
    tw_config_destroy(cfg);
    return rc;
}

int
bench_runtime(int argc, char **argv)
{
    enum { O_WORKERS = 1, O_TASKS, O_REPEAT, O_POLICY, O_HELP };
    static const struct option opts[] = {{"workers", required_argument, NULL, O_WORKERS},
                                         {"tasks", required_argument, NULL, O_TASKS},
                                         {"repeat", required_argument, NULL, O_REPEAT},
                                         {"policy", required_argument, NULL, O_POLICY},
                                         {"help", no_argument, NULL, O_HELP},
                                         {NULL, 0, NULL, 0}};
    int64_t workers = -1, m = 200000, repeat = 5;
    const char *policy_arg = NULL;
    char policies[MAX_POLICIES][32];
    int n_policies = 1;
    double *wall = NULL, *cpu = NULL;
    int opt, rc = BENCH_OK;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case O_WORKERS: rc = bench_parse_int("--workers", optarg, -1, 4096, &workers); break;
        case O_TASKS: rc = bench_parse_int("--tasks", optarg, 1, INT64_C(1) << 30, &m); break;
        case O_REPEAT: rc = bench_parse_int("--repeat", optarg, 1, 1000, &repeat); break;
        case O_POLICY: policy_arg = optarg; break;
        case 'h':
        case O_HELP: fputs(help, stdout); goto out;
        default: rc = bench_usage("unknown option '%s'", argv[optind - 1]); break;
        }
        if (rc != BENCH_OK)
            goto out;
    }
    if (optind < argc) {
        rc = bench_usage("unexpected argument '%s'", argv[optind]);
        goto out;
    }
    if (workers == 0) {
        rc = bench_usage("--workers: need at least one CPU worker");
        goto out;
    }
    if (policy_arg && (n_policies = policy_list(policy_arg, policies)) == 0) {
        rc = BENCH_USAGE;
        goto out;
    }
    wall = calloc((size_t)repeat, sizeof *wall);
    cpu = calloc((size_t)repeat, sizeof *cpu);
    if (!wall || !cpu) {
        rc = bench_fail("out of memory");
        goto out;
    }
    for (int i = 0; i < n_policies && rc == BENCH_OK; i++)
        rc = run_policy(policy_arg ? policies[i] : NULL, workers, m, repeat, wall, cpu);
out:
    free(wall);
    free(cpu);
    return rc;
}
