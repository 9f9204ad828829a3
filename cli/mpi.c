/* SPDX-License-Identifier: MIT */
/* tilewave CLI: how a command runs: in one process, in bands over MPI ranks, or over a list. */
/*
 * Started by mpirun with more than one rank, a command either runs one job in bands across the
 * ranks (the operations of tilewave/mpi.h: every rank runs the same command line and rank 0
 * writes the output), or, with --list, runs each slide of a list as a job of its own on
 * whichever rank asks for the next one (cli/list.c). Anything else is refused, on rank 0 only,
 * before MPI starts. Without mpirun (or with one rank) nothing here touches MPI.
 *
 * Ranks that mpirun starts on one node share its cores: each takes its part
 * (runtime.cpu_share), since every runtime would otherwise bind its first worker to the
 * node's first core.
 *
 * Failures. In bands, the rank where a job's failure happened prints it ("tilewave edt: rank 1
 * of 4: ..."; the others, whose jobs fail because of it, stay silent: tw_mpi_report says
 * which rank it was) and, unless every rank's job failed at the same point, ends every rank
 * with MPI_Abort: the others may be inside a collective that cannot be withdrawn. A list run
 * ends normally: each rank counts its failed slides, and all ranks agree on the exit status.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

tw_mpi *cli_mpi;
tw_mpi_report cli_mpi_report;
static tw_mpi *ctx;      /* the MPI context (bands or list), NULL in one process */
static bool list_agreed; /* a list run ended with every rank: no abort */
static char where[48];   /* "rank R of N" for messages */

/* The commands that run as one job in bands across ranks. */
static const char *const in_bands[] = {"reconstruct", "fill-holes", "hmax",
                                       "regional-max", "edt", "area-open",
                                       "area-close", "height-open", "height-close"};
/* The commands --list does not apply to: no input slide, or two. */
static const char *const no_list[] = {"info", "devices", "sample", "config", "tune",
                                      "reconstruct"};

static bool
in_table(const char *name, const char *const *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, t[i]) == 0)
            return true;
    return false;
}

/* What the launcher put in the environment (Open MPI, MPICH/Hydra, PMIx): a count or rank,
 * -1 when it says nothing. */
static int
env_int(const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(names[i]);
        int out;

        if (v && cli_parse_int(v, 0, 1 << 24, &out) == 0)
            return out;
    }
    return -1;
}

static int
launcher_size(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};

    return env_int(names, sizeof names / sizeof names[0]);
}

static int
launcher_rank(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};

    return env_int(names, sizeof names / sizeof names[0]);
}

void
cli_mpi_share_cores(tw_config *cfg)
{
    static const char *const local_rank[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"};
    static const char *const local_size[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"};
    int k = env_int(local_rank, 2), n = env_int(local_size, 2);
    char share[32];
    tw_config_entry e;

    if (!ctx || k < 0 || n < 2 || k >= n)
        return;
    /* Only where nobody chose: a file, the environment or --set wins. */
    for (size_t i = 0; i < tw_config_count(); i++)
        if (tw_config_describe(cfg, i, &e) == TW_OK && strcmp(e.key, "runtime.cpu_share") == 0 &&
            e.source != TW_CONFIG_DEFAULT)
            return;
    snprintf(share, sizeof share, "%d/%d", k, n);
    if (tw_config_set(cfg, "runtime.cpu_share", share, TW_CONFIG_SET, NULL) != TW_OK)
        return; /* more than 4096 ranks on a node: every rank uses every core */
}

const char *
cli_mpi_where(void)
{
    return ctx && where[0] ? where : NULL;
}

tw_mpi *
cli_mpi_context(void)
{
    return ctx;
}

void
cli_mpi_list_agreed(void)
{
    list_agreed = true;
}

/* Start MPI when mpirun started this process with several ranks. -1: go on (in bands when
 * cli_mpi is set); else the exit code, the error printed. */
static int
mpi_begin(const char *cmd, bool list)
{
    int size = launcher_size(), rank = launcher_rank();
    bool speak = rank <= 0; /* one line, not one per rank, for what every rank finds */
    tw_error err;

    if (size == 1 || (size < 0 && rank < 0))
        return -1;
    if (!tw_build_has_mpi()) {
        if (speak)
            cli_error("started by mpirun with %d ranks, but this tilewave was built without MPI "
                      "(configure with -DTW_ENABLE_MPI=ON)",
                      size);
        return CLI_FAIL;
    }
    if (!list && !in_table(cmd, in_bands, sizeof in_bands / sizeof in_bands[0])) {
        if (speak)
            cli_error("does not run across MPI ranks; reconstruct, fill-holes, hmax, "
                      "regional-max, edt, area-open, area-close, height-open and height-close "
                      "do, and every command with one input takes --list FILE");
        return CLI_USAGE;
    }
    if (tw_mpi_open(NULL, NULL, &ctx, &err) != TW_OK) {
        cli_error("%s", err.message);
        return CLI_FAIL;
    }
    if (tw_mpi_get_size(ctx) == 1) {
        tw_mpi_close(ctx);
        ctx = NULL;
        return -1;
    }
    snprintf(where, sizeof where, "rank %d of %d", tw_mpi_get_rank(ctx), tw_mpi_get_size(ctx));
    if (!list) {
        cli_mpi = ctx;
        tw_mpi_report_init(&cli_mpi_report);
    }
    return -1;
}

static int
mpi_end(int rc)
{
    if (!ctx)
        return rc;
    /* In bands the other ranks may wait inside MPI for this one: end them all, unless every
     * rank's job failed at the same point (nobody waits). */
    if (rc != CLI_OK && !list_agreed && !(cli_mpi && cli_mpi_report.all_failed)) {
        fflush(stdout);
        fflush(stderr);
        tw_mpi_abort(ctx, rc);
    }
    tw_mpi_close(ctx);
    ctx = cli_mpi = NULL;
    return rc;
}

int
cli_run_command(const char *prog_path, const char *cmd, int (*fn)(int, char **), int argc,
                char **argv)
{
    const char *list = cli_list_arg(argc, argv);
    int rc;

    if (list && in_table(cmd, no_list, sizeof no_list / sizeof no_list[0]) &&
        launcher_rank() <= 0)
        return cli_usage_error("--list: this command does not take one input slide");
    if (list && in_table(cmd, no_list, sizeof no_list / sizeof no_list[0]))
        return CLI_USAGE;
    if ((rc = mpi_begin(cmd, list != NULL)) >= 0)
        return rc;
    rc = list ? cli_list_run(prog_path, cmd, fn, argc, argv, list) : fn(argc, argv);
    return mpi_end(rc);
}

bool
cli_mpi_untold(void)
{
    return cli_mpi && cli_mpi_report.failed_rank >= 0 &&
           cli_mpi_report.failed_rank != tw_mpi_get_rank(cli_mpi);
}

bool
cli_mpi_quiet(void)
{
    return cli_mpi && tw_mpi_get_rank(cli_mpi) != 0;
}

/* "512 B", "12.3 kB", "4.56 MB", "1.23 GB" (decimal units). */
static void
format_size(char *buf, size_t n, int64_t b)
{
    if (b < 1000)
        snprintf(buf, n, "%lld B", (long long)b);
    else if (b < 1000000)
        snprintf(buf, n, "%.1f kB", 1e-3 * (double)b);
    else if (b < 1000000000)
        snprintf(buf, n, "%.2f MB", 1e-6 * (double)b);
    else
        snprintf(buf, n, "%.2f GB", 1e-9 * (double)b);
}

void
cli_mpi_print_report(void)
{
    const tw_mpi_report *r = &cli_mpi_report;

    if (!cli_mpi || tw_mpi_get_rank(cli_mpi) != 0 || r->size < 2)
        return;
    char ex[32], out[32];

    format_size(ex, sizeof ex, r->total_exchange_bytes);
    format_size(out, sizeof out, r->total_output_bytes);
    fprintf(stderr,
            "%s: mpi: %d ranks, bands of %lld..%lld rows, %lld exchange round%s, %s exchanged, "
            "%s of results sent to rank 0, waits up to %.2f s\n",
            cli_prog, r->size, (long long)r->rows_min, (long long)r->rows_max,
            (long long)r->rounds, r->rounds == 1 ? "" : "s", ex, out, r->max_wait_s);
}
