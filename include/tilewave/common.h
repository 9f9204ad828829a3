/* SPDX-License-Identifier: MIT */
/* tilewave: status codes, error records, sample types and logging shared by every header. */
#ifndef TILEWAVE_COMMON_H
#define TILEWAVE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "tilewave/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup tw_common Status codes, errors and logging
 *
 * Error contract (applies to every function in tilewave):
 *
 * - Every fallible function returns a ::tw_status; #TW_OK (zero) is success and results come
 *   back through out-parameters, which are left untouched on failure. Each function lists the
 *   codes it returns and when; misuse (a NULL required pointer, a wrong struct_size, an
 *   out-of-range enum, index or size, an unknown name, key or flag) is #TW_E_INVALID.
 * - Functions that do work take an optional ::tw_error as last argument; on failure its status
 *   is the code returned and its message one line, "domain: what (values)", naming the
 *   problem. Pass NULL when the text is not wanted. On success its content is unspecified.
 * - Where the message of a failing call is found, per object:
 *   config: tw_config_load_file(), tw_config_load_env(), tw_config_set() take a ::tw_error;
 *   runtime: tw_runtime_create() takes one; slide: tw_slide_open(), tw_slide_read_region();
 *   writer: tw_writer_open(), tw_writer_write_tile(), tw_writer_close() (a failed append is
 *   sticky: later writes and the close return it again, with its message); job: the submit
 *   functions (tw_gray_submit() ...) take one for what fails before the job runs, and a running
 *   job keeps its first error (sticky), which tw_job_get_error() returns until the job is
 *   destroyed; also tw_sample_write(), tw_models_read().
 * - Getters and parsers without a ::tw_error (tw_config_get_int(), tw_config_describe(),
 *   tw_*_parse(), tw_slide_get_level(), tw_runtime_get_worker(), tw_models_get_path(),
 *   tw_job_wait() ...) have no message: the code alone says what failed, as documented.
 * - Options and report structs that the library reads begin with `size_t struct_size`, set by
 *   their `*_init()` function, which also fills the defaults. The library accepts only the
 *   size it was built with: 0 (never initialised) or another size (headers of another version)
 *   is #TW_E_INVALID, "OP: options not initialised with tw_OP_opts_init()". Structs nested in
 *   them (::tw_input, ::tw_output, ::tw_host_image) are versioned by the enclosing struct.
 *   Structs the library only fills (::tw_level_info, ::tw_worker_info, ::tw_progress, ...)
 *   and ::tw_input_report (zeroed by the caller) carry no struct_size.
 * - The library never prints, exits or aborts. Diagnostics go through the log handler
 *   (tw_log_set_handler()); the default handler writes WARN and above to stderr.
 * - Functions are safe to call concurrently on different objects; runtimes and slides may be
 *   shared between threads; `*_destroy` and `*_close` need the object to be quiescent. Each
 *   function says where it is thread-safe on one object.
 * - Ownership: objects returned through `**out` belong to the caller, who frees them with the
 *   matching `*_destroy`, `*_close` or `*_free`; strings returned as `const char *` belong to
 *   the object they came from (or are static) and must not be freed. Pointers given in
 *   options (paths, buffers, reports) stay the caller's; they must stay valid until the call
 *   returns, or, for a submitted job, until the job has ended.
 * @{
 */

/** Result of a fallible call. @since 0.1 */
typedef enum tw_status {
    TW_OK = 0,
    TW_E_INVALID,  /**< bad argument, unknown key or flag, out-of-range value */
    TW_E_NOMEM,    /**< an allocation failed */
    TW_E_IO,       /**< a file could not be opened, read or written */
    TW_E_FORMAT,   /**< unsupported or corrupt slide / TIFF */
    TW_E_NODEV,    /**< no worker can run this task (no variant for any device present) */
    TW_E_DEVICE,   /**< a CUDA error */
    TW_E_CANCELED, /**< the job was canceled */
    TW_E_TIMEOUT,  /**< a wait ran out of time; the job goes on */
    TW_E_INTERNAL  /**< a bug in tilewave: please report it */
} tw_status;

/** Static name of a status, e.g. "TW_E_IO"; "TW_E_UNKNOWN" for a value outside the enum.
 *  Never NULL, never to be freed. Thread-safe. @since 0.1 */
TW_API const char *tw_status_string(tw_status st);

/** Longest error message kept, terminating NUL included. */
#define TW_ERROR_MAX 512

/**
 * Caller-owned error record filled by constructors and synchronous calls on failure.
 * @since 0.1
 */
typedef struct tw_error {
    tw_status status;              /**< the code returned */
    char message[TW_ERROR_MAX];    /**< one line, "domain: what (values)" */
} tw_error;

/** Sample type of an image channel. @since 0.1 */
typedef enum tw_sample_type {
    TW_U8 = 1, /**< unsigned 8-bit */
    TW_U16,    /**< unsigned 16-bit */
    TW_U32,    /**< unsigned 32-bit */
    TW_F32,    /**< IEEE float32 */
    TW_U64     /**< unsigned 64-bit (max-tree parent images above 2^32 - 1 pixels) @since 0.4 */
} tw_sample_type;

/** Bytes per sample of @p t, 0 for an unknown type. Thread-safe. @since 0.1 */
TW_API size_t tw_sample_size(tw_sample_type t);

/** Short name of a sample type: "u8", "u16", "u32", "f32", "u64" ("?" when unknown). Static,
 *  never NULL. Thread-safe. @since 0.1 */
TW_API const char *tw_sample_type_name(tw_sample_type t);

/** Log levels, most severe first. @since 0.1 */
typedef enum tw_log_level {
    TW_LOG_ERROR = 0,
    TW_LOG_WARN,
    TW_LOG_INFO,
    TW_LOG_DEBUG
} tw_log_level;

/**
 * Log handler. Called on whichever thread logs (a worker, the caller), possibly concurrently;
 * it must be thread-safe and must not call back into tilewave.
 * @since 0.1
 */
typedef void (*tw_log_fn)(tw_log_level level, const char *domain, const char *message,
                          void *user);

/**
 * Replace the process-wide log handler; NULL restores the default (stderr, WARN and above).
 * Messages above the level set with tw_log_set_level() are not formatted at all. @p user is
 * passed to @p fn as is (the caller's, never freed). The strings @p fn receives are valid
 * during the call only. Thread-safe. @since 0.1
 */
TW_API void tw_log_set_handler(tw_log_fn fn, void *user);

/** Most verbose level delivered to the handler (default #TW_LOG_WARN); a value outside the
 *  enum is ignored. Process-wide, thread-safe. @since 0.1 */
TW_API void tw_log_set_level(tw_log_level level);

/** Free memory that a tilewave function documented as "free with tw_free()"; NULL is a no-op.
 *  Thread-safe. @since 0.1 */
TW_API void tw_free(void *p);

/** Version string of the library, e.g. "0.1.0" (static; compare with TW_VERSION_STRING of
 *  tilewave/version.h for the headers'). Thread-safe. @since 0.1 */
TW_API const char *tw_version_string(void);

/** 1 when the library was built with CUDA support (a GPU may still be absent), else 0.
 *  Thread-safe. @since 0.1 */
TW_API int tw_build_has_cuda(void);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* TILEWAVE_COMMON_H */
