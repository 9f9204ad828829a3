/* SPDX-License-Identifier: MIT */
/* tilewave CLI: the one check of the files a command names (cli_files_check). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* What one named file is: its device and inode when it exists (links followed), else the
 * real path of its folder plus its name (NULL when the folder cannot be resolved either: then
 * the writer reports the path, and the file cannot be any other). */
typedef struct file_id {
    bool exists;
    dev_t dev;
    ino_t ino;
    char *name;
} file_id;

static const char *
kind_of(mode_t m)
{
    switch (m & S_IFMT) {
    case S_IFDIR: return "a directory";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    default: return "not a regular file";
    }
}

/* `path` with the symbolic links of its last component followed, as the writers follow them
 * (a dangling link names the file that will be created); malloc'ed, NULL on a loop or error. */
static char *
follow(const char *path)
{
    char *cur = strdup(path);
    struct stat sb;

    for (int hops = 0; cur && hops <= 40; hops++) {
        char target[PATH_MAX], *next;
        const char *slash;
        size_t dlen;
        ssize_t got; /* lint-allow: what readlink returns */

        if (lstat(cur, &sb) != 0 || !S_ISLNK(sb.st_mode))
            return cur;
        if ((got = readlink(cur, target, sizeof target - 1)) < 0)
            break;
        target[got] = '\0';
        slash = strrchr(cur, '/');
        dlen = target[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        if (!(next = malloc(dlen + (size_t)got + 1)))
            break;
        snprintf(next, dlen + (size_t)got + 1, "%.*s%s", (int)dlen, cur, target);
        free(cur);
        cur = next;
    }
    free(cur);
    return NULL;
}

/* The real path of the folder of a file not there yet, plus its name. */
static char *
name_of_new(const char *path)
{
    char *p = follow(path), *dir = NULL, *real = NULL, *out = NULL;
    const char *slash, *base;
    size_t n;

    if (!p)
        return NULL;
    slash = strrchr(p, '/');
    base = slash ? slash + 1 : p;
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        goto out;
    if (!(dir = slash ? strndup(p, (size_t)(slash - p) + (slash == p)) : strdup(".")))
        goto out;
    if (!(real = realpath(dir, NULL)))
        goto out;
    n = strlen(real) + 1 + strlen(base) + 1;
    if ((out = malloc(n)))
        snprintf(out, n, "%s/%s", real, base);
out:
    free(p);
    free(dir);
    free(real);
    return out;
}

static bool
same(const file_id *a, const file_id *b)
{
    if (a->exists && b->exists)
        return a->dev == b->dev && a->ino == b->ino;
    return !a->exists && !b->exists && a->name && b->name && strcmp(a->name, b->name) == 0;
}

int
cli_files_check(const cli_file *files, int n)
{
    file_id *id = calloc((size_t)(n > 0 ? n : 1), sizeof *id);
    int rc = CLI_OK;

    if (!id) {
        cli_error("out of memory");
        return CLI_FAIL;
    }
    for (int i = 0; i < n && rc == CLI_OK; i++) {
        struct stat sb;

        if (!files[i].path)
            continue;
        if (stat(files[i].path, &sb) == 0) {
            id[i].exists = true;
            id[i].dev = sb.st_dev;
            id[i].ino = sb.st_ino;
            /* Inputs are checked by the library when opened (regular files only). Outputs
             * replace only regular files: a rename over /dev/null would make it one. */
            if (files[i].output && !S_ISREG(sb.st_mode)) {
                cli_error("%s: '%s' is %s, not a regular file", files[i].what, files[i].path,
                          kind_of(sb.st_mode));
                rc = CLI_USAGE;
            }
        } else if (files[i].output) {
            id[i].name = name_of_new(files[i].path);
        }
    }
    for (int i = 0; i < n && rc == CLI_OK; i++) {
        for (int j = 0; j < n && rc == CLI_OK; j++) {
            const cli_file *a = &files[i], *b = &files[j];

            /* each pair once, an output first */
            if (i == j || !a->path || !b->path || !a->output || (b->output && j < i) ||
                !same(&id[i], &id[j]))
                continue;
            if (!b->output)
                cli_error("%s: '%s' would overwrite %s '%s'", a->what, a->path, b->what,
                          b->path);
            else if (strcmp(b->what, "-o") == 0)
                cli_error("%s: '%s' is the output itself", a->what, a->path);
            else if (strcmp(a->what, "-o") == 0)
                cli_error("%s: '%s' is the output itself", b->what, b->path);
            else
                cli_error("%s: '%s' is the same file as %s '%s'", a->what, a->path, b->what,
                          b->path);
            rc = CLI_USAGE;
        }
    }
    for (int i = 0; i < n; i++)
        free(id[i].name);
    free(id);
    return rc;
}

int
cli_image_name_check(const char *what, const char *path)
{
    static const char *const ext[] = {".tif", ".tiff", ".btf", ".tf8"};
    size_t n;

    if (!path)
        return CLI_OK;
    n = strlen(path);
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t k = strlen(ext[i]);

        if (n > k && strcasecmp(path + n - k, ext[i]) == 0 && path[n - k - 1] != '/')
            return CLI_OK;
    }
    cli_error("%s: '%s' is not named as a TIFF (.tif, .tiff, .btf or .ome.tif): tilewave "
              "writes tiled BigTIFF, which other programs would not read under that name",
              what, path);
    return CLI_USAGE;
}
