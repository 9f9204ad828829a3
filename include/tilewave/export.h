/* SPDX-License-Identifier: MIT */
/* tilewave: symbol visibility (TW_API) and attributes used by the public headers. */
#ifndef TILEWAVE_EXPORT_H
#define TILEWAVE_EXPORT_H

/* The library is built with hidden visibility; only TW_API declarations are exported. */
#if defined(__GNUC__) || defined(__clang__)
#define TW_API __attribute__((visibility("default")))
#define TW_NODISCARD __attribute__((warn_unused_result))
#define TW_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define TW_API
#define TW_NODISCARD
#define TW_PRINTF(fmt, args)
#endif

#endif /* TILEWAVE_EXPORT_H */
