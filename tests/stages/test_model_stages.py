"""Model stages through run_local against the loopback OpenAI and Gemini fakes."""

from __future__ import annotations

import json
import shutil

import numpy as np
from PIL import Image

from forenset.backends.rule_judge import RULE_VERSION
from forenset.config import validate_config
from forenset.flows.local import run_local
from forenset.stages import stage_class
from forenset.tasks.base import StageContext
from forenset.testing._base import Fault
from forenset.text.templates import PROMPTS_DIR
from tests.conftest import small_config_dict
from tests.helpers import rows
from tests.stages.fixtures import *  # noqa: F403 - pytest fixtures (see fixtures.py)
from tests.stages.scripted import MODEL_STAGES, llm


def tiny_build(tmp_path, **over):
    """Two manifest photos and one plain photo without a caption, one clean generator."""
    folder = tmp_path / "photos"
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    img = np.full((64, 80, 3), 120, np.uint8)
    img[10:30, 12:40] = (200, 40, 40)
    img += rng.integers(0, 12, img.shape, dtype=np.uint8)
    Image.fromarray(img).save(folder / "plain.png")
    base = dict(
        sources={"samples": ["astronaut", "coffee"], "folders": [str(folder)], "max_side": 80},
        shard_size=4,
        generators=[{"name": "cv-a", "family": "classical"}],
        scenarios={"enabled": False},
    )
    return validate_config(small_config_dict(tmp_path / "run", **{**base, **over}))


def all_llm(backend, srv, **per_stage):
    cfg = {s: {"llm": llm(backend, srv)} for s in MODEL_STAGES}
    cfg["captions"]["keep_manifest"] = True
    for s, extra in per_stage.items():
        cfg[s] = {**cfg[s], **extra}
    return cfg


def test_every_model_stage_through_the_fake(tmp_path, server):
    backend, srv, model = server
    model.hallucinate_target_once = True  # each first instruction set names a missing entity
    model.hallucinate_difference = True  # and the VLM lists a change where nothing changed
    cfg = tiny_build(tmp_path, **all_llm(backend, srv))
    store, stats, _ = run_local(cfg)
    assert not any(st.failures for st in stats.values()), {
        k: v.failures for k, v in stats.items() if v.failures
    }
    label = f"{backend}/{backend}-fake"

    caps = rows(store, "captions")
    model_caps = [r for r in caps if r["caption_source"] == "model"]
    assert len(model_caps) == 1 and model_caps[0]["status"] == "ok"  # the folder photo
    assert {r["caption_source"] for r in caps} == {"manifest", "model"}
    mc = model_caps[0]
    assert (mc["backend"], mc["model"], mc["prompt_id"]) == (
        backend,
        f"{backend}-fake",
        "caption@1",
    )
    assert len(mc["prompt_hash"]) == 64 and mc["input_tokens"] > 0
    assert json.loads(mc["model_entities"]) == ["grey surface", "dark shapes", "pale line"]
    assert json.loads(mc["entities"])  # boxes from the pixel regions

    ins = rows(store, "instructions")
    ok = [r for r in ins if r["status"] == "ok"]
    bad = [r for r in ins if r["status"] == "error"]
    assert len(ok) == 4  # two photos x two edits, grounded on the manifest entity boxes
    assert all(r["attempts"] == 2 for r in ok)  # the hallucinated set was regenerated
    assert all(r["prompt_id"] == "edit_instructions@1" and r["backend"] == backend for r in ok)
    assert all(r["difficulty"] == 4 for r in ok)  # rated by instruction_difficulty
    # One edit_instructions + one instruction_difficulty call per photo: usage on the first row.
    assert all((r["input_tokens"] > 0) == (r["idx"] == 0) for r in ok)
    assert all(r["cached"] is False for r in ok)
    for r in ok:
        ent = r["target"].removeprefix("the ")
        assert r["bbox"] and r["bbox"] == r["change_bbox"]
        manifest = [e for c in caps for e in json.loads(c["entities"] or "[]")]
        assert r["bbox"] in [e["bbox"] for e in manifest if e["name"] == ent]
    recolor = [r for r in ok if r["kind"] == "recolor"]
    assert recolor and all(json.loads(r["params"])["colour"] == "blue" for r in recolor)
    assert len(bad) == 1 and "cannot be located" in bad[0]["error"]  # the plain photo
    assert bad[0]["attempts"] == cfg.instructions.max_attempts

    diffs = [r for r in rows(store, "diffs") if r["status"] == "ok"]
    assert len(diffs) == 4
    for r in diffs:
        g = json.loads(r["grounding"])
        assert g["extractor"] == label and r["prompt_id"] == "visual_differences@1"
        listed = json.loads(r["differences"])
        made_up = [d["id"] for d in listed if d["region"] == "the white vase"]
        real = [d["id"] for d in listed if d["region"] == "the edited object"]
        assert made_up and made_up[0] in g["hallucinated"]
        assert not set(real) & set(g["hallucinated"])
        assert r["psnr"] > 0 and 0 < r["changed_frac"] < 1

    judg = rows(store, "judgments")
    assert len(judg) == 4 and all(r["judge"] == label and r["status"] == "ok" for r in judg)
    assert all(r["verdict"] == "KEEP" and r["prompt_id"] == "alignment_judge@1" for r in judg)
    judge_bodies = [json.dumps(b) for b in srv.requests if "You audit image edits" in json.dumps(b)]
    assert judge_bodies and all("pixel_evidence" in b for b in judge_bodies)

    ex = rows(store, "explanations")
    assert {r["kind"] for r in ex} == {"complex", "simple", "authenticity"}
    plain = {r["sample_id"] for r in rows(store, "splits") if r["image_id"] == mc["image_id"]}
    for r in ex:
        if r["sample_id"] in plain:  # its model caption names none of its pixel regions
            assert r["status"] == "error" and "mentions no concrete entity" in r["error"]
        else:
            assert r["status"] == "ok" and r["backend"] == backend, r["error"]
            assert r["text"] and r["attempts"] == 1
    assert {r["prompt_id"] for r in ex} == {
        "explain_complex@1",
        "explain_simple@1",
        "explain_authenticity@1",
    }


def test_offline_defaults_label_rows(tmp_path):
    store, stats, _ = run_local(tiny_build(tmp_path))
    assert not any(st.failures for st in stats.values())
    for stage in ("instructions", "diffs", "judgments", "explanations"):
        got = rows(store, stage)
        assert got and {r["backend"] for r in got if r["status"] == "ok"} == {"offline"}
        assert all(r["prompt_id"] is None for r in got)
    assert {r["backend"] for r in rows(store, "captions")} == {"manifest", "offline"}


def test_malformed_reply_becomes_error_row_with_reason(tmp_path, server):
    backend, srv, model = server
    # Every judge reply contradicts itself (KEEP with a failure category): never repaired.
    srv.reply = lambda body: {
        "match_score": 0.9,
        "offtarget_penalty": 0.0,
        "final_score": 0.9,
        "verdict": "KEEP",
        "failure_category": "off_target",
        "rationale": "x",
    }
    cfg = tiny_build(
        tmp_path,
        sources={"samples": ["coffee"], "max_side": 64},
        judgments={"llm": llm(backend, srv), "max_attempts": 2},
    )
    store, stats, _ = run_local(cfg)
    judg = rows(store, "judgments")
    assert judg and all(r["status"] == "error" for r in judg)
    assert all("KEEP verdict with a failure category" in r["error"] for r in judg)
    assert all("after 2 attempts" in r["error"] for r in judg)
    assert len(srv.requests) == 2 * len(judg)  # the first reply and one regeneration each
    assert any("Your previous reply was rejected" in json.dumps(b) for b in srv.requests)


def test_error_rate_fails_the_shard_with_one_sentence(tmp_path, server):
    backend, srv, model = server
    srv.fault_for = lambda body: Fault(status=401, message="bad key")
    cfg = tiny_build(
        tmp_path,
        sources={"samples": ["coffee"], "folders": [], "max_side": 64},
        captions={"llm": llm(backend, srv, max_error_rate=0.5, error_window=1)},
    )
    cfg = cfg.model_copy(
        update={"captions": cfg.captions.model_copy(update={"keep_manifest": False})}
    )
    _, stats, _ = run_local(cfg)
    fails = stats["captions"].failures
    assert fails and "ErrorRateExceeded" in fails[0] and "captions" in fails[0]
    assert stats["instructions"].run == 0


def stage_configs(cfg, tmp_path):
    ctx = StageContext(store=None, config=cfg)  # stage_config needs no store
    return {n: stage_class(n)(ctx).stage_config() for n in MODEL_STAGES}


def test_template_change_changes_that_stage_only(tmp_path, server):
    backend, srv, model = server
    prompts = tmp_path / "prompts"
    shutil.copytree(PROMPTS_DIR, prompts)
    over = all_llm(backend, srv)
    for s in MODEL_STAGES:
        over[s]["prompts_dir"] = str(prompts)
    cfg = tiny_build(tmp_path, sources={"samples": ["coffee"], "max_side": 64}, **over)
    before = stage_configs(cfg, tmp_path)
    store, stats, _ = run_local(cfg)
    assert not any(st.failures for st in stats.values())

    path = prompts / "alignment_judge.yaml"
    path.write_text(path.read_text().replace("You audit image edits.", "You audit image edits!"))
    after = stage_configs(cfg, tmp_path)
    changed = {n for n in MODEL_STAGES if before[n] != after[n]}
    assert changed == {"judgments"}

    n_before = len(srv.requests)
    _, stats2, executed = run_local(cfg)
    assert not any(st.failures for st in stats2.values())
    for up in ("sources", "captions", "instructions", "candidates", "diffs"):
        assert executed[up] == 0, up
    assert executed["judgments"] > 0 and executed["verdicts"] > 0
    new = srv.requests[n_before:]
    assert new and all("You audit image edits!" in json.dumps(b) for b in new)
    new_hash = after["judgments"]["templates"]["alignment_judge"]
    assert new_hash != before["judgments"]["templates"]["alignment_judge"]
    assert {r["prompt_hash"] for r in rows(store, "judgments")} == {new_hash}
    # Operational knobs (rate limits, timeouts) are not in the fingerprint.
    faster = cfg.model_copy(deep=True)
    spec = faster.judgments.llm.pool[0].model_copy(update={"rpm": 999.0, "timeout_s": 1.0})
    faster.judgments.llm = faster.judgments.llm.model_copy(update={"pool": [spec]})
    assert stage_configs(faster, tmp_path)["judgments"] == after["judgments"]


def test_judge_panel_one_row_per_judge(tmp_path, server):
    backend, srv, model = server
    settings = llm(backend, srv)
    second = {**settings["pool"][0], "model": f"{backend}-fake-2", "weight": 3.0}
    settings["pool"].append(second)
    cfg = tiny_build(
        tmp_path,
        sources={"samples": ["coffee"], "max_side": 64},
        judgments={"llm": settings, "panel": True, "with_rule_judge": True},
    )
    store, stats, _ = run_local(cfg)
    assert not any(st.failures for st in stats.values())
    judg = rows(store, "judgments")
    per = {}
    for r in judg:
        per.setdefault(r["candidate_id"], set()).add(r["judge"])
    expected = {
        f"{backend}/{backend}-fake",
        f"{backend}/{backend}-fake-2",
        f"offline/{RULE_VERSION}",
    }
    assert per and all(js == expected for js in per.values()), per
    verdicts = rows(store, "verdicts")
    assert {r["n_judges"] for r in verdicts} == {3}


def test_caption_failing_validation_is_regenerated(tmp_path, server):
    backend, srv, model = server
    model.hedge_caption_once = True
    cfg = tiny_build(  # the plain folder photo only, captioned by the model
        tmp_path,
        sources={"samples": "none", "folders": [str(tmp_path / "photos")], "max_side": 64},
        captions={"llm": llm(backend, srv), "keep_manifest": False},
    )
    store, stats, _ = run_local(cfg)
    [cap] = rows(store, "captions")
    assert cap["status"] == "ok" and cap["caption_source"] == "model"
    assert "probably" not in cap["caption"]
    assert model.calls["caption"] == 2
    retry = [
        json.dumps(b) for b in srv.requests if "Your previous reply was rejected" in json.dumps(b)
    ]
    assert len(retry) == 1 and "probably" in retry[0]  # the reasons quote the hedge


def test_recomputed_stage_is_answered_from_the_run_cache(tmp_path, server):
    backend, srv, model = server
    cfg = tiny_build(
        tmp_path,
        sources={"samples": ["coffee"], "max_side": 64},
        judgments={"llm": llm(backend, srv)},
    )
    store, _, _ = run_local(cfg)
    first = rows(store, "judgments")
    n_calls = len(srv.requests)
    assert first and all(r["cached"] is False and r["cost_usd"] == 0.0 for r in first)
    shutil.rmtree(tmp_path / "run" / "stages" / "judgments")  # lose the stage's output
    store, _, executed = run_local(cfg)
    again = rows(store, "judgments")
    assert executed["judgments"] > 0 and len(srv.requests) == n_calls  # no new model call
    assert all(r["cached"] is True for r in again)
    strip = ("cached", "input_tokens", "output_tokens")
    assert [{k: v for k, v in r.items() if k not in strip} for r in again] == [
        {k: v for k, v in r.items() if k not in strip} for r in first
    ]


def test_authenticity_explanations_take_their_own_pool(tmp_path, server):
    """``explanations.authenticity_llm`` explains real photos; fakes keep ``llm`` (here unset:
    explained offline from measurements)."""
    backend, srv, _ = server
    auth = llm(backend, srv)
    auth["pool"][0]["model"] = f"{backend}-fake-auth"
    cfg = tiny_build(
        tmp_path,
        sources={"samples": ["astronaut", "coffee"], "max_side": 64},
        explanations={"authenticity_llm": auth},
    )
    store, stats, _ = run_local(cfg)
    assert not any(st.failures for st in stats.values())
    ex = [r for r in rows(store, "explanations") if r["status"] == "ok"]
    reals = [r for r in ex if r["kind"] == "authenticity"]
    fakes = [r for r in ex if r["kind"] != "authenticity"]
    assert reals and all(r["model"] == f"{backend}-fake-auth" for r in reals)
    assert fakes and all(r["backend"] == "offline" for r in fakes)


def test_a_refused_item_answered_by_another_pool_model_records_who_refused(tmp_path, server):
    """The refusal fallback is visible in the stage row: `model` answered, `refused_by` refused."""
    backend, srv, model = server
    sent = []

    def refuse_first(body):
        sent.append(body)
        return Fault(refusal="I can't help with that.") if len(sent) == 1 else None

    srv.fault_for = refuse_first
    pool = llm(backend, srv)
    pool["regenerations"] = 0  # no same-model re-ask: straight to the other pool model
    other = {**pool["pool"][0], "model": f"{backend}-fake-b"}
    pool["pool"].append(other)
    cfg = tiny_build(
        tmp_path,
        sources={"samples": ["coffee"], "folders": [], "max_side": 64},
        captions={"llm": pool},
    )
    cfg = cfg.model_copy(
        update={"captions": cfg.captions.model_copy(update={"keep_manifest": False})}
    )
    store, _, _ = run_local(cfg)
    (cap,) = rows(store, "captions")
    assert cap["status"] == "ok", cap["error"]
    labels = {f"{backend}/{backend}-fake", f"{backend}/{backend}-fake-b"}
    assert cap["refused_by"] in labels
    assert f"{backend}/{cap['model']}" == (labels - {cap["refused_by"]}).pop()


def test_judge_category_contradicting_the_pixels_is_recorded(tmp_path, server):
    """The scripted judge says KEEP for every candidate; a faulty generator that hands back the
    photo unchanged makes the pixels say edit_missing: each row keeps the model's category,
    records the pixels' one and is flagged ungrounded."""
    backend, srv, _ = server
    cfg = tiny_build(
        tmp_path,
        sources={"samples": ["coffee"], "max_side": 64},
        generators=[{"name": "lazy", "family": "faulty", "faults": {"missing": 1.0}}],
        judgments={"llm": llm(backend, srv)},
    )
    store, stats, _ = run_local(cfg)
    assert not any(st.failures for st in stats.values())
    judg = [r for r in rows(store, "judgments") if r["status"] == "ok"]
    assert judg
    for r in judg:
        assert r["failure_category"] == "none" and r["verdict"] == "KEEP"
        assert r["pixel_category"] == "edit_missing"
        assert r["category_grounded"] is False
        assert "[pixels: edit_missing" in r["rationale"]
        m = json.loads(r["measurements"])
        assert m["coverage"] == 0.0 and m["weak_coverage"] < 0.12
