"""The repetition rule of the PROV-ML paper's Fig. 10, made explicit.

One cold run, then warm runs until the distribution-free 95 % confidence interval of the
median is within ±5 % of the median, with at least ``min_warm`` runs and at most
``max_warm`` (or until a time budget is spent). The typed and tagged variants of a query
are run alternately, so a burst of load on the (shared) machine hits both alike.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Timing", "measure_pair", "median_ci", "ratio_spread"]

_Z95 = 1.959964


def median_ci(samples: list[float]) -> tuple[float, float] | None:
    """The 95 % confidence interval of the median from order statistics (binomial ranks),
    or None when there are too few samples for one (fewer than 6).

    >>> median_ci([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    (2.0, 9.0)
    """
    n = len(samples)
    half = _Z95 * math.sqrt(n) / 2
    lo_rank = round(n / 2 - half)               # 1-based ranks
    hi_rank = round(1 + n / 2 + half)
    if lo_rank < 1 or hi_rank > n:
        return None
    xs = sorted(samples)
    return xs[lo_rank - 1], xs[hi_rank - 1]


@dataclass
class Timing:
    """Seconds of one query variant on one store."""

    cold: float
    warm: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.warm) if self.warm else self.cold

    @property
    def minimum(self) -> float:
        return min(self.warm) if self.warm else self.cold

    @property
    def maximum(self) -> float:
        return max(self.warm) if self.warm else self.cold

    @property
    def ci(self) -> tuple[float, float] | None:
        return median_ci(self.warm)

    def tight(self, rel: float) -> bool:
        ci = self.ci
        if ci is None:
            return False
        m = self.median
        return max(m - ci[0], ci[1] - m) <= rel * m

    def as_dict(self) -> dict[str, object]:
        ci = self.ci
        return {"cold_s": self.cold, "median_s": self.median, "min_s": self.minimum,
                "max_s": self.maximum, "ci95_s": list(ci) if ci else None,
                "repetitions": len(self.warm), "warm_s": self.warm}


def measure_pair(run_typed: Callable[[], float], run_tagged: Callable[[], float], *,
                 min_warm: int = 5, max_warm: int = 100, rel_ci: float = 0.05,
                 budget_s: float = 60.0,
                 cold: tuple[float, float] | None = None) -> tuple[Timing, Timing]:
    """Cold run of each, then alternating warm runs per the rule above.

    Each callable runs the query once and returns its elapsed seconds (measured by the
    caller around the request, as the paper did). The budget counts warm runs only and
    never cuts below ``min_warm`` runs. ``cold`` passes cold times measured by the caller.
    """
    typed_cold, tagged_cold = cold if cold is not None else (run_typed(), run_tagged())
    typed, tagged = Timing(cold=typed_cold), Timing(cold=tagged_cold)
    start = time.perf_counter()
    while True:
        n = len(typed.warm)
        if n >= min_warm and (
            (typed.tight(rel_ci) and tagged.tight(rel_ci))
            or n >= max_warm or time.perf_counter() - start > budget_s
        ):
            break
        # alternate which goes first, so neither always follows the other's cache effects
        if n % 2:
            tagged.warm.append(run_tagged())
            typed.warm.append(run_typed())
        else:
            typed.warm.append(run_typed())
            tagged.warm.append(run_tagged())
    return typed, tagged


def ratio_spread(typed: Timing, tagged: Timing) -> dict[str, float | None]:
    """How many times faster typed is than tagged (tagged / typed medians), with the range
    the two confidence intervals (or, without them, the min-max ranges) allow."""
    lo_t, hi_t = typed.ci or (typed.minimum, typed.maximum)
    lo_g, hi_g = tagged.ci or (tagged.minimum, tagged.maximum)
    return {"speedup": tagged.median / typed.median if typed.median else None,
            "low": lo_g / hi_t if hi_t else None, "high": hi_g / lo_t if lo_t else None}
