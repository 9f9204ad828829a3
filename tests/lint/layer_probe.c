/* SPDX-License-Identifier: MIT */
/* tilewave tests: a source compiled with a layer's include directories and usage requirements
 * (tests/CMakeLists.txt, lint/layer_*): TW_PROBE 0 includes what the layer may see and must
 * compile; every other value includes a header of a folder the layer must not see, and the
 * build must fail, so that the layering holds at compile time and not only in the lint. */
#if TW_PROBE == 0
#include "edt.h"
#include "tilewave.h"
#include "tile_view.h"
#elif TW_PROBE == 1
#include "tw_internal.h" /* runtime/ */
#elif TW_PROBE == 2
#include "cuda_kernels.h" /* cuda/, from omp/ */
#elif TW_PROBE == 3
#include "omp_kernels.h" /* omp/, from cuda/ or kern/ */
#elif TW_PROBE == 4
#include "tw_io.h" /* io/ */
#endif

int twtest_layer_probe(void);

int
twtest_layer_probe(void)
{
    return TW_PROBE;
}
