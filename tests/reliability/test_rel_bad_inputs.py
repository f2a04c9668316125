"""The bad-input corpus of tests/core, reused: bad files are rows with reasons, in every stage."""

from __future__ import annotations

from forenset.config import validate_config
from tests.conftest import small_config_dict
from tests.core.test_bad_inputs import corpus  # noqa: F401 - the pytest fixture, reused
from tests.helpers import rows, run_local


def test_bad_inputs_resume_and_give_reasons(tmp_path, corpus):  # noqa: F811
    cfg = validate_config(
        small_config_dict(
            tmp_path / "run",
            sources={"samples": "none", "folders": [str(corpus)], "max_side": 96},
            generators=[{"name": "cv-a", "family": "classical"}],
            scenarios={"enabled": False},
        )
    )
    store, stats, _ = run_local(cfg)
    assert not any(s.failures for s in stats.values())  # no shard crashed on a bad file
    for stage in ("sources", "captions", "instructions", "candidates", "judgments"):
        for r in rows(store, stage):
            assert r["status"] in ("ok", "error"), (stage, r)
            assert (r["status"] == "ok") == (not r["error"]), (stage, r)
    errors = [r for r in rows(store, "sources") if r["status"] == "error"]
    assert len(errors) >= 4 and all(not r["retryable"] for r in errors)
    # terminal errors are not retried: a second build runs nothing
    _, _, executed = run_local(cfg)
    assert sum(executed.values()) == 0, executed
