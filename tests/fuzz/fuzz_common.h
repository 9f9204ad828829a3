/* SPDX-License-Identifier: MIT */
/* tilewave fuzz targets: what they share (input as a file, quiet logs, invariant checks). */
#ifndef TW_FUZZ_COMMON_H
#define TW_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tilewave.h"

/* An invariant broken: report it and abort, so libFuzzer keeps the input as a crash. */
#define FZ_CHECK(cond)                                                                         \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static void
fz_quiet_log(tw_log_level level, const char *domain, const char *message, void *user)
{
    (void)level;
    (void)domain;
    (void)message;
    (void)user;
}

/* The library logs nothing (its warnings about bad input are expected by the thousand). */
static inline void
fz_quiet(void)
{
    tw_log_set_handler(fz_quiet_log, NULL);
}

/* The bytes as a file in memory (memfd), named by /proc/self/fd/N in path. The fd, or -1. */
static inline int
fz_memfile(const uint8_t *data, size_t size, char *path, size_t n)
{
    int fd = memfd_create("tw-fuzz", MFD_CLOEXEC);
    size_t done = 0;

    if (fd < 0)
        return -1;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    snprintf(path, n, "/proc/self/fd/%d", fd);
    return fd;
}

/* A failed call left a one-line, NUL-terminated message naming its domain. */
static inline void
fz_check_error(tw_status st, const tw_error *err)
{
    size_t len = strnlen(err->message, sizeof err->message);

    FZ_CHECK(len < sizeof err->message);
    FZ_CHECK(len > 0);
    FZ_CHECK(err->status == st);
    FZ_CHECK(strchr(err->message, '\n') == NULL);
}

#endif /* TW_FUZZ_COMMON_H */
