"""The public benchmarks' importers on tiny releases in each one's own layout
(tests/public/fixtures.py): records become items with their labels, references and task types;
bad records and hostile paths (absolute, '..', a symlink out) become error rows, and the import
goes on."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from forenset.benchmarks.public.formats import replies
from forenset.benchmarks.public.formats.importers import import_records
from tests.public import fixtures as fx


def by_id(rows):
    return {r["item_id"]: r for r in rows}


def test_fakeclue_records_labels_references_and_error_rows(tmp_path):
    root = fx.fakeclue(tmp_path)
    got = list(import_records("fakeclue", str(root)))
    ok = [r for r in got if r["status"] == "ok"]
    assert [(r["record_id"], r["label"], r["category"]) for r in ok] == [
        ("genimage/fake/a.png", "fake", "genimage"),
        ("genimage/real/b.png", "real", "genimage"),
    ]
    assert ok[0]["task"] == "judgement" and ok[0]["question"] == "Does the image looks real/fake?"
    assert ok[0]["reference"] == fx.FAKE_CLUE
    assert ok[0]["images"] == [str((root / "test/genimage/fake/a.png").resolve())]
    errors = [r["error"] for r in got if r["status"] == "error"]
    assert len(errors) == 5 and all(e for e in errors)
    assert "label 5 is neither 0 (fake) nor 1 (real)" in errors[0]
    assert "climbs out with '..'" in errors[1]
    assert "is an absolute path" in errors[2]
    assert "outside the listing's folder" in errors[3]  # the symlink out
    assert "no gpt turn" in errors[4]
    assert len(list(import_records("fakeclue", str(root), limit=1))) == 1


def test_loki_three_task_types_from_the_repository_layout(tmp_path):
    root = fx.loki(tmp_path)
    got = by_id(import_records("loki", str(root)))
    tf = got["loki/judgement/doc_tf_fake_0_0"]
    assert (tf["label"], tf["asks"], tf["category"], tf["answer"]) == (
        "real",
        "fake",
        "doc",
        "real",
    )
    assert tf["question"].endswith("answer no otherwise.)\nAnswer with yes or no.")
    assert "<image>" not in tf["question"]
    assert got["loki/judgement/doc_tf_fake_1_0"]["label"] == "fake"
    mc = got["loki/multiple_choice/mc_1"]
    assert (mc["answer"], mc["asks"], len(mc["images"])) == ("B", "fake", 2)
    assert mc["question"].endswith(
        "A. The first one.\nB. The second one.\nAnswer with the option letter."
    )
    ex = got["loki/explanation/a980c24e"]  # read from a UTF-16 file
    assert ex["reference"] == f"{fx.LOKI_GLOBAL}\n{fx.LOKI_REGION}"
    assert json.loads(ex["regions"]) == [{"region": [4.5, 2.0, 8.0, 6.0], "desc": fx.LOKI_REGION}]
    errors = {k: r["error"] for k, r in got.items() if r["status"] == "error"}
    assert "question_type says the image is fake" in errors["loki/judgement/bad_type"]
    assert "climbs out with '..'" in errors["loki/judgement/escape"]
    assert "outside the listing's folder" in errors["loki/judgement/symlink"]
    assert "modality 'video-text' is not supported" in errors["loki/judgement/video"]
    assert "not one of the option letters" in errors["loki/multiple_choice/mc_bad"]
    assert "not [x, y, w, h]" in errors["loki/explanation/no-box"]
    assert len(errors) == 6 and len(got) == 11
    only = list(import_records("loki", str(root), tasks=["multiple_choice"]))
    assert {r["task"] for r in only} == {"multiple_choice"} and len(only) == 3


@pytest.mark.parametrize("v2", [True, False])
def test_sofake_ood_parquet_labels_by_version(tmp_path, v2):
    root = fx.sofake(tmp_path, v2)
    got = by_id(import_records("sofake_ood", str(root)))
    kinds = {k.rsplit("/", 1)[1]: (r.get("label"), r.get("kind")) for k, r in got.items()}
    assert kinds["reddit_00001.jpg"] == ("real", "real")
    assert kinds["part1_00002_openai_tampered.png"] == ("fake", "tampered")
    assert kinds["image_00003_seedream.png"] == ("fake", "full_synthetic")
    assert "label 7 is not a class" in got["sofake_ood/judgement/bad_label.png"]["error"]
    gen = got["sofake_ood/judgement/part1_00002_openai_tampered.png"]["generator"]
    assert gen == ("openai" if v2 else None)
    assert isinstance(got["sofake_ood/judgement/reddit_00001.jpg"]["images"][0], bytes)
    if not v2:  # the v1.0 order assumed without class names, contradicted by the file name
        err = got["sofake_ood/judgement/07_sd_tampered.png"]["error"]
        assert "label 1 is real in the v1.0 class order" in err and "file name says tampered" in err


def test_aigi_holmes_test_folders(tmp_path):
    root = fx.aigi_holmes(tmp_path)
    got = by_id(import_records("aigi_holmes", str(root)))
    ok = {k: (r["label"], r["generator"]) for k, r in got.items() if r["status"] == "ok"}
    assert ok == {
        "aigi_holmes/judgement/FLUX/0_real/r.png": ("real", "FLUX"),
        "aigi_holmes/judgement/FLUX/1_fake/f.png": ("fake", "FLUX"),
        "aigi_holmes/judgement/VAR/1_fake/g.jpg": ("fake", "VAR"),
    }
    assert got["aigi_holmes/judgement/FLUX/1_fake/f.png"]["reference"] is None
    evil = got["aigi_holmes/judgement/VAR/1_fake/evil.png"]["error"]
    assert "outside the listing's folder" in evil


def test_aigi_holmes_jsonl_labels_references_and_error_rows(tmp_path):
    root = fx.aigi_holmes(tmp_path)
    got = by_id(import_records("aigi_holmes", str(root), annotations="dataset/test.jsonl"))
    ok = {
        k.removeprefix("aigi_holmes/judgement/"): r for k, r in got.items() if r["status"] == "ok"
    }
    assert {k: (r["label"], r["generator"]) for k, r in ok.items()} == {
        "TestSet/FLUX/1_fake/f.png": ("fake", "FLUX"),
        "dataset/0_real/p.png": ("real", None),
        "dataset/x/q.png": ("fake", None),  # from its mask
    }
    assert ok["TestSet/FLUX/1_fake/f.png"]["reference"] == fx.HOLMES_EXPLANATION
    assert ok["dataset/x/q.png"]["reference"] is None
    assert ok["dataset/0_real/p.png"]["question"] == "Is this image real or fake?"
    errors = {k.removeprefix("aigi_holmes/judgement/"): r["error"] for k, r in got.items()
              if r["status"] == "error"}  # fmt: skip
    assert "line 4 is not JSON" in errors["line-4"]
    assert "climbs out with '..'" in errors["../../etc/passwd"]
    assert "nor a mask field" in errors["dataset/x/none.png"]
    assert len(errors) == 3


def test_aigi_holmes_jsonl_conversation_forms(tmp_path):
    """ms-swift's other JSONL forms: conversations (user/assistant or human/gpt), query /
    response, and images as one string."""
    root = fx.aigi_holmes(tmp_path)
    got = list(import_records("aigi_holmes", str(root), annotations="dataset/forms.jsonl"))
    assert [r["status"] for r in got] == ["ok"] * 3
    assert [(r["label"], r["question"], r["reference"]) for r in got] == [
        ("fake", "Real or fake?", fx.HOLMES_EXPLANATION),
        ("real", "Sharegpt?", fx.HOLMES_REAL),
        ("fake", "Query?", fx.HOLMES_EXPLANATION),
    ]


def test_aigi_holmes_test_set_unzipped_into_its_own_folder(tmp_path):
    root = tmp_path / "AIGI-Holmes"
    fx.png(root / "TestSet" / "TestSet" / "VAR" / "0_real" / "r.png")
    got = list(import_records("aigi_holmes", str(root)))
    assert [(r["record_id"], r["label"], r["generator"]) for r in got] == [
        ("VAR/0_real/r.png", "real", "VAR")
    ]


def test_a_release_that_cannot_be_read_is_one_sentence(tmp_path):
    with pytest.raises(FileNotFoundError, match="no FakeClue annotation file under"):
        list(import_records("fakeclue", str(tmp_path)))
    (tmp_path / "data_json").mkdir()
    (tmp_path / "data_json" / "test.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="test.json is not JSON"):
        list(import_records("fakeclue", str(tmp_path)))


def test_reply_rules():
    assert replies.verdict("Yes.", "fake") == ("fake", None)
    assert replies.verdict("no, it was photographed", "fake") == ("real", None)
    assert replies.verdict("Yes", "real") == ("real", None)
    assert replies.verdict("This is a real image. Nothing looks fake.", None) == ("real", None)
    assert replies.verdict("<reasoning>x</reasoning><answer>fake</answer>", None) == ("fake", None)
    assert replies.verdict("I cannot tell.", None) == (None, replies.NO_VERDICT)
    assert replies.verdict("", None)[0] is None
    two = ["The first one.", "The second one."]
    assert replies.choice("B", two) == ("B", None)
    assert replies.choice("(A) because ... not (B)? Final: **B**", two)[0] == "B"
    assert replies.choice("It is the second one.", two) == ("B", None)
    assert replies.choice("neither", two) == (None, replies.NO_CHOICE)
    assert replies.explanation("<reasoning>fused fingers</reasoning><answer>fake</answer>") == (
        "fused fingers"
    )


LOKI_REPO = Path(os.environ.get("LOKI_REPO", "/work/.mirror/opendatalab+LOKI/repo"))


def _loki_file(name: str) -> bytes | None:
    """A file of the LOKI repository (a bare mirror: ``git show``), or None when not at hand."""
    if (LOKI_REPO / "data_json").is_dir():
        return (LOKI_REPO / name).read_bytes()
    try:
        return subprocess.run(["git", "-C", str(LOKI_REPO), "show", f"HEAD:{name}"],
                              capture_output=True, check=True, timeout=60).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None


def test_the_real_loki_annotation_files_import_without_an_error(tmp_path):
    """The repository's own image annotation files (media replaced by placeholders): every
    record is an item, the labels derived from question_type agree with every answer."""
    names = [f"data_json/image/{f}.json" for f in ("true_or_false", "multi_choice",
                                                   "open_ended_vqa")]  # fmt: skip
    got = {n: _loki_file(n) for n in names}
    if any(v is None for v in got.values()):
        pytest.skip(f"the LOKI repository is not at {LOKI_REPO} (set LOKI_REPO)")
    for name, data in got.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
        for r in json.loads(data.decode("utf-16" if data[:2] == b"\xff\xfe" else "utf-8")):
            for p in r["image_path"] if isinstance(r["image_path"], list) else [r["image_path"]]:
                (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / p).touch()
    rows = list(import_records("loki", str(tmp_path)))
    assert [r["error"] for r in rows if r["status"] == "error"] == []
    count = Counter(r["task"] for r in rows)
    assert count == {"judgement": 4434, "multiple_choice": 2634, "explanation": 229}
    labels = Counter(r["label"] for r in rows if r["task"] == "judgement")
    assert labels == {"fake": 2634, "real": 1800}
