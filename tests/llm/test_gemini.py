"""The Gemini backend through the real google-genai SDK against the loopback fake."""

from __future__ import annotations

import json

import pytest
from llm_kit import Caption, gemini_spec, png, settings

from forenset.backends.llm import ChatRequest, run_chat
from forenset.testing.fake_gemini import Fault, request_images


def req(i: int = 0, **kw) -> ChatRequest:
    base = dict(
        task="caption",
        item_id=f"g{i}",
        system="Be factual.",
        user=f"Caption photo {i} now",
        response_model=Caption,
    )
    return ChatRequest(**{**base, **kw})


@pytest.mark.parametrize("version", ["v1beta", "v1"])
def test_structured_output_inline_images(gemini_server, stage, version):
    images = [png((1, 2, 3))]
    spec = gemini_spec(gemini_server, api_version=version)
    [res] = run_chat(
        [req(images=images, max_tokens=99, seed=5)],
        settings(spec),
        build_seed=1,
        stage=stage,
        cache=None,
    )
    assert res.status == "ok", res.error
    assert "Caption photo 0" in res.parsed.caption
    body = gemini_server.requests[-1]
    assert body["_model"] == "gemini-fake"
    assert request_images(body) == images
    cfg = body["generationConfig"]
    assert cfg["responseMimeType"] == "application/json"
    assert cfg["responseJsonSchema"]["title"] == "Caption"
    assert (cfg["maxOutputTokens"], cfg["seed"]) == (99, 5)
    assert body["systemInstruction"]["parts"][0]["text"] == "Be factual."
    assert gemini_server.counts == {f"/{version}/models/gemini-fake:generateContent": 1}
    assert res.input_tokens > 258 and res.output_tokens > 0


def test_429_retry_info_and_500_are_retried(gemini_server, stage):
    gemini_server.script(Fault(status=429, retry_after_s=0.2), Fault(status=500))
    [res] = run_chat(
        [req()], settings(gemini_spec(gemini_server)), build_seed=1, stage=stage, cache=None
    )
    assert res.status == "ok" and res.attempts == 3 and res.latency_s >= 0.2


@pytest.mark.usefixtures("genai_transport")
def test_timeout_is_retried(gemini_server, stage):
    gemini_server.script(Fault(delay_s=1.0))
    spec = gemini_spec(gemini_server, timeout_s=0.3)
    [res] = run_chat([req()], settings(spec), build_seed=1, stage=stage, cache=None)
    assert res.status == "ok" and res.attempts == 2


def test_safety_block_is_terminal(gemini_server, stage):
    gemini_server.script(Fault(refusal="blocked"))
    [res] = run_chat(
        [req()],
        settings(gemini_spec(gemini_server), regenerations=0),
        build_seed=1,
        stage=stage,
        cache=None,
    )
    assert res.status == "error" and not res.retryable and "SAFETY" in res.error


def test_fenced_and_repaired_replies(gemini_server, stage):
    gemini_server.script(
        Fault(content='```json\n{"caption": "c", "objects": ["o"], "salience": 2}\n```'),
        Fault(content="Sure! Here you go: not json"),
    )
    spec = gemini_spec(gemini_server, max_concurrency=1)
    out = run_chat([req(0), req(1)], settings(spec), build_seed=1, stage=stage, cache=None)
    assert [r.status for r in out] == ["ok", "ok"]
    assert [r.attempts for r in out] == [1, 2]
    turns = gemini_server.requests[-1]["contents"]
    assert [t["role"] for t in turns] == ["user", "model", "user"]
    assert "not valid JSON" in turns[-1]["parts"][0]["text"]


def test_image_modality_reply(gemini_server):
    from google import genai
    from google.genai import types

    client = genai.Client(
        api_key="k",
        http_options=types.HttpOptions(base_url=gemini_server.base_url, api_version="v1beta"),
    )
    src = png((0, 0, 0), (32, 32))
    resp = client.models.generate_content(
        model="img",
        contents=[types.Part.from_bytes(data=src, mime_type="image/png"), "add box"],
        config=types.GenerateContentConfig(response_modalities=["TEXT", "IMAGE"]),
    )
    [img_part] = [p for p in resp.candidates[0].content.parts if p.inline_data]
    import io

    from PIL import Image

    out = Image.open(io.BytesIO(img_part.inline_data.data))
    assert out.size == (32, 32)
    assert out.getpixel((0, 0)) == (0, 0, 0) and out.getpixel((16, 16)) != (0, 0, 0)


def test_garbled_response_body_is_retried(gemini_server, stage):
    gemini_server.fault_for = lambda body: (
        Fault(raw_body=b"{not json") if "photo 0 " in json.dumps(body) else None
    )
    s = settings(gemini_spec(gemini_server, max_concurrency=1), max_retries=1)
    out = run_chat([req(0), req(1)], s, build_seed=1, stage=stage, cache=None)
    assert out[0].status == "error" and out[0].retryable and out[0].attempts == 2
    assert "malformed response body" in out[0].error
    assert out[1].status == "ok" and out[1].attempts == 1
