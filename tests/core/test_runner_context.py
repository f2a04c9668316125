"""Shard tasks carry the config hash, not the config: workers read config.yaml from the run dir."""

import pytest
import yaml

from forenset import worker as runner
from forenset.config import validate_config
from forenset.store.run_store import RunStore
from tests.conftest import small_config_dict


def _write_config(run_dir, cfg) -> None:
    RunStore(str(run_dir)).write_bytes_atomic(
        "config.yaml", yaml.safe_dump(cfg.resolved(), sort_keys=False).encode()
    )


def test_worker_loads_the_config_from_the_run_dir_once(tmp_path, monkeypatch):
    cfg = validate_config(small_config_dict(tmp_path / "run", seed=11))
    _write_config(tmp_path / "run", cfg)
    monkeypatch.setattr(runner, "_CTX", {})  # a fresh worker process has no cached context
    ctx = runner.context_for(str(tmp_path / "run"), cfg.config_hash())
    assert ctx.config.config_hash() == cfg.config_hash()
    assert ctx.config.seed == 11
    (tmp_path / "run" / "config.yaml").unlink()  # cached: the second shard reads nothing
    assert runner.context_for(str(tmp_path / "run"), cfg.config_hash()) is ctx


def test_a_changed_config_yaml_is_a_clear_error(tmp_path, monkeypatch):
    cfg = validate_config(small_config_dict(tmp_path / "run", seed=11))
    other = validate_config(small_config_dict(tmp_path / "run", seed=12))
    _write_config(tmp_path / "run", other)
    monkeypatch.setattr(runner, "_CTX", {})
    with pytest.raises(RuntimeError, match="another build changed the run directory"):
        runner.context_for(str(tmp_path / "run"), cfg.config_hash())


def test_a_run_dir_without_config_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "_CTX", {})
    with pytest.raises(RuntimeError, match="has no config.yaml"):
        runner.context_for(str(tmp_path / "empty"), "0" * 24)
