"""Every registered pipeline through the real checkpoint path: save a tiny one, load it by path.

Why: with real weights the backend runs ``cls.from_pretrained(config.model)``, which the tiny
in-memory pipelines skip. Saving a tiny pipeline and loading it through
``DiffusersConfig(model=<folder>)`` exercises that path offline; comparing its pixels with the
in-memory pipeline's shows the load restored the same weights, tokenizers, scheduler and
processor rather than defaults or fresh random weights.
"""

import sys

import numpy as np
import pytest
from diffusers_testkit import photo, pixels, tiny_config

from forenset.backends.image.base import EditRequest, GenerateRequest
from forenset.backends.image.diffusers_backend import (
    DiffusersBackend,
    DiffusersConfig,
    clear_pipeline_cache,
)
from forenset.backends.image.registry import PIPELINES
from forenset.backends.image.tiny import build_tiny_pipeline, tiny_pipeline_names

# Per-pipeline settings that keep one call fast on CPU; a new pipeline needs none to be tested.
# QwenImageEdit encodes every source at ~1 MP: one step, no true CFG (half the work).
FAST = {"QwenImageEditPipeline": {"steps": 1, "guidance_scale": 1.0}}
GENERATE_SIZE = (32, 32)
EDIT_SOURCE = (40, 24)  # not a multiple of 16: Flux edits run at 32x16 and are resized back


@pytest.fixture(autouse=True, scope="module")
def _drop_pipelines_afterwards():
    """Pipelines loaded from temp folders are never reused: free them, and leave the process
    cache as other tests expect it (they count what they add)."""
    yield
    clear_pipeline_cache()


def _one_image(backend: DiffusersBackend):
    """One real generate or edit call (whichever the pipeline does) on a tiny input."""
    if backend.spec.task == "t2i":
        req = GenerateRequest("a red bicycle by a lake", seed=5, size=GENERATE_SIZE)
        return backend.generate([req])[0]
    req = EditRequest(photo(*EDIT_SOURCE, seed=2), {"text": "make the disc blue"}, seed=5)
    return backend.edit([req])[0]


def test_every_registered_pipeline_has_a_tiny_builder():
    """The round trip below covers the registry; a tiny builder outside it would go untested."""
    assert tiny_pipeline_names() == sorted(PIPELINES)


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_saved_tiny_pipeline_loads_by_path_and_matches_in_memory(pipeline, tmp_path, monkeypatch):
    settings = {"steps": 2, "batch_size": 1, "device": "cpu", **FAST.get(pipeline, {})}
    folder = tmp_path / pipeline
    build_tiny_pipeline(pipeline, seed=0).save_pretrained(folder)
    assert (folder / "model_index.json").is_file()

    # Load as a fresh worker would, one that never built a tiny pipeline (diffusers resolves
    # custom component classes only from modules already imported).
    monkeypatch.delitem(sys.modules, "forenset.backends.image.tiny")
    loaded = DiffusersBackend(DiffusersConfig(pipeline=pipeline, model=str(folder), **settings))
    out = _one_image(loaded)
    assert out.status == "ok", out.error
    expected = GENERATE_SIZE if loaded.spec.task == "t2i" else EDIT_SOURCE
    assert out.image.mode == "RGB" and out.image.size == expected
    assert np.asarray(out.image).std() > 0  # not a blank or constant image
    assert out.model == str(folder) and out.params["tiny"] is False
    assert type(loaded.pipeline).__name__ == pipeline

    same = _one_image(DiffusersBackend(tiny_config(pipeline, tiny_seed=0, **settings)))
    assert same.status == "ok", same.error
    assert np.abs(pixels(out.image) - pixels(same.image)).max() <= 1

    # The comparison has teeth: other random weights give clearly different pixels.
    other = _one_image(DiffusersBackend(tiny_config(pipeline, tiny_seed=1, **settings)))
    assert other.status == "ok", other.error
    assert np.abs(pixels(out.image) - pixels(other.image)).mean() > 5
