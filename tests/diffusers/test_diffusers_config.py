import pytest
from pydantic import ValidationError

from forenset.backends.image.diffusers_backend import DiffusersConfig
from forenset.backends.image.registry import PIPELINES


def test_unknown_field_is_rejected():
    with pytest.raises(ValidationError, match="extra"):
        DiffusersConfig(pipeline="FluxPipeline", model="x", stepz=4)


def test_unknown_pipeline_is_rejected():
    with pytest.raises(ValidationError, match="unknown pipeline"):
        DiffusersConfig(pipeline="NoSuchPipeline", model="x")


def test_model_required_unless_tiny():
    with pytest.raises(ValidationError, match="model is required"):
        DiffusersConfig(pipeline="FluxPipeline")
    assert (
        DiffusersConfig(pipeline="FluxPipeline", tiny=True).model_id() == "tiny-random/FluxPipeline"
    )


def test_resolved_defaults_on_cpu():
    cfg = DiffusersConfig(
        pipeline="StableDiffusionInstructPix2PixPipeline", model="m", device="cpu"
    )
    r = cfg.resolved()
    assert r["dtype"] == "float32"
    assert r["steps"] == PIPELINES["StableDiffusionInstructPix2PixPipeline"].default_steps
    assert r["image_guidance_scale"] == 1.5
    cuda = DiffusersConfig(pipeline="FluxPipeline", model="m", device="cuda:0", steps=8)
    assert cuda.resolved()["dtype"] == "bfloat16"
    assert cuda.resolved()["steps"] == 8
    assert cuda.resolved()["image_guidance_scale"] is None


def test_load_key_separates_what_changes_the_loaded_pipeline():
    a = DiffusersConfig(pipeline="FluxPipeline", model="m", device="cpu")
    assert (
        a.load_key()
        == DiffusersConfig(
            pipeline="FluxPipeline", model="m", device="cpu", steps=3, batch_size=9
        ).load_key()
    )
    assert (
        a.load_key()
        != DiffusersConfig(
            pipeline="FluxPipeline", model="m", device="cpu", revision="abc"
        ).load_key()
    )
    assert (
        a.load_key()
        != DiffusersConfig(
            pipeline="FluxPipeline", model="m", device="cpu", dtype="bfloat16"
        ).load_key()
    )


def test_registry_names_the_required_classes():
    for name in [
        "FluxPipeline",
        "FluxKontextPipeline",
        "StableDiffusionPipeline",
        "StableDiffusionXLPipeline",
        "StableDiffusion3Pipeline",
        "StableDiffusionInstructPix2PixPipeline",
        "QwenImageEditPipeline",
    ]:
        import diffusers

        assert hasattr(diffusers, name)
        assert name in PIPELINES


def test_unknown_scheduler_is_rejected():
    with pytest.raises(ValidationError, match="unknown diffusers scheduler"):
        DiffusersConfig(pipeline="FluxPipeline", model="m", scheduler="NoScheduler")
