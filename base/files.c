/* SPDX-License-Identifier: MIT */
/* tilewave: opening inputs that are regular files only, and following links at output paths. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tw_base.h"

/* Symbolic links followed at an output path before ELOOP, as the kernel's own limit. */
#define LINKS_MAX 40

const char *
twi_file_kind(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
    }
}

int
twi_open_regular(const char *path, const char **kind)
{
    struct stat before, after;
    int fd, flags, e;

    *kind = NULL;
    /* stat first: open() alone would block on a FIFO with no writer, and open a device. */
    if (stat(path, &before) != 0)
        return -1;
    if (!S_ISREG(before.st_mode)) {
        *kind = twi_file_kind((unsigned)before.st_mode);
        errno = 0;
        return -1;
    }
    /* Non-blocking, in case a FIFO took the name since; fstat again to close that race. */
    if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)) < 0)
        return -1;
    if (fstat(fd, &after) != 0) {
        e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(after.st_mode)) {
        close(fd);
        *kind = twi_file_kind((unsigned)after.st_mode);
        errno = 0;
        return -1;
    }
    if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

char *
twi_path_follow(const char *path)
{
    char *cur = NULL, *next = NULL;
    size_t n = strlen(path);
    struct stat sb;

    if (!(cur = malloc(n + 1))) {
        errno = ENOMEM;
        return NULL;
    }
    memcpy(cur, path, n + 1);
    for (int hops = 0;; hops++) {
        char target[PATH_MAX];
        const char *slash;
        size_t dlen, tlen;
        ssize_t got; /* lint-allow: what readlink returns */

        if (lstat(cur, &sb) != 0 || !S_ISLNK(sb.st_mode))
            return cur; /* not a link (or nothing there): the name itself */
        if (hops == LINKS_MAX) {
            free(cur);
            errno = ELOOP;
            return NULL;
        }
        if ((got = readlink(cur, target, sizeof target)) < 0 || (size_t)got >= sizeof target) {
            int e = got < 0 ? errno : ENAMETOOLONG;

            free(cur);
            errno = e;
            return NULL;
        }
        tlen = (size_t)got;
        /* A relative target is relative to the folder that holds the link. */
        slash = strrchr(cur, '/');
        dlen = target[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        if (!(next = malloc(dlen + tlen + 1))) {
            free(cur);
            errno = ENOMEM;
            return NULL;
        }
        memcpy(next, cur, dlen);
        memcpy(next + dlen, target, tlen);
        next[dlen + tlen] = '\0';
        free(cur);
        cur = next;
        next = NULL;
    }
}
