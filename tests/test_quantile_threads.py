"""The quantile-regression attack fits its gradient boosting on one OpenMP thread, and that changes no prediction:
the idle threads of more would spin against other work on a busy machine, or wake for every small parallel region
when told to sleep (audit/attacks/quantile.py)."""
from __future__ import annotations

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_info

from topicaudit.attacks import quantile
from topicaudit.attacks.quantile import fit_quantiles


def _rows(seed=0, n=3000):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4))
    return x, x @ np.array([0.5, -1.0, 0.2, 0.0]) + rng.gumbel(size=n), rng.normal(size=(200, 4))


def test_the_quantile_fits_run_on_one_openmp_thread(monkeypatch):
    seen = []
    fit = HistGradientBoostingRegressor.fit

    def counting_fit(self, *args, **kwargs):
        seen.append({lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "openmp"})
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(HistGradientBoostingRegressor, "fit", counting_fit)
    fit_quantiles(*_rows(), max_iter=5)
    assert len(seen) == 2 and all(threads == {1} for threads in seen)


def test_one_thread_predicts_what_two_predict(monkeypatch):
    one = fit_quantiles(*_rows(1), max_iter=20)
    monkeypatch.setattr(quantile, "THREADS", 2)
    two = fit_quantiles(*_rows(1), max_iter=20)
    assert all(np.array_equal(a, b) for a, b in zip(one, two))
