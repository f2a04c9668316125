"""Responders (every model under evaluation) and chat backends: registry coverage, old names,
a plugin responder and a plugin chat backend end to end in a stage, per-item error isolation."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from forenset.backends.llm import registry as chat_registry
from forenset.backends.llm import reset_stage
from forenset.backends.llm.base import RawReply
from forenset.backends.llm.types import ModelSpec
from forenset.benchmarks.common import respond, responders, training
from forenset.benchmarks.common.answers import parse_answer
from forenset.benchmarks.evaluation.config import EvaluationConfig
from forenset.benchmarks.fakebench.config import FakeBenchConfig
from forenset.benchmarks.reward.config import RewardConfig
from forenset.config import validate_config
from forenset.images import decode_rgb
from tests.conftest import small_config_dict
from tests.helpers import rows, run_local

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def fresh():
    reset_stage("detections", 3)
    training._TRAINED.clear()
    yield


def config(tmp_path, detectors):
    return small_config_dict(
        tmp_path / "run",
        splits={
            "fractions": {"train": 0.5, "validation": 0.25, "test": 0.25},
            "holdout_families": ["faulty"],
        },
        evaluation={"enabled": True, "fakes": 4, "reals": 2, "detectors": detectors},
        generators=[
            {"name": "cv-a", "family": "classical"},
            {"name": "cv-faulty", "family": "faulty", "strength": 1.2},
        ],
    )


# -- registry coverage -------------------------------------------------------------------------


def _tests_text() -> str:
    text = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    return text + "\n".join(p.read_text() for p in (ROOT / "examples").glob("*.yaml"))


def test_every_responder_kind_is_exercised_and_documented():
    kinds = responders.kinds()
    assert set(responders.BUILTIN) <= set(kinds)
    text = _tests_text()
    docs = "\n".join(
        (ROOT / "docs" / f).read_text() for f in ("evaluation.md", "reward.md", "fakebench.md")
    )
    for k in responders.BUILTIN:
        assert f'"kind": "{k}"' in text or f"kind: {k}" in text, f"responder {k} untested"
        assert f"`{k}`" in docs, f"responder {k} undocumented"
    for old in responders.ALIASES:
        assert f"`{old}`" in docs


def test_every_chat_backend_is_exercised_and_documented():
    names = chat_registry.names()
    assert {"offline", "openai", "gemini"} <= set(names)
    text = _tests_text()
    docs = (ROOT / "docs" / "backends.md").read_text()
    for b in chat_registry.BUILTIN:
        assert f'"backend": "{b}"' in text or f"backend: {b}" in text, f"chat backend {b} untested"
        assert f"`{b}`" in docs, f"chat backend {b} undocumented"
        assert callable(getattr(chat_registry.backend_class(b), "complete", None))


# -- config: one union, old names, one-sentence errors --------------------------------------------


def test_old_kind_names_read_as_the_canonical_ones():
    pool = {"pool": [{"backend": "offline", "model": "m"}]}
    ev = EvaluationConfig.model_validate(
        {"detectors": [{"name": "a", "kind": "offline"}, {"name": "b", "kind": "vlm", "llm": pool}]}
    )
    assert [d.kind for d in ev.detectors] == ["detector", "llm"]
    assert [d.kind for d in EvaluationConfig().detectors] == ["detector"]  # the default
    fb = FakeBenchConfig.model_validate(
        {"models": [{"name": "c", "kind": "constant", "belief": "real"},
                    {"name": "d", "kind": "constant"}, {"name": "e", "llm": pool}]}
    )  # fmt: skip
    assert [(m.kind, getattr(m, "answer", None)) for m in fb.models] == [
        ("constant", "real"), ("constant", "fake"), ("llm", None)
    ]  # fmt: skip
    rw = RewardConfig.model_validate(
        {"policies": [{"name": "p"}, {"name": "q", "kind": "constant"}]}
    )
    assert [(p.kind, getattr(p, "answer", None)) for p in rw.policies] == [
        ("detector", None), ("constant", "real")
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("model", "entry", "says"),
    [
        (EvaluationConfig, {"detectors": [{"name": "x", "kind": "oracle"}]}, "unknown responder kind 'oracle' (known: detector, llm, file"),
        (EvaluationConfig, {"detectors": [{"name": "x", "kind": "constant"}]}, "kind 'constant' does not answer evaluation questions"),
        (RewardConfig, {"policies": [{"name": "x", "kind": "official", "answers": "a"}, {"name": "y"}]}, "does not answer reward questions"),
        (EvaluationConfig, {"detectors": [{"name": "x", "kind": "file"}]}, "x (file): path: Field required"),
        (FakeBenchConfig, {"models": [{"name": "x"}]}, "x (llm): llm: Field required"),
    ],
)  # fmt: skip
def test_bad_responders_are_one_sentence(model, entry, says):
    with pytest.raises(ValidationError) as e:
        model.model_validate(entry)
    assert says in str(e.value)


def test_an_unknown_chat_backend_lists_the_known_ones():
    with pytest.raises(ValidationError) as e:
        ModelSpec(backend="nope", model="m")
    assert "unknown chat backend 'nope' (known: offline, openai, gemini)" in str(e.value)


# -- a plugin responder through a fake entry point --------------------------------------------

PLUGIN = '''
from typing import Literal

import numpy as np

from forenset.benchmarks.common.respond import Answer, Responder
from forenset.benchmarks.common.responders import ResponderConfig
from forenset.images import decode_rgb


class BrightnessConfig(ResponderConfig):
    kind: Literal["brightness"] = "brightness"
    threshold: float = 0.5


class Brightness(Responder):
    """Calls an image fake when its mean brightness is over the threshold."""

    kind = "brightness"
    Config = BrightnessConfig

    def answer_one(self, stage, cfg, q):
        img = decode_rgb(stage.ctx.store.get_blob(q.item["blob"]))
        mean = float(np.asarray(img, dtype=float).mean() / 255)
        verdict = "fake" if mean > cfg.threshold else "real"
        reply = f"<reasoning>mean brightness {mean:.4f}</reasoning><answer>{verdict}</answer>"
        return Answer(reply=reply, trace={"backend": "plugin", "model": "brightness"})
'''


@pytest.fixture
def plugin_responder(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "fs_responder_demo").mkdir(parents=True)
    (site / "fs_responder_demo" / "__init__.py").write_text(PLUGIN)
    dist = site / "fs_responder_demo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fs-responder-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[forenset.responders]\nbrightness = fs_responder_demo:Brightness\n"
    )
    monkeypatch.syspath_prepend(str(site))
    yield "brightness"
    sys.modules.pop("fs_responder_demo", None)


def test_a_plugin_responder_answers_in_the_detections_stage(plugin_responder, tmp_path):
    assert "brightness" in responders.kinds()
    d = config(tmp_path, [{"name": "bright", "kind": "brightness", "threshold": 0.45}])
    store, stats, _ = run_local(validate_config(d))
    assert not stats["detections"].failures
    got = rows(store, "detections")
    ev = [r for r in rows(store, "eval_sets") if r["status"] == "ok"]
    assert ev and len(got) == 2 * len(ev) and all(r["status"] == "ok" for r in got)
    blobs = {e["eval_item_id"]: e["blob"] for e in ev}
    for r in got:  # the answer is what the plugin computed from this item's image
        img = decode_rgb(store.get_blob(blobs[r["eval_item_id"]]))
        mean = float(np.asarray(img, dtype=float).mean() / 255)
        assert r["answer"] == ("fake" if mean > 0.45 else "real")
        assert r["explanation"] == f"mean brightness {mean:.4f}"
        assert (r["backend"], r["model"]) == ("plugin", "brightness")


# -- per-item error isolation ------------------------------------------------------------------


class Flaky(respond.Responder):
    """Answers real, except for items whose sample id is in ``fail``: it raises there."""

    kind = "flaky"

    class Config(responders.ResponderConfig):
        kind: str = "flaky"
        fail: list[str] = []

    def answer_one(self, stage, cfg, q):
        if q.item["sample_id"] in cfg.fail:
            raise ValueError(f"cannot read {q.item['sample_id']}")
        return respond.Answer(reply="<reasoning>r</reasoning><answer>real</answer>")


@pytest.fixture
def flaky():
    responders.register(Flaky)
    yield
    responders.unregister("flaky")


def test_a_failing_item_is_an_error_row_and_the_shard_goes_on(flaky, tmp_path):
    d = config(tmp_path, [{"name": "forensic", "kind": "detector"}])
    store, _, _ = run_local(validate_config(d))
    bad = sorted(r["sample_id"] for r in rows(store, "eval_sets") if r["status"] == "ok")[0]
    d = config(tmp_path, [{"name": "fl", "kind": "flaky", "fail": [bad]}])
    store, stats, _ = run_local(validate_config(d))
    got = [r for r in rows(store, "detections") if r["detector"] == "fl"]
    errors = [r for r in got if r["status"] == "error"]
    assert errors and {r["sample_id"] for r in errors} == {bad}
    assert all(r["error"].startswith(f"ValueError: cannot read {bad}") for r in errors)
    assert all(r["retryable"] for r in errors)
    ok = [r for r in got if r["status"] == "ok"]
    assert ok and all(r["answer"] == "real" for r in ok) and bad not in {r["sample_id"] for r in ok}


def test_guarded_keeps_configuration_errors_fatal_and_others_as_answers():
    from forenset.errors import ConfigurationError
    from forenset.tasks.base import StageRowError

    a = respond.guarded(lambda: (_ for _ in ()).throw(StageRowError("explained", retryable=False)))
    assert (a.ok, a.error, a.retryable) == (False, "explained", False)
    b = respond.guarded(lambda: 1 / 0)  # type: ignore[arg-type, return-value]
    assert not b.ok and b.error.startswith("ZeroDivisionError") and b.retryable
    assert b.error_fields() == {"status": "error", "error": b.error, "retryable": True}
    with pytest.raises(ConfigurationError):
        respond.guarded(lambda: (_ for _ in ()).throw(ConfigurationError("bad config")))


# -- a plugin chat backend ---------------------------------------------------------------------


class EchoChat:
    """Answers fake when the prompt asks for simple language, else real."""

    name = "echo"

    async def complete(self, spec, req, extra):
        verdict = "fake" if "jargon-free" in req.user else "real"
        return RawReply(text=f"<reasoning>echo {spec.model}</reasoning><answer>{verdict}</answer>")


@pytest.fixture
def echo_backend():
    chat_registry.register("echo", EchoChat)
    yield
    chat_registry.unregister("echo")


def test_a_plugin_chat_backend_serves_an_llm_responder(echo_backend, tmp_path):
    pool = {"pool": [{"backend": "echo", "model": "e1"}]}
    d = config(tmp_path, [{"name": "echoer", "kind": "llm", "llm": pool}])
    store, stats, _ = run_local(validate_config(d))
    got = rows(store, "detections")
    assert got and all(r["status"] == "ok" for r in got)
    assert {(r["track"], r["answer"]) for r in got} == {("complex", "real"), ("simple", "fake")}
    assert {r["backend"] for r in got} == {"echo"} and {r["model"] for r in got} == {"e1"}
    assert all(r["explanation"] == parse_answer(r["reply"]).reasoning == "echo e1" for r in got)
