"""Replies sized to their prompt: each template's max_tokens, a stage override, and a cut reply
asked again once, told to be brief (against the loopback fake)."""

from __future__ import annotations

import json

import pytest
from llm_kit import openai_spec, req, settings

from forenset.backends.llm import ChatRequest, run_chat
from forenset.backends.llm.types import DEFAULT_MAX_TOKENS
from forenset.testing.fake_openai import last_user_text
from forenset.text.models import response_model_for
from forenset.text.templates import list_templates, load_template


def test_every_packaged_prompt_declares_a_reply_size():
    sizes = {t: load_template(t).max_tokens for t in list_templates()}
    assert all(isinstance(n, int) and 64 <= n <= 2048 for n in sizes.values()), sizes
    # a judgment is given less room than a caption, a caption less than a scenario list
    assert sizes["alignment_judge"] < sizes["caption"] < sizes["scenario_expansion"]


def test_a_template_request_carries_its_size_and_a_stage_setting_overrides_it(openai_server, stage):
    tpl = load_template("caption")
    model = response_model_for(tpl)
    r = ChatRequest.from_template(
        "caption", "img0", "caption", None, response_model=model, min_words=5, max_words=20
    )
    assert r.max_tokens == tpl.max_tokens
    spec = openai_spec(openai_server)
    run_chat([r], settings(spec), build_seed=1, stage=stage, cache=None)
    run_chat([r], settings(spec, max_tokens=77), build_seed=1, stage=stage + "o", cache=None)
    run_chat([req()], settings(spec), build_seed=1, stage=stage + "d", cache=None)
    sent = [b["max_tokens"] for b in openai_server.requests]
    assert sent == [tpl.max_tokens, 77, DEFAULT_MAX_TOKENS]


def rambler(body):
    """A model that fills its room unless told to be brief (as SmolLM2 does on JSON tasks)."""
    if "briefly" in last_user_text(body):
        return {"caption": "a red car", "objects": ["car"], "salience": 2}
    return {"caption": "a red car " * 200, "objects": ["car"], "salience": 2}


@pytest.mark.parametrize("growth", [1.0, 2.0])
def test_a_cut_reply_is_asked_again_once_told_to_be_brief(growth, stage):
    from forenset.testing.fake_openai import FakeOpenAI

    with FakeOpenAI(reply=rambler) as server:
        s = settings(openai_spec(server), max_tokens=60, length_growth=growth)
        [res] = run_chat([req()], s, build_seed=1, stage=stage, cache=None)
        assert res.ok and res.parsed.caption == "a red car"  # brevity, not room, fixed it
        first, again = server.requests
        assert (first["max_tokens"], again["max_tokens"]) == (60, int(60 * growth))
        note = last_user_text(again)
        assert "ran past 60 tokens" in note and "close the JSON object" in note
        assert "briefly" not in last_user_text(first)


def test_a_reply_cut_after_the_brief_retry_says_both(stage):
    from forenset.testing.fake_openai import FakeOpenAI

    long = json.dumps({"caption": "x" * 4000, "objects": ["a"], "salience": 2})
    with FakeOpenAI(reply=lambda body: long) as server:
        s = settings(openai_spec(server), max_tokens=30, regenerations=0)
        [res] = run_chat([req()], s, build_seed=1, stage=stage, cache=None)
        assert res.status == "error"
        assert "cut at max_tokens=60" in res.error and "asking for a brief reply" in res.error
