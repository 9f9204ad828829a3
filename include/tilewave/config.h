/* SPDX-License-Identifier: MIT */
/* tilewave: the configuration table (INI files, TILEWAVE_* environment, --set key=value). */
#ifndef TILEWAVE_CONFIG_H
#define TILEWAVE_CONFIG_H

#include <stdbool.h>

#include "tilewave/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup tw_config Configuration
 *
 * One table inside the library defines every key: its type, range, default and help text.
 * A ::tw_config holds one value per key and remembers where each value came from. Precedence
 * is fixed: built-in default < INI file < TILEWAVE_* environment < explicit set (command line
 * flags, API). A value is only replaced by a source of equal or higher precedence, so the
 * order of the calls does not matter. Values are validated whatever their precedence: a bad
 * value is an error even where a higher-precedence source already holds the key.
 *
 * Environment: key "tile.size" is read from TILEWAVE_TILE_SIZE (dots become underscores,
 * letters upper case).
 *
 * Errors name the place: "configs/x.ini:12: unknown key 'tile.sise'",
 * "TILEWAVE_TILE_SIZE: bad value '0x0' for tile.size (range 1x1..65536x65536)".
 *
 * Thread-safety: a config may be read from several threads; writes need exclusive access.
 * @{
 */

/** A set of values for every key. @since 0.1 */
typedef struct tw_config tw_config;

/** Where a value came from, in increasing precedence. @since 0.1 */
typedef enum tw_config_source {
    TW_CONFIG_DEFAULT = 0, /**< built-in */
    TW_CONFIG_FILE,        /**< an INI file */
    TW_CONFIG_ENV,         /**< a TILEWAVE_* variable */
    TW_CONFIG_SET          /**< tw_config_set(): command line or API */
} tw_config_source;

/** Type of a key's value. @since 0.1 */
typedef enum tw_config_type {
    TW_CONFIG_INT = 0, /**< 64-bit integer with a range */
    TW_CONFIG_DIMS,    /**< "WxH", each in a range */
    TW_CONFIG_ENUM,    /**< one word of a fixed list */
    TW_CONFIG_STRING,  /**< free text (e.g. a GPU list "0,1", "all", "none") */
    TW_CONFIG_BYTES    /**< a byte count with optional K/M/G/T suffix (powers of 1024) */
} tw_config_type;

/** Description and current value of one key, for listings. Strings are owned by the config
 *  (or static) and valid until the next change to it or its destruction. @since 0.1 */
typedef struct tw_config_entry {
    const char *key;         /**< "tile.size" */
    tw_config_type type;
    const char *value;       /**< current value, formatted as it would be written in an INI */
    const char *default_value;
    const char *range;       /**< "-1..4096", "16x16..65536x65536, multiple of 16",
                                  "auto|openslide|tiff", "" for strings */
    const char *help;        /**< one sentence, with the unit */
    tw_config_source source; /**< where the current value came from */
    const char *origin;      /**< "default", "FILE:LINE", "TILEWAVE_X" or "set" (see
                                  tw_config_set()) */
} tw_config_entry;

/** Create a config holding the built-in defaults; the caller owns *@p out and frees it with
 *  tw_config_destroy(). @return TW_OK, TW_E_INVALID (@p out NULL), TW_E_NOMEM.
 *  Thread-safe. @since 0.1 */
TW_API TW_NODISCARD tw_status tw_config_create(tw_config **out);

/** Copy a config (values and origins) into a new one the caller owns (tw_config_destroy()).
 *  @return TW_OK, TW_E_INVALID (NULL argument), TW_E_NOMEM. Thread-safe (reads @p cfg).
 *  @since 0.1 */
TW_API TW_NODISCARD tw_status tw_config_clone(const tw_config *cfg, tw_config **out);

/** Destroy a config; NULL is a no-op. Nothing else may use @p cfg meanwhile (a runtime keeps
 *  its own copy: the config may be destroyed once tw_runtime_create() returned). @since 0.1 */
TW_API void tw_config_destroy(tw_config *cfg);

/**
 * Read an INI file with libinih ("[section]" then "name = value", or dotted keys
 * "section.name = value" before any section). Lines starting with '#' or ';' are comments;
 * an inline comment needs " ;" (an inline '#' stays part of the value); an indented line
 * continues the previous value; lines are limited to 199 characters; values are not quoted.
 * Values get source #TW_CONFIG_FILE and origin "PATH:LINE"; of two files the later load wins.
 * Any syntax error, unknown key or bad value fails the whole load and leaves @p cfg
 * unchanged; the message names the first one: "PATH:LINE: unknown key 'KEY'",
 * "PATH:LINE: bad value 'V' for KEY (range R)", "PATH:LINE: syntax error".
 * @return TW_OK, TW_E_IO (cannot open or read: "config: cannot open 'PATH' (reason)"),
 *         TW_E_INVALID (NULL @p cfg or @p path, syntax, unknown key, bad value), TW_E_NOMEM.
 * Needs exclusive access to @p cfg. @since 0.1
 */
TW_API TW_NODISCARD tw_status tw_config_load_file(tw_config *cfg, const char *path,
                                                 tw_error *err);

/**
 * Apply the environment variable of every key (TILEWAVE_ + the key upper-cased, '.' -> '_').
 * Only the table's names are looked up: other TILEWAVE_* variables (TILEWAVE_CONFIG,
 * TILEWAVE_DEBUG, typos) are ignored, and an empty variable counts as unset. Values get
 * source #TW_CONFIG_ENV and the variable's name as origin. A bad value fails the whole load
 * and leaves @p cfg unchanged: "TILEWAVE_TILE_SIZE: bad value '0x0' for tile.size (range ...)".
 * @return TW_OK, TW_E_INVALID (NULL @p cfg, bad value), TW_E_NOMEM. Needs exclusive access to
 * @p cfg; reads the environment (getenv), so not concurrently with setenv. @since 0.1
 */
TW_API TW_NODISCARD tw_status tw_config_load_env(tw_config *cfg, tw_error *err);

/**
 * Set one key from text, as the source @p src. Ignored (TW_OK) when the current value came
 * from a source of higher precedence; a bad value is rejected even then. The origin becomes
 * "set" (#TW_CONFIG_SET), "environment", "file" or "default" after @p src. Messages:
 * "config: unknown key 'KEY'", "config: bad value 'V' for KEY (range R)".
 * @return TW_OK, TW_E_INVALID (NULL argument, unknown key, bad value, @p src outside the
 * enum: "config: bad arguments to tw_config_set"), TW_E_NOMEM. Needs exclusive access to
 * @p cfg. @since 0.1
 */
TW_API TW_NODISCARD tw_status tw_config_set(tw_config *cfg, const char *key, const char *value,
                                           tw_config_source src, tw_error *err);

/** Read an INT or BYTES key. @return TW_OK, TW_E_INVALID (NULL argument, unknown key or a key
 *  of another type). Thread-safe for readers. @since 0.1 */
TW_API TW_NODISCARD tw_status tw_config_get_int(const tw_config *cfg, const char *key,
                                               int64_t *out);

/** Read a DIMS key. @return TW_OK, TW_E_INVALID (NULL argument, unknown key or a key of
 *  another type). Thread-safe for readers. @since 0.1 */
TW_API TW_NODISCARD tw_status tw_config_get_dims(const tw_config *cfg, const char *key,
                                                int64_t *w, int64_t *h);

/** Read an ENUM or STRING key; the string is owned by @p cfg, valid until the key changes or
 *  @p cfg is destroyed. @return TW_OK, TW_E_INVALID (NULL argument, unknown key or a key of
 *  another type). Thread-safe for readers. @since 0.1 */
TW_API TW_NODISCARD tw_status tw_config_get_string(const tw_config *cfg, const char *key,
                                                  const char **out);

/** Number of keys in the table. Thread-safe. @since 0.1 */
TW_API size_t tw_config_count(void);

/** Describe key @p i (0 <= i < tw_config_count()); the entry's strings are owned as
 *  ::tw_config_entry says. @return TW_OK, TW_E_INVALID (NULL argument, @p i out of range).
 *  Thread-safe for readers. @since 0.1 */
TW_API TW_NODISCARD tw_status tw_config_describe(const tw_config *cfg, size_t i,
                                                tw_config_entry *out);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* TILEWAVE_CONFIG_H */
