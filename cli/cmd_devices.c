/* SPDX-License-Identifier: MIT */
/* tilewave CLI: `devices`, the hardware and where each worker runs. */
#include <string.h>

#include "cli.h"

static const char help[] =
    "Usage: tilewave devices [--policies] [common options]\n"
    "\n"
    "Start the runtime as a job would and print the cores and GPUs it found, the scheduling\n"
    "policy, and every worker thread: its device, its OpenMP team size, the cores hwloc\n"
    "assigned it and the binding the thread reads back.\n"
    "  --policies   list the scheduling policies (runtime.policy) instead, without starting\n"
    "\n" CLI_COMMON_HELP;

enum { OPT_POLICIES = CLI_OPT_END };

/* The runtime.policy entry of the config (its values, help, current value and origin). */
static int
policy_entry(const tw_config *cfg, tw_config_entry *e)
{
    for (size_t i = 0; i < tw_config_count(); i++)
        if (tw_config_describe(cfg, i, e) == TW_OK && strcmp(e->key, "runtime.policy") == 0)
            return 1;
    return 0;
}

int
cmd_devices(int argc, char **argv)
{
    static const struct option opts[] = {{"policies", no_argument, NULL, OPT_POLICIES},
                                         CLI_COMMON_OPTIONS,
                                         {NULL, 0, NULL, 0}};
    cli_common c;
    tw_config_entry pe;
    bool policies = false;
    tw_config *cfg = NULL;
    tw_runtime *rt = NULL;
    tw_topology_info topo;
    int opt, rc;

    cli_common_init(&c);
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (opt == 'h' || opt == CLI_OPT_HELP) {
            fputs(help, stdout);
            cli_common_fini(&c);
            return CLI_OK;
        }
        if (opt == OPT_POLICIES) {
            policies = true;
            continue;
        }
        if ((rc = cli_common_option(&c, opt, optarg)) != 0) {
            cli_common_fini(&c);
            return rc > 0 ? rc : cli_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc) {
        cli_common_fini(&c);
        return cli_usage_error("unexpected argument '%s'", argv[optind]);
    }
    if ((rc = cli_config_build(&c, &cfg)) != CLI_OK)
        goto out;
    if (!policy_entry(cfg, &pe)) {
        cli_error("the configuration has no runtime.policy");
        rc = CLI_FAIL;
        goto out;
    }
    if (policies) {
        printf("policies: %s\n  %s\nin use: %s (from %s)\n", pe.range, pe.help, pe.value,
               pe.origin);
        goto out;
    }
    if ((rc = cli_runtime_create(cfg, &rt)) != CLI_OK)
        goto out;
    if (tw_runtime_get_topology(rt, &topo) != TW_OK) {
        cli_error("cannot read the topology");
        rc = CLI_FAIL;
        goto out;
    }
    printf("cores:   %d (%d hardware threads, %d package%s, %d NUMA node%s)\n", topo.n_cores,
           topo.n_pus, topo.n_packages, topo.n_packages == 1 ? "" : "s", topo.n_numa_nodes,
           topo.n_numa_nodes == 1 ? "" : "s");
    if (!tw_build_has_cuda())
        printf("GPUs:    none (built without CUDA)\n");
    else if (topo.n_gpus_present == 0)
        printf("GPUs:    none found (CPU workers only)\n");
    else
        printf("GPUs:    %d present, %d used\n", topo.n_gpus_present, topo.n_gpus);
    for (int i = 0; i < topo.n_gpus; i++) {
        tw_gpu_info g;

        if (tw_runtime_get_gpu(rt, i, &g) != TW_OK)
            continue;
        printf("  GPU %d: %s, compute capability %d.%d, %.1f GiB, PCI %s, near cores %s\n",
               g.ordinal, g.name, g.cc_major, g.cc_minor,
               (double)g.total_mem / (1024.0 * 1024.0 * 1024.0), g.pci_bus_id, g.near_cpuset);
    }
    printf("policy:  %s (runtime.policy, from %s; 'devices --policies' lists them)\n", pe.value,
           pe.origin);
    printf("workers: %d\n", tw_runtime_get_worker_count(rt));
    for (int i = 0; i < tw_runtime_get_worker_count(rt); i++) {
        tw_worker_info w;

        if (tw_runtime_get_worker(rt, i, &w) != TW_OK)
            continue;
        if (w.type == TW_DEVICE_CUDA)
            printf("  worker %2d  cuda  GPU %d       cores %-8s bound %s\n", w.index, w.gpu,
                   w.cpuset, w.bound_cpuset[0] ? w.bound_cpuset : "(unknown)");
        else
            printf("  worker %2d  cpu   team %-3d    cores %-8s bound %s\n", w.index, w.team,
                   w.cpuset, w.bound_cpuset[0] ? w.bound_cpuset : "(unknown)");
    }
out:
    tw_runtime_destroy(rt);
    tw_config_destroy(cfg);
    cli_common_fini(&c);
    return rc;
}
