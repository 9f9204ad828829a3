/* SPDX-License-Identifier: MIT */
/* tilewave: private, nameless scratch files (the spill of tiles, border max-trees, partial
 * output tiles) and whole-buffer positioned I/O on them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tw_base.h"

int
twi_scratch_open(const char *dir, const char *hint)
{
    char *path;
    size_t n;
    int fd, e;

#ifdef O_TMPFILE
    if ((fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) >= 0)
        return fd;
    /* EOPNOTSUPP / EISDIR / EINVAL: no O_TMPFILE here; other errors recur below, named */
#endif
    n = strlen(dir) + strlen(hint) + sizeof "/tilewave--XXXXXX";
    if (!(path = malloc(n))) {
        errno = ENOMEM;
        return -1;
    }
    snprintf(path, n, "%s/tilewave-%s-XXXXXX", dir, hint);
    fd = mkostemp(path, O_CLOEXEC);
    e = errno;
    if (fd >= 0)
        (void)unlink(path);
    free(path);
    errno = e;
    return fd;
}

int
twi_pwrite_all(int fd, const void *buf, size_t n, int64_t off)
{
    size_t done = 0;

    while (done < n) {
        int64_t k = (int64_t)pwrite(fd, (const char *)buf + done, n - done, off + (int64_t)done);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = ENOSPC;
            return -1;
        }
        done += (size_t)k;
    }
    return 0;
}

int
twi_pread_all(int fd, void *buf, size_t n, int64_t off)
{
    size_t done = 0;

    while (done < n) {
        int64_t k = (int64_t)pread(fd, (char *)buf + done, n - done, off + (int64_t)done);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO;
            return -1;
        }
        done += (size_t)k;
    }
    return 0;
}
