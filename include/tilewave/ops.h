/* SPDX-License-Identifier: MIT */
/* tilewave: the operations, each submitted as a job on a runtime. */
#ifndef TILEWAVE_OPS_H
#define TILEWAVE_OPS_H

#include "tilewave/common.h"
#include "tilewave/image.h"
#include "tilewave/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup tw_ops Operations
 *
 * Each operation reads one input image (a slide level and region), streams it tile by tile
 * through the runtime's workers, and writes a tiled BigTIFF. Options structs are initialised
 * by their `_init` function (which sets struct_size) and then edited. Submission validates the
 * input synchronously (errors in @p err); failures while running are the job's sticky error.
 * Tiling never changes the result: any tile size and CPU/GPU mix gives the same bytes.
 * @{
 */

/** The input of an operation. @since 0.1 */
typedef struct tw_input {
    const char *path;
    tw_reader_kind reader; /**< default TW_READER_AUTO */
    int level;             /**< default 0 */
    int64_t x, y, w, h;    /**< region in the level's frame; w = h = 0: the whole level */
} tw_input;

/** The output of an operation. @since 0.1 */
typedef struct tw_output {
    const char *path;
    tw_compression compression; /**< default: the config's io.compression */
    bool compression_set;       /**< false: use the config */
} tw_output;

/** How `gray` makes one channel from RGB. @since 0.1 */
typedef enum tw_gray_mode {
    TW_GRAY_LUMINANCE = 0, /**< (299 R + 587 G + 114 B + 500) / 1000, ITU-R BT.601, exact integer */
    TW_GRAY_R,
    TW_GRAY_G,
    TW_GRAY_B
} tw_gray_mode;

/** Parse "luminance", "r", "g", "b". @return TW_OK, TW_E_INVALID. @since 0.1 */
TW_API TW_NODISCARD tw_status tw_gray_mode_parse(const char *name, tw_gray_mode *out);

/** Options of tw_gray_submit(). @since 0.1 */
typedef struct tw_gray_opts {
    size_t struct_size;
    tw_input input;
    tw_output output;
    tw_gray_mode mode;
    int32_t tile_w, tile_h; /**< 0: the config's gray.tile (or tile.size) */
} tw_gray_opts;

/** Fill @p o with defaults. @since 0.1 */
TW_API void tw_gray_opts_init(tw_gray_opts *o);

/**
 * Convert the input to one channel of the same sample type (RGB: by @p mode; gray input is
 * copied) and write it. CPU (OpenMP) and CUDA variants give identical bytes.
 * @return TW_OK (the job runs), TW_E_INVALID, TW_E_IO, TW_E_FORMAT, TW_E_NOMEM.
 * Thread-safe. @since 0.1
 */
TW_API TW_NODISCARD tw_status tw_gray_submit(tw_runtime *rt, const tw_gray_opts *o,
                                            tw_job **out, tw_error *err);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* TILEWAVE_OPS_H */
