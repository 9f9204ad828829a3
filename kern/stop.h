/* SPDX-License-Identifier: MIT */
/* tilewave: how a caller stops a long kernel early (valid C and C++). */
#ifndef TWI_KERN_STOP_H
#define TWI_KERN_STOP_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A long kernel's cancellation (the *_stop variants): stop(user) true ends the run early with
 * TW_E_CANCELED, the output then unusable. The kernel asks between its steps (blocks, merges,
 * every few dozen rows) from any thread of its team: stop must be cheap and thread safe, and
 * once it said true it must keep saying so. NULL, or a NULL stop: never stops. */
typedef struct twi_stop {
    bool (*stop)(const void *user);
    const void *user;
} twi_stop;

#ifdef __cplusplus
}
#endif

#endif /* TWI_KERN_STOP_H */
