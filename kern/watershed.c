/* SPDX-License-Identifier: MIT */
/* tilewave: the neighbour order the watershed kernels and their driver share. */
#include "watershed.h"

const int twi_watershed_dx[8] = {0, 0, -1, 1, -1, 1, 1, -1};
const int twi_watershed_dy[8] = {-1, 1, 0, 0, -1, 1, -1, 1};
