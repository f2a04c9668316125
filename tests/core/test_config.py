import pytest

from forenset.config import DEFAULT_CONFIG, ConfigError, load_config, validate_config


def test_demo_config_is_default_and_valid():
    cfg = load_config(None)
    assert DEFAULT_CONFIG.name == "demo.yaml"
    assert len(cfg.generators) >= 3
    assert cfg.config_hash() == load_config(DEFAULT_CONFIG).config_hash()


def test_unknown_key_is_one_sentence_naming_it():
    with pytest.raises(ConfigError) as e:
        validate_config({"generators": [{"name": "g", "famly": "x"}]}, "x.yaml")
    msg = str(e.value)
    assert "generators.0.famly" in msg and "unknown key" in msg
    assert "\n" not in msg and msg.endswith(".")


def test_bad_value_names_the_key():
    with pytest.raises(ConfigError) as e:
        validate_config({"splits": {"fractions": {"train": 0.9, "validation": 0.3, "test": 0.0}}})
    assert "splits.fractions" in str(e.value) and "sum to 1" in str(e.value)
    with pytest.raises(ConfigError, match="shard_size"):
        validate_config({"shard_size": 0})


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    p = tmp_path / "bad.yaml"
    p.write_text("seed: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p)


def test_duplicate_generator_names_rejected():
    with pytest.raises(ConfigError, match="unique"):
        validate_config({"generators": [{"name": "a"}, {"name": "a"}]})


def test_ray_runner_without_prefect_ray_is_one_sentence(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "prefect_ray" else real(name)
    )
    with pytest.raises(ConfigError) as e:
        validate_config({"runners": {"default": {"kind": "threads"}, "diffs": {"kind": "ray"}}})
    msg = str(e.value)
    assert "runners.diffs" in msg and "forenset[ray]" in msg and "\n" not in msg


@pytest.mark.parametrize(
    ("data", "key", "hint"),
    [
        ({"generators": [{"name": "g", "famly": "x"}]}, "generators.0.famly", "family"),
        ({"seeed": 1}, "seeed", "seed"),
        ({"splits": {"fractons": {}}}, "splits.fractons", "fractions"),
        ({"runners": {"default": {"kindd": "threads"}}}, "runners.default.kindd", "kind"),
    ],
)
def test_unknown_key_suggests_the_closest_field(data, key, hint):
    with pytest.raises(ConfigError) as e:
        validate_config(data, "x.yaml")
    msg = str(e.value)
    assert f"unknown key '{key}' (did you mean '{hint}'?)" in msg
    assert "\n" not in msg and msg.endswith(".")


def test_unknown_key_far_from_every_field_gets_no_guess():
    with pytest.raises(ConfigError) as e:
        validate_config({"zzzzqq": 1}, "x.yaml")
    assert "did you mean" not in str(e.value)


def test_missing_local_source_csv_is_reported_at_config_load(tmp_path):
    """Not minutes later when the sources stage runs: one sentence naming the file."""
    p = tmp_path / "cfg.yaml"
    p.write_text(f"sources:\n  csv: [{tmp_path / 'nope.csv'}]\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert msg == f"Invalid config {p}: sources: CSV {tmp_path / 'nope.csv'} does not exist."
    (tmp_path / "nope.csv").write_text("path\n")
    assert load_config(p).sources.csv == [str(tmp_path / "nope.csv")]
    # a remote URI is the stage's to check (it may reach it; config load does not)
    p.write_text("sources:\n  csv: [s3://bucket/photos.csv]\n")
    assert load_config(p).sources.csv == ["s3://bucket/photos.csv"]
