"""OpenAIImageBackend through the real openai SDK against the loopback fake."""

from __future__ import annotations

import hashlib
import io
import logging
import re

import numpy as np
import pytest
from PIL import Image

from forenset.backends.image.generator import GeneratorConfig
from forenset.backends.image.openai_images import OpenAIImageBackend, OpenAIImagesConfig
from forenset.backends.llm import limiter_stats
from forenset.errors import ConfigurationError
from forenset.testing._base import png_bytes
from forenset.testing.fake_openai import Fault
from tests.imageapi.imageapi_kit import (
    FAST,
    OPENAI_SENTINEL,
    edit_req,
    gen_req,
    openai_config,
    photo,
)


def prompt_colour(prompt: str) -> tuple[int, int, int]:
    d = hashlib.sha256(prompt.encode("utf-8")).digest()
    return (d[0], d[1], d[2])


def test_generate_happy_path(openai_server):
    backend = OpenAIImageBackend(openai_config(openai_server, quality="low", price_per_image=0.04))
    [res] = backend.generate([gen_req(0, size=(64, 48))])
    assert res.status == "ok", res.error
    assert res.image is not None and res.image.size == (64, 48)
    assert res.image.getpixel((5, 5)) == prompt_colour("a red bicycle number 0")
    assert res.model == "gpt-image-1" and backend.name == "openai"
    p = res.params
    assert (p["size"], p["quality"], p["n"], p["attempts"], p["cost_usd"]) == (
        "64x48",
        "low",
        1,
        1,
        0.04,
    )
    body = openai_server.requests[-1]
    assert (body["model"], body["prompt"], body["size"], body["n"]) == (
        "gpt-image-1",
        "a red bicycle number 0",
        "64x48",
        1,
    )
    assert body["quality"] == "low" and "response_format" not in body


def test_configured_size_and_revised_prompt(openai_server):
    openai_server.revise_prompts = True
    backend = OpenAIImageBackend(openai_config(openai_server, size="32x32"))
    [res] = backend.generate([gen_req(1, size=(64, 48))])
    assert res.status == "ok", res.error
    assert res.image.size == (32, 32) and res.params["size"] == "32x32"
    assert res.params["revised_prompt"] == "revised: a red bicycle number 1"


def test_edit_sends_png_and_mask_and_keeps_size(openai_server):
    backend = OpenAIImageBackend(openai_config(openai_server))
    req = edit_req(0, mask=True)
    [res] = backend.edit([req])
    assert res.status == "ok", res.error
    assert res.image.size == req.image.size and "resized_to_source" not in res.params
    files = openai_server.edit_files[-1]
    (name, data), (mname, mdata) = files["image"][0], files["mask"][0]
    assert (name, mname) == ("image.png", "mask.png")
    sent = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    assert np.array_equal(sent, np.asarray(req.image))  # the photo travelled losslessly
    alpha = np.asarray(Image.open(io.BytesIO(mdata)))[..., 3]
    assert alpha[20, 20] == 0 and alpha[60, 70] == 255  # transparent where we want the edit
    assert openai_server.requests[-1]["prompt"] == "add a small blue kite 0"
    out, src = np.asarray(res.image), np.asarray(req.image)
    assert np.array_equal(out[:5, :5], src[:5, :5])  # outside the fake's box: untouched
    assert not np.array_equal(out[28:36, 36:44], src[28:36, 36:44])  # the edit is there


def test_edit_output_resized_back_to_source(openai_server):
    openai_server.image_reply = lambda prompt, image, body: png_bytes(prompt, (128, 128))
    backend = OpenAIImageBackend(openai_config(openai_server))
    [res] = backend.edit([edit_req(2)])
    assert res.status == "ok", res.error
    assert res.image.size == (80, 64)
    assert res.params["resized_to_source"] is True and res.params["output_size"] == [128, 128]


def test_429_retry_after_then_success(openai_server):
    openai_server.script(Fault(status=429, retry_after_s=0.2), Fault(status=429, retry_after_s=0.1))
    cfg = openai_config(openai_server)
    [res] = OpenAIImageBackend(cfg).generate([gen_req()])
    assert res.status == "ok", res.error
    assert res.params["attempts"] == 3
    assert res.latency_s >= 0.3  # both Retry-After values were honoured
    assert limiter_stats(cfg.model_spec())["throttled"] == 2


def test_500_burst_retried_then_exhausted(openai_server):
    openai_server.script(Fault(status=500), Fault(status=503), Fault(status=502))
    backend = OpenAIImageBackend(openai_config(openai_server))
    [res] = backend.edit([edit_req()])
    assert res.status == "ok" and res.params["attempts"] == 4
    openai_server.script(*[Fault(status=500)] * 3)
    [res] = OpenAIImageBackend(openai_config(openai_server, max_retries=2)).generate([gen_req()])
    assert res.status == "error" and res.retryable and res.image is None
    assert res.params["attempts"] == 3 and "HTTP 500" in res.error


def test_dropped_connection_is_retried(openai_server):
    openai_server.script(Fault(drop=True))
    [res] = OpenAIImageBackend(openai_config(openai_server)).generate([gen_req()])
    assert res.status == "ok" and res.params["attempts"] == 2


def test_content_policy_refusal_is_terminal(openai_server):
    openai_server.script(
        Fault(status=400, code="moderation_blocked", message="Rejected by the safety system.")
    )
    [res] = OpenAIImageBackend(openai_config(openai_server)).edit([edit_req()])
    assert res.status == "error" and not res.retryable
    assert res.error.startswith("refused") and "moderation_blocked" in res.error
    assert "Rejected by the safety system" in res.error
    assert res.params["attempts"] == 1 and len(openai_server.requests) == 1


def test_other_4xx_is_terminal(openai_server):
    openai_server.script(Fault(status=404, message="model not found"))
    [res] = OpenAIImageBackend(openai_config(openai_server)).generate([gen_req()])
    assert res.status == "error" and not res.retryable and "HTTP 404" in res.error
    assert res.params["attempts"] == 1


def test_timeout_is_retryable_after_retries(openai_server):
    openai_server.script(Fault(delay_s=1.0), Fault(delay_s=1.0))
    cfg = openai_config(openai_server, timeout_s=0.25, max_retries=1)
    [res] = OpenAIImageBackend(cfg).generate([gen_req()])
    assert res.status == "error" and res.retryable
    assert "timeout" in res.error and res.params["attempts"] == 2


def test_key_never_leaks(openai_server, caplog):
    caplog.set_level(logging.DEBUG)
    openai_server.script(Fault(status=401))  # the fake echoes the key it got, like OpenAI
    cfg = openai_config(openai_server)
    backend = OpenAIImageBackend(cfg)
    [res] = backend.generate([gen_req()])
    assert openai_server.request_headers[-1]["authorization"] == f"Bearer {OPENAI_SENTINEL}"
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
    assert not any(OPENAI_SENTINEL in t or OPENAI_SENTINEL[3:12] in t for t in texts)


def test_missing_key_env_fails_at_construction(openai_server):
    """Every request would fail the same way: one ConfigurationError, not an error row per item."""
    cfg = OpenAIImagesConfig(base_url=openai_server.base_url, api_key_env="IMG_UNSET_KEY_ENV")
    with pytest.raises(ConfigurationError) as e:
        OpenAIImageBackend(cfg)
    assert str(e.value) == (
        "The openai image generator (model 'gpt-image-1') needs an API key in the environment "
        "variable IMG_UNSET_KEY_ENV, which is not set."
    )
    assert openai_server.requests == []
    keyless = OpenAIImagesConfig(base_url=openai_server.base_url, api_key_env=None)
    [res] = OpenAIImageBackend(keyless).generate([gen_req()])  # self-hosted: placeholder key
    assert res.status == "ok", res.error


@pytest.fixture
def real_api(monkeypatch):
    """base_url None means api.openai.com; should a check regress, its request goes to a dead
    loopback proxy instead of the internet."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    return dict(api_key_env="IMG_OPENAI_KEY", max_retries=0, timeout_s=2.0)


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"quality": "hd"}, "does not take quality 'hd' (it takes auto, high, low, medium)"),
        ({"size": "512x512"}, "does not take size '512x512' (it takes 1024x1024, 1024x1536,"),
        ({"model": "dall-e-3", "quality": "low"}, "does not take quality 'low'"),
        ({"model": "dall-e-2", "size": "1536x1024"}, "does not take size '1536x1024'"),
    ],
)
def test_settings_the_openai_api_refuses_fail_at_construction(real_api, settings, problem):
    with pytest.raises(ConfigurationError) as e:
        OpenAIImageBackend(OpenAIImagesConfig(**real_api, **settings))
    msg = str(e.value)
    assert problem in msg and msg.endswith(".") and msg.count(". ") == 0


def test_unchecked_where_another_server_decides(openai_server, monkeypatch):
    """An OpenAI-compatible server may take other sizes and qualities: nothing is refused."""
    cfg = openai_config(openai_server, quality="hd", size="40x30")
    [res] = OpenAIImageBackend(cfg).generate([gen_req()])
    assert res.status == "ok" and res.image.size == (40, 30)
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)  # the SDK's own default
    backend = OpenAIImageBackend(OpenAIImagesConfig(api_key_env="IMG_OPENAI_KEY", **FAST))
    [res] = backend.generate([gen_req(1, size=(48, 32))])
    assert res.status == "ok" and res.image.size == (48, 32)
    assert openai_server.requests[-1]["size"] == "48x32"


def test_t2i_size_the_model_cannot_make_fails_before_any_request(real_api):
    backend = OpenAIImageBackend(OpenAIImagesConfig(**real_api))  # gpt-image-1, size unset
    with pytest.raises(ConfigurationError) as e:
        backend.generate([gen_req(0, size=(512, 512))])
    assert str(e.value) == (
        "The openai image generator (model 'gpt-image-1') cannot make 512x512 images (it takes "
        "1024x1024, 1024x1536, 1536x1024, auto): set the generator's t2i_size or openai.size "
        "to one of them."
    )


def test_dall_e_3_only_generates(openai_server):
    gen = GeneratorConfig(name="d3", backend="openai", openai={"model": "dall-e-3"})
    assert gen.tasks() == {"t2i"}
    assert GeneratorConfig(name="g1", backend="openai").tasks() == {"edit", "t2i"}
    backend = OpenAIImageBackend(openai_config(openai_server, model="dall-e-3"))
    with pytest.raises(ConfigurationError, match="cannot edit images"):
        backend.edit([edit_req()])
    assert openai_server.requests == []


def test_concurrent_results_keep_input_order(openai_server):
    openai_server.latency_s = 0.05

    def slow_first(body):  # early items finish last
        n = int(re.search(r"number (\d+)", body.get("prompt", "")).group(1))
        return Fault(delay_s=0.03 * (8 - n))

    openai_server.fault_for = slow_first
    reqs = [gen_req(i, size=(16, 16)) for i in range(8)]
    out = OpenAIImageBackend(openai_config(openai_server, max_concurrency=4)).generate(reqs)
    assert [r.status for r in out] == ["ok"] * 8
    assert [r.image.getpixel((0, 0)) for r in out] == [prompt_colour(r.prompt) for r in reqs]
    assert 2 <= openai_server.peak_in_flight <= 4  # concurrent, but bounded by the limiter
    openai_server.fault_for = None
    edits = [edit_req(i) for i in range(3)]
    eout = OpenAIImageBackend(openai_config(openai_server)).edit(edits)
    assert [r.status for r in eout] == ["ok"] * 3
    assert [np.asarray(r.image)[0, 0].tolist() for r in eout] == [
        np.asarray(photo(i))[0, 0].tolist() for i in range(3)
    ]


def test_donor_photo_is_sent_as_second_image(openai_server):
    req = edit_req(3)
    req.donor = photo(9, (40, 40))
    [res] = OpenAIImageBackend(openai_config(openai_server)).edit([req])
    assert res.status == "ok", res.error
    assert res.params["donor"] is True
    [(_, first), (_, second)] = openai_server.edit_files[-1]["image"]
    assert Image.open(io.BytesIO(first)).size == (80, 64)
    assert Image.open(io.BytesIO(second)).size == (40, 40)
