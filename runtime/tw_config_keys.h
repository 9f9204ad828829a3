/* SPDX-License-Identifier: MIT */
/* tilewave: the row type of configuration key tables, and how a table joins the config. */
#ifndef TW_CONFIG_KEYS_H
#define TW_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw_internal.h"

/*
 * runtime/config.c is a generic engine over key tables: it owns the runtime's own keys and
 * knows no operation. Each operation owns its keys (ops/config_keys.c) and adds its table
 * with twi_config_add_keys() from a load-time constructor, so that every tw_config, including
 * the one tw_runtime_create() makes for a NULL config, has every key.
 */

/* One key. */
typedef struct twi_config_key {
    const char *key;          /* "tile.size" */
    tw_config_type type;
    const char *def;          /* default, as it is written in an INI file */
    int64_t min, max;         /* INT, BYTES: the value; DIMS: each side */
    int64_t multiple;         /* DIMS: each side a multiple of this; 0 = no constraint */
    bool zero_ok;             /* DIMS: 0x0 is also accepted (meaning "not set") */
    const char *const *words; /* ENUM: the accepted words, NULL-terminated */
    /* STRING: validate text and write its canonical form to canon (n >= strlen(text) + 1). */
    tw_status (*check)(const char *text, char *canon, size_t n);
    const char *expect;       /* STRING: what check() accepts, for error messages */
    const char *help;         /* one sentence, with the unit */
} twi_config_key;

/* Add a table of n keys (static storage, names unique across tables). Keys are listed
 * (tw_config_describe()) in the order tables were added, after the runtime's keys and before
 * log.level. Only from a load-time constructor: configs are made from the tables as they
 * stand, and nothing locks them. */
TWI_HIDDEN void twi_config_add_keys(const twi_config_key *keys, size_t n);

#endif /* TW_CONFIG_KEYS_H */
