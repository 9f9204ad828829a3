/* SPDX-License-Identifier: MIT */
/* tilewave CLI: common flags, configuration, runtime, progress and signals. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

const char *cli_prog = "tilewave";

/* SIGINT / SIGTERM while a command runs: the handler only records the signal; the wait loop
 * of cli_job_run() cancels the job (async-signal-safe: nothing else happens in the handler). */
static volatile sig_atomic_t interrupted = 0;
static struct sigaction old_int, old_term;
static bool handlers_installed;

void
cli_error(const char *fmt, ...)
{
    const char *cmd = strchr(cli_prog, ' ');
    char msg[1024];
    const char *m = msg;
    size_t n;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_api_words(msg, sizeof msg);
    /* "tilewave gray: gray: level 9 ..." reads better as "tilewave gray: level 9 ...". */
    if (cmd && (n = strlen(cmd + 1)) > 0 && strncmp(msg, cmd + 1, n) == 0 && msg[n] == ':' &&
        msg[n + 1] == ' ')
        m = msg + n + 2;
    /* Under mpirun every rank writes to the same terminal: say which one speaks. */
    if (cli_mpi_where())
        fprintf(stderr, "%s: %s: %s\n", cli_prog, cli_mpi_where(), m);
    else
        fprintf(stderr, "%s: %s\n", cli_prog, m);
}

int
cli_usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", cli_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see '%s --help')\n", cli_prog);
    return CLI_USAGE;
}

void
cli_common_init(cli_common *c)
{
    memset(c, 0, sizeof *c);
    c->quiet = cli_mpi_quiet(); /* in bands, rank 0 speaks for all */
}

void
cli_common_fini(cli_common *c)
{
    free(c->sets);
    memset(c, 0, sizeof *c);
}

int
cli_common_option(cli_common *c, int opt, const char *arg)
{
    char **sets;

    switch (opt) {
    case CLI_OPT_CONFIG: c->config_path = arg; return 0;
    case CLI_OPT_SET:
        if (!strchr(arg, '='))
            return cli_usage_error("--set wants KEY=VALUE, got '%s'", arg);
        sets = realloc(c->sets, (size_t)(c->n_sets + 1) * sizeof *sets);
        if (!sets) {
            cli_error("out of memory");
            return CLI_FAIL;
        }
        c->sets = sets;
        c->sets[c->n_sets++] = (char *)arg;
        return 0;
    case CLI_OPT_TILE: c->tile = arg; return 0;
    case CLI_OPT_CPU_WORKERS: c->cpu_workers = arg; return 0;
    case CLI_OPT_GPUS: c->gpus = arg; return 0;
    case CLI_OPT_TRACE: c->trace = arg; return 0;
    case CLI_OPT_GPU_MEM: c->gpu_mem = arg; return 0;
    case CLI_OPT_MEM_BUDGET: c->mem_budget = arg; return 0;
    case CLI_OPT_SUMMARY: c->summary = true; return 0;
    case CLI_OPT_ON_BAD_TILE: c->on_bad_tile = arg; return 0;
    case CLI_OPT_QUIET: c->quiet = true; return 0;
    default: return -1;
    }
}

static int
set_flag(tw_config *cfg, const char *flag, const char *key, const char *value)
{
    tw_error err;

    if (tw_config_set(cfg, key, value, TW_CONFIG_SET, &err) != TW_OK)
        return cli_usage_error("%s: %s", flag, err.message);
    return CLI_OK;
}

/* --summary: the runtime of this process, whose workers cli_job_run() describes at the end
 * (one runtime and one job per command). */
static bool want_summary;
static bool progress_percent; /* cli_progress_in_percent() */
static tw_runtime *summary_rt;
/* The input options of this process's job (cli_input_apply), whose report cli_job_run()
 * prints. */
static cli_input_io *job_input;
static void print_input_report(void);

int
cli_config_build(const cli_common *c, tw_config **out)
{
    tw_config *cfg = NULL;
    tw_error err;
    const char *file = c->config_path ? c->config_path : getenv("TILEWAVE_CONFIG");
    const char *level = NULL;
    int rc = CLI_OK;

    if (tw_config_create(&cfg) != TW_OK) {
        cli_error("out of memory");
        return CLI_FAIL;
    }
    /* The command's own default, below a file, the environment and --set: slide jobs ran as
     * fast or faster with pageable host tiles (runtime.pinned_tiles in configs/default.ini). */
    if (tw_config_set(cfg, "runtime.pinned_tiles", "no", TW_CONFIG_DEFAULT, &err) != TW_OK) {
        cli_error("%s", err.message);
        rc = CLI_FAIL;
        goto out;
    }
    if (file && *file && tw_config_load_file(cfg, file, &err) != TW_OK) {
        cli_error("%s", err.message);
        rc = CLI_FAIL;
        goto out;
    }
    if (tw_config_load_env(cfg, &err) != TW_OK) {
        cli_error("%s", err.message);
        rc = CLI_FAIL;
        goto out;
    }
    if ((c->tile && (rc = set_flag(cfg, "--tile", "tile.size", c->tile)) != CLI_OK) ||
        (c->cpu_workers &&
         (rc = set_flag(cfg, "--cpu-workers", "runtime.cpu_workers", c->cpu_workers)) != CLI_OK) ||
        (c->gpus && (rc = set_flag(cfg, "--gpus", "runtime.gpus", c->gpus)) != CLI_OK) ||
        (c->trace && (rc = set_flag(cfg, "--trace", "runtime.trace", c->trace)) != CLI_OK) ||
        (c->gpu_mem &&
         (rc = set_flag(cfg, "--gpu-mem", "runtime.gpu_mem", c->gpu_mem)) != CLI_OK) ||
        (c->mem_budget &&
         (rc = set_flag(cfg, "--mem-budget", "runtime.host_mem", c->mem_budget)) != CLI_OK) ||
        (c->on_bad_tile &&
         (rc = set_flag(cfg, "--on-bad-tile", "io.on_bad_tile", c->on_bad_tile)) != CLI_OK))
        goto out;
    for (int i = 0; i < c->n_sets; i++) {
        char key[256];
        const char *eq = strchr(c->sets[i], '=');
        size_t n = (size_t)(eq - c->sets[i]);

        if (n == 0 || n >= sizeof key) {
            rc = cli_usage_error("--set wants KEY=VALUE, got '%s'", c->sets[i]);
            goto out;
        }
        memcpy(key, c->sets[i], n);
        key[n] = '\0';
        if ((rc = set_flag(cfg, "--set", key, eq + 1)) != CLI_OK)
            goto out;
    }
    if (c->no_gpu) {
        /* over the file, the environment, the flags and --set, all checked as usual */
        if (tw_config_set(cfg, "runtime.gpus", "none", TW_CONFIG_SET, &err) != TW_OK) {
            cli_error("%s", err.message);
            rc = CLI_FAIL;
            goto out;
        }
    }
    if (tw_config_get_string(cfg, "log.level", &level) == TW_OK) {
        static const char *const names[] = {"error", "warn", "info", "debug"};
        for (int i = 0; i < 4; i++)
            if (strcmp(level, names[i]) == 0)
                tw_log_set_level((tw_log_level)i);
    }
    want_summary = c->summary;
    if (c->quiet)
        tw_log_set_level(TW_LOG_ERROR);
    cli_mpi_share_cores(cfg);
    *out = cfg;
    cfg = NULL;
out:
    tw_config_destroy(cfg);
    return rc;
}

static void
on_signal(int sig)
{
    interrupted = sig;
}

/* From here on SIGINT and SIGTERM cancel the command's job instead of killing the process,
 * whose output writer would leave its temporary file behind. */
static void
install_handlers(void)
{
    struct sigaction sa;

    if (handlers_installed)
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    handlers_installed = true;
}

static void
restore_handlers(void)
{
    if (!handlers_installed)
        return;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    handlers_installed = false;
}

int
cli_runtime_create(const tw_config *cfg, tw_runtime **out)
{
    tw_error err;
    sigset_t block, old_mask;
    tw_status st;

#ifdef TW_CLI_FUZZ
    (void)cfg;
    *out = NULL;
    return CLI_FUZZ_STOP;
#endif
    /* Worker threads (and their OpenMP teams) inherit a mask blocking both signals, so they
     * reach this thread only, never interrupting a worker's system call. One arriving while
     * the runtime starts is delivered when the mask is restored: it ends the process as
     * usual, before any output exists. */
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old_mask);
    st = tw_runtime_create(cfg, out, &err);
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    if (st != TW_OK) {
        cli_error("%s", err.message);
        return CLI_FAIL;
    }
    summary_rt = *out;
    install_handlers();
    return CLI_OK;
}

/* "512 KB", "12.3 MB", "1.50 GB" (decimal units, as the GPU copies above). */
static void
format_bytes(char *buf, size_t n, double b)
{
    if (b < 1e6)
        snprintf(buf, n, "%.0f KB", b / 1e3);
    else if (b < 1e9)
        snprintf(buf, n, "%.1f MB", b / 1e6);
    else
        snprintf(buf, n, "%.2f GB", b / 1e9);
}

/* The job's reads and writes (tw_job_get_io). */
static void
print_io(tw_job *job)
{
    static const char *const where[] = {
        [TW_KEEP_GPU] = "kept on the GPU between passes",
        [TW_KEEP_HOST] = "kept in host memory between passes",
        [TW_KEEP_SCRATCH] = "kept in a scratch file between passes",
        [TW_KEEP_REREAD] = "decoded again in the second pass (runtime.keep_input)",
    };
    tw_job_io io;
    char rd[32], dec[32], enc[32], wr[32];

    tw_job_get_io(job, &io);
    format_bytes(rd, sizeof rd, (double)io.bytes_read);
    format_bytes(dec, sizeof dec, (double)io.bytes_decoded);
    format_bytes(enc, sizeof enc, (double)io.bytes_encoded);
    format_bytes(wr, sizeof wr, (double)io.bytes_written);
    fprintf(stderr, "  io: read %s, decoded %s (%llu tiles, %llu decoded more than once), "
            "encoded %s, wrote %s", rd, dec, (unsigned long long)io.tiles_decoded,
            (unsigned long long)io.tiles_redecoded, enc, wr);
    if (io.tiles_bad > 0)
        fprintf(stderr, "; %llu bad filled with 0", (unsigned long long)io.tiles_bad);
    if (io.kept != TW_KEEP_NONE && (unsigned)io.kept < sizeof where / sizeof where[0])
        fprintf(stderr, "; input %s", where[io.kept]);
    fputc('\n', stderr);
}

static void
print_summary(tw_runtime *rt, tw_job *job, double wall_s)
{
    int n = tw_runtime_get_worker_count(rt);
    tw_memory_info mi;

    fprintf(stderr, "%s: %.2f s, %d workers\n", cli_prog, wall_s, n);
    for (int i = 0; i < n; i++) {
        tw_worker_info wi;

        if (tw_runtime_get_worker(rt, i, &wi) != TW_OK)
            continue;
        if (wi.type == TW_DEVICE_CUDA)
            fprintf(stderr, "  gpu %d manager (cores %s)", wi.gpu, wi.cpuset);
        else
            fprintf(stderr, "  cpu worker %d (cores %s)", wi.index, wi.cpuset);
        fprintf(stderr, ": %llu tasks, busy %.2f s (%.0f%%)", (unsigned long long)wi.tasks_run,
                wi.busy_s, wi.alive_s > 0 ? 100.0 * wi.busy_s / wi.alive_s : 0.0);
        if (wi.type == TW_DEVICE_CUDA)
            fprintf(stderr, ", %.2f GB to the GPU (%.2f GB found there), %.2f GB back",
                    1e-9 * (double)wi.bytes_to_gpu, 1e-9 * (double)wi.bytes_gpu_resident,
                    1e-9 * (double)wi.bytes_from_gpu);
        if (wi.tasks_retried)
            fprintf(stderr, ", %llu failed tasks retried on CPU",
                    (unsigned long long)wi.tasks_retried);
        fputc('\n', stderr);
    }
    if (tw_runtime_get_memory(rt, &mi) == TW_OK) {
        char peak[32], budget[32], out[32], back[32];

        format_bytes(peak, sizeof peak, (double)mi.host_peak);
        fprintf(stderr, "  host tiles: peak %s", peak);
        if (mi.host_budget > 0) {
            format_bytes(budget, sizeof budget, (double)mi.host_budget);
            format_bytes(out, sizeof out, (double)mi.spill_bytes);
            format_bytes(back, sizeof back, (double)mi.reload_bytes);
            fprintf(stderr, " of a %s budget, %s spilled in %llu tiles, %s read back", budget,
                    out, (unsigned long long)mi.spills, back);
        }
        if (mi.over_budget > 0)
            fprintf(stderr, ", %llu allocations over it", (unsigned long long)mi.over_budget);
        fputc('\n', stderr);
    }
    print_io(job);
}

static void
format_seconds(char *buf, size_t n, double s)
{
    if (s < 60)
        snprintf(buf, n, "%.1f s", s);
    else
        snprintf(buf, n, "%d min %02d s", (int)(s / 60), (int)s % 60);
}

void
cli_progress_in_percent(void)
{
    progress_percent = true;
}

int
cli_job_run(tw_job *job, const char *what, bool quiet)
{
    bool tty = isatty(STDERR_FILENO), shown = false, canceled = false;
    double last_line = 0;
    int sig;
    tw_status st;
    tw_progress p;

    /* Normally installed with the runtime, before the job (and its output file) existed. */
    install_handlers();
    /* Short waits: an interrupt is seen within 100 ms, the progress line moves 5 times a
     * second. */
    while ((st = tw_job_wait(job, canceled ? 1000 : 100)) == TW_E_TIMEOUT) {
        if (interrupted && !canceled) {
            tw_job_cancel(job);
            canceled = true;
        }
        tw_job_get_progress(job, &p);
        if (quiet || canceled || p.elapsed_s < 1.0 || p.total <= 0)
            continue;
        /* A live line on a terminal; on a pipe or a log, one line every 5 seconds. */
        if (tty || p.elapsed_s - last_line >= 5.0) {
            char el[32], eta[32] = "?";

            format_seconds(el, sizeof el, p.elapsed_s);
            if (p.eta_s >= 0)
                format_seconds(eta, sizeof eta, p.eta_s);
            if (progress_percent)
                fprintf(stderr, "%s%s: %3d%%, %s, ETA %s%s", tty ? "\r" : "", what,
                        (int)(100 * p.done / p.total), el, eta, tty ? "\033[K" : "\n");
            else
                fprintf(stderr, "%s%s: %3d%% (%lld/%lld tiles), %s, ETA %s%s", tty ? "\r" : "",
                        what, (int)(100 * p.done / p.total), (long long)p.done,
                        (long long)p.total, el, eta, tty ? "\033[K" : "\n");
            fflush(stderr);
            last_line = p.elapsed_s;
            shown = true;
        }
    }
    if (shown && tty)
        fputc('\n', stderr);
    sig = interrupted;
    if (want_summary && summary_rt && !quiet && !sig) {
        tw_job_get_progress(job, &p);
        print_summary(summary_rt, job, p.elapsed_s);
    }
    restore_handlers();
    /* Interrupted: the job was canceled (a failure meanwhile may be the interrupt's doing);
     * its writers removed their temporary files. One finished before the signal took effect
     * stands. Exit 128 + the signal number, as the shell reports a process it killed. */
    if (sig && st != TW_OK) {
        cli_error("interrupted by %s: %s canceled, no output written",
                  sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal", what);
        return 128 + sig;
    }
    if (st != TW_OK) {
        const char *msg = tw_job_get_error(job);

        if (!cli_mpi_untold())
            cli_error("%s", msg ? msg : tw_status_string(st));
        return CLI_FAIL;
    }
    /* In bands every rank read its own part of the input: rank 0 tells the whole. The job
     * succeeded on every rank (its end was collective), so all of them are here. */
    if (cli_mpi && job_input) {
        double v[2] = {(double)job_input->report.reads, (double)job_input->report.skipped};

        if (tw_mpi_sum(cli_mpi, v, 2, NULL) == TW_OK) {
            job_input->report.reads = (int64_t)v[0];
            job_input->report.skipped = (int64_t)v[1];
        }
    }
    if (!quiet)
        print_input_report();
    {
        /* pixels the user asked to be made up: said even with --quiet */
        tw_job_io io;

        tw_job_get_io(job, &io);
        if (io.tiles_bad > 0)
            cli_error("warning: %llu bad input tile%s filled with 0 (--on-bad-tile fill)",
                      (unsigned long long)io.tiles_bad, io.tiles_bad == 1 ? "" : "s");
    }
    return CLI_OK;
}

void
cli_job_init(cli_common *c, cli_recon_io *io)
{
    cli_common_init(c);
    memset(io, 0, sizeof *io);
    optind = 1;
    opterr = 0;
}

int
cli_job_setup(const cli_common *c, const cli_output_io *out, const char *out_path,
              const char *in_path, const cli_file *more, int n_more, tw_config **cfg,
              tw_runtime **rt)
{
    enum { N_OWN = 6 };
    cli_file files[N_OWN + 8];
    const char *trace = NULL, *models = NULL;
    int rc, n = 0;

    if ((rc = cli_config_build(c, cfg)) != CLI_OK ||
        (rc = cli_output_check(out, *cfg, out_path, in_path)) != CLI_OK)
        return rc;
    if (tw_config_get_string(*cfg, "runtime.trace", &trace) != TW_OK || !*trace)
        trace = NULL;
    /* the cost model file is read at the start and rewritten at the end */
    if (tw_config_get_string(*cfg, "runtime.models", &models) != TW_OK ||
        strcmp(models, "auto") == 0 || strcmp(models, "none") == 0)
        models = NULL;
    files[n++] = (cli_file){"the input", in_path, false};
    files[n++] = (cli_file){"-o", out_path, true};
    files[n++] = (cli_file){"--overlay", out ? out->overlay : NULL, true};
    files[n++] = (cli_file){"--tissue-mask", job_input ? job_input->tissue_mask : NULL, true};
    files[n++] = (cli_file){c->trace ? "--trace" : "runtime.trace", trace, true};
    files[n++] = (cli_file){"runtime.models", models, true};
    for (int i = 0; i < n_more && n < (int)(sizeof files / sizeof files[0]); i++)
        files[n++] = more[i];
    if ((rc = cli_files_check(files, n)) != CLI_OK)
        return rc;
    /* images (after what a file is: '/dev/null' is a device, whatever its name): -o,
     * --overlay, --tissue-mask and the command's other outputs, not the trace or models */
    for (int i = 0; i < n; i++)
        if (files[i].output && (i < 4 || i >= N_OWN) && !(i == 1 && out && out->table) &&
            (rc = cli_image_name_check(files[i].what, files[i].path)) != CLI_OK)
            return rc;
    return cli_runtime_create(*cfg, rt);
}

int
cli_job_submitted(tw_status st, const tw_error *err, tw_job *job, const char *what, bool quiet)
{
    if (st != TW_OK) {
        if (!cli_mpi_untold())
            cli_error("%s", err->message);
        return CLI_FAIL;
    }
    return cli_job_run(job, what, quiet);
}

void
cli_tiles_summary(tw_job *job, const char *out_path)
{
    tw_progress p;

    tw_job_get_progress(job, &p);
    fprintf(stderr, "%s: wrote %s (%lld tiles) in %.2f s\n", cli_prog, out_path,
            (long long)p.total, p.elapsed_s);
}

int
cli_job_end(int rc, tw_job *job, tw_runtime *rt, tw_config *cfg, cli_common *c)
{
    tw_error err;

    if (rc == CLI_OK && job && !c->quiet)
        cli_mpi_print_report(); /* after the command's own summary line */
    tw_job_destroy(job);
    /* The trace is an output like the others: a failure to write it fails the run. */
    if (rt && tw_runtime_finish(rt, &err) != TW_OK && rc == CLI_OK) {
        cli_error("%s", err.message);
        rc = CLI_FAIL;
    }
    tw_runtime_destroy(rt);
    tw_config_destroy(cfg);
    cli_common_fini(c);
    return rc;
}

/* A finite number that is the whole string. */
static int
parse_number(const char *s, double *out)
{
    char *end = NULL;

    if (!s || !*s)
        return -1;
    errno = 0;
    *out = strtod(s, &end);
    return errno || *end || !(*out == *out) || *out > 1e300 || *out < -1e300 ? -1 : 0;
}

int
cli_input_option(cli_input_io *io, int opt, const char *arg)
{
    switch (opt) {
    case CLI_OPT_GRAY:
        if (tw_gray_mode_parse(arg, &io->gray) != TW_OK)
            return cli_usage_error("--gray: unknown mode '%s' (luminance, r, g, b, hematoxylin, "
                                   "eosin)", arg);
        return 0;
    case CLI_OPT_STAINS: {
        char buf[512];
        char *p = buf, *comma;
        int n = 0;

        if (strlen(arg) >= sizeof buf)
            return cli_usage_error("--stain-vectors: too long");
        memcpy(buf, arg, strlen(arg) + 1);
        for (; p; p = comma, n++) {
            if ((comma = strchr(p, ',')) != NULL)
                *comma++ = '\0';
            if (n >= 9 || parse_number(p, &io->stains[n]) != 0)
                return cli_usage_error("--stain-vectors: '%s' is not 9 numbers separated by "
                                       "commas", arg);
        }
        if (n != 9)
            return cli_usage_error("--stain-vectors: '%s' is not 9 numbers separated by commas",
                                   arg);
        io->stains_set = true;
        return 0;
    }
    case CLI_OPT_TISSUE: io->tissue = true; return 0;
    case CLI_OPT_TISSUE_MASK:
        io->tissue_mask = arg;
        io->tissue = true;
        return 0;
    case CLI_OPT_THRESHOLD:
        if (strcmp(arg, "otsu") == 0) {
            io->threshold_mode = TW_THRESHOLD_OTSU;
        } else if (parse_number(arg, &io->threshold) == 0) {
            io->threshold_mode = TW_THRESHOLD_VALUE;
        } else {
            return cli_usage_error("--threshold: bad threshold '%s' (a number or otsu)", arg);
        }
        return 0;
    case CLI_OPT_INVERT: io->invert = true; return 0;
    case CLI_OPT_MPP:
    case CLI_OPT_MAGNIFICATION: {
        const char *flag = opt == CLI_OPT_MPP ? "--mpp" : "--magnification";
        double v = 0;

        if (parse_number(arg, &v) != 0 || !(v > 0))
            return cli_usage_error("%s: bad value '%s' (a positive number)", flag, arg);
        if (io->level_given)
            return cli_usage_error("--level and %s cannot both be given (%s chooses the level)",
                                   flag, flag);
        if ((opt == CLI_OPT_MPP ? io->magnification : io->mpp) > 0)
            return cli_usage_error("--mpp and --magnification cannot both be given");
        *(opt == CLI_OPT_MPP ? &io->mpp : &io->magnification) = v;
        return 0;
    }
    default: return -1;
    }
}

int
cli_input_level_given(cli_input_io *io)
{
    io->level_given = true;
    if (io->mpp > 0 || io->magnification > 0)
        return cli_usage_error("--level and %s cannot both be given (%s chooses the level)",
                               io->mpp > 0 ? "--mpp" : "--magnification",
                               io->mpp > 0 ? "--mpp" : "--magnification");
    return 0;
}

void
cli_input_apply(cli_input_io *io, tw_input *in)
{
    in->mpp = io->mpp;
    in->magnification = io->magnification;
    in->gray = io->gray;
    in->stains_set = io->stains_set;
    memcpy(in->stains, io->stains, sizeof in->stains);
    in->threshold_mode = io->threshold_mode;
    in->threshold = io->threshold;
    in->invert = io->invert;
    in->tissue = io->tissue;
    in->tissue_mask_path = io->tissue_mask;
    in->report = &io->report;
    job_input = io;
}

/* "tilewave CMD: input: level 0 reduced 2x2, 0.998 um per pixel; threshold 120 (otsu of level
 * 0); tissue 41% of level 2, 30 of 96 reads skipped" after a job whose inputs had --mpp or
 * --magnification (or any, with --summary), a threshold or --tissue. */
static void
print_input_report(void)
{
    const cli_input_io *io = job_input;
    const tw_input_report *r;
    bool res;
    const char *sep = "";

    if (!io)
        return;
    res = io->mpp > 0 || io->magnification > 0 || want_summary;
    if (!res && io->threshold_mode == TW_THRESHOLD_NONE && !io->tissue)
        return;
    r = &io->report;
    fprintf(stderr, "%s: input:", cli_prog);
    if (res) {
        fprintf(stderr, " level %d", r->level);
        if (r->reduce > 1)
            fprintf(stderr, " reduced %dx%d by area average", r->reduce, r->reduce);
        if (r->mpp_x > 0)
            fprintf(stderr, ", %.4g um per pixel", r->mpp_x);
        else
            fprintf(stderr, ", pixel size unknown");
        sep = ";";
    }
    if (io->threshold_mode == TW_THRESHOLD_OTSU)
        fprintf(stderr, "%s threshold %g (otsu of level %d)", sep, r->threshold, r->otsu_level);
    else if (io->threshold_mode == TW_THRESHOLD_VALUE)
        fprintf(stderr, "%s threshold %g", sep, r->threshold);
    if (io->threshold_mode != TW_THRESHOLD_NONE)
        sep = ";";
    if (io->tissue)
        fprintf(stderr, "%s tissue %.0f%% of level %d, %lld of %lld reads skipped", sep,
                100.0 * r->tissue_fraction, r->tissue_level, (long long)r->skipped,
                (long long)r->reads);
    fputc('\n', stderr);
}

int
cli_parse_int(const char *s, int min, int max, int *out)
{
    char *end = NULL;
    long v;

    if (!s || !*s)
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

int
cli_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end = NULL;
    long long v;

    /* digits only: strtoll would accept blanks, signs and wrap "-1" past a range check */
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = (int64_t)v;
    return 0;
}

int
cli_parse_region(const char *s, int64_t r[4])
{
    char *end = NULL;
    const char *p = s;

    for (int i = 0; i < 4; i++) {
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || end == p || v < 0)
            return -1;
        r[i] = (int64_t)v;
        /* "x,y,w,h" or "x,y,wxh" */
        if (i < 3) {
            if (*end != ',' && !(i == 2 && *end == 'x'))
                return -1;
            p = end + 1;
        }
    }
    return *end ? -1 : 0;
}

/* ---- output options */

int
cli_output_option(cli_output_io *io, int opt, const char *arg)
{
    switch (opt) {
    case CLI_OPT_COMPRESSION:
        if (tw_compression_parse(arg, &io->compression) != TW_OK)
            return cli_usage_error("--compression: unknown compression '%s' (deflate, zstd, lzw, "
                                   "none or jpeg)", arg);
        io->compression_set = true;
        return 0;
    case CLI_OPT_QUALITY:
        if (cli_parse_int(arg, 1, 100, &io->quality) != 0)
            return cli_usage_error("--quality: bad JPEG quality '%s' (1..100)", arg);
        return 0;
    case CLI_OPT_PYRAMID: io->pyramid = true; return 0;
    case CLI_OPT_LAYOUT:
        if (tw_layout_parse(arg, &io->layout) != TW_OK)
            return cli_usage_error("--layout: unknown layout '%s' (tiff or ome)", arg);
        io->layout_set = true;
        return 0;
    case CLI_OPT_OVERLAY:
        if (!*arg)
            return cli_usage_error("--overlay: empty file name");
        io->overlay = arg;
        return 0;
    default: return -1;
    }
}

int
cli_output_check(const cli_output_io *io, const tw_config *cfg, const char *out_path,
                 const char *in_path)
{
    tw_compression comp = TW_COMPRESS_DEFLATE;
    const char *name = NULL;

    if (io->compression_set)
        comp = io->compression;
    else if (tw_config_get_string(cfg, "io.compression", &name) == TW_OK &&
             tw_compression_parse(name, &comp) != TW_OK)
        comp = TW_COMPRESS_DEFLATE;
    if (io->quality && comp != TW_COMPRESS_JPEG)
        return cli_usage_error("--quality applies to JPEG only (add --compression jpeg)");
    /* --overlay naming the output or the input: cli_files_check, with every other file */
    (void)out_path;
    (void)in_path;
    return 0;
}

void
cli_output_apply(const cli_output_io *io, tw_output *out)
{
    if (io->compression_set) {
        out->compression = io->compression;
        out->compression_set = true;
    }
    out->quality = io->quality;
    out->pyramid = io->pyramid;
    if (io->layout_set) {
        out->layout = io->layout;
        out->layout_set = true;
    }
    out->overlay = io->overlay;
    out->description = cli_command_line();
}

/* The command line, for the outputs' metadata; long ones end in "...". */
static char command_line[4096];

/* Characters a POSIX shell takes literally in a word; anything else is single-quoted. */
static bool
shell_safe(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr("_@%+=:,./-", *s)))
            return false;
    return true;
}

/* Append len bytes of s; once something does not fit, nothing more is added. */
static void
append(size_t *n, bool *full, const char *s, size_t len)
{
    const size_t cap = sizeof command_line - 4; /* room for "..." and the NUL */

    if (*full || *n + len > cap) {
        *full = true;
        return;
    }
    memcpy(command_line + *n, s, len);
    *n += len;
}

void
cli_set_command_line(int argc, char **argv)
{
    size_t n = 0;
    bool full = false;

    for (int i = 0; i < argc && !full; i++) {
        const char *a = argv[i];

        if (i > 0)
            append(&n, &full, " ", 1);
        if (shell_safe(a)) {
            append(&n, &full, a, strlen(a));
            continue;
        }
        /* single quotes, each ' inside as '\'' */
        append(&n, &full, "'", 1);
        for (; *a; a++)
            append(&n, &full, *a == '\'' ? "'\\''" : a, *a == '\'' ? 4 : 1);
        append(&n, &full, "'", 1);
    }
    if (full) {
        memcpy(command_line + n, "...", 3);
        n += 3;
    }
    command_line[n] = '\0';
}

const char *
cli_command_line(void)
{
    return command_line[0] ? command_line : NULL;
}
