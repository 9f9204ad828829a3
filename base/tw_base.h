/* SPDX-License-Identifier: MIT */
/* tilewave: the base layer every folder may use and io/ uses alone: visibility, assertions,
 * errors, logging, number and value parsing (with the stain and fault-injection syntaxes),
 * scratch files and positioned I/O, the files the user names, I/O counts and the clock. It
 * knows no runtime object (tasks, tiles, jobs, config): base/ includes only this header, the
 * public headers and system headers. */
#ifndef TW_BASE_H
#define TW_BASE_H

#include <locale.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tilewave.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TWI_HIDDEN __attribute__((visibility("hidden")))
#else
#define TWI_HIDDEN
#endif

/* ---- assertions: compiled out unless TW_DEBUG_ASSERT; the library never aborts in release */
#ifdef TW_DEBUG_ASSERT
#include <assert.h>
#define TW_ASSERT(c) assert(c)
#else
#define TW_ASSERT(c) ((void)0)
#endif

/* ---- ThreadSanitizer and OpenMP. libgomp is not built with TSan, so the barrier that ends a
 * parallel region is invisible to it: memory a team's thread wrote inside the region and the
 * encountering thread frees after it shows as a race whose team-side stack TSan often cannot
 * restore (so tests/sanitize/tsan.supp's `_omp_fn` rule cannot match it). Where that happens,
 * each iteration ends with TWI_OMP_TSAN_RELEASE(obj) and the encountering thread does
 * TWI_OMP_TSAN_ACQUIRE(obj) after the region: the barrier's happens-before, told to TSan.
 * Nothing in other builds. */
#if defined(__SANITIZE_THREAD__)
#define TWI_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TWI_TSAN 1
#endif
#endif
#ifdef TWI_TSAN
#include <sanitizer/tsan_interface.h>
#define TWI_OMP_TSAN_RELEASE(obj) __tsan_release((void *)(obj))
#define TWI_OMP_TSAN_ACQUIRE(obj) __tsan_acquire((void *)(obj))
#else
#define TWI_OMP_TSAN_RELEASE(obj) ((void)0)
#define TWI_OMP_TSAN_ACQUIRE(obj) ((void)0)
#endif

/* ---- logging (base/log.c). The level check sits in the macro so that suppressed
 * messages are never formatted. */
TWI_HIDDEN int twi_log_level_get(void);
TWI_HIDDEN void twi_log(tw_log_level level, const char *domain, const char *fmt, ...)
    TW_PRINTF(3, 4);
#define TW_LOG(level, domain, ...)                                                              \
    do {                                                                                        \
        if ((int)(level) <= twi_log_level_get())                                                \
            twi_log((level), (domain), __VA_ARGS__);                                            \
    } while (0)
#define TW_WARN(domain, ...) TW_LOG(TW_LOG_WARN, domain, __VA_ARGS__)
#define TW_INFO(domain, ...) TW_LOG(TW_LOG_INFO, domain, __VA_ARGS__)
#define TW_DEBUG(domain, ...) TW_LOG(TW_LOG_DEBUG, domain, __VA_ARGS__)

/* ---- errors (base/error.c). Fill err (may be NULL) with "domain: what" and return st. */
TWI_HIDDEN tw_status twi_error_set(tw_error *err, tw_status st, const char *fmt, ...)
    TW_PRINTF(3, 4);
TWI_HIDDEN tw_status twi_error_setv(tw_error *err, tw_status st, const char *fmt, va_list ap);

/* ---- parsing (base/parse.c): whole-string, range-checked; never atoi/strtol elsewhere. */
TWI_HIDDEN tw_status twi_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
TWI_HIDDEN tw_status twi_parse_f64(const char *s, double *out);
/* "WxH" (also "W" alone meaning WxW), each within [min, max]. */
TWI_HIDDEN tw_status twi_parse_dims(const char *s, int64_t min, int64_t max, int64_t *w,
                                    int64_t *h);
/* "K/N" (0 <= K < N <= 4096): part K of N equal parts (runtime.cpu_share). */
TWI_HIDDEN tw_status twi_parse_share(const char *s, int64_t *k, int64_t *n);
/* The C locale for numbers in files: twi_parse_f64 reads with it; code that prints numbers
 * into files brackets the printing with uselocale(twi_c_locale()). */
TWI_HIDDEN locale_t twi_c_locale(void);

/* ---- value syntaxes (base/syntax.c): what a config string means, as plain values. */
/* A list of exactly n numbers separated by commas (blanks allowed around them, each as
 * twi_parse_f64) into out[0..n-1]: TW_OK or TW_E_INVALID. The stain vectors' syntax
 * (gray.stain_vectors; ops/tissue.c checks that the matrix inverts). */
TWI_HIDDEN tw_status twi_parse_f64_list(const char *s, double *out, int n);
/* Fault injection (runtime.fault_inject). "" = off; "cuda" = every CUDA task attempt fails
 * before its variant runs; "cuda:N" = every Nth attempt; "cuda:N:KIND" = every Nth attempt of
 * the kind named KIND (e.g. mrecon.tp). On success *every is N (0 when off) and kind the
 * kind's name ("" for any); `canon` (n >= strlen(text) + 1 bytes, may be NULL) receives the
 * canonical text. TW_E_INVALID for anything else. */
#define TWI_FAULT_KIND_MAX 64
TWI_HIDDEN tw_status twi_fault_parse(const char *text, int64_t *every,
                                     char kind[TWI_FAULT_KIND_MAX], char *canon, size_t n);

/* ---- scratch files (base/scratch.c; the folder they go to is the runtime's config) */
/* A private scratch file in `dir` that has no name, so nothing is left behind however the
 * process ends: O_TMPFILE, or where the file system lacks it mkostemp("DIR/tilewave-HINT-
 * XXXXXX") unlinked at once. Close-on-exec. Returns the descriptor, or -1 with errno. */
TWI_HIDDEN int twi_scratch_open(const char *dir, const char *hint);
/* pwrite/pread of all n bytes at off, retried on EINTR and short counts. 0, or -1 with errno
 * (ENOSPC for a write that makes no progress, EIO for a read past the end). */
TWI_HIDDEN int twi_pwrite_all(int fd, const void *buf, size_t n, int64_t off);
TWI_HIDDEN int twi_pread_all(int fd, void *buf, size_t n, int64_t off);

/* ---- files the user names (base/files.c) */
/* "a directory", "a character device", "a FIFO", "a socket", ... for a st_mode. */
TWI_HIDDEN const char *twi_file_kind(unsigned mode);
/* Open `path` read-only, close-on-exec, only if it is a regular file: stat first, then a
 * non-blocking open and fstat again (a FIFO never blocks the open, a name swapped meanwhile is
 * seen), the descriptor left blocking. Returns it, or -1: with errno set when the file cannot
 * be reached or opened; with errno 0 and *kind naming what it is (twi_file_kind) when it is
 * not a regular file. */
TWI_HIDDEN int twi_open_regular(const char *path, const char **kind);
/* `path` with the symbolic links at its last component followed (a relative target taken from
 * the link's folder), so that an output written in its place replaces the file the link
 * names, not the link: malloc'ed, `path` itself when it is no link or does not exist. NULL
 * with errno (ELOOP after 40 links, ENOMEM). */
TWI_HIDDEN char *twi_path_follow(const char *path);

/* ---- I/O counts (tw_job_io): the readers and writers a job's streams use add into its
 * counts (io/reader_tiff.c, io/writer_tiff.c; attached by ops/stream.c). Lock-free. */
typedef struct twi_io_counts {
    atomic_uint_fast64_t bytes_read, bytes_decoded, tiles_decoded, tiles_redecoded;
    atomic_uint_fast64_t tiles_bad; /* undecodable input tiles filled (io.on_bad_tile=fill) */
    atomic_uint_fast64_t bytes_encoded, bytes_written;
    atomic_int kept;          /* tw_keep */
} twi_io_counts;

static inline void
twi_io_add(atomic_uint_fast64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* ---- the clock (base/clock.c): CLOCK_MONOTONIC, so that a change of the wall clock never
 * shows in a duration or a deadline. */
TWI_HIDDEN int64_t twi_now_ns(void);
TWI_HIDDEN double twi_now_s(void);

#ifdef __cplusplus
}
#endif

#endif /* TW_BASE_H */
