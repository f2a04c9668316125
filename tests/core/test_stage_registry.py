"""Coverage of what is registered, and the stage contract as the registry declares it.

Every stage is in topological order, documented, traced, owns its config section, reads only
columns its inputs write, and is partitioned by columns it writes. A new stage that breaks any
of this fails here (and ``test_dag`` fails when it produces no rows in the test build).
"""

import sys
from pathlib import Path

import pyarrow as pa
import pytest

from forenset import stages
from forenset.backends.image import factory
from forenset.config import BuildConfig, ConfigError, validate_config
from forenset.schemas.common import TRACE_NAMES
from forenset.stages import (
    RegistryError,
    stage_class,
    stage_classes,
    stage_names,
    table_names,
    targets,
    topological,
)
from forenset.store.run_store import RunStore
from forenset.tasks.base import ContractError, RowStage, ShardSpec, StageContext
from tests.conftest import small_config_dict

ROOT = Path(__file__).resolve().parents[2]


def test_registry_is_in_true_topological_order_without_repeats():
    names = stage_names()
    assert names == list(targets())  # no plugin installed in the test environment
    assert len(table_names()) == len(set(table_names()))
    seen: set[str] = set()
    for cls in stage_classes():
        assert set(cls.inputs) <= seen, f"{cls.name} is listed before its inputs {cls.inputs}"
        seen.add(cls.name)
    assert [c.name for c in topological(stage_classes())] == names


def check_stage_contract(s, readme: str, sections: set[str]) -> None:
    """What every registered stage must satisfy (also run on CONTRIBUTING's example stage)."""
    assert f"| {s.name} |" in readme, f"stage {s.name} missing from README's stage table"
    names = s.output_schema.names
    assert s.key in names, s.name
    assert all(t in names for t in TRACE_NAMES), f"{s.name} lacks trace columns"
    # a stage owns its section, or reads the section a stage of its family owns (config_key)
    assert s.config_section() in sections, f"stage {s.name} has no config section"
    for up in s.inputs:
        written = stage_class(up).output_schema.names
        missing = [c for c in s.columns_of(up) if c not in written]
        assert not missing, f"{s.name} declares columns {missing} that {up} does not write"
        assert s.columns_of(up), f"{s.name} reads nothing of {up}"
    for col in s.partition_by:
        assert col in s.output_schema.names, f"{s.name} is partitioned by unwritten {col}"


def test_every_stage_satisfies_the_contract():
    readme = (ROOT / "README.md").read_text()
    sections = set(BuildConfig.model_fields)
    for s in stage_classes():
        check_stage_contract(s, readme, sections)


def test_runner_keys_must_name_stages(tmp_path):
    d = small_config_dict(tmp_path)
    d["runners"] = {"default": {"kind": "threads"}, "difs": {"kind": "threads"}}
    with pytest.raises(ConfigError, match="difs.*name no stage"):
        validate_config(d)
    d["runners"] = {"default": {"kind": "threads"}, "diffs": {"kind": "threads"}}
    assert validate_config(d).runner_for("diffs").kind == "threads"


def test_every_generator_backend_is_exercised_by_a_test():
    backends = factory.names()  # the built-ins' entry points (pyproject.toml)
    assert {"offline", "diffusers", "openai", "gemini"} <= set(backends)
    text = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    text += "\n".join(p.read_text() for p in (ROOT / "examples").glob("*.yaml"))
    for b in backends:
        if b == "offline":
            continue  # the default of every test build
        assert f'"backend": "{b}"' in text or f"backend: {b}" in text, b
        assert (
            f"backend: {b}" in (ROOT / "docs" / "generation.md").read_text()
            or b in (ROOT / "docs" / "generation.md").read_text()
        ), f"generator backend {b} undocumented"


def test_test_module_names_are_unique():
    """pytest's default import mode needs unique basenames; a clash hides a whole folder."""
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


# -- the contract is enforced ----------------------------------------------------------------


def _ctx(tmp_path) -> StageContext:
    return StageContext(
        RunStore(str(tmp_path / "run")), validate_config(small_config_dict(tmp_path))
    )


def test_to_table_refuses_unknown_and_missing_columns(tmp_path, monkeypatch):
    stage = stage_class("verdicts")(_ctx(tmp_path))
    with pytest.raises(ContractError, match="unknown column"):
        stage.to_table([{"candidate_id": "c", "status": "ok", "verdit": "KEEP"}])
    with pytest.raises(ContractError, match="out of an ok row"):
        stage.to_table([{"candidate_id": "c", "status": "ok"}])
    # an error row may carry only what was known when it failed
    t = stage.to_table([{"candidate_id": "c", "status": "error", "error": "bad"}])
    assert t.num_rows == 1 and t["verdict"].null_count == 1
    monkeypatch.delenv("FORENSET_STRICT_ROWS")  # production: missing columns are null
    assert stage.to_table([{"candidate_id": "c", "status": "ok"}]).num_rows == 1


def test_reads_are_projected_to_the_declared_columns(tmp_path, monkeypatch):
    from tests.helpers import run_local

    store, _, _ = run_local(validate_config(small_config_dict(tmp_path)))
    asked: list[list[str] | None] = []
    real = RunStore.read_shard

    def spy(self, info, columns=None):
        asked.append(columns)
        return real(self, info, columns)

    monkeypatch.setattr(RunStore, "read_shard", spy)
    judgments = stage_class("judgments")(
        StageContext(store, validate_config(small_config_dict(tmp_path)))
    )
    info = store.manifest("diffs")[0]
    batch = judgments.read_inputs(judgments.plan(info)[0])
    assert asked == [[*judgments.columns_of("diffs"), "status"]]
    assert batch.column_names == list(judgments.columns_of("diffs"))
    wide = len(stage_class("diffs").output_schema)
    assert batch.num_columns < wide  # less I/O than the whole diffs table


def test_partition_contract_is_checked(tmp_path):
    stage = stage_class("verdicts")(_ctx(tmp_path))
    out = pa.table({"generator": ["cv-b"]})
    good = ShardSpec("verdicts", "s", {"generator": "cv-a"}, [], {})
    with pytest.raises(ContractError, match="generator=.*cv-b.*into the generator=cv-a"):
        stage.check_partition(good, out)
    with pytest.raises(ContractError, match="partitioned by"):
        stage.check_partition(ShardSpec("verdicts", "s", {}, [], {}), out)
    stage.check_partition(good, pa.table({"generator": ["cv-a"]}))


def test_a_stage_error_from_configuration_is_not_turned_into_rows(tmp_path):
    from forenset.errors import ConfigurationError

    class Broken(RowStage):
        name = "broken"
        output_schema = stage_class("sources").output_schema
        key = "image_id"

        def process_row(self, row, shard):
            raise ConfigurationError("model folder /nowhere does not exist")

    with pytest.raises(ConfigurationError, match="/nowhere"):
        Broken(_ctx(tmp_path)).process(pa.table({"image_id": ["a", "b"]}), None)


# -- plugins -----------------------------------------------------------------------------------


PLUGIN = """
import pyarrow as pa
from pydantic import Field
from forenset.confbase import Strict
from forenset.schemas.common import F64, S, stage_schema
from forenset.tasks.base import RowStage

class BrightnessConfig(Strict):
    scale: float = Field(1.0, gt=0)

class Brightness(RowStage):
    name = "brightness"
    inputs = ("sources",)
    input_columns = ("image_id", "width")
    output_schema = stage_schema(pa.field("image_id", S, nullable=False), pa.field("value", F64))
    key = "image_id"
    config_model = BrightnessConfig

    def process_row(self, row, shard):
        yield {"image_id": row["image_id"], "value": row["width"] * self.cfg.scale}
"""


@pytest.fixture
def plugin_stage(tmp_path, monkeypatch):
    """A real distribution on sys.path that ships a stage through the entry-point group."""
    site = tmp_path / "site"
    (site / "fs_plugin_demo").mkdir(parents=True)
    (site / "fs_plugin_demo" / "__init__.py").write_text(PLUGIN)
    dist = site / "fs_plugin_demo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fs-plugin-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[forenset.stages]\nbrightness = fs_plugin_demo:Brightness\n"
    )
    monkeypatch.syspath_prepend(str(site))
    yield "brightness"
    sys.modules.pop("fs_plugin_demo", None)
    stages._load.cache_clear()


def test_a_plugin_stage_joins_the_dag_config_and_build(plugin_stage, tmp_path):
    import forenset.config as config_module

    assert stage_names()[-1] == "brightness" and "brightness" in table_names()
    model = config_module.assemble()
    cfg = model.model_validate({**small_config_dict(tmp_path), "brightness": {"scale": 2.0}})
    assert cfg.brightness.scale == 2.0
    from forenset.flows.local import run_local

    store, stats, _ = run_local(cfg)
    assert stats["brightness"].ok == stats["sources"].ok > 0
    from tests.helpers import rows

    widths = {r["image_id"]: r["width"] for r in rows(store, "sources")}
    assert {r["image_id"]: r["value"] for r in rows(store, "brightness")} == {
        k: 2.0 * v for k, v in widths.items()
    }


def test_a_plugin_that_clashes_or_reads_an_unknown_stage_is_refused(tmp_path, monkeypatch):
    builtins = stage_classes()

    class Orphan:
        name, inputs = "orphan", ("nothing",)

    # before the clashing plugin is installed: splits finds its gate in the (sound) registry
    with pytest.raises(RegistryError, match="unknown stage"):
        topological([*builtins, Orphan])
    site = tmp_path / "site"
    dist = site / "fs_bad-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fs-bad\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[forenset.stages]\ndiffs = fs_bad:Diffs\n")
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(RegistryError, match="clashes with a built-in"):
        stage_names()


class _GateA:
    name, inputs, gate = "gate_a", ("judgments",), True


class _GateB:
    name, inputs, gate = "gate_b", ("gate_a",), True


class _GateC:
    name, inputs, gate = "gate_c", ("gate_a",), True


class _Both:
    name, inputs, gate = "gate_both", ("gate_a", "gate_b"), True


class _Loop:
    name, inputs, gate = "gate_loop", ("gate_loop",), True


def test_gates_form_one_chain_and_splits_reads_the_last():
    from forenset import stages
    from forenset.tasks.splits import Splits

    assert stages.gate_names() == ["verdicts"] and stages.final_gate() == "verdicts"
    assert Splits.inputs == ("captions", "verdicts", "candidates")
    me = "tests.core.test_stage_registry"

    def chain(*classes):
        return stages._gate_chain(tuple((c.name, f"{me}:{c.__name__}") for c in classes))

    assert chain(_GateB, _GateA) == ("gate_a", "gate_b")  # chain order, not listing order
    with pytest.raises(RegistryError, match="gate_b, gate_c are each last"):
        chain(_GateA, _GateB, _GateC)  # two gates branch off one: splits could read neither
    with pytest.raises(RegistryError, match="gate 'gate_both' reads several gates"):
        chain(_GateA, _GateB, _Both)
    with pytest.raises(RegistryError, match="do not form one chain"):
        chain(_GateA, _Loop)
