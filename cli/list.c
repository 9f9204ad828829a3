/* SPDX-License-Identifier: MIT */
/* tilewave CLI: --list FILE, one job per slide of a list, over the MPI ranks when there are. */
/*
 * `tilewave CMD --list slides.txt ... -o OUTDIR` runs `tilewave CMD SLIDE ... -o
 * OUTDIR/NAME.tif` for every slide of the list (one path a line; blank lines and lines
 * starting with # are skipped; NAME is the slide's file name without its extension), each a
 * complete command of its own: its runtime, its job, its summary line, its description in the
 * output's metadata. Under mpirun the slides go to the ranks one at a time, the next to
 * whichever asks first (tw_mpi_queue), so large and small slides even out. A slide that fails
 * is counted and the list goes on; the exit status is 1 when any failed on any rank.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include "cli.h"

const char *
cli_list_arg(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strcmp(argv[i], "--list") == 0)
            return i + 1 < argc ? argv[i + 1] : "";
        if (strncmp(argv[i], "--list=", 7) == 0)
            return argv[i] + 7;
    }
    return NULL;
}

typedef struct slide_list {
    char **path;
    char **out;
    int64_t n;
} slide_list;

static void
list_free(slide_list *l)
{
    for (int64_t i = 0; i < l->n; i++) {
        free(l->path[i]);
        free(l->out[i]);
    }
    free(l->path);
    free(l->out);
    memset(l, 0, sizeof *l);
}

/* OUTDIR/NAME.tif: NAME is the file name without its extension (and without .ome). */
static char *
out_name(const char *dir, const char *slide)
{
    const char *base = strrchr(slide, '/'), *dot;
    size_t len, dlen = strlen(dir), n;
    char *out;

    base = base ? base + 1 : slide;
    len = strlen(base);
    if ((dot = strrchr(base, '.')) && dot != base)
        len = (size_t)(dot - base);
    if (len > 4 && strncmp(base + len - 4, ".ome", 4) == 0)
        len -= 4;
    while (dlen > 1 && dir[dlen - 1] == '/')
        dlen--;
    n = dlen + len + 6;
    if ((out = malloc(n)))
        snprintf(out, n, "%.*s/%.*s.tif", (int)dlen, dir, (int)len, base);
    return out;
}

/* Read the list; every output name must be its own. CLI_OK or the exit code, printed. */
static int
list_read(const char *file, const char *dir, slide_list *l)
{
    FILE *f = NULL;
    char line[4096];
    int64_t cap = 0;
    struct stat sb;
    int fd = -1;

    /* A regular file only: a FIFO would block the open, a device never end. Non-blocking,
     * then fstat again for a name swapped meanwhile. */
    if (stat(file, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        cli_error("--list: '%s' is not a regular file", file);
        return CLI_FAIL;
    }
    if ((fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0 || fstat(fd, &sb) != 0 ||
        !S_ISREG(sb.st_mode) || fcntl(fd, F_SETFL, 0) != 0 || !(f = fdopen(fd, "r"))) {
        int e = fd >= 0 && fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode) ? 0 : errno;

        if (fd >= 0)
            close(fd);
        if (e)
            cli_error("--list: cannot open '%s' (%s)", file, strerror(e));
        else
            cli_error("--list: '%s' is not a regular file", file);
        return CLI_FAIL;
    }
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        char *p = line;

        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' ||
                         line[n - 1] == '\t'))
            line[--n] = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '#')
            continue;
        if (l->n == cap) {
            int64_t c = cap ? 2 * cap : 64;
            char **np = realloc(l->path, (size_t)c * sizeof *np), **no;

            if (np)
                l->path = np;
            if (!np || !(no = realloc(l->out, (size_t)c * sizeof *no))) {
                fclose(f);
                cli_error("out of memory");
                return CLI_FAIL;
            }
            l->out = no;
            cap = c;
        }
        l->path[l->n] = strdup(p);
        l->out[l->n] = out_name(dir, p);
        if (!l->path[l->n] || !l->out[l->n]) {
            free(l->path[l->n]);
            free(l->out[l->n]);
            fclose(f);
            cli_error("out of memory");
            return CLI_FAIL;
        }
        l->n++;
    }
    fclose(f);
    for (int64_t i = 0; i < l->n; i++)
        for (int64_t j = i + 1; j < l->n; j++)
            if (strcmp(l->out[i], l->out[j]) == 0) {
                cli_error("--list: '%s' and '%s' would both write '%s'", l->path[i], l->path[j],
                          l->out[i]);
                return CLI_USAGE;
            }
    return CLI_OK;
}

/* Where -o / --output names the folder: argv index of the value, and its prefix length ("-o"
 * glued to it: 2; "--output=": 9; a separate argument: 0). -1 when not given. */
static int
find_output(int argc, char **argv, size_t *prefix)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if ((strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) && i + 1 < argc) {
            *prefix = 0;
            return i + 1;
        }
        if (strncmp(argv[i], "--output=", 9) == 0) {
            *prefix = 9;
            return i;
        }
        if (strncmp(argv[i], "-o", 2) == 0 && argv[i][2]) {
            *prefix = 2;
            return i;
        }
    }
    return -1;
}

/* Options that name one more file: with a list, every slide would write it. */
static int
check_options(const char *cmd, int argc, char **argv)
{
    static const char *const one_file[] = {"--overlay", "--indices", "--tissue-mask"};

    for (int i = 1; i < argc; i++) {
        for (size_t k = 0; k < sizeof one_file / sizeof one_file[0]; k++) {
            size_t n = strlen(one_file[k]);

            if (strncmp(argv[i], one_file[k], n) == 0 && (!argv[i][n] || argv[i][n] == '='))
                return cli_usage_error("--list: %s names one file; it cannot be used with a list",
                                       one_file[k]);
        }
        if (strcmp(cmd, "maxtree") == 0 && strncmp(argv[i], "--area", 6) == 0)
            return cli_usage_error("--list: --area names one file; it cannot be used with a list");
    }
    return CLI_OK;
}

/* The command line of slide i: --list FILE becomes the slide, -o DIR its output. argv2 has
 * argc + 1 entries; the strings it holds that are not argv's are in *own (one, freed by the
 * caller). */
static int
slide_argv(int argc, char **argv, const slide_list *l, int64_t i, int out_at, size_t prefix,
           char **argv2, char **own)
{
    int n = 0;

    *own = NULL;
    for (int k = 0; k < argc; k++) {
        if (k > 0 && strcmp(argv[k], "--list") == 0 && k + 1 < argc) {
            argv2[n++] = l->path[i];
            k++;
        } else if (k > 0 && strncmp(argv[k], "--list=", 7) == 0) {
            argv2[n++] = l->path[i];
        } else if (k == out_at) {
            size_t len = prefix + strlen(l->out[i]) + 1;

            if (!(*own = malloc(len)))
                return -1;
            snprintf(*own, len, "%.*s%s", (int)prefix, argv[k], l->out[i]);
            argv2[n++] = *own;
        } else {
            argv2[n++] = argv[k];
        }
    }
    argv2[n] = NULL;
    return n;
}

int
cli_list_run(const char *prog_path, const char *cmd, int (*fn)(int, char **), int argc,
             char **argv, const char *file)
{
    tw_mpi *mpi = cli_mpi_context();
    tw_mpi_queue *q = NULL;
    slide_list l = {0};
    char **argv2 = NULL, **full = NULL, *own = NULL;
    char failed_names[512] = "", ranks[32] = "";
    double counts[3] = {0, 0, 0}; /* written, failed, interrupted */
    struct timespec t0, t1;
    int64_t next = 0, item;
    size_t prefix = 0;
    int rc, out_at, interrupted = 0;
    tw_error err;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!*file)
        return cli_usage_error("--list wants a FILE of slide paths");
    if ((rc = check_options(cmd, argc, argv)) != CLI_OK)
        return rc;
    if ((out_at = find_output(argc, argv, &prefix)) < 0)
        return cli_usage_error("--list needs -o OUTDIR, the folder of the outputs");
    if ((rc = list_read(file, argv[out_at] + prefix, &l)) != CLI_OK)
        goto out;
    if (mkdir(argv[out_at] + prefix, 0777) != 0 && errno != EEXIST) {
        cli_error("--list: cannot make the folder '%s' (%s)", argv[out_at] + prefix,
                  strerror(errno));
        rc = CLI_FAIL;
        goto out;
    }
    if (!(argv2 = calloc((size_t)argc + 1, sizeof *argv2)) ||
        !(full = calloc((size_t)argc + 2, sizeof *full))) {
        cli_error("out of memory");
        rc = CLI_FAIL;
        goto out;
    }
    if (mpi && tw_mpi_queue_create(mpi, l.n, &q, &err) != TW_OK) {
        cli_error("%s", err.message);
        rc = CLI_FAIL;
        goto out;
    }
    for (;;) {
        int n;

        if (q) {
            if (tw_mpi_queue_next(q, &item, &err) != TW_OK) {
                cli_error("%s", err.message);
                rc = CLI_FAIL;
                goto out; /* a broken queue: the ranks cannot agree any more */
            }
        } else {
            item = next < l.n ? next++ : -1;
        }
        if (item < 0)
            break;
        if ((n = slide_argv(argc, argv, &l, item, out_at, prefix, argv2, &own)) < 0) {
            cli_error("out of memory");
            counts[1]++;
            continue;
        }
        /* The output's metadata tells how to make it again: this slide's command line. */
        full[0] = (char *)prog_path;
        memcpy(full + 1, argv2, (size_t)(n + 1) * sizeof *full);
        cli_set_command_line(n + 1, full);
        rc = fn(n, argv2);
        free(own);
        own = NULL;
        if (rc == CLI_OK) {
            counts[0]++;
        } else {
            size_t used = strlen(failed_names);

            counts[1]++;
            snprintf(failed_names + used, sizeof failed_names - used, "%s%s", used ? ", " : "",
                     l.path[item]);
        }
        if (rc > 128) { /* SIGINT, SIGTERM: this rank takes no more slides */
            interrupted = rc;
            counts[2]++;
            break;
        }
    }
    if (counts[1] > 0)
        cli_error("--list: %.0f of the slides given to %s failed: %s", counts[1],
                  mpi ? "this rank" : "it", failed_names);
    if (mpi) {
        tw_mpi_queue_destroy(q);
        q = NULL;
        if (tw_mpi_sum(mpi, counts, 3, &err) != TW_OK) {
            cli_error("%s", err.message);
            rc = CLI_FAIL;
            goto out;
        }
        cli_mpi_list_agreed(); /* every rank has the same counts and exit status */
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (mpi)
        snprintf(ranks, sizeof ranks, " on %d ranks", tw_mpi_get_size(mpi));
    if (!mpi || tw_mpi_get_rank(mpi) == 0)
        fprintf(stderr, "%s: --list: %lld slides in %.2f s%s: %.0f written to %s, %.0f failed%s\n",
                cli_prog, (long long)l.n,
                (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec),
                ranks, counts[0], argv[out_at] + prefix, counts[1],
                counts[2] > 0 ? ", interrupted" : "");
    /* The same status on every rank: 130 when a rank was interrupted, 1 when a slide failed. */
    rc = interrupted ? interrupted : counts[2] > 0 ? 130 : counts[1] > 0 ? CLI_FAIL : CLI_OK;
out:
    tw_mpi_queue_destroy(q);
    free(own);
    free(argv2);
    free(full);
    list_free(&l);
    return rc;
}
