"""scenarios + prompts (SafeIMG path): offline counts and spread, dedupe, the LLM variant."""

from __future__ import annotations

from collections import Counter

import yaml

from forenset.config import DEFAULT_CONFIG, validate_config
from forenset.flows.local import run_local
from forenset.text.safety_prompts import jaccard, normalized_tokens
from forenset.text.taxonomy import load_taxonomy
from tests.conftest import small_config_dict
from tests.helpers import rows
from tests.stages.fixtures import *  # noqa: F403 - pytest fixtures (see fixtures.py)
from tests.stages.scripted import ScriptedSafetyModel, llm

CATEGORIES = [c.id for c in load_taxonomy()]


def safety_only(tmp_path, **over):
    """No photos: only the taxonomy-driven stages have work."""
    base = {"sources": {"samples": "none"}}
    return validate_config(small_config_dict(tmp_path / "run", **{**base, **over}))


def test_demo_builds_120_prompts_over_all_categories(tmp_path):
    demo = yaml.safe_load(DEFAULT_CONFIG.read_text())
    over = {k: demo[k] for k in ("seed", "scenarios", "prompts") if k in demo}
    store, stats, executed = run_local(safety_only(tmp_path, **over))
    assert executed["scenarios"] == 12 and executed["prompts"] == 12
    scen = rows(store, "scenarios")
    prompts = rows(store, "prompts")
    assert all(r["status"] == "ok" and r["backend"] == "offline" for r in prompts)
    assert len(prompts) >= 120
    per = Counter(r["category"] for r in prompts)
    assert set(per) == set(CATEGORIES) and min(per.values()) >= 8, per
    assert Counter(r["category"] for r in scen) == Counter(
        {c: demo["scenarios"]["per_category"] for c in CATEGORIES}
    )
    # Each prompt traces to its scenario, and the prompt uses every 5W+1H field's content.
    by_id = {r["scenario_id"]: r for r in scen}
    for p in prompts:
        s = by_id[p["scenario_id"]]
        assert (p["category"], p["media_form"], p["content"]) == (
            s["category"],
            s["media_form"],
            s["content"],
        )
        assert all(p[k] for k in ("who", "what", "when", "where", "why", "how"))
    # No near-duplicates survive inside a category.
    for c in CATEGORIES:
        toks = [normalized_tokens(p["prompt"]) for p in prompts if p["category"] == c]
        assert all(
            jaccard(a, b) < demo["prompts"]["dedupe_threshold"]
            for i, a in enumerate(toks)
            for b in toks[i + 1 :]
        )
    # Deterministic: a second build in a new directory gives the same rows.
    store2, _, _ = run_local(safety_only(tmp_path / "again", **over))
    assert [r["prompt"] for r in rows(store2, "prompts")] == [r["prompt"] for r in prompts]


def test_dedupe_threshold_and_category_subset(tmp_path):
    loose = safety_only(
        tmp_path / "a",
        scenarios={"per_category": 6, "categories": ["P1", "I2"]},
        prompts={"dedupe_threshold": 0.99},
    )
    strict = safety_only(
        tmp_path / "b",
        scenarios={"per_category": 6, "categories": ["P1", "I2"]},
        prompts={"dedupe_threshold": 0.15},
    )
    a = rows(run_local(loose)[0], "prompts")
    b = rows(run_local(strict)[0], "prompts")
    assert {r["category"] for r in a} == {"P1", "I2"}
    assert len(a) == 12 and len(b) < len(a)
    assert {r["prompt_uid"] for r in b} <= {r["prompt_uid"] for r in a}  # keep-first
    off = safety_only(tmp_path / "c", scenarios={"enabled": False})
    _, _, executed = run_local(off)
    assert executed["scenarios"] == 0 and executed["prompts"] == 0


def test_llm_scenarios_and_prompts(tmp_path, server):
    backend, srv, _ = server
    model = ScriptedSafetyModel(srv.reply.m, bad_media_once=True)
    srv.reply = model
    cfg = safety_only(
        tmp_path,
        scenarios={"per_category": 3, "categories": ["P1"], "llm": llm(backend, srv)},
        prompts={"llm": llm(backend, srv)},
    )
    store, stats, _ = run_local(cfg)
    assert not any(st.failures for st in stats.values())
    scen = rows(store, "scenarios")
    assert len(scen) == 3 and all(r["source"] == "llm" and r["backend"] == backend for r in scen)
    assert model.calls["scenarios"] == 2  # the unknown media form was sent back once
    assert all(r["prompt_id"] == "scenario_expansion@1" for r in scen)
    prompts = rows(store, "prompts")
    assert prompts and all(r["status"] == "ok" and r["source"] == "llm" for r in prompts)
    assert all(r["prompt_id"] == "prompt_5w1h@1" and len(r["prompt_hash"]) == 64 for r in prompts)
    # The scripted prompts share all but content and media: dedupe keeps fewer than built.
    assert model.calls["prompts"] == 3 and 1 <= len(prompts) < 3
