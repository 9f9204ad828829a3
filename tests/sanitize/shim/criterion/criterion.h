/* SPDX-License-Identifier: MIT */
/* tilewave tests: a small stand-in for Criterion's API, for builds Criterion cannot run in. */
#ifndef TWSHIM_CRITERION_H
#define TWSHIM_CRITERION_H

/*
 * Criterion's runner cannot start under ThreadSanitizer: it maps a shared arena at a random
 * fixed address in a range TSan reserves for its shadow memory, and aborts with "Could not
 * initialize inheritable arena" (Snaipe/Criterion#274). The ci-tsan preset therefore
 * builds the test programs against this header (-DTW_TEST_SHIM=ON): the same test sources,
 * the subset of Criterion the tests use (Test, TestSuite with .init/.fini/.timeout/.disabled,
 * cr_assert with the new eq/ne/lt/le/gt/ge/not/zero comparisons, the old cr_assert_* forms,
 * cr_expect, cr_fatal, cr_skip_test, cr_log_*), and a runner (twshim.c) that, as Criterion
 * does, runs every test in a forked process of its own, --jobs N at a time.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct twshim_opts {
    void (*init)(void);
    void (*fini)(void);
    double timeout;          /* seconds; 0 = none */
    bool disabled;
    const char *description;
    int exit_code;           /* accepted, not checked */
    int signal;              /* accepted, not checked */
} twshim_opts;

typedef struct twshim_test {
    const char *suite, *name;
    void (*fn)(void);
    twshim_opts opts;
    struct twshim_test *next;
} twshim_test;

typedef struct twshim_suite {
    const char *name;
    twshim_opts opts;
    struct twshim_suite *next;
} twshim_suite;

void twshim_register(twshim_test *t);
void twshim_register_suite(twshim_suite *s);
_Noreturn void twshim_fail(const char *file, int line, const char *expr, const char *fmt, ...);
void twshim_expect_fail(const char *file, int line, const char *expr, const char *fmt, ...);
_Noreturn void twshim_skip(const char *fmt, ...);
void twshim_log(const char *level, const char *fmt, ...);
void twshim_detail(const char *ea, int op, const char *eb, const char *va, const char *vb);

#define TWSHIM_CAT_(a, b) a##b
#define TWSHIM_CAT(a, b) TWSHIM_CAT_(a, b)

#define Test(suite, name, ...)                                                                  \
    static void twshim_fn_##suite##_##name(void);                                               \
    static twshim_test twshim_t_##suite##_##name = {#suite, #name, twshim_fn_##suite##_##name,  \
                                                    {__VA_ARGS__}, NULL};                       \
    __attribute__((constructor)) static void twshim_reg_##suite##_##name(void)                  \
    {                                                                                           \
        twshim_register(&twshim_t_##suite##_##name);                                            \
    }                                                                                           \
    static void twshim_fn_##suite##_##name(void)

#define TestSuite(suite, ...)                                                                   \
    static twshim_suite twshim_s_##suite = {#suite, {__VA_ARGS__}, NULL};                       \
    __attribute__((constructor)) static void twshim_sreg_##suite(void)                          \
    {                                                                                           \
        twshim_register_suite(&twshim_s_##suite);                                               \
    }

/* ---- assertions: cr_assert(cond) or cr_assert(cond, fmt, ...) */
#define TWSHIM_CHECK(cond, ...)                                                                 \
    do {                                                                                        \
        if (!(cond))                                                                            \
            twshim_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                                \
    } while (0)
#define TWSHIM_EXPECT(cond, ...)                                                                \
    do {                                                                                        \
        if (!(cond))                                                                            \
            twshim_expect_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                         \
    } while (0)

#define cr_assert(...) TWSHIM_CHECK(__VA_ARGS__, NULL)
#define cr_expect(...) TWSHIM_EXPECT(__VA_ARGS__, NULL)
#define cr_assert_not(...) TWSHIM_NOT(__VA_ARGS__, NULL)
#define TWSHIM_NOT(c, ...) TWSHIM_CHECK(!(c), __VA_ARGS__)
#define cr_fatal(...) twshim_fail(__FILE__, __LINE__, NULL, __VA_ARGS__)
#define cr_assert_fail(...) twshim_fail(__FILE__, __LINE__, NULL, "" __VA_ARGS__)
#define cr_skip_test(...) twshim_skip("" __VA_ARGS__)
#define cr_log_info(...) twshim_log("INFO", __VA_ARGS__)
#define cr_log_warn(...) twshim_log("WARN", __VA_ARGS__)
#define cr_log_error(...) twshim_log("ERROR", __VA_ARGS__)

/* The old API: cr_assert_eq(a, b) or cr_assert_eq(a, b, fmt, ...), and so on. */
#define TWSHIM_REL(a, op, b, ...) TWSHIM_CHECK((a)op(b), __VA_ARGS__)
#define cr_assert_eq(a, ...) TWSHIM_REL(a, ==, __VA_ARGS__, NULL)
#define cr_assert_neq(a, ...) TWSHIM_REL(a, !=, __VA_ARGS__, NULL)
#define cr_assert_lt(a, ...) TWSHIM_REL(a, <, __VA_ARGS__, NULL)
#define cr_assert_leq(a, ...) TWSHIM_REL(a, <=, __VA_ARGS__, NULL)
#define cr_assert_gt(a, ...) TWSHIM_REL(a, >, __VA_ARGS__, NULL)
#define cr_assert_geq(a, ...) TWSHIM_REL(a, >=, __VA_ARGS__, NULL)
#define cr_expect_eq(a, ...) TWSHIM_EXPECT_REL(a, ==, __VA_ARGS__, NULL)
#define TWSHIM_EXPECT_REL(a, op, b, ...) TWSHIM_EXPECT((a)op(b), __VA_ARGS__)
#define cr_assert_null(...) TWSHIM_CHECK_PTR(==, __VA_ARGS__, NULL)
#define cr_assert_not_null(...) TWSHIM_CHECK_PTR(!=, __VA_ARGS__, NULL)
#define TWSHIM_CHECK_PTR(op, p, ...) TWSHIM_CHECK((const void *)(p)op NULL, __VA_ARGS__)
#define TWSHIM_STR(a, op, b, ...) TWSHIM_CHECK(strcmp((a), (b)) op 0, __VA_ARGS__)
#define cr_assert_str_eq(a, ...) TWSHIM_STR(a, ==, __VA_ARGS__, NULL)
#define cr_assert_str_neq(a, ...) TWSHIM_STR(a, !=, __VA_ARGS__, NULL)
#define cr_assert_str_empty(...) TWSHIM_EMPTY(==, __VA_ARGS__, NULL)
#define cr_assert_str_not_empty(...) TWSHIM_EMPTY(!=, __VA_ARGS__, NULL)
#define TWSHIM_EMPTY(op, s, ...) TWSHIM_CHECK((s)[0] op '\0', __VA_ARGS__)
#define TWSHIM_FLT(a, b, eps, ...)                                                              \
    TWSHIM_CHECK((a) - (b) <= (eps) && (b) - (a) <= (eps), __VA_ARGS__)
#define cr_assert_float_eq(a, ...) TWSHIM_FLT(a, __VA_ARGS__, NULL)
#define TWSHIM_ARR(a, b, n, ...) TWSHIM_CHECK(memcmp((a), (b), (n)) == 0, __VA_ARGS__)
#define cr_assert_arr_eq(a, ...) TWSHIM_ARR(a, __VA_ARGS__, NULL)

/* ---- the new API's comparisons: eq(TAG, a, b) etc., TAG one of Criterion's type tags */
enum { TWSHIM_EQ, TWSHIM_NE, TWSHIM_LT, TWSHIM_LE, TWSHIM_GT, TWSHIM_GE };

#define TWSHIM_CMP_DEFINE(tag, T, fmt, conv)                                                    \
    static inline bool twshim_cmp_##tag(int op, T a, T b, const char *ea, const char *eb)      \
    {                                                                                           \
        bool r = op == TWSHIM_EQ   ? a == b                                                     \
                 : op == TWSHIM_NE ? a != b                                                     \
                 : op == TWSHIM_LT ? a < b                                                      \
                 : op == TWSHIM_LE ? a <= b                                                     \
                 : op == TWSHIM_GT ? a > b                                                      \
                                   : a >= b;                                                    \
        if (!r) {                                                                               \
            char va[64], vb[64];                                                                \
            snprintf(va, sizeof va, fmt, conv(a));                                              \
            snprintf(vb, sizeof vb, fmt, conv(b));                                              \
            twshim_detail(ea, op, eb, va, vb);                                                  \
        }                                                                                       \
        return r;                                                                               \
    }

#define TWSHIM_AS_LL(x) ((long long)(x))
#define TWSHIM_AS_ULL(x) ((unsigned long long)(x))
#define TWSHIM_AS_DBL(x) ((double)(x))
#define TWSHIM_AS_PTR(x) ((const void *)(x))
TWSHIM_CMP_DEFINE(chr, char, "%lld", TWSHIM_AS_LL)
TWSHIM_CMP_DEFINE(int, int, "%lld", TWSHIM_AS_LL)
TWSHIM_CMP_DEFINE(uint, unsigned, "%llu", TWSHIM_AS_ULL)
TWSHIM_CMP_DEFINE(long, long, "%lld", TWSHIM_AS_LL)
TWSHIM_CMP_DEFINE(ulong, unsigned long, "%llu", TWSHIM_AS_ULL)
TWSHIM_CMP_DEFINE(llong, long long, "%lld", TWSHIM_AS_LL)
TWSHIM_CMP_DEFINE(ullong, unsigned long long, "%llu", TWSHIM_AS_ULL)
TWSHIM_CMP_DEFINE(i8, int8_t, "%lld", TWSHIM_AS_LL)
TWSHIM_CMP_DEFINE(i16, int16_t, "%lld", TWSHIM_AS_LL)
TWSHIM_CMP_DEFINE(i32, int32_t, "%lld", TWSHIM_AS_LL)
TWSHIM_CMP_DEFINE(i64, int64_t, "%lld", TWSHIM_AS_LL)
TWSHIM_CMP_DEFINE(u8, uint8_t, "%llu", TWSHIM_AS_ULL)
TWSHIM_CMP_DEFINE(u16, uint16_t, "%llu", TWSHIM_AS_ULL)
TWSHIM_CMP_DEFINE(u32, uint32_t, "%llu", TWSHIM_AS_ULL)
TWSHIM_CMP_DEFINE(u64, uint64_t, "%llu", TWSHIM_AS_ULL)
TWSHIM_CMP_DEFINE(sz, size_t, "%llu", TWSHIM_AS_ULL)
TWSHIM_CMP_DEFINE(iptr, intptr_t, "%lld", TWSHIM_AS_LL)
TWSHIM_CMP_DEFINE(uptr, uintptr_t, "%llu", TWSHIM_AS_ULL)
TWSHIM_CMP_DEFINE(ptr, const void *, "%p", TWSHIM_AS_PTR)
TWSHIM_CMP_DEFINE(flt, float, "%.9g", TWSHIM_AS_DBL)
TWSHIM_CMP_DEFINE(dbl, double, "%.17g", TWSHIM_AS_DBL)
TWSHIM_CMP_DEFINE(ldbl, long double, "%.17g", TWSHIM_AS_DBL)

static inline bool
twshim_cmp_str(int op, const char *a, const char *b, const char *ea, const char *eb)
{
    int c = a && b ? strcmp(a, b) : a == b ? 0 : a ? 1 : -1;
    bool r = op == TWSHIM_EQ   ? c == 0
             : op == TWSHIM_NE ? c != 0
             : op == TWSHIM_LT ? c < 0
             : op == TWSHIM_LE ? c <= 0
             : op == TWSHIM_GT ? c > 0
                               : c >= 0;

    if (!r)
        twshim_detail(ea, op, eb, a ? a : "(null)", b ? b : "(null)");
    return r;
}

#define eq(tag, a, b) twshim_cmp_##tag(TWSHIM_EQ, (a), (b), #a, #b)
#define ne(tag, a, b) twshim_cmp_##tag(TWSHIM_NE, (a), (b), #a, #b)
#define lt(tag, a, b) twshim_cmp_##tag(TWSHIM_LT, (a), (b), #a, #b)
#define le(tag, a, b) twshim_cmp_##tag(TWSHIM_LE, (a), (b), #a, #b)
#define gt(tag, a, b) twshim_cmp_##tag(TWSHIM_GT, (a), (b), #a, #b)
#define ge(tag, a, b) twshim_cmp_##tag(TWSHIM_GE, (a), (b), #a, #b)
#define zero(tag, a) twshim_cmp_##tag(TWSHIM_EQ, (a), 0, #a, "0")
#define not(c) (!(c))

#endif /* TWSHIM_CRITERION_H */
