"""The reward path against the loopback fake OpenAI and Gemini servers: text-to-image fakes
through the image API, an llm policy and an llm judge beside the offline ones."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from forenset.backends.llm import reset_stage
from forenset.config import validate_config
from forenset.testing._base import Fault
from forenset.text.templates import render
from tests.helpers import rows, run_local
from tests.reward.build import reward_config
from tests.stages.fixtures import *  # noqa: F403 - pytest fixtures (server, keys, fresh_guards)
from tests.stages.scripted import llm

POLICY_PROMPT = render("reward_policy", None)[1]
JUDGE_ASK = (
    "Between the two responses, the original prompt, and the image, which response is better?"
)


@pytest.fixture(autouse=True)
def fresh_reward_stages():
    for s in ("reward_responses", "reward_judgments"):
        reset_stage(s, 3)
    yield


class Scripted:
    """Policy replies with a verdict (the first one without), judge replies preferring the
    second response (the first one unparseable); anything else is an image request's text."""

    def __init__(self, module):
        self.m = module
        self.lock = threading.Lock()
        self.seen = Counter()

    def __call__(self, body):
        text = self.m.request_text(body)
        kind = "judge" if JUDGE_ASK in text else "policy" if POLICY_PROMPT in text else "image"
        with self.lock:
            self.seen[kind] += 1
            first = self.seen[kind] == 1
        if kind == "policy":
            assert len(self.m.request_images(body)) == 1
            if first:
                return "I would rather not say."
            return "Fake. The lower left corner shows smooth texture and soft edges, 2x blur."
        if kind == "judge":
            assert len(self.m.request_images(body)) == 1 and "First response:" in text
            return "Hmm, hard to say." if first else "Second. It names the region it relies on."
        return "here is the image"


def image_generator(backend, srv):
    key = "FAKE_OPENAI_KEY" if backend == "openai" else "FAKE_GEMINI_KEY"
    api = {"model": f"{backend}-image-fake", "base_url": srv.base_url, "api_key_env": key,
           "max_retries": 1, "backoff_base_s": 0.01}  # fmt: skip
    return {"name": f"{backend}-t2i", "backend": backend, "family": "api", "t2i_size": [64, 64],
            backend: api}  # fmt: skip


def test_llm_policy_and_judge_through_the_fake_servers(tmp_path, server):
    backend, srv, model = server
    srv.reply = Scripted(model.m)
    cfg = reward_config(
        tmp_path / "run",
        images=2,
        generators=[image_generator(backend, srv)],
        policies=[
            {"name": "vlm", "kind": "llm", "llm": llm(backend, srv)},
            {"name": "forensic-grounded"},
        ],
        judges=[{"name": "judge-llm", "kind": "llm", "llm": llm(backend, srv)}, {"name": "rules"}],
    )
    store, stats, _ = run_local(validate_config(cfg))
    for s in ("reward_images", "reward_responses", "reward_judgments", "reward_scores"):
        assert stats[s].failed == 0, s
    imgs = rows(store, "reward_images")
    assert len(imgs) == 4 and {r["backend"] for r in imgs if r["label"] == "fake"} == {backend}
    resp = [r for r in rows(store, "reward_responses") if r["policy"] == "vlm"]
    assert len(resp) == 4 and all(r["status"] == "ok" for r in resp)
    assert {r["backend"] for r in resp} == {backend} and {r["prompt_id"] for r in resp} == {
        "reward_policy@1"
    }
    unparsed = [r for r in resp if r["verdict"] is None]
    assert len(unparsed) == 1 and "'real' or 'fake'" in unparsed[0]["parse_error"]
    assert {r["verdict"] for r in resp if r["verdict"]} == {"fake"}
    trips = rows(store, "reward_triplets")
    assert len(trips) == 4  # two policies: one pair per image
    judged = [j for j in rows(store, "reward_judgments") if j["judge"] == "judge-llm"]
    assert len(judged) == 2 * len(trips) and all(j["status"] == "ok" for j in judged)
    assert sum(j["choice"] is None for j in judged) == 1
    for j in judged:
        if j["choice"] is not None:
            assert j["choice"] == "Second"
            assert j["choice_shown"] == ("First" if j["order"] == "swapped" else "Second")
    sc = {r["score_id"]: r for r in rows(store, "reward_scores")}
    bias = sc["position_bias/judge-llm/shown/judge-llm/position_bias"]
    assert bias["value"] == -0.5  # always "Second": the strongest position bias
    swap = sc["position_bias/judge-llm/shown/judge-llm/swap_consistency"]
    assert swap["value"] == 0.0  # it follows the position
    acc = sc["policy_accuracy/vlm/overall/-/accuracy"]
    assert acc["n"] == 4 and acc["value"] == pytest.approx(
        1 / 4 if unparsed[0]["label"] == "fake" else 2 / 4
    )
    assert "judge_accuracy/judge-llm/shown/simulated/acc4" in sc


def test_a_failed_judge_call_is_one_error_row(tmp_path, server):
    backend, srv, model = server
    srv.reply = scripted = Scripted(model.m)
    scripted.seen["judge"] = 1  # every judge reply parses here
    failed = []

    def fault_for(body):
        if JUDGE_ASK in model.m.request_text(body) and not failed:
            failed.append(body)
            return Fault(status=400, message="this request is malformed")
        return None

    srv.fault_for = fault_for
    cfg = reward_config(
        tmp_path / "run",
        images=1,
        generators=[image_generator(backend, srv)],
        policies=[
            {"name": "says-real", "kind": "constant", "answer": "real"},
            {"name": "says-fake", "kind": "constant", "answer": "fake"},
        ],
        judges=[{"name": "judge-llm", "kind": "llm", "llm": llm(backend, srv)}],
        swap=False,
    )
    store, stats, _ = run_local(validate_config(cfg))
    js = rows(store, "reward_judgments")
    assert len(js) == 2 and len(failed) == 1
    bad = [j for j in js if j["status"] == "error"]
    assert len(bad) == 1 and "400" in bad[0]["error"] and bad[0]["retryable"] is False
    assert bad[0]["choice"] is None and bad[0]["triplet_id"]
    assert [j["choice"] for j in js if j["status"] == "ok"] == ["Second"]
    sc = {r["score_id"]: r for r in rows(store, "reward_scores")}
    assert (
        stats["reward_scores"].failed == 0 and "judge_accuracy/judge-llm/shown/simulated/acc4" in sc
    )
