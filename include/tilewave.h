/* SPDX-License-Identifier: MIT */
/* tilewave: the public API, one umbrella header (C11; usable from C++). */
#ifndef TILEWAVE_H
#define TILEWAVE_H

/**
 * @mainpage tilewave
 *
 * A hybrid CPU-GPU task runtime for gigapixel whole-slide images. Create one ::tw_runtime per
 * process (tilewave/runtime.h), open slides (tilewave/image.h), submit operations as jobs
 * (tilewave/ops.h), tune them through the configuration table (tilewave/config.h). The error
 * contract is stated once, in tilewave/common.h.
 */

#include "tilewave/common.h"
#include "tilewave/config.h"
#include "tilewave/image.h"
#include "tilewave/ops.h"
#include "tilewave/runtime.h"
#include "tilewave/version.h"

#endif /* TILEWAVE_H */
