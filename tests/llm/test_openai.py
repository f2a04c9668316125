"""The OpenAI backend through the real SDK against the loopback fake."""

from __future__ import annotations

import json

from llm_kit import Caption, openai_spec, png, req, settings

from forenset.backends.llm import limiter_stats, run_chat
from forenset.testing.fake_openai import Fault, request_images


def test_structured_output_with_images(openai_server, stage):
    images = [png((10, 20, 30)), png((40, 50, 60))]
    spec = openai_spec(openai_server, price_in_per_mtok=1.0, price_out_per_mtok=2.0)
    [res] = run_chat([req(images=images)], settings(spec), build_seed=1, stage=stage, cache=None)
    assert res.status == "ok", res.error
    assert isinstance(res.parsed, Caption)
    assert "Caption image number 0" in res.parsed.caption  # computed from the request
    body = openai_server.requests[-1]
    assert request_images(body) == images
    assert body["response_format"]["json_schema"]["schema"]["title"] == "Caption"
    assert body["messages"][0] == {"role": "system", "content": "Describe factually."}
    assert res.input_tokens > 170 and res.output_tokens > 0
    want = (res.input_tokens * 1.0 + res.output_tokens * 2.0) / 1e6
    assert abs(res.cost_usd - want) < 1e-12
    assert (res.backend, res.model, res.attempts, res.cached) == ("openai", "gpt-fake", 1, False)


def test_results_keep_input_order(openai_server, stage):
    reqs = [req(i) for i in range(12)]
    out = run_chat(
        reqs, settings(openai_spec(openai_server)), build_seed=1, stage=stage, cache=None
    )
    assert [r.item_id for r in out] == [r.item_id for r in reqs]
    assert all(f"number {i} " in r.parsed.caption for i, r in enumerate(out))


def test_429_retry_after_then_success(openai_server, stage):
    openai_server.script(Fault(status=429, retry_after_s=0.2), Fault(status=429, retry_after_s=0.1))
    spec = openai_spec(openai_server)
    [res] = run_chat([req()], settings(spec), build_seed=1, stage=stage, cache=None)
    assert res.status == "ok" and res.attempts == 3
    assert res.latency_s >= 0.3  # honoured both Retry-After values
    assert limiter_stats(spec)["throttled"] == 2


def test_500_timeout_and_dropped_connection_are_retried(openai_server, stage):
    openai_server.script(Fault(status=500), Fault(delay_s=1.0), Fault(drop=True))
    spec = openai_spec(openai_server, timeout_s=0.3)
    [res] = run_chat([req()], settings(spec), build_seed=1, stage=stage, cache=None)
    assert res.status == "ok" and res.attempts == 4


def test_retries_exhausted_is_a_retryable_error_row(openai_server, stage):
    openai_server.script(*[Fault(status=503)] * 3)
    spec = openai_spec(openai_server)
    [res] = run_chat([req()], settings(spec, max_retries=2), build_seed=1, stage=stage, cache=None)
    assert res.status == "error" and res.retryable and "503" in res.error
    assert res.attempts == 3


def test_malformed_json_gets_one_repair_turn(openai_server, stage):
    openai_server.script(Fault(content='{"caption": "a cat", "objects": [], "salience": 9'))
    [res] = run_chat(
        [req()], settings(openai_spec(openai_server)), build_seed=1, stage=stage, cache=None
    )
    assert res.status == "ok" and res.attempts == 2
    repair = openai_server.requests[-1]["messages"]
    assert repair[-2]["role"] == "assistant" and repair[-2]["content"].startswith('{"caption"')
    assert repair[-1]["role"] == "user" and "not valid JSON" in repair[-1]["content"]


def test_schema_failure_shows_validation_error_then_gives_up(openai_server, stage):
    bad = json.dumps({"caption": "x", "objects": [], "salience": 9})
    openai_server.script(Fault(content=bad), Fault(content=bad))
    [res] = run_chat(
        [req()],
        settings(openai_spec(openai_server), regenerations=0),
        build_seed=1,
        stage=stage,
        cache=None,
    )
    assert res.status == "error" and not res.retryable and res.attempts == 2
    assert "salience" in res.error and "objects" in res.error
    assert "salience" in openai_server.requests[-1]["messages"][-1]["content"]


def test_json_in_code_fences_is_accepted(openai_server, stage):
    fenced = '```json\n{"caption": "a dog", "objects": ["dog"], "salience": 3}\n```'
    openai_server.script(Fault(content=fenced))
    [res] = run_chat(
        [req()], settings(openai_spec(openai_server)), build_seed=1, stage=stage, cache=None
    )
    assert res.status == "ok" and res.attempts == 1 and res.parsed.objects == ["dog"]


def test_refusals_are_terminal(openai_server, stage):
    openai_server.script(
        Fault(refusal="I can't help with that."),
        Fault(status=400, code="content_policy_violation", message="blocked by content policy"),
    )
    out = run_chat(
        [req(0), req(1)],
        settings(openai_spec(openai_server, max_concurrency=1), regenerations=0),
        build_seed=1,
        stage=stage,
        cache=None,
    )
    assert [r.status for r in out] == ["error", "error"]
    assert not any(r.retryable for r in out)
    assert "refused: I can't help" in out[0].error
    assert "content policy" in out[1].error
    assert all(r.attempts == 1 for r in out)


def test_plain_text_without_schema(openai_server, stage):
    [res] = run_chat(
        [req(response_model=None, images=[png()])],
        settings(openai_spec(openai_server)),
        build_seed=1,
        stage=stage,
        cache=None,
    )
    assert res.status == "ok" and res.parsed is None
    assert res.text == "echo: Caption image number 0 please [1 images]"


def test_ratelimit_headers_update_the_shared_limiter(openai_server, stage):
    headers = {
        "x-ratelimit-limit-requests": "1200",
        "x-ratelimit-remaining-requests": "1199",
        "x-ratelimit-reset-requests": "50ms",
    }
    openai_server.script(Fault(headers=headers))
    spec = openai_spec(openai_server)
    assert limiter_stats(spec)["rpm"] is None
    run_chat([req()], settings(spec), build_seed=1, stage=stage, cache=None)
    stats = limiter_stats(spec)
    assert stats["rpm"] == 1200 and stats["header_updates"] == 1


def test_garbled_response_body_is_retried(openai_server, stage):
    openai_server.fault_for = lambda body: (
        Fault(raw_body=b"<html>proxy error</html>") if "number 0 " in json.dumps(body) else None
    )
    s = settings(openai_spec(openai_server, max_concurrency=1), max_retries=1)
    out = run_chat([req(0), req(1)], s, build_seed=1, stage=stage, cache=None)
    assert out[0].status == "error" and out[0].retryable and out[0].attempts == 2
    assert "malformed response body" in out[0].error
    assert out[1].status == "ok" and out[1].attempts == 1
