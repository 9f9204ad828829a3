/* SPDX-License-Identifier: MIT */
/* tilewave: output files that appear only when complete (the TIFF writer and the text outputs
 * of `objects`): created nameless in the output's folder, named and renamed over the output
 * path at the end. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_internal.h"
#include "tw_io.h"

int
twi_out_nameless(const char *dir)
{
#ifdef O_TMPFILE
    return open(*dir ? dir : ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#else
    (void)dir;
    errno = EOPNOTSUPP;
    return -1;
#endif
}

int
twi_out_beside(const char *dir, const char *path, const char *suffix, char **name)
{
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    size_t n = strlen(dir) + 1 + strlen(base) + strlen(suffix) + sizeof "XXXXXX";
    int fd;

    if (!(*name = malloc(n))) {
        errno = ENOMEM;
        return -1;
    }
    snprintf(*name, n, "%s.%s%sXXXXXX", dir, base, suffix);
    if ((fd = mkostemp(*name, O_CLOEXEC)) < 0) {
        int e = errno;

        free(*name);
        *name = NULL;
        errno = e;
    }
    return fd;
}

int
twi_out_link(int keep_fd, const char *dir, const char *path, char **tmp_path)
{
    char proc[64];

    snprintf(proc, sizeof proc, "/proc/self/fd/%d", keep_fd);
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = twi_out_beside(dir, path, ".tw-", tmp_path), e;

        if (fd < 0)
            return -1;
        /* the name is ours; swap the empty file under it for the nameless one */
        close(fd);
        unlink(*tmp_path);
        if (linkat(AT_FDCWD, proc, AT_FDCWD, *tmp_path, AT_SYMLINK_FOLLOW) == 0)
            return 0;
        e = errno;
        free(*tmp_path);
        *tmp_path = NULL;
        if (e != EEXIST) {
            errno = e;
            return -1;
        }
    }
    errno = EEXIST;
    return -1;
}

/* ---- text outputs: a buffered stream over such a file */

struct twi_text_out {
    char *path, *dir, *tmp_path;
    int keep_fd;   /* nameless: our descriptor of it, else -1 */
    FILE *f;
    int err;       /* the first write error (errno), 0 none */
};

static tw_status
text_fail(tw_error *err, const char *domain, const char *what, const char *path, int e)
{
    char ebuf[128];

    return twi_error_set(err, e == ENOMEM ? TW_E_NOMEM : TW_E_IO, "%s: cannot %s '%s' (%s)",
                         domain, what, path, twi_io_strerror(e, ebuf, sizeof ebuf));
}

tw_status
twi_text_out_open(const char *path, const char *domain, twi_text_out **out, tw_error *err)
{
    twi_text_out *t;
    const char *slash;
    struct stat sb;
    int fd = -1;

    if (!*(strrchr(path, '/') ? strrchr(path, '/') + 1 : path))
        return twi_error_set(err, TW_E_INVALID, "%s: '%s' names a folder, not a file", domain,
                             path);
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return twi_error_set(err, TW_E_IO, "%s: '%s' is %s, not a regular file", domain, path,
                             twi_file_kind((unsigned)sb.st_mode));
    if (!(t = calloc(1, sizeof *t)))
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", domain);
    t->keep_fd = -1;
    /* A symbolic link is followed: the file it names is replaced, the link stays. */
    if (!(t->path = twi_path_follow(path))) {
        tw_status st = text_fail(err, domain, "write", path, errno);

        free(t);
        return st;
    }
    slash = strrchr(t->path, '/');
    if (!(t->dir = slash ? strndup(t->path, (size_t)(slash - t->path) + 1) : strdup(""))) {
        twi_text_out_abort(t);
        return twi_error_set(err, TW_E_NOMEM, "%s: out of memory", domain);
    }
    if ((fd = twi_out_nameless(t->dir)) >= 0) {
        if ((t->keep_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
            goto fail;
    } else if ((fd = twi_out_beside(t->dir, t->path, ".tw-", &t->tmp_path)) < 0) {
        goto fail;
    }
    if (fchmod(fd, 0644) != 0 || !(t->f = fdopen(fd, "w")))
        goto fail;
    *out = t;
    return TW_OK;
fail: {
    int e = errno;

    if (fd >= 0 && !t->f)
        close(fd);
    tw_status st = text_fail(err, domain, "create", path, e);

    twi_text_out_abort(t);
    return st;
}
}

void
twi_text_out_vprintf(twi_text_out *t, const char *fmt, va_list ap)
{
    if (t->err)
        return;
    if (vfprintf(t->f, fmt, ap) < 0)
        t->err = errno ? errno : EIO;
}

void
twi_text_out_printf(twi_text_out *t, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    twi_text_out_vprintf(t, fmt, ap);
    va_end(ap);
}

tw_status
twi_text_out_close(twi_text_out *t, const char *domain, tw_error *err)
{
    tw_status st;
    int e = t->err;

    if (!e && fflush(t->f) != 0)
        e = errno;
    if (!e && fsync(fileno(t->f)) != 0)
        e = errno;
    if (fclose(t->f) != 0 && !e)
        e = errno;
    t->f = NULL;
    if (e) {
        st = text_fail(err, domain, "write", t->path, e);
        twi_text_out_abort(t);
        return st;
    }
    if (t->keep_fd >= 0 && twi_out_link(t->keep_fd, t->dir, t->path, &t->tmp_path) != 0) {
        st = text_fail(err, domain, "name the file for", t->path, errno);
        twi_text_out_abort(t);
        return st;
    }
    if (rename(t->tmp_path, t->path) != 0) {
        st = text_fail(err, domain, "rename the file over", t->path, errno);
        twi_text_out_abort(t);
        return st;
    }
    free(t->tmp_path);
    t->tmp_path = NULL;
    twi_text_out_abort(t); /* frees what is left; nothing to remove now */
    return TW_OK;
}

void
twi_text_out_abort(twi_text_out *t)
{
    if (!t)
        return;
    if (t->f)
        fclose(t->f);
    if (t->tmp_path)
        unlink(t->tmp_path);
    if (t->keep_fd >= 0)
        close(t->keep_fd);
    free(t->tmp_path);
    free(t->dir);
    free(t->path);
    free(t);
}
