"""Overlapped post-processing: same pixels, same row order, same error isolation as inline."""

import numpy as np
import pytest
from diffusers_testkit import RecordingPipeline, photo, pixels, tiny_config

from forenset.backends.image.base import EditRequest, GenerateRequest
from forenset.backends.image.diffusers_backend import DiffusersBackend, load_pipeline


def _pair(pipeline: str, wrap=None, **overrides):
    """Two backends on the same tiny pipeline object: overlap on (depth 1) and off."""
    on = tiny_config(pipeline, overlap=True, overlap_depth=1, batch_size=2, **overrides)
    off = on.model_copy(update={"overlap": False})
    pipe = load_pipeline(on)
    return (
        DiffusersBackend(on, pipeline=wrap(pipe) if wrap else pipe),
        DiffusersBackend(off, pipeline=wrap(pipe) if wrap else pipe),
    )


def _same(a, b):
    assert [r.status for r in a] == [r.status for r in b], [r.error for r in a + b]
    for x, y in zip(a, b, strict=True):
        if x.status == "ok":
            assert x.image.size == y.image.size and x.image.mode == y.image.mode == "RGB"
            assert np.array_equal(pixels(x.image), pixels(y.image))
            assert {k: v for k, v in x.params.items() if "latency" not in k} == {
                k: v for k, v in y.params.items() if "latency" not in k
            }


@pytest.mark.parametrize("pipeline", ["StableDiffusionPipeline", "FluxPipeline"])
def test_generate_identical_with_overlap_on_and_off(pipeline):
    on, off = _pair(pipeline)
    # two size buckets, a short tail batch: rows must come back in request order
    sizes = [(32, 32), (48, 32), (32, 32), (48, 32), (32, 32)]
    reqs = [GenerateRequest(f"prompt {i}", seed=i, size=s) for i, s in enumerate(sizes)]
    a, b = on.generate(reqs), off.generate(reqs)
    _same(a, b)
    assert [r.params["seed"] for r in a] == list(range(5))
    assert [r.image.size for r in a] == sizes


@pytest.mark.parametrize(
    "pipeline",
    [
        "StableDiffusionInstructPix2PixPipeline",
        pytest.param("QwenImageEditPipeline", marks=pytest.mark.slow),  # ~1 MP sources on CPU
    ],
)
def test_edit_identical_with_overlap_on_and_off(pipeline):
    on, off = _pair(pipeline)
    srcs = [photo(40, 36, 0), photo(32, 32, 1), photo(36, 44, 2)]
    reqs = [EditRequest(p, {"text": f"edit {i}"}, seed=i) for i, p in enumerate(srcs)]
    a, b = on.edit(reqs), off.edit(reqs)
    _same(a, b)
    assert [r.image.size for r in a] == [p.size for p in srcs]  # resized back to the source
    assert a[0].params["resized_to_source"] is True


def test_errors_and_oom_isolated_with_overlap():
    on, off = _pair(
        "StableDiffusionPipeline",
        wrap=lambda p: RecordingPipeline(p, oom_above=1, fail_prompt="bad"),
    )
    reqs = [GenerateRequest(t, seed=i, size=(32, 32)) for i, t in enumerate(["a", "bad", "c", "d"])]
    a, b = on.generate(reqs), off.generate(reqs)
    _same(a, b)
    assert [r.status for r in a] == ["ok", "error", "ok", "ok"]
    assert "simulated bad item" in a[1].error
    assert a[0].params["oom_halvings"] == 1 and a[0].params["batch_size"] == 1


def test_unconvertible_output_fails_alone():
    """A post-processing failure on the worker is that item's error row, not a crash."""

    class HalfBroken(RecordingPipeline):
        def __call__(self, **kwargs):
            out = super().__call__(**kwargs)
            images = list(out.images)
            if "broken" in kwargs["prompt"]:
                images[kwargs["prompt"].index("broken")] = "not an image"
            out.images = images
            return out

    on, _ = _pair("StableDiffusionPipeline", wrap=HalfBroken)
    reqs = [GenerateRequest(t, seed=i, size=(32, 32)) for i, t in enumerate(["a", "broken", "c"])]
    out = on.generate(reqs)
    assert [r.status for r in out] == ["ok", "error", "ok"]
    assert out[1].error.startswith("post-processing failed")


def test_overlap_asks_for_tensors_and_off_for_pil():
    """The overlap path really converts decoded tensors itself (else it would prove nothing)."""
    seen = []

    class Spy(RecordingPipeline):
        def __call__(self, **kwargs):
            seen.append(kwargs["output_type"])
            return super().__call__(**kwargs)

    on, off = _pair("StableDiffusionPipeline", wrap=Spy)
    req = [GenerateRequest("a", seed=0, size=(32, 32))]
    on.generate(req)
    off.generate(req)
    assert seen == ["pt", "pil"]


def test_png_encoded_on_the_worker_is_the_stages_encoding():
    from forenset.images import encode_png

    on, off = _pair("StableDiffusionInstructPix2PixPipeline")
    reqs = [EditRequest(photo(40, 36, i), {"text": "x"}, seed=i) for i in range(3)]
    a, b = on.edit(reqs), off.edit(reqs)
    assert all(r.png is None for r in b)  # overlap off: the stage encodes
    assert [r.png for r in a] == [encode_png(r.image) for r in b]
