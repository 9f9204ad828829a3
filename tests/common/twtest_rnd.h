/* SPDX-License-Identifier: MIT */
/* tilewave tests and benches: the one random generator (xorshift64*), header only. */
#ifndef TWTEST_RND_H
#define TWTEST_RND_H

/* Header only, with no dependency, so that tw_bench, the tests/gpu drivers and the .cu timing
 * tool draw from the same source as the Criterion tests without linking twtest.c. Streams are
 * deterministic on every machine: the results are compared with independent references, so a
 * test needs reproducible inputs, never particular ones. */

#include <stdint.h>

/* xorshift64*: the next 64 random bits of the stream *s. Any seed works: 0, the one state
 * xorshift cannot leave, is replaced by a fixed non-zero one. */
static inline uint64_t
twtest_xorshift(uint64_t *s)
{
    if (!*s)
        *s = 0x9e3779b97f4a7c15ull;
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* Uniform in [0, n) (0 when n is 0). */
static inline uint32_t
twtest_rnd(uint64_t *s, uint32_t n)
{
    return n ? (uint32_t)((twtest_xorshift(s) >> 32) % n) : 0;
}

/* Uniform in [0, 1), 53 bits. */
static inline double
twtest_rnd_unit(uint64_t *s)
{
    return (double)(twtest_xorshift(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* splitmix64's finaliser: a hash whose output bits all depend on every input bit. For inputs
 * drawn by position rather than in sequence (the pixel (x, y) of a generated slide, of a
 * benchmark image that a Python twin must reproduce) and for seeding streams. */
static inline uint64_t
twtest_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The state of stream number `n` (0, 1, 2, ...) of twtest_xorshift: nearby numbers give
 * unrelated streams, which they would not as the state itself. */
static inline uint64_t
twtest_rnd_stream(uint64_t n)
{
    return twtest_mix64(n + 0x9e3779b97f4a7c15ull);
}

#endif
