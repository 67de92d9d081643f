"""Float32 tolerances derived from the sizes of the values and the lengths of the sums, for comparing two float32
computations of the same numbers that differ only in how their sums are ordered (a K/V cache's one-row step against
the whole forward, one torch thread against several)."""

import numpy as np

U32 = 2.0 ** -24  # float32's unit roundoff
LAMBDA = 4.0  # how many standard deviations of rounding error the bound allows (Higham & Mary 2019: λ√n·u)


def rounding_tolerance(reference, length: int, steps: int = 1) -> np.ndarray:
    """The absolute tolerance for each value of `reference`, broadcastable to it, that holds for any order of
    summation: each value is the end of `steps` sums in series (a model's layers), each of at most `length` terms.

    A float32 sum of n terms, in any order, is off by at most λ·√n·u times the size of its terms, with a probability
    near 1 for λ of a few (rounding errors behave as independent, zero-mean; the deterministic n·u is the worst case of
    every error in one direction). Sums in series add their errors: √(length · steps). The size of the terms is each
    row's largest |value| (last axis), since a row is normalised before it feeds the next layer's sums."""
    values = np.asarray(reference, dtype=np.float64)
    scale = np.abs(values).max(-1, keepdims=True)  # (..., 1) each row's size
    return LAMBDA * np.sqrt(length * steps) * U32 * scale


def assert_close_rounding(actual, desired, length: int, steps: int = 1) -> None:
    """actual == desired within rounding_tolerance(desired, length, steps), with the worst value named."""
    actual, desired = np.asarray(actual, dtype=np.float64), np.asarray(desired, dtype=np.float64)
    assert actual.shape == desired.shape, (actual.shape, desired.shape)
    tolerance = rounding_tolerance(desired, length, steps)
    excess = np.abs(actual - desired) - tolerance
    worst = np.unravel_index(int(np.argmax(excess)), excess.shape)
    assert excess[worst] <= 0, (f"at {worst}: {actual[worst]} against {desired[worst]}, off by "
                                f"{abs(actual[worst] - desired[worst]):.3g}, tolerance {np.broadcast_to(tolerance, excess.shape)[worst]:.3g}")
