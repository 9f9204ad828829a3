/* SPDX-License-Identifier: MIT */
/* tilewave example service: request lines parsed, and request paths confined to the roots. */
#ifndef TW_EXAMPLE_SERVICE_REQUEST_H
#define TW_EXAMPLE_SERVICE_REQUEST_H

/* No socket and no runtime here: examples/service.c serves what these functions return, and
 * tests/fuzz/fuzz_service.c calls them on arbitrary bytes. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <tilewave.h>

enum { SVC_MAX_WORDS = 32, SVC_MAX_ROOTS = 16 };

typedef enum svc_verb {
    SVC_SUBMIT, SVC_STATUS, SVC_WAIT, SVC_CANCEL, SVC_LIST, SVC_SHUTDOWN
} svc_verb;

typedef enum svc_op_kind {
    SVC_OP_GRAY, SVC_OP_CONVERT, SVC_OP_EDT, SVC_OP_MRECON_FILTER, SVC_OP_ATTR, SVC_OP_LABEL,
    SVC_OP_OBJECTS, SVC_OP_WATERSHED
} svc_op_kind;

typedef tw_status (*svc_mrecon_filter_fn)(tw_runtime *rt, const tw_mrecon_filter_opts *o,
                                          tw_job **out, tw_error *err);

/* An operation: its request name, how it is submitted and the keys it takes. */
typedef struct svc_op {
    const char *name;
    svc_op_kind kind;
    unsigned keys;                      /* the key=value words it takes, a mask of 1 << key index */
    svc_mrecon_filter_fn mrecon_filter; /* SVC_OP_MRECON_FILTER */
    tw_attr_filter attr;                /* SVC_OP_ATTR */
} svc_op;

/* The parameters of a submit, from its words. */
typedef struct svc_params {
    const char *in, *out;    /* as the request wrote them (point into the parsed line) */
    const char *markers, *mask; /* watershed's other inputs, the same way; NULL: not given */
    int32_t tile_w, tile_h;  /* 0: the operation's default */
    int level, conn;         /* conn 0: the default */
    tw_compression compression;
    bool compression_set, pyramid, invert, dome, lines, negate;
    tw_gray_mode gray, mode;
    tw_threshold_mode threshold_mode;
    double threshold;
    uint64_t attr;           /* area= or height= (0: the default) */
    int64_t h;
    int32_t radius;
    tw_edt_format format;
} svc_params;

typedef struct svc_request {
    svc_verb verb;
    const svc_op *op;        /* SVC_SUBMIT */
    svc_params p;            /* SVC_SUBMIT */
    int64_t id;              /* SVC_STATUS, SVC_WAIT, SVC_CANCEL: >= 1 */
} svc_request;

/* Parse one request line (no newline), splitting it in place: the request's strings point
 * into `line`. False with the reply's reason (one line, no "error " prefix) in why. */
bool svc_request_parse(char *line, svc_request *r, char *why, size_t n);

/* A whole-string decimal integer in [min, max]. */
bool svc_parse_int(const char *s, int64_t min, int64_t max, int64_t *out);

/* The folders a request may name paths in (canonical: realpath), and the service's socket. */
typedef struct svc_roots {
    char *dir[SVC_MAX_ROOTS];
    int n;
    bool sock_set;           /* sock_dev/sock_ino name the service's socket */
    dev_t sock_dev;
    ino_t sock_ino;
} svc_roots;

/* Add a root: `dir` must be an existing folder; stored resolved (links, "..", "."). False
 * with the reason in why. */
bool svc_roots_add(svc_roots *r, const char *dir, char *why, size_t n);
void svc_roots_fini(svc_roots *r);

/* A path a request names, confined: relative paths are taken in the first root, absolute
 * ones must lie in a root; any ".." component is refused; links are resolved and the file
 * they name must lie in a root too. What exists there must be a regular file (not the
 * socket); an input that does not exist passes (its job fails with the library's message),
 * an output that does not exist is created by the job. On success *canon is the resolved
 * path (malloc'd, the caller frees it) and *exists, *dev, *ino describe the file if it
 * exists. On failure why holds the reply: for every path outside the roots the same text,
 * "path outside the allowed roots: PATH", whether or not anything exists there. */
bool svc_path_confine(const svc_roots *r, const char *path, char **canon, bool *exists,
                      dev_t *dev, ino_t *ino, char *why, size_t n);

#endif /* TW_EXAMPLE_SERVICE_REQUEST_H */
