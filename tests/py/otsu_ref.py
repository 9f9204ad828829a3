# SPDX-License-Identifier: MIT
# tilewave tests: the exact Otsu threshold the cross-checks compare with (crosscheck_edt,
# crosscheck_otsu).
"""Otsu's threshold of an integer image in exact integer arithmetic."""
import numpy as np


def exact_otsu(img):
    """The first value t maximising the between-class variance of {<= t} and {> t}, as
    threshold_otsu defines it. (Some scikit-image versions round: 0.26.0 gives 27731 on an
    image where 0.19.3 and this give 27734, whose variance is larger.)"""
    vals, cnt = np.unique(img, return_counts=True)
    n, s = int(cnt.sum()), int((vals.astype(np.int64) * cnt).sum())
    best, best_t, w0, s0 = (0, 1), int(vals[0]), 0, 0
    for v, c in zip(vals[:-1].tolist(), cnt[:-1].tolist()):
        w0 += c
        s0 += v * c
        w1, s1 = n - w0, s - s0
        num, den = (s0 * w1 - s1 * w0) ** 2, w0 * w1  # w0 w1 (mean0 - mean1)^2 = num / den
        if num * best[1] > best[0] * den:
            best, best_t = (num, den), v
    return best_t
