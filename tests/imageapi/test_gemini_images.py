"""GeminiImageBackend through the real google-genai SDK against the loopback fake."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import re

import numpy as np
import pytest
from PIL import Image

from forenset.backends.image.gemini_images import GeminiImageBackend
from forenset.backends.llm import limiter_stats
from forenset.errors import ConfigurationError
from forenset.testing._base import png_bytes
from forenset.testing.fake_gemini import Fault, decode_b64, request_images
from tests.imageapi.imageapi_kit import GEMINI_SENTINEL, edit_req, gemini_config, gen_req, photo


def prompt_colour(prompt: str) -> tuple[int, int, int]:
    d = hashlib.sha256(prompt.encode("utf-8")).digest()
    return (d[0], d[1], d[2])


def test_generate_happy_path(gemini_server):
    backend = GeminiImageBackend(gemini_config(gemini_server, price_per_image=0.039))
    [res] = backend.generate([gen_req(0)])
    assert res.status == "ok", res.error
    assert res.image.size == (64, 64)  # Gemini picks the size; generate keeps it
    assert res.image.getpixel((3, 3)) == prompt_colour("a red bicycle number 0")
    assert res.model == "gemini-2.5-flash-image" and backend.name == "gemini"
    p = res.params
    assert (p["attempts"], p["n"], p["seed"], p["cost_usd"]) == (1, 1, 100, 0.039)
    assert p["finish_reason"] == "STOP" and "a red bicycle" in p["model_text"]
    body = gemini_server.requests[-1]
    assert body["_model"] == "gemini-2.5-flash-image"
    assert body["generationConfig"]["responseModalities"] == ["TEXT", "IMAGE"]
    assert body["generationConfig"]["seed"] == 100
    assert body["contents"][0]["parts"] == [{"text": "a red bicycle number 0"}]


def test_edit_sends_image_then_text_and_keeps_size(gemini_server):
    backend = GeminiImageBackend(gemini_config(gemini_server, aspect_ratio="4:3"))
    req = edit_req(1)
    [res] = backend.edit([req])
    assert res.status == "ok", res.error
    body = gemini_server.requests[-1]
    parts = body["contents"][0]["parts"]
    assert "inlineData" in parts[0] and parts[1] == {"text": "add a small blue kite 1"}
    assert body["generationConfig"]["imageConfig"] == {"aspectRatio": "4:3"}
    [sent] = request_images(body)
    assert np.array_equal(
        np.asarray(Image.open(io.BytesIO(sent)).convert("RGB")), np.asarray(req.image)
    )
    assert res.image.size == req.image.size and "resized_to_source" not in res.params
    out, src = np.asarray(res.image), np.asarray(req.image)
    assert np.array_equal(out[:5, :5], src[:5, :5])
    assert not np.array_equal(out[28:36, 36:44], src[28:36, 36:44])


def test_edit_output_resized_back_to_source(gemini_server):
    gemini_server.image_reply = lambda prompt, image, body: png_bytes(prompt, (96, 96))
    [res] = GeminiImageBackend(gemini_config(gemini_server)).edit([edit_req(2)])
    assert res.status == "ok", res.error
    assert res.image.size == (80, 64)
    assert res.params["resized_to_source"] is True and res.params["output_size"] == [96, 96]


def test_fake_decodes_urlsafe_and_standard_base64():
    """Regression: google-genai sends inline bytes URL-safe; the fake used the standard alphabet."""
    data = bytes(range(256)) * 3  # encodes to both '+' / '/' (standard) and '-' / '_' (URL-safe)
    std, url = base64.b64encode(data).decode(), base64.urlsafe_b64encode(data).decode()
    assert "+" in std and "/" in std and "-" in url and "_" in url
    assert decode_b64(std) == data and decode_b64(url) == data
    assert decode_b64(url.rstrip("=")) == data  # unpadded too
    body = {"contents": [{"parts": [{"inlineData": {"mimeType": "image/png", "data": url}}]}]}
    assert request_images(body) == [data]


def test_429_retry_info_then_success(gemini_server):
    gemini_server.script(Fault(status=429, retry_after_s=0.2), Fault(status=429, retry_after_s=0.1))
    cfg = gemini_config(gemini_server)
    [res] = GeminiImageBackend(cfg).generate([gen_req()])
    assert res.status == "ok", res.error
    assert res.params["attempts"] == 3 and res.latency_s >= 0.3
    assert limiter_stats(cfg.model_spec())["throttled"] == 2


def test_500_burst_retried_then_exhausted(gemini_server):
    gemini_server.script(Fault(status=500), Fault(status=503))
    [res] = GeminiImageBackend(gemini_config(gemini_server)).edit([edit_req()])
    assert res.status == "ok" and res.params["attempts"] == 3
    gemini_server.script(*[Fault(status=503)] * 2)
    [res] = GeminiImageBackend(gemini_config(gemini_server, max_retries=1)).generate([gen_req()])
    assert res.status == "error" and res.retryable and "HTTP 503" in res.error
    assert res.params["attempts"] == 2


def test_safety_finish_is_terminal(gemini_server):
    gemini_server.script(Fault(refusal="no"))
    [res] = GeminiImageBackend(gemini_config(gemini_server)).edit([edit_req()])
    assert res.status == "error" and not res.retryable and res.image is None
    assert res.error == "refused: finish reason SAFETY"
    assert res.params["attempts"] == 1 and len(gemini_server.requests) == 1


def test_text_only_reply_is_terminal_with_the_models_words(gemini_server):
    reply = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "I can't make images of that."}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ]
    }
    gemini_server.script(Fault(raw_body=json.dumps(reply).encode()))
    [res] = GeminiImageBackend(gemini_config(gemini_server)).generate([gen_req()])
    assert res.status == "error" and not res.retryable
    assert "no image" in res.error and "I can't make images of that." in res.error


@pytest.mark.usefixtures("genai_transport")
def test_timeout_is_retryable_after_retries(gemini_server):
    gemini_server.script(Fault(delay_s=1.0), Fault(delay_s=1.0))
    cfg = gemini_config(gemini_server, timeout_s=0.25, max_retries=1)
    [res] = GeminiImageBackend(cfg).generate([gen_req()])
    assert res.status == "error" and res.retryable
    assert "timeout" in res.error and res.params["attempts"] == 2


@pytest.mark.usefixtures("genai_transport")
def test_key_never_leaks(gemini_server, caplog):
    caplog.set_level(logging.DEBUG)
    gemini_server.script(Fault(status=401))  # the fake echoes the key it got
    cfg = gemini_config(gemini_server)
    backend = GeminiImageBackend(cfg)
    [res] = backend.generate([gen_req()])
    assert gemini_server.request_headers[-1]["x-goog-api-key"] == GEMINI_SENTINEL
    assert res.status == "error" and not res.retryable and "***" in res.error
    texts = [
        repr(res),
        str(res.params),
        repr(backend),
        repr(cfg),
        str(backend.config_fingerprint()),
    ]
    assert "127.0.0.1" in caplog.text  # the SDK / httpx DEBUG logs were captured
    texts.append(caplog.text)
    assert not any(GEMINI_SENTINEL in t or GEMINI_SENTINEL[4:14] in t for t in texts)


def test_concurrent_results_keep_input_order(gemini_server):
    gemini_server.latency_s = 0.05

    def slow_first(body):
        text = body["contents"][0]["parts"][-1]["text"]
        n = int(re.search(r"(\d+)$", text).group(1))
        return Fault(delay_s=0.03 * (6 - n))

    gemini_server.fault_for = slow_first
    reqs = [gen_req(i) for i in range(6)]
    out = GeminiImageBackend(gemini_config(gemini_server, max_concurrency=3)).generate(reqs)
    assert [r.status for r in out] == ["ok"] * 6
    assert [r.image.getpixel((0, 0)) for r in out] == [prompt_colour(r.prompt) for r in reqs]
    assert 2 <= gemini_server.peak_in_flight <= 3
    edits = [edit_req(i) for i in range(4)]
    eout = GeminiImageBackend(gemini_config(gemini_server, max_concurrency=3)).edit(edits)
    assert [r.status for r in eout] == ["ok"] * 4
    assert [np.asarray(r.image)[0, 0].tolist() for r in eout] == [
        np.asarray(photo(i))[0, 0].tolist() for i in range(4)
    ]


def test_donor_photo_is_sent_before_the_instruction(gemini_server):
    req = edit_req(3)
    req.donor = photo(9, (40, 40))
    [res] = GeminiImageBackend(gemini_config(gemini_server)).edit([req])
    assert res.status == "ok", res.error
    assert res.params["donor"] is True
    body = gemini_server.requests[-1]
    sizes = [Image.open(io.BytesIO(b)).size for b in request_images(body)]
    assert sizes == [(80, 64), (40, 40)]
    assert body["contents"][0]["parts"][-1] == {"text": "add a small blue kite 3"}


def test_missing_key_env_fails_at_construction(gemini_server):
    with pytest.raises(ConfigurationError) as e:
        GeminiImageBackend(gemini_config(gemini_server, api_key_env="IMG_UNSET_GEMINI_ENV"))
    assert str(e.value) == (
        "The gemini image generator (model 'gemini-2.5-flash-image') needs an API key in the "
        "environment variable IMG_UNSET_GEMINI_ENV, which is not set."
    )
    with pytest.raises(ConfigurationError, match="needs api_key_env"):
        GeminiImageBackend(gemini_config(gemini_server, api_key_env=""))
    assert gemini_server.requests == []


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"params": {"temprature": 0.2}}, "params the Gemini API does not take (temprature: Extra"),
        ({"params": {"seed": "soon"}}, "params the Gemini API does not take (seed: Input should"),
        ({"aspect_ratio": "16x9"}, "aspect_ratio '16x9', not of the form 'W:H'"),
        ({"api_version": "v2"}, "api_version 'v2' (expected one of v1, v1alpha, v1beta)"),
    ],
)
def test_settings_the_gemini_api_refuses_fail_at_construction(gemini_server, settings, problem):
    """Before, each of these became one error row per item (a typo in params even a retried
    'undecodable image')."""
    with pytest.raises(ConfigurationError) as e:
        GeminiImageBackend(gemini_config(gemini_server, **settings))
    msg = str(e.value)
    assert problem in msg and msg.endswith(".") and msg.count(". ") == 0
    assert gemini_server.requests == []
