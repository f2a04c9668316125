"""Reply parsers, the rubric judge, the simulated annotator rule, round-robin pairing, fake storage."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from forenset.benchmarks.reward.scorers.replies import parse_judge, parse_policy
from forenset.benchmarks.reward.scorers.rubric import (
    RuleJudge,
    quality,
    rubric_score,
    simulate_annotator,
)
from forenset.benchmarks.reward.stages.reward_triplets import round_robin

GROUNDED = (
    "Fake. The lower left region (x 0.10-0.35, y 0.60-0.90) shows noise residual energy 3.1 "
    "sigma below the rest of the image and a smooth texture with soft edges, which inpainting "
    "leaves behind, so the image is judged manipulated."
)
SHALLOW = "Real. Looks fine."
CONTRADICTS = (
    "Fake. The lighting and the shadows in the left corner are consistent, the texture and "
    "noise look like a camera's, so the image is real."
)


def test_policy_parser_reads_the_one_word_verdict_first():
    assert parse_policy("**Fake**. The hands have six fingers.") == (
        "fake", "The hands have six fingers.", None,
    )  # fmt: skip
    assert parse_policy("real\n\nA normal street.").verdict == "real"
    bad = parse_policy("The image is fake.")
    assert bad.verdict is None and "'The'" in bad.reason and "'real' or 'fake'" in bad.reason
    assert parse_policy("").verdict is None and parse_policy(None).reason


def test_judge_parser_reads_the_four_choices():
    assert parse_judge("First. It names the artifact.") == ("First", "It names the artifact.", None)
    assert parse_judge("**Second**: better").choice == "Second"
    assert parse_judge("tie - both fine").choice == "Tie"
    for both in ("BothBad: neither", "Both Bad. neither", "both-bad", "Both_bad"):
        assert parse_judge(both).choice == "BothBad", both
    bad = parse_judge("I prefer the first one.")
    assert bad.choice is None and "First, Second, Tie or BothBad" in bad.reason
    assert parse_judge("Firstly, ...").choice is None  # a word that merely starts alike
    assert parse_judge("First response is better: it names the artifact.").choice == "First"
    assert parse_judge("Second\nThe first response misses the hands.").choice == "Second"


@pytest.mark.parametrize(
    "reply,why",
    [
        ("First response: Real. The light is natural. Second response: fake BothBad", "heading"),
        ("First response: Real.\nSecond response: Fake.", "heading"),
        ("First.\nSecond.\nActually both are weak.", "more than one verdict (First, Second)"),
        ("Tie - but really BothBad", "more than one verdict (BothBad, Tie)"),
        ("Second the motion", "heading"),
    ],
)
def test_judge_parser_accepts_only_an_unambiguous_choice(reply, why):
    got = parse_judge(reply)
    assert got.choice is None and why in got.reason and got.reason.endswith("."), got.reason


def test_a_real_small_model_judge_reply_is_a_parse_error():
    """SmolLM2-135M's reply to a judge prompt (tests/llm/fixtures/llamacpp_replies.json)."""
    path = Path(__file__).parents[1] / "llm" / "fixtures" / "llamacpp_replies.json"
    real = json.loads(path.read_text())["judge_reply"]["body"]["choices"][0]["message"]
    got = parse_judge(real["content"])
    assert got.choice is None and "'The second" in got.reason


def test_rubric_orders_grounded_over_shallow_and_punishes_contradiction():
    g, s, c = rubric_score(GROUNDED), rubric_score(SHALLOW), rubric_score(CONTRADICTS)
    assert g > c and g > s
    assert rubric_score("No verdict here, just words about noise.") == 0.0
    assert rubric_score(CONTRADICTS.replace("so the image is real", "so it is fake")) > c
    judge = RuleJudge()
    assert judge.judge(GROUNDED, SHALLOW)[0] == "First"
    assert judge.judge(SHALLOW, GROUNDED)[0] == "Second"
    assert judge.judge(GROUNDED, GROUNDED)[0] == "Tie"
    assert judge.judge(SHALLOW, "Real. Fine.")[0] == "BothBad"
    assert "vs" in judge.judge(GROUNDED, SHALLOW)[1]


def test_simulated_annotator_follows_the_noisy_rule():
    assert quality(GROUNDED, "fake") > quality(GROUNDED, "real")
    quiet = [
        simulate_annotator(GROUNDED, SHALLOW, "fake", np.random.default_rng(i), 0.0, 0.0)
        for i in range(20)
    ]
    assert {c for c, _ in quiet} == {"First"} and all(t > 10 for _, t in quiet)
    noisy = [
        simulate_annotator(GROUNDED, SHALLOW, "fake", np.random.default_rng(i), 1.0, 1.0)
        for i in range(200)
    ]
    assert set(Counter(c for c, _ in noisy)) == {"First", "Second", "Tie", "BothBad"}
    assert all(3 <= t <= 10 for _, t in noisy)  # rushed: all under the 15 s floor


def test_round_robin_balances_pairs_and_policies():
    answered = {f"img{i}": ["a", "b", "c", "d"] for i in range(8)}
    pairs = round_robin(answered, 3, seed=1)
    assert len(pairs) == 24
    assert set(Counter(p for _, p in pairs).values()) == {4}  # 6 pairs x 4: every pair meets
    assert set(Counter(x for _, p in pairs for x in p).values()) == {12}
    for img in answered:  # no pair twice on one image
        mine = [p for i, p in pairs if i == img]
        assert len(mine) == len(set(mine)) == 3
    assert pairs == round_robin(dict(reversed(answered.items())), 3, seed=1)
    # a policy that answered only some images is paired wherever it can be
    partial = {**answered, "img0": ["a", "b", "c", "d", "h"], "img1": ["a", "b", "c", "d", "h"]}
    got = round_robin(partial, 3, seed=1)
    assert sum("h" in p for _, p in got) == 6
    assert round_robin({"x": ["a", "b"]}, 3, seed=0) == [("x", ("a", "b"))]


def test_templates_carry_the_papers_prompts():
    from forenset.text.templates import render

    system, user, pid, _ = render("reward_policy")
    assert system == "" and pid == "reward_policy@1"
    assert user == (
        "Is the following image real or fake in terms of AI generation? Give a single-word "
        "answer ('real' or 'fake') to start your response. Then, provide a more detailed "
        "explanation."
    )
    _, judge, _, _ = render("reward_judge", prompt="<p>", first="<a>", second="<b>")
    assert judge.index("<p>") < judge.index("<a>") < judge.index("<b>")
    flat = " ".join(judge.split())
    assert (
        "Between the two responses, the original prompt, and the image, which response is better?"
        in flat
    )
    assert all(c in flat for c in ("First (", "Second (", "Tie (", "BothBad ("))


def test_the_reward_example_is_the_demo_with_reward_on():
    from pathlib import Path

    import yaml

    from forenset.config import load_config

    root = Path(__file__).resolve().parents[2]
    cfg = load_config(str(root / "examples" / "reward.yaml"))
    r = cfg.reward
    assert r.enabled and r.swap and r.triplets_per_image == 3 and r.labels.path is None
    assert all(g.tasks() == {"t2i"} and g.diffusers.tiny for g in r.generators)  # offline
    assert {p.kind for p in r.policies} == {"detector", "constant"}
    assert [j.kind for j in r.judges] == ["rules"]
    demo = yaml.safe_load((root / "forenset" / "data" / "demo.yaml").read_text())
    example = yaml.safe_load((root / "examples" / "reward.yaml").read_text())
    # the demo's build, plus the fetched real photos when present and one text-to-image generator
    # whose renders train the forensic policies (examples/reward.yaml says why)
    sources = dict(example["sources"])
    assert sources.pop("csv_if_present") == ["data/real-photos/photos.csv"]
    assert sources == demo["sources"]
    gens = example["generators"]
    assert gens[: len(demo["generators"])] == demo["generators"]
    assert [g["name"] for g in gens[len(demo["generators"]) :]] == ["flux-tiny-train"]
    assert gens[-1]["diffusers"]["tiny"] is True  # offline
    same = ("reward", "run_dir", "sources", "generators")
    assert {k: v for k, v in example.items() if k not in same} == {
        k: v for k, v in demo.items() if k not in same
    }


def test_fakes_store_the_backends_png_when_no_crop_or_resize_is_needed(tmp_path, monkeypatch):
    """A square text-to-image result at image_size keeps the backend's PNG (encoded off the
    critical path); a result that square() crops or scales is encoded by the stage."""
    import io

    from PIL import Image

    import forenset.benchmarks.reward.stages.reward_images as ri
    from forenset.config import validate_config
    from forenset.store.run_store import RunStore
    from forenset.tasks.base import StageContext
    from tests.reward.build import reward_config

    encoded: list[tuple[int, int]] = []
    real_encode = ri.encode_png

    def counting(img):
        encoded.append(img.size)
        return real_encode(img)

    monkeypatch.setattr(ri, "encode_png", counting)
    group = [(0, {"image_id": "a", "caption": "a red car"}), (2, {"image_id": "b", "caption": "x"})]
    sizes = {}
    for image_size in (64, 32):
        cfg = validate_config(reward_config(tmp_path / f"run{image_size}", image_size=image_size))
        stage = ri.RewardImages(StageContext(RunStore(str(cfg.run_dir)), cfg))
        encoded.clear()
        rows = stage.fakes(stage.generator("sd-a"), group)
        assert [r["status"] for r in rows] == ["ok", "ok"]
        sizes[image_size] = list(encoded)
        for r in rows:
            img = Image.open(io.BytesIO(stage.ctx.store.get_blob(r["blob"])))
            assert img.size == (image_size, image_size) == (r["width"], r["height"])
    assert sizes == {64: [], 32: [(32, 32), (32, 32)]}
