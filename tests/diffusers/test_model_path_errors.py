"""A generator whose model cannot be loaded stops its stage with one sentence, not error rows.

Why: a wrong model path fails every candidate the same way; as error rows the build ended
"complete" with an empty dataset. ConfigurationError has to leave the backend and the stage's
``process()`` so the scheduler can stop the build with it.
"""

import shutil
from typing import ClassVar

import pyarrow as pa
import pytest
from diffusers_testkit import photo

from forenset.backends.image.base import GenerateRequest
from forenset.backends.image.diffusers_backend import DiffusersBackend, DiffusersConfig
from forenset.backends.image.generator import GeneratorConfig
from forenset.backends.image.tiny import build_tiny_pipeline
from forenset.config import BuildConfig
from forenset.errors import ConfigurationError
from forenset.images import encode_png
from forenset.schemas.common import S, stage_schema
from forenset.store.run_store import RunStore
from forenset.tasks.base import RowStage, StageContext
from forenset.tasks.candidates import Candidates


def _config(model, pipeline="FluxPipeline", **extra) -> DiffusersConfig:
    return DiffusersConfig(pipeline=pipeline, model=str(model), device="cpu", **extra)


def test_missing_folder_raises_at_construction_naming_the_path(tmp_path):
    missing = tmp_path / "models" / "flux-dev"
    with pytest.raises(ConfigurationError) as err:
        DiffusersBackend(_config(missing))
    message = str(err.value)
    assert str(missing) in message and "does not exist" in message
    assert message.count(".") >= 1 and "\n" not in message  # one sentence


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: p.mkdir(), "without model_index.json"),  # an empty or wrong folder
        (lambda p: p.write_text("{}"), "is a file"),  # a file where a folder belongs
    ],
    ids=["empty-folder", "file"],
)
def test_not_a_pipeline_folder_raises_at_construction(tmp_path, make, says):
    path = tmp_path / "ckpt"
    make(path)
    with pytest.raises(ConfigurationError, match=says) as err:
        DiffusersBackend(_config(path))
    assert str(path) in str(err.value)


def test_hub_id_missing_from_the_cache_raises_when_offline(tmp_path):
    cfg = _config(
        "forenset-tests/no-such-pipeline",
        load_kwargs={"local_files_only": True, "cache_dir": str(tmp_path)},
    )
    with pytest.raises(ConfigurationError, match="not in the Hugging Face cache") as err:
        DiffusersBackend(cfg)
    assert "'forenset-tests/no-such-pipeline'" in str(err.value)


def test_hub_id_in_the_cache_loads_offline(tmp_path):
    """The offline check accepts what the hub cache really holds (and diffusers loads it)."""
    repo = tmp_path / "models--forenset-tests--tiny-sd"
    commit = "0" * 40
    build_tiny_pipeline("StableDiffusionPipeline").save_pretrained(repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    cfg = _config(
        "forenset-tests/tiny-sd",
        pipeline="StableDiffusionPipeline",
        steps=1,
        load_kwargs={"local_files_only": True, "cache_dir": str(tmp_path)},
    )
    out = DiffusersBackend(cfg).generate([GenerateRequest("x", seed=0, size=(32, 32))])
    assert out[0].status == "ok", out[0].error
    assert out[0].revision == commit  # the exact weights, although no revision was configured
    branch = _config(
        "forenset-tests/tiny-sd",
        pipeline="StableDiffusionPipeline",
        steps=1,
        revision="main",
        load_kwargs={"local_files_only": True, "cache_dir": str(tmp_path)},
    )
    out = DiffusersBackend(branch).generate([GenerateRequest("x", seed=0, size=(32, 32))])
    assert (out[0].status, out[0].revision) == ("ok", commit)  # a branch resolves to its commit
    local = _config(repo / "snapshots" / commit, pipeline="StableDiffusionPipeline", steps=1)
    out = DiffusersBackend(local).generate([GenerateRequest("x", seed=0, size=(32, 32))])
    assert (out[0].status, out[0].revision) == ("ok", None)  # a folder has no commit


def test_half_copied_checkpoint_raises_on_load_not_error_rows(tmp_path):
    """model_index.json is there but a component is not: only the load can tell."""
    folder = tmp_path / "partial"
    build_tiny_pipeline("StableDiffusionPipeline").save_pretrained(folder)
    shutil.rmtree(folder / "unet")
    backend = DiffusersBackend(_config(folder, pipeline="StableDiffusionPipeline"))
    with pytest.raises(ConfigurationError, match="cannot be loaded") as err:
        backend.generate([GenerateRequest("x", seed=0, size=(32, 32))] * 2)
    assert str(folder) in str(err.value)


def _candidates_stage(tmp_path, generator: GeneratorConfig) -> tuple[Candidates, RunStore]:
    store = RunStore(str(tmp_path / "run"))
    cfg = BuildConfig(run_dir=str(tmp_path / "run"), generators=[generator])
    return Candidates(StageContext(store, cfg)), store


@pytest.mark.parametrize("pipeline", ["FluxPipeline", "StableDiffusionInstructPix2PixPipeline"])
def test_candidates_process_raises_instead_of_error_rows(tmp_path, pipeline):
    missing = tmp_path / "nowhere" / pipeline
    gen = GeneratorConfig(
        name="broken",
        backend="diffusers",
        family="x",
        diffusers={"pipeline": pipeline, "model": str(missing), "device": "cpu"},
    )
    stage, store = _candidates_stage(tmp_path, gen)
    [task] = gen.tasks()
    if task == "t2i":
        batch = pa.table({"prompt_uid": ["p1", "p2"], "prompt": ["a cat", "a dog"]})
    else:
        blob = store.put_blob(encode_png(photo(32, 32)))
        row = {"instruction_id": "i1", "image_id": "img1", "blob": blob, "caption": "c"}
        row |= {"text": "make it blue", "family": "color", "kind": "local", "params": "{}"}
        batch = pa.Table.from_pylist([row])
    params = {"generator": gen.model_dump(mode="json"), "task": task}
    spec = stage.spec("s0", {"generator": gen.name}, [], params)
    with pytest.raises(ConfigurationError) as err:
        stage.process(batch, spec)
    assert str(missing) in str(err.value)


class _Echo(RowStage):
    """A minimal row stage: ``boom`` raises what the row names."""

    name = "echo"
    key = "item_id"
    output_schema = stage_schema(pa.field("item_id", S))
    errors: ClassVar[dict[str, Exception]] = {
        "config": ConfigurationError("model '/nope' does not exist."),
        "row": ValueError("this row is bad"),
    }

    def process_row(self, row, shard):
        if row["boom"]:
            raise self.errors[row["boom"]]
        yield {"item_id": row["item_id"]}


def test_row_stage_isolates_row_errors_but_not_configuration_errors():
    stage = _Echo(StageContext(store=None, config=BuildConfig()))
    out = stage.process(pa.table({"item_id": ["a", "b"], "boom": [None, "row"]})).to_pylist()
    assert [r["status"] for r in out] == ["ok", "error"] and "this row is bad" in out[1]["error"]
    with pytest.raises(ConfigurationError, match="/nope"):
        stage.process(pa.table({"item_id": ["a", "b"], "boom": [None, "config"]}))
