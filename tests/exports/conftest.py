"""One real small build shared by the export and report tests (built once per session)."""

from __future__ import annotations

import pytest

from forenset.config import validate_config
from tests.conftest import small_config_dict
from tests.helpers import run_local


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """(store, cfg) of a 4-photo, 96 px build with two generators, perturbations, explanations."""
    run = tmp_path_factory.mktemp("exports-build") / "run"
    cfg = validate_config(small_config_dict(run, perturbations={"variants": 1}))
    store, stats, _ = run_local(cfg)
    assert all(s.failed == 0 for s in stats.values()), stats
    return store, cfg


@pytest.fixture(scope="session")
def samples(built):
    from forenset.exports.data import load_samples

    return load_samples(built[0])
