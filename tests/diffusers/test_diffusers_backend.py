"""The diffusers backend end to end on tiny random-weight pipelines (CPU, no download)."""

import numpy as np
import pytest
from diffusers_testkit import RecordingPipeline, photo, pixels, tiny_backend, tiny_config

from forenset.backends.image.base import EditRequest, GenerateRequest
from forenset.backends.image.diffusers_backend import (
    DiffusersBackend,
    cached_pipeline_count,
    load_pipeline,
)

T2I = [
    "StableDiffusionPipeline",
    "StableDiffusionXLPipeline",
    "StableDiffusion3Pipeline",
    "FluxPipeline",
]
EDIT = ["StableDiffusionInstructPix2PixPipeline", "FluxKontextPipeline"]


@pytest.mark.parametrize("pipeline", T2I)
def test_text_to_image(pipeline):
    backend = tiny_backend(pipeline)
    reqs = [
        GenerateRequest("a red bicycle", seed=1, size=(32, 32), item_id="a"),
        GenerateRequest("a cat on a sofa", seed=2, size=(48, 32), item_id="b"),
    ]
    out = backend.generate(reqs)
    assert [r.status for r in out] == ["ok", "ok"], [r.error for r in out]
    assert out[0].image.size == (32, 32) and out[1].image.size == (48, 32)
    assert out[0].image.mode == "RGB"
    assert out[0].model == f"tiny-random/{pipeline}"
    p = out[0].params
    assert p["steps"] == 2 and p["dtype"] == "float32" and p["device"] == "cpu"
    assert p["seed"] == 1 and p["pipeline"] == pipeline and p["width"] == 32
    assert out[0].latency_s > 0
    # random weights still give an image that depends on the prompt/seed, not a constant
    assert np.asarray(out[0].image).std() > 0


@pytest.mark.parametrize("pipeline", EDIT)
def test_edit_keeps_source_size(pipeline):
    backend = tiny_backend(pipeline)
    reqs = [
        EditRequest(photo(32, 32, 0), {"text": "make the disc blue"}, seed=3, item_id="x"),
        EditRequest(photo(40, 36, 1), {"text": "remove the disc"}, seed=4, item_id="y"),
    ]
    out = backend.edit(reqs)
    assert [r.status for r in out] == ["ok", "ok"], [r.error for r in out]
    assert out[0].image.size == (32, 32)
    assert out[1].image.size == (40, 36)  # ran at a size multiple, resized back
    assert out[1].params["source_size"] == [40, 36]
    assert out[0].params["instruction"] == "make the disc blue"
    if pipeline == "StableDiffusionInstructPix2PixPipeline":
        assert out[0].params["image_guidance_scale"] == 1.5


def test_edit_output_depends_on_source_image():
    backend = tiny_backend("StableDiffusionInstructPix2PixPipeline")
    a, b = backend.edit(
        [
            EditRequest(photo(32, 32, 0), {"text": "t"}, seed=5),
            EditRequest(photo(32, 32, 7), {"text": "t"}, seed=5),
        ]
    )
    assert np.abs(pixels(a.image) - pixels(b.image)).max() > 0


@pytest.mark.parametrize("pipeline", ["StableDiffusionPipeline", "FluxPipeline"])
def test_same_seed_same_pixels_whatever_the_batch(pipeline):
    backend = tiny_backend(pipeline, batch_size=3)
    target = GenerateRequest("a lighthouse at dusk", seed=42, size=(32, 32))
    alone = backend.generate([target])[0]
    again = backend.generate([target])[0]
    batched = backend.generate(
        [
            GenerateRequest("a bowl of fruit", seed=7, size=(32, 32)),
            target,
            GenerateRequest("a mountain road", seed=8, size=(32, 32)),
        ]
    )
    assert batched[1].params["batch_size"] == 3 and alone.params["batch_size"] == 1
    assert np.array_equal(pixels(alone.image), pixels(again.image))
    # float batching may move a channel value by one quantisation step, no more
    assert np.abs(pixels(alone.image) - pixels(batched[1].image)).max() <= 1
    other_seed = backend.generate([GenerateRequest(target.prompt, seed=43, size=(32, 32))])[0]
    assert np.abs(pixels(alone.image) - pixels(other_seed.image)).mean() > 1


def test_edit_determinism_across_batches():
    backend = tiny_backend("FluxKontextPipeline", batch_size=2)
    target = EditRequest(photo(32, 32, 3), {"text": "add a hat"}, seed=11)
    alone = backend.edit([target])[0]
    pair = backend.edit([EditRequest(photo(32, 32, 4), {"text": "x"}, seed=12), target])
    assert pair[1].params["batch_size"] == 2
    assert np.abs(pixels(alone.image) - pixels(pair[1].image)).max() <= 1


def test_batches_by_resolution_bucket_and_keeps_order():
    inner = load_pipeline(tiny_config("StableDiffusionPipeline"))
    rec = RecordingPipeline(inner)
    backend = DiffusersBackend(tiny_config("StableDiffusionPipeline", batch_size=2), pipeline=rec)
    sizes = [(32, 32), (48, 32), (32, 32), (32, 32), (48, 32), (33, 35)]  # 33x35 rounds to 32
    reqs = [GenerateRequest(f"p{i}", seed=i, size=s) for i, s in enumerate(sizes)]
    out = backend.generate(reqs)
    assert all(r.status == "ok" for r in out)
    assert [r.params["seed"] for r in out] == list(range(6))
    assert [r.image.size for r in out] == [
        (32, 32),
        (48, 32),
        (32, 32),
        (32, 32),
        (48, 32),
        (32, 32),
    ]
    calls = [(c["size"], c["batch"]) for c in rec.calls]
    assert sorted(calls) == sorted([((32, 32), 2), ((32, 32), 2), ((48, 32), 2)])
    for c in rec.calls:  # every call holds one size only
        assert all(sizes[int(p[1:])][0] // 8 * 8 == c["size"][0] for p in c["prompts"])


def test_config_size_overrides_request_size():
    backend = tiny_backend("FluxPipeline", size=(48, 32))
    out = backend.generate([GenerateRequest("x", seed=0, size=(512, 512))])
    assert out[0].image.size == (48, 32)


def test_oom_halves_the_batch_and_retries():
    cfg = tiny_config("StableDiffusionPipeline", batch_size=4)
    rec = RecordingPipeline(load_pipeline(cfg), oom_above=1)
    backend = DiffusersBackend(cfg, pipeline=rec)
    reqs = [GenerateRequest(f"prompt {i}", seed=i, size=(32, 32)) for i in range(5)]
    out = backend.generate(reqs)
    assert [r.status for r in out] == ["ok"] * 5
    assert [c["batch"] for c in rec.calls[:3]] == [4, 2, 1]  # 4 -> OOM, 2 -> OOM, then 1s
    assert all(c["batch"] == 1 for c in rec.calls[2:]) and len(rec.calls) == 2 + 5
    assert out[0].params["oom_halvings"] == 2 and out[0].params["batch_size"] == 1
    # the halved outputs equal the ones an unconstrained backend makes
    plain = tiny_backend("StableDiffusionPipeline", batch_size=1).generate(reqs[:1])[0]
    assert np.abs(pixels(plain.image) - pixels(out[0].image)).max() <= 1
    # the next shard at this size starts at the batch that fit
    rec.calls.clear()
    DiffusersBackend(cfg, pipeline=rec).generate(reqs[:2])  # a new shard, same process
    assert [c["batch"] for c in rec.calls] == [1, 1]
    rec.calls.clear()
    backend.generate([GenerateRequest("other size", seed=0, size=(48, 32))] * 2)
    assert [c["batch"] for c in rec.calls] == [2, 1, 1]  # other sizes learn on their own


def test_oom_at_batch_one_gives_retryable_error_rows():
    cfg = tiny_config("FluxPipeline", batch_size=2)
    backend = DiffusersBackend(cfg, pipeline=RecordingPipeline(load_pipeline(cfg), oom_above=0))
    out = backend.generate(
        [GenerateRequest("a", seed=1, size=(32, 32)), GenerateRequest("b", seed=2, size=(32, 32))]
    )
    assert [r.status for r in out] == ["error", "error"]
    assert all(r.retryable and r.image is None for r in out)
    assert "out of memory at batch size 1" in out[0].error
    assert out[0].model == "tiny-random/FluxPipeline"


def test_a_bad_item_fails_alone():
    cfg = tiny_config("StableDiffusionPipeline", batch_size=4)
    rec = RecordingPipeline(load_pipeline(cfg), fail_prompt="poison")
    backend = DiffusersBackend(cfg, pipeline=rec)
    prompts = ["ok one", "poison", "ok two"]
    out = backend.generate(
        [GenerateRequest(p, seed=i, size=(32, 32)) for i, p in enumerate(prompts)]
    )
    assert [r.status for r in out] == ["ok", "error", "ok"]
    assert "ValueError" in out[1].error and "poison" in out[1].error
    assert out[1].retryable is False


def test_wrong_task_and_bad_requests_are_error_rows():
    t2i = tiny_backend("FluxPipeline")
    out = t2i.edit([EditRequest(photo(32, 32), {"text": "x"}, seed=0)])
    assert out[0].status == "error" and "call generate()" in out[0].error
    ed = tiny_backend("FluxKontextPipeline")
    assert "call edit()" in ed.generate([GenerateRequest("x", seed=0)])[0].error
    out = ed.edit(
        [
            EditRequest(photo(32, 32), {"family": "object"}, seed=0),
            EditRequest(photo(32, 32), {"text": "ok"}, seed=0),
        ]
    )
    assert out[0].status == "error" and "no text" in out[0].error
    assert out[1].status == "ok"
    assert t2i.generate([]) == [] and ed.edit([]) == []


def test_one_pipeline_load_per_process():
    from forenset.backends.image.diffusers_backend import clear_pipeline_cache

    clear_pipeline_cache()  # other tests in this worker may have loaded these configs already
    a = tiny_backend("StableDiffusionPipeline", steps=2)
    b = tiny_backend("StableDiffusionPipeline", steps=3, batch_size=1)  # same load config
    assert a.pipeline is b.pipeline
    assert cached_pipeline_count() == 1
    c = tiny_backend("StableDiffusionPipeline", tiny_seed=1)
    assert c.pipeline is not a.pipeline
    assert cached_pipeline_count() == 2


def test_fingerprint_has_resolved_defaults():
    fp = tiny_backend("FluxKontextPipeline", steps=None).config_fingerprint()
    assert fp["steps"] == 28 and fp["guidance_scale"] == 2.5 and fp["dtype"] == "float32"


def test_qwen_image_edit_tiny():
    """QwenImageEdit encodes the source at ~1 MP whatever its size: one image, no CFG."""
    backend = tiny_backend("QwenImageEditPipeline", guidance_scale=1.0, batch_size=1, steps=1)
    out = backend.edit([EditRequest(photo(32, 24), {"text": "turn the disc green"}, seed=9)])
    assert out[0].status == "ok", out[0].error
    assert out[0].image.size == (32, 24)
    assert out[0].params["guidance_scale"] == 1.0
    assert backend.pipeline.processor.image_processor.size.longest_edge == 28 * 28 * 4


def test_scheduler_can_be_swapped_by_name():
    backend = tiny_backend("StableDiffusionPipeline", scheduler="EulerDiscreteScheduler")
    out = backend.generate([GenerateRequest("x", seed=0, size=(32, 32))])
    assert out[0].status == "ok" and out[0].params["scheduler"] == "EulerDiscreteScheduler"


def test_large_photos_are_downscaled_for_the_pipeline_and_restored():
    cfg = tiny_config("StableDiffusionInstructPix2PixPipeline", edit_max_side=48)
    rec = RecordingPipeline(load_pipeline(cfg))
    out = DiffusersBackend(cfg, pipeline=rec).edit(
        [EditRequest(photo(100, 60), {"text": "blur the background"}, seed=1)]
    )
    assert out[0].status == "ok", out[0].error
    assert rec.calls[0]["size"] == (48, 24)  # longer side 48, 60*0.48=29 -> multiple of 8
    assert out[0].image.size == (100, 60) and out[0].params["resized_to_source"] is True


def test_bfloat16_path_runs():
    """The dtype used on CUDA, exercised on CPU (bf16 matmuls are supported there)."""
    out = tiny_backend("FluxPipeline", dtype="bfloat16").generate(
        [GenerateRequest("x", seed=0, size=(32, 32))]
    )
    assert out[0].status == "ok", out[0].error
    assert out[0].params["dtype"] == "bfloat16"
    assert np.asarray(out[0].image).std() > 0


def test_cpu_offload_without_cuda_is_an_error_row():
    out = tiny_backend("FluxPipeline", device="cpu", cpu_offload=True).generate(
        [GenerateRequest("x", seed=0, size=(32, 32))]
    )
    assert out[0].status == "error" and "cpu_offload needs a CUDA device" in out[0].error


def test_malformed_requests_are_their_own_error_rows(tmp_path):
    t2i = tiny_backend("FluxPipeline")
    out = t2i.generate(
        [GenerateRequest("ok", seed=0, size=(32, 32)), GenerateRequest("tiny", seed=0, size=(4, 4))]
    )
    assert [r.status for r in out] == ["ok", "error"]
    assert out[1].error.startswith("bad request") and out[1].retryable is False
    # a truncated PNG opens lazily and fails when decoded
    path = tmp_path / "broken.png"
    photo(32, 32).save(path)
    path.write_bytes(path.read_bytes()[:60])  # header only, no pixel data
    from PIL import Image

    broken = Image.open(path)
    ed = tiny_backend("StableDiffusionInstructPix2PixPipeline")
    out = ed.edit(
        [
            EditRequest(broken, {"text": "x"}, seed=0),
            EditRequest(photo(32, 32), {"text": "x"}, seed=0),
        ]
    )
    assert [r.status for r in out] == ["error", "ok"]
    assert out[0].error.startswith("bad source image")
