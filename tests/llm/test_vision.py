"""A stage that sends images to a model that cannot take them stops at once, in one sentence
naming the model and the stage (against the loopback fake; the real llama-cpp-python server
with SmolLM2 is in tests/realmodels)."""

from __future__ import annotations

import pytest
from llm_kit import Caption, openai_spec, png, settings

from forenset.backends.llm import ChatRequest, VisionUnsupported, limiter_stats, run_chat
from forenset.errors import ConfigurationError
from forenset.testing.fake_openai import FakeOpenAI


def req(i: int, images: bool = True) -> ChatRequest:
    return ChatRequest(
        task="caption",
        item_id=f"img{i}",
        system="Describe factually.",
        user=f"Caption image number {i} please",
        images=[png()] if images else [],
        response_model=Caption,
    )


def one_sentence(msg: str) -> None:
    assert msg.endswith(".") and msg.count(". ") == 0 and 'File "' not in msg, msg


def test_llamacpp_python_answering_image_parts_with_500_stops_the_stage_at_once(stage):
    with FakeOpenAI.like_llamacpp() as server:
        spec = openai_spec(server, model="smollm2")
        with pytest.raises(VisionUnsupported) as info:
            run_chat(
                [req(i) for i in range(12)], settings(spec), build_seed=1, stage=stage, cache=None
            )
        msg = str(info.value)
        assert isinstance(info.value, ConfigurationError)  # the build exits non-zero
        one_sentence(msg)
        assert f"Stage '{stage}' sends images" in msg and "openai/smollm2" in msg
        assert "cannot take them" in msg and "can only concatenate" in msg
        # the format negotiation's one rejected json_schema, then the one image request
        assert len(server.requests) == 2


def test_a_server_reporting_no_vision_is_sent_no_image_request(stage):
    with FakeOpenAI(slots=4, vision=False) as server:
        spec = openai_spec(server, model="text-only")
        with pytest.raises(VisionUnsupported) as info:
            run_chat(
                [req(i) for i in range(5)], settings(spec), build_seed=1, stage=stage, cache=None
            )
        msg = str(info.value)
        one_sentence(msg)
        assert "openai/text-only" in msg and "reports no vision modality" in msg
        assert server.requests == []
        assert limiter_stats(spec)["requests"] == 0


def test_the_same_text_model_still_answers_text_requests(stage):
    with FakeOpenAI(slots=4, vision=False) as server:
        spec = openai_spec(server)
        out = run_chat(
            [req(i, images=False) for i in range(3)],
            settings(spec),
            build_seed=1,
            stage=stage,
            cache=None,
        )
        assert all(r.ok for r in out)


def test_a_vision_model_gets_its_images(stage):
    with FakeOpenAI(slots=4, vision=True) as server:
        spec = openai_spec(server)
        out = run_chat(
            [req(i) for i in range(3)], settings(spec), build_seed=1, stage=stage, cache=None
        )
        assert all(r.ok for r in out) and len(server.requests) == 3


def test_other_500s_on_image_requests_are_not_read_as_blindness(openai_server, stage):
    from forenset.testing.fake_openai import Fault

    openai_server.script(Fault(status=500, message="upstream busy"))
    spec = openai_spec(openai_server)
    out = run_chat([req(0)], settings(spec), build_seed=1, stage=stage, cache=None)
    assert out[0].ok and out[0].attempts == 2
