"""The public family end to end: the four releases (tests/public/fixtures.py) imported by a
build, answered by offline responders (a constant and a file of written replies), scored per
benchmark and task type with n and intervals; every number below is counted by hand from the
fixtures."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from forenset.benchmarks.common.scoring.pivot import wide_rows
from forenset.config import validate_config
from tests.conftest import small_config_dict
from tests.helpers import rows, run_local
from tests.public import fixtures as fx

GROUP = ("answerer", "benchmark", "task", "group_kind", "group")


def _replies(path, tmp_path):
    lines = [
        ("loki/judgement/doc_tf_fake_0_0", "No", ""),  # asks "AI-generated?": no -> real, right
        ("loki/judgement/doc_tf_fake_1_0", "fake", ""),  # right
        ("loki/multiple_choice/mc_0", "B", ""),  # gold A: wrong
        ("loki/multiple_choice/mc_1", "(B)", ""),  # right
        ("loki/explanation/a980c24e", "fake", f"{fx.LOKI_GLOBAL}\n{fx.LOKI_REGION}"),  # verbatim
        ("fakeclue/judgement/genimage/fake/a.png", "real", fx.FAKE_CLUE),  # wrong, verbatim clue
        # fakeclue b.png: no line (an error row; scored wrong and as an empty explanation)
        ("sofake_ood/judgement/reddit_00001.jpg", "real", ""),  # right
        ("sofake_ood/judgement/part1_00002_openai_tampered.png", "fake", ""),  # right
        ("sofake_ood/judgement/image_00003_seedream.png", "real", ""),  # wrong
        ("aigi_holmes/judgement/TestSet/FLUX/1_fake/f.png", "fake", fx.HOLMES_EXPLANATION),
    ]
    text = "\n".join(  # the predictions reader needs an explanation on every line
        json.dumps({"sample_id": s, "answer": a, "explanation": e or "not given"})
        for s, a, e in lines
    )
    path.write_text(text + "\nnot a record\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("public")
    public = {
        "enabled": True,
        "benchmarks": [
            {"name": "fakeclue", "path": str(fx.fakeclue(tmp))},
            {"name": "loki", "path": str(fx.loki(tmp))},
            {"name": "sofake_ood", "path": str(fx.sofake(tmp))},
            {"name": "aigi_holmes", "path": str(fx.aigi_holmes(tmp)),
             "annotations": "dataset/test.jsonl"},
        ],
        "models": [
            {"name": "always-fake", "kind": "constant", "answer": "fake"},
            {"name": "written", "kind": "file", "path": _replies(tmp / "replies.jsonl", tmp)},
        ],
        "intervals": {"resamples": 200},
    }  # fmt: skip
    run = tmp / "run"
    cfg = validate_config(
        small_config_dict(
            run, evaluation={"enabled": False}, fakebench={"enabled": False}, public=public
        )
    )
    store, _, _ = run_local(cfg)
    _, _, again = run_local(cfg)  # resume: every shard is committed, nothing runs again
    assert not any(again[s] for s in ("public_items", "public_answers", "public_scores"))
    return run, store


def scores(store):
    ok = [r for r in rows(store, "public_scores") if r["status"] == "ok"]
    return wide_rows(ok, GROUP)


def test_items_are_imported_with_error_rows(built):
    _, store = built
    items = rows(store, "public_items")
    ok = [r for r in items if r["status"] == "ok"]
    bad = {r["item_id"]: r["error"] for r in items if r["status"] == "error"}
    per = {b: sum(r["benchmark"] == b for r in ok) for b in ("fakeclue", "loki", "sofake_ood",
                                                               "aigi_holmes")}  # fmt: skip
    assert per == {"fakeclue": 2, "loki": 5, "sofake_ood": 3, "aigi_holmes": 3}
    assert "image not stored" in bad["sofake_ood/judgement/not_an_image.png"]
    assert len(bad) == 5 + 6 + 2 + 3
    mc = next(r for r in ok if r["item_id"] == "loki/multiple_choice/mc_0")
    assert mc["n_images"] == 2 and mc["blobs"][0] != mc["blobs"][1]
    same = {r["blobs"][0] for r in ok if r["item_id"].startswith("loki/judgement/doc_tf_fake_1")}
    assert same <= set(mc["blobs"])  # one image, one blob across tasks


def test_constant_floor_scored_by_hand(built):
    _, store = built
    s = scores(store)
    tf = s["always-fake/loki/judgement/all=all"]
    assert (tf["accuracy"], tf["n"]) == (0.5, 2)  # the real image is called fake
    assert tf["f1"] == pytest.approx(2 / 3)  # tp 1, fp 1, fn 0
    assert (tf["real_accuracy"], tf["fake_accuracy"]) == (0.0, 1.0)
    assert tf["accuracy_ci_low"] <= 0.5 <= tf["accuracy_ci_high"]
    assert "below the minimum" in tf["accuracy_caveat"]
    assert s["always-fake/loki/multiple_choice/all=all"]["mc_accuracy"] == 0.5  # always A
    so = s["always-fake/sofake_ood/judgement/all=all"]
    assert (so["accuracy"], so["f1"]) == (pytest.approx(2 / 3), pytest.approx(0.8))
    assert s["always-fake/sofake_ood/judgement/kind=tampered"]["accuracy"] == 1.0
    real = s["always-fake/loki/judgement/label=real"]  # one class by design: no F1
    assert (real["accuracy"], real["accuracy_caveat"]) == (
        0.0,
        "n = 1 is below the minimum of 10 items",
    )
    assert "f1" not in real and "fake_accuracy" not in real
    assert s["always-fake/fakeclue/judgement/all=all"]["accuracy"] == 0.5
    ex = s["always-fake/loki/explanation/all=all"]
    assert ex["similarity"] is None and "public.similarity_model" in ex["similarity_reason"]
    assert ex["bertscore_f1"] is None and "public.bertscore_model" in ex["bertscore_f1_reason"]
    assert 0 <= ex["rouge_l"] < 0.2


def test_written_replies_scored_by_hand(built):
    _, store = built
    s = scores(store)
    tf = s["written/loki/judgement/all=all"]
    assert (tf["accuracy"], tf["f1"]) == (1.0, 1.0)
    assert s["written/loki/multiple_choice/all=all"]["mc_accuracy"] == 0.5
    ex = s["written/loki/explanation/all=all"]
    assert (ex["bleu1"], ex["rouge_l"], ex["n"]) == (pytest.approx(1.0), pytest.approx(1.0), 1)
    fc = s["written/fakeclue/judgement/all=all"]
    assert fc["accuracy"] == 0.0  # a wrong verdict and a missing reply
    fce = s["written/fakeclue/explanation/all=all"]
    assert (fce["rouge_l"], fce["n"]) == (pytest.approx(0.5), 2)  # verbatim 1, missing 0
    assert s["written/sofake_ood/judgement/all=all"]["accuracy"] == pytest.approx(2 / 3)
    assert s["written/sofake_ood/judgement/kind=full_synthetic"]["accuracy"] == 0.0
    ai = s["written/aigi_holmes/judgement/generator=FLUX"]
    assert (ai["accuracy"], ai["n"]) == (1.0, 1)
    assert s["written/aigi_holmes/judgement/all=all"]["accuracy"] == pytest.approx(1 / 3)
    aie = s["written/aigi_holmes/explanation/all=all"]  # f.png verbatim, p.png unanswered
    assert (aie["rouge_l"], aie["n"]) == (pytest.approx(0.5), 2)
    answers = {r["answer_id"]: r for r in rows(store, "public_answers")}
    missing = answers["written/fakeclue/judgement/genimage/real/b.png"]
    assert missing["status"] == "error" and "has no line for this item" in missing["error"]
    problems = [r for r in answers.values() if "/file-problem/" in r["answer_id"]]
    assert problems and all(r["status"] == "error" for r in problems)


def test_cli_prints_the_scores(built):
    from forenset.cli import app

    run, _ = built
    res = CliRunner().invoke(app, ["public", str(run)], terminal_width=250)
    assert res.exit_code == 0, res.output
    assert "judgement" in res.output and "multiple_choice" in res.output
    assert "public.similarity_model" in res.output


def test_cli_import_dry_run(tmp_path):
    from forenset.cli import app

    root = fx.loki(tmp_path)
    res = CliRunner().invoke(app, ["public-import", "loki", str(root)], terminal_width=250)
    assert res.exit_code == 0, res.output
    assert "multiple_choice" in res.output and "modality 'video-text'" in res.output
    res = CliRunner().invoke(app, ["public-import", "loki", str(tmp_path / "none")])
    assert res.exit_code == 2 and "no LOKI judgement file" in res.output


class CountingChat:
    """Replies from what it was sent: the number of images and the question's last line, so the
    test sees that a multiple choice carries both images and LOKI's instruction."""

    name = "public-count"
    calls: list[tuple[int, str]] = []

    async def complete(self, spec, req, extra):
        from forenset.backends.llm.base import RawReply

        last = req.user.strip().splitlines()[-1]
        CountingChat.calls.append((len(req.images), last))
        if last == "Answer with the option letter.":
            return RawReply(text="B" if len(req.images) == 2 else "I see one image.")
        if last == "Answer with yes or no.":
            return RawReply(text="Yes.")
        return RawReply(text=f"<reasoning>{fx.LOKI_GLOBAL}</reasoning><answer>fake</answer>")


def test_an_llm_model_sees_every_image_in_the_release_wording(tmp_path):
    from forenset.backends.llm import registry as chat_registry

    chat_registry.register("public-count", CountingChat)
    try:
        public = {
            "enabled": True,
            "benchmarks": [{"name": "loki", "path": str(fx.loki(tmp_path))}],
            "models": [{"name": "vlm", "llm": {"pool": [{"backend": "public-count",
                                                         "model": "c1"}]}}],
            "intervals": {"resamples": 50},
        }  # fmt: skip
        d = small_config_dict(tmp_path / "run", evaluation={"enabled": False},
                              fakebench={"enabled": False}, public=public)  # fmt: skip
        store, _, _ = run_local(validate_config(d))
    finally:
        chat_registry.unregister("public-count")
    assert sorted(CountingChat.calls) == [
        (1, "Answer with yes or no."),
        (1, "Answer with yes or no."),
        (
            1,
            "This is a fake image generated by an advanced AI model. Explain where it seems "
            "inauthentic.",
        ),
        (2, "Answer with the option letter."),
        (2, "Answer with the option letter."),
    ]
    s = scores(store)
    assert s["vlm/loki/multiple_choice/all=all"]["mc_accuracy"] == 0.5  # B, B against A, B
    assert s["vlm/loki/judgement/all=all"]["accuracy"] == 0.5  # "Yes." to "AI-generated?"
    ex = s["vlm/loki/explanation/all=all"]
    assert 0 < ex["rouge_l"] < 1  # the reasoning is the global half of the reference
    answers = {r["item_id"]: r for r in rows(store, "public_answers")}
    exp = answers["loki/explanation/a980c24e"]
    assert (exp["explanation"], exp["backend"], exp["model"]) == (
        fx.LOKI_GLOBAL,
        "public-count",
        "c1",
    )
