"""SFT export as XPlainVerse App. 16 trains: the zero-shot prompts with their format
instruction verbatim, and the balanced 50 % training subset (--train-fraction)."""

from __future__ import annotations

import json
from collections import Counter

from typer.testing import CliRunner

from forenset.exports.api import run_export
from forenset.exports.cli import app
from forenset.exports.data import train_subset
from forenset.exports.settings import ExportSettings
from forenset.exports.sft import has_both_tracks

FORMAT = (
    "Respond in the following format:\n"
    "<reasoning>your reasoning here</reasoning>\n"
    "<answer>real or fake</answer>"
)
APP16 = {  # the paper's text, App. 16.0.0.2
    "complex": "Detect whether the image is real or fake and provide reasoning for it.\n" + FORMAT,
    "simple": (
        "Detect whether the image is real or fake and provide reasoning for it in simple, "
        "easy-to-understand, jargon-free language.\n" + FORMAT
    ),
}


def records(out, track):
    return [
        json.loads(x)
        for p in sorted((out / track).glob("*.jsonl"))
        for x in p.read_text().splitlines()
    ]


def test_prompts_are_app16_verbatim(built, samples, tmp_path):
    store, _ = built
    run_export(store, "sft", tmp_path / "sft", samples=samples)
    for track, prompt in APP16.items():
        recs = records(tmp_path / "sft", track)
        assert recs and all(r["prompt"] == prompt for r in recs)
        assert all(r["messages"][0]["content"] == "<image>" + prompt for r in recs)


def fake_samples():
    out = []
    for split, label, n in [("train", "real", 12), ("train", "fake", 40), ("test", "fake", 5)]:
        for i in range(n):
            out.append(
                {
                    "sample_id": f"{split}-{label}-{i}",
                    "split": split,
                    "label": label,
                    "ok": i % 10 != 3,  # some lack an explanation
                }
            )
    return out


def test_train_subset_is_half_the_training_split_half_real():
    s = fake_samples()
    got = train_subset(s, 0.5, seed=1)
    per = Counter((x["split"], x["label"]) for x in got)
    # 52 training samples -> 26 = 13 real + 13 fake; only 12 reals exist -> 12 + 12
    assert per == {("train", "real"): 12, ("train", "fake"): 12, ("test", "fake"): 5}
    assert train_subset(s, 0.5, seed=1) == got  # deterministic
    assert train_subset(s, 0.5, seed=2) != got  # another seed draws other fakes
    small = train_subset(s, 0.25, seed=1)
    assert Counter(x["label"] for x in small if x["split"] == "train") == {"real": 6, "fake": 6}
    only_ok = train_subset(s, 0.5, seed=1, eligible=lambda x: x["ok"])
    assert all(x["ok"] for x in only_ok if x["split"] == "train")
    assert Counter(x["label"] for x in only_ok if x["split"] == "train") == {"real": 11, "fake": 11}


def test_train_fraction_export_and_cli(built, samples, tmp_path):
    store, _ = built
    st = ExportSettings(train_fraction=0.5, seed=3)
    res = run_export(store, "sft", tmp_path / "sft", st, samples=samples)
    train = {t: [r for r in records(tmp_path / "sft", t) if r["split"] == "train"] for t in APP16}
    assert [r["id"] for r in train["complex"]] == [r["id"] for r in train["simple"]]
    lab = Counter(r["label"] for r in train["complex"])
    n_train = sum(s["split"] == "train" for s in samples)
    assert lab["real"] == lab["fake"] > 0 and 2 * lab["real"] <= round(n_train / 2) + 1
    eligible = [s for s in samples if s["split"] == "train" and has_both_tracks(s)]
    assert lab["real"] == min(
        round(n_train / 4), *(sum(s["label"] == x for s in eligible) for x in ("real", "fake"))
    )
    assert res["settings"]["train_fraction"] == 0.5
    runner = CliRunner()
    r = runner.invoke(
        app,
        ["export", store.uri, "-f", "sft", "--train-fraction", "0.5", "--out", str(tmp_path / "c")],
    )
    assert r.exit_code == 0, r.output
    assert (
        json.loads((tmp_path / "c" / "export.json").read_text())["settings"]["train_fraction"]
        == 0.5
    )
    r = runner.invoke(app, ["export", store.uri, "-f", "sft", "--train-fraction", "1.5"])
    assert r.exit_code != 0 and "--train-fraction must be in (0, 1]" in r.output
