"""Local OpenAI-compatible servers as they really answer (llama-cpp-python 0.3.36 measured):
the fake made to behave like one, checked against the real replies captured in
fixtures/llamacpp_replies.json, and the client's negotiation, content shape, max_tokens,
finish_reason, error classification, fail-fast and regeneration against it."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest
from llm_kit import gemini_spec, openai_spec, png, req, settings

from forenset.backends.llm import limiter_stats, run_chat
from forenset.backends.llm.types import SameFailure
from forenset.backends.retry import error_from_status, trim_server_error
from forenset.errors import ConfigurationError
from forenset.testing.fake_gemini import FakeGemini
from forenset.testing.fake_openai import FakeOpenAI, Fault

REAL = json.loads((Path(__file__).parent / "fixtures" / "llamacpp_replies.json").read_text())


@pytest.fixture
def llama():
    with FakeOpenAI.like_llamacpp() as server:
        yield server


def post(server: FakeOpenAI, body: dict) -> httpx.Response:
    return httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=10)


# -- the fake behaves like the real server ----------------------------------------------------


@pytest.mark.parametrize(
    "case", ["json_schema_rejected", "list_content_rejected", "json_object_schema_ok"]
)
def test_fake_answers_like_the_captured_real_server(llama, case):
    real = REAL[case]
    got = post(llama, {"model": "smollm2", **real["request"]})
    assert got.status_code == real["status"]
    if real["status"] != 200:
        assert got.json()["error"]["message"].split("File")[0].strip() == (
            real["body"]["error"]["message"].split("File")[0].strip()
        )
        assert got.json()["error"]["type"] == real["body"]["error"]["type"]
    else:
        schema = real["request"]["response_format"]["schema"]
        reply = json.loads(got.json()["choices"][0]["message"]["content"])
        assert set(reply) == set(json.loads(real["body"]["choices"][0]["message"]["content"]))
        assert reply["answer"] in schema["properties"]["answer"]["enum"]


def test_fake_cuts_at_max_tokens_and_echoes_the_model_name():
    real = REAL["finish_length"]
    with FakeOpenAI.like_llamacpp(reply=lambda body: "Once upon a time " * 20) as llama:
        got = post(llama, {"model": "any-name-at-all", **real["request"]}).json()
    assert got["choices"][0]["finish_reason"] == real["body"]["choices"][0]["finish_reason"]
    assert got["usage"]["completion_tokens"] <= real["request"]["max_tokens"]
    assert got["model"] == "any-name-at-all"


def test_fake_sends_no_rate_limit_headers_and_serves_one_at_a_time():
    with FakeOpenAI.like_llamacpp(latency_s=0.05, rate_limit_rps=1000) as server:
        server.script(Fault(status=429, retry_after_s=2))
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        first = post(server, body)
        assert first.status_code == 429
        assert not [k for k in first.headers if k.startswith(("retry-after", "x-ratelimit"))]
        threads = [threading.Thread(target=post, args=(server, body)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert server.peak_in_flight == 1


def test_the_default_fake_still_behaves_like_openai(openai_server):
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "X", "schema": {}}},
    }
    assert post(openai_server, body).status_code == 200


# -- errors read right -------------------------------------------------------------------------


def test_real_rejections_are_terminal_and_their_tracebacks_trimmed():
    for case in ("json_schema_rejected", "list_content_rejected"):
        err = error_from_status(500, REAL[case]["body"]["error"]["message"], None, {})
        assert not err.retryable and err.rejected, case
        assert "File" not in err.reason and "/site-packages/" not in err.reason
    schema = error_from_status(
        500, REAL["json_schema_rejected"]["body"]["error"]["message"], None, {}
    )
    assert "body.response_format.type: Input should be 'text' or 'json_object'" in schema.reason
    overloaded = error_from_status(500, "model overloaded, try again", None, {})
    assert overloaded.retryable and not overloaded.rejected


def test_trim_server_error_drops_frames_and_paths():
    msg = 'boom\nTraceback (most recent call last):\n  File "/home/u/app.py", line 3, in f\n'
    assert trim_server_error(msg) == "boom"
    assert trim_server_error("failed reading /home/alice/models/x.gguf now") == (
        "failed reading <path> now"
    )


# -- the client against it --------------------------------------------------------------------


def test_structured_output_is_negotiated_once_and_recorded(llama, stage):
    out = run_chat(
        [req(i) for i in range(5)],
        settings(openai_spec(llama)),
        build_seed=1,
        stage=stage,
        cache=None,
    )
    assert all(r.ok for r in out), [r.error for r in out]
    assert {r.output_mode for r in out} == {"json_object_schema"}
    kinds = [(b.get("response_format") or {}).get("type") for b in llama.requests]
    assert kinds == ["json_schema"] + ["json_object"] * 5  # one rejected request, then known
    assert all(isinstance(b["messages"][-1]["content"], str) for b in llama.requests)
    assert all(b["max_tokens"] == 1024 for b in llama.requests)  # the default room
    assert all("JSON schema" in b["messages"][0]["content"] for b in llama.requests[1:])


@pytest.mark.parametrize("mode", ["json_object", "prompt"])
def test_configured_mode_is_sent_as_is(openai_server, stage, mode):
    spec = openai_spec(openai_server, structured_output=mode)
    fence = '```json\n{"caption": "a cat", "objects": ["cat"], "salience": 2}\n```'
    openai_server.fault_for = lambda body: Fault(content=fence)
    [res] = run_chat([req()], settings(spec), build_seed=1, stage=stage, cache=None)
    assert res.ok and res.output_mode == mode
    [body] = openai_server.requests
    assert (body.get("response_format") or {}).get("type") == (
        "json_object" if mode == "json_object" else None
    )
    assert '"salience"' in body["messages"][0]["content"]  # the schema is in the prompt


def test_text_only_content_is_a_string_and_images_a_list(openai_server, stage):
    run_chat(
        [req(0), req(1, images=[png()])],
        settings(openai_spec(openai_server)),
        build_seed=1,
        stage=stage,
        cache=None,
    )
    shapes = sorted(type(b["messages"][-1]["content"]).__name__ for b in openai_server.requests)
    assert shapes == ["list", "str"]


def test_a_cut_reply_is_asked_again_with_more_room_once(openai_server, stage):
    long = json.dumps({"caption": "x" * 100, "objects": ["a"], "salience": 2})  # 38 tokens
    openai_server.fault_for = lambda body: Fault(content=long)
    s = settings(openai_spec(openai_server), max_tokens=20, length_growth=2.0)
    [res] = run_chat([req()], s, build_seed=1, stage=stage, cache=None)
    assert res.ok and [b["max_tokens"] for b in openai_server.requests] == [20, 40]


def test_a_reply_cut_twice_is_an_error_row_that_says_so(openai_server, stage):
    long = json.dumps({"caption": "x" * 400, "objects": ["a"], "salience": 2})
    openai_server.fault_for = lambda body: Fault(content=long)
    s = settings(openai_spec(openai_server), max_tokens=20, regenerations=0)
    [res] = run_chat([req()], s, build_seed=1, stage=stage, cache=None)
    assert res.status == "error" and not res.retryable
    assert "cut at max_tokens=40 (finish_reason length)" in res.error
    assert len(openai_server.requests) == 2


def test_a_rejected_request_is_not_retried(openai_server, stage):
    openai_server.script(Fault(status=500, message=FakeOpenAI.LLAMACPP_LIST_ERROR))
    [res, ok] = run_chat(
        [req(0), req(1)],
        settings(openai_spec(openai_server, max_concurrency=1)),
        build_seed=1,
        stage=stage,
        cache=None,
    )
    assert res.status == "error" and not res.retryable and ok.ok
    assert "rejected the request" in res.error
    assert len(openai_server.requests) == 2  # no retry of the rejected one


def test_every_call_failing_alike_stops_the_build_with_one_sentence(llama, stage):
    s = settings(openai_spec(llama, max_concurrency=1))
    imgs = [req(i, images=[png()]) for i in range(12)]  # a text-only server: list content
    with pytest.raises(SameFailure) as info:
        run_chat(imgs, s, build_seed=1, stage=stage, cache=None)
    msg = str(info.value)
    assert isinstance(info.value, ConfigurationError)  # the scheduler stops with a non-zero exit
    assert msg.endswith(".") and msg.count(". ") == 0 and "can only concatenate" in msg
    assert "File" not in msg
    assert len(llama.requests) <= 3 + 3  # stopped after fail_fast_after, not 12 x retries


def test_a_small_stage_failing_alike_also_stops(openai_server, stage):
    openai_server.fault_for = lambda body: Fault(status=400, message="Unsupported parameter")
    with pytest.raises(SameFailure):
        run_chat(
            [req(0), req(1)],
            settings(openai_spec(openai_server)),
            build_seed=1,
            stage=stage,
            cache=None,
        )


def test_failures_after_a_success_do_not_stop_the_build(openai_server, stage):
    bad = Fault(status=400, message="Unsupported parameter")
    openai_server.script(Fault(), bad, bad, bad, bad)
    s = settings(openai_spec(openai_server, max_concurrency=1))
    out = run_chat([req(i) for i in range(5)], s, build_seed=1, stage=stage, cache=None)
    assert [r.status for r in out] == ["ok"] + ["error"] * 4


# -- no row lost to a transient refusal or truncation ------------------------------------------


def test_a_refusal_is_regenerated_on_the_same_model_and_recorded(openai_server, stage):
    openai_server.script(Fault(refusal="No."))
    s = settings(openai_spec(openai_server), regenerations=2)
    [res] = run_chat([req()], s, build_seed=1, stage=stage, cache=None)
    assert res.ok and res.regenerations == 1 and res.refused_by is None
    seeds = [b.get("seed") for b in openai_server.requests]
    assert len(seeds) == 2 and seeds[0] != seeds[1]  # a new seed: a new sample


def test_a_broken_reply_after_its_repair_is_regenerated(openai_server, stage):
    cut = '{"caption": "a dog", "objects": ["do'
    openai_server.script(Fault(content=cut), Fault(content=cut))
    [res] = run_chat(
        [req()], settings(openai_spec(openai_server)), build_seed=1, stage=stage, cache=None
    )
    assert res.ok and res.regenerations == 1 and res.attempts == 3


def test_regeneration_is_bounded(openai_server, stage):
    openai_server.fault_for = lambda body: Fault(refusal="No.")
    s = settings(openai_spec(openai_server), regenerations=2)
    [res] = run_chat([req()], s, build_seed=1, stage=stage, cache=None)
    assert res.status == "error" and "refused" in res.error and res.regenerations == 2
    assert len(openai_server.requests) == 3


# -- a serial server: detected, nothing queued, nothing piled up -------------------------------


def test_a_llamacpp_python_server_is_detected_as_serial_and_nothing_queues(stage):
    with FakeOpenAI.like_llamacpp(latency_s=0.05) as server:
        spec = openai_spec(server, structured_output="json_object_schema")  # 16 configured
        out = run_chat(
            [req(i) for i in range(8)], settings(spec), build_seed=1, stage=stage, cache=None
        )
        assert all(r.ok for r in out), [r.error for r in out]
        assert limiter_stats(spec)["concurrency_limit"] == 1
        assert server.queued == 0 and server.abandoned == 0 and server.skipped == 0
        assert server.counts["/openapi.json"] == 1  # asked once per model, not per item


def test_without_detection_a_serial_server_queues_what_is_sent(stage):
    """The control of the test above: the same requests queue at the server."""
    with FakeOpenAI.like_llamacpp(latency_s=0.05) as server:
        spec = openai_spec(server, structured_output="json_object_schema", detect_slots=False)
        run_chat([req(i) for i in range(8)], settings(spec), build_seed=1, stage=stage, cache=None)
        assert server.queued > 0 and "/openapi.json" not in server.counts


def test_llama_server_slots_cap_the_concurrency(stage):
    with FakeOpenAI(latency_s=0.05, slots=2) as server:
        spec = openai_spec(server)
        out = run_chat(
            [req(i) for i in range(8)], settings(spec), build_seed=1, stage=stage, cache=None
        )
        assert all(r.ok for r in out)
        assert limiter_stats(spec)["concurrency_limit"] == 2 and server.peak_in_flight <= 2


def test_a_server_that_says_nothing_keeps_the_configured_concurrency(openai_server, stage):
    spec = openai_spec(openai_server, max_concurrency=6)
    run_chat([req(i) for i in range(3)], settings(spec), build_seed=1, stage=stage, cache=None)
    assert limiter_stats(spec)["concurrency_limit"] == 6
    assert openai_server.counts["/props"] == 1 and openai_server.counts["/openapi.json"] == 1


def test_a_timed_out_request_leaves_no_work_queued_behind_it(stage):
    """A stalled generation outlives its client's timeout (llama-cpp-python finishes it): the
    timed-out item waits for the server to be idle before its slot goes to the next request,
    so exactly one generation is abandoned and nothing queues behind it."""
    with FakeOpenAI.like_llamacpp() as server:
        server.script(Fault(delay_s=2.5))  # the first generation stalls past the timeout
        spec = openai_spec(server, structured_output="json_object_schema", timeout_s=1.0)
        out = run_chat(
            [req(i) for i in range(3)], settings(spec), build_seed=1, stage=stage, cache=None
        )
        assert all(r.ok for r in out), [r.error for r in out]
        assert sum(r.attempts for r in out) == 4  # one timeout, retried once
        assert server.abandoned == 1 and server.queued == 0 and server.skipped == 0


def test_without_the_wait_requests_queue_behind_abandoned_work(stage):
    """The control: the same stall with detection off (concurrency 1 configured)."""
    with FakeOpenAI.like_llamacpp() as server:
        server.script(Fault(delay_s=2.5))
        spec = openai_spec(server, structured_output="json_object_schema", timeout_s=1.0,
                           detect_slots=False, max_concurrency=1)  # fmt: skip
        run_chat([req(i) for i in range(3)], settings(spec), build_seed=1, stage=stage, cache=None)
        assert server.abandoned == 1 and server.queued >= 1


# -- the Gemini fake's real-server knobs ------------------------------------------------------


def gpost(server: FakeGemini, model: str, body: dict) -> httpx.Response:
    url = f"{server.base_url}/v1beta/models/{model}:generateContent"
    return httpx.post(url, json=body, timeout=10)


def gbody(text: str = "hi", **cfg) -> dict:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}], "generationConfig": cfg}


def test_gemini_fake_cuts_at_max_output_tokens_and_echoes_the_model_name():
    with FakeGemini(reply=lambda body: "Once upon a time " * 20) as server:
        got = gpost(server, "any-name-at-all", gbody(maxOutputTokens=8)).json()
        whole = gpost(server, "m", gbody()).json()
    cand = got["candidates"][0]
    assert cand["finishReason"] == "MAX_TOKENS" and got["modelVersion"] == "any-name-at-all"
    assert got["usageMetadata"]["candidatesTokenCount"] <= 8
    assert whole["candidates"][0]["finishReason"] == "STOP"


def test_gemini_like_local_rejects_what_a_local_server_cannot_do():
    image = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
    with FakeGemini.like_local(rate_limit_rps=1000) as server:
        schema = gpost(server, "m", gbody(responseJsonSchema={"type": "object"}))
        with_image = gpost(server, "m", {"contents": [{"parts": [{"text": "x"}, image]}]})
        server.script(Fault(status=429, retry_after_s=2))
        throttled = gpost(server, "m", gbody())
        ok = gpost(server, "m", gbody())
    assert schema.status_code == 500 and "not supported" in schema.json()["error"]["message"]
    assert with_image.status_code == 500 and "inlineData" in with_image.json()["error"]["message"]
    assert throttled.status_code == 429 and throttled.json()["error"]["details"] == []
    assert not [k for k in throttled.headers if k.startswith(("retry-after", "x-ratelimit"))]
    assert ok.status_code == 200


def test_gemini_like_local_serves_one_at_a_time():
    with FakeGemini.like_local(latency_s=0.05) as server:
        threads = [threading.Thread(target=gpost, args=(server, "m", gbody())) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert server.peak_in_flight == 1 and server.queued >= 1


def test_gemini_client_asks_a_cut_reply_again_with_more_room(gemini_server, stage):
    long = json.dumps({"caption": "x" * 100, "objects": ["a"], "salience": 2})  # 38 tokens
    gemini_server.fault_for = lambda body: Fault(content=long)
    s = settings(gemini_spec(gemini_server), max_tokens=20, length_growth=2.0)
    [res] = run_chat([req()], s, build_seed=1, stage=stage, cache=None)
    sent = [b["generationConfig"]["maxOutputTokens"] for b in gemini_server.requests]
    assert res.ok and sent == [20, 40]


def test_gemini_client_stops_when_a_local_server_rejects_every_request(stage):
    with FakeGemini.like_local() as server:
        s = settings(gemini_spec(server, max_concurrency=1))
        with pytest.raises(SameFailure) as info:
            run_chat([req(i) for i in range(12)], s, build_seed=1, stage=stage, cache=None)
        assert "not supported" in str(info.value) and "rejected the request" in str(info.value)
        assert len(server.requests) <= 3 + 3  # no retries of a rejected form


def test_gemini_client_retries_a_429_without_retry_after(stage):
    with FakeGemini.like_local(json_schema=True) as server:
        server.script(Fault(status=429, message="quota"))
        [res] = run_chat(
            [req()], settings(gemini_spec(server)), build_seed=1, stage=stage, cache=None
        )
        assert res.ok and res.attempts == 2
