"""FakeBench's averages over resamples with absent measures: NaN, silently, without touching the
process's warning filters (shards score in parallel threads)."""

from __future__ import annotations

import warnings

import numpy as np

from forenset.benchmarks.fakebench.scorers import AVERAGE, nan_mean


def test_nan_mean_matches_numpy_and_is_silent_on_empty_slices():
    a = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan], [2.0, 2.0, np.nan]])
    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        out = nan_mean(a, axis=1)
    assert got == []
    assert warnings.filters == before
    assert out[0] == 2.0 and np.isnan(out[1]) and out[2] == 2.0
    assert np.allclose(nan_mean(a, axis=0), [1.5, 2.0, 3.0])


def test_average_statistic_with_a_measure_absent_from_every_resample_warns_nothing():
    # (b resamples, n units, measures): the judged measures absent everywhere
    x = np.full((4, 3, 7), np.nan)
    x[:, :, :4] = 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        got = AVERAGE.statistic(x)
    assert np.allclose(got, 0.5)  # the overall is the automatic side alone
