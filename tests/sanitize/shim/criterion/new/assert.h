/* SPDX-License-Identifier: MIT */
/* tilewave tests: Criterion stand-in (see ../criterion.h). */
#include "../criterion.h"
