"""FakeBench in its official release format, both ways: the export, the release's own scripts run
on it (when the fetched repository is at hand), the release read back as items, a model's
official answer files scored, and bad records as error rows. Fixtures are written here from
the public format (github.com/Yixuan423/FakeBench, Evaluation/*.json)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from forenset.benchmarks.fakebench import official as of
from forenset.benchmarks.fakebench.report import pivot_scores
from forenset.cli import app
from forenset.config import validate_config
from forenset.store.run_store import RunStore
from tests.conftest import small_config_dict
from tests.helpers import rows, run_local

REPO = Path(os.environ.get("FAKEBENCH_REPO", "/work/.mirror/Yixuan423+FakeBench/repo"))


def ok(store, stage):
    return [r for r in rows(store, stage) if r["status"] == "ok"]


def errors(store, stage):
    return [r for r in rows(store, stage) if r["status"] == "error"]


def fb_config(run, **fakebench):
    fbc = {"enabled": True, "split": "train", "fakes": 2, "reals": 2, "models": [], **fakebench}
    fbc["clue_modes"] = fbc.get("clue_modes", ["inference", "fault_finding"])
    return validate_config(small_config_dict(run, evaluation={"enabled": False}, fakebench=fbc))


# -- unit: the format's rules ---------------------------------------------------------------------
def test_questions_verdicts_and_ids_follow_the_release():
    assert of.qa_question("irreality") == (
        "How is the unrealistic aspect regarding the authenticity of this image?"
    )
    assert of.qa_question("light & shadow").startswith("How is the light & shadow regarding")
    assert of.question_dimension(
        "Are there any content deficiencies regarding the authenticity"
    ) == ("content deficiency")
    assert of.question_dimension("Is the theme unrealistic regarding the authenticity?") == (
        "irreality"
    )
    assert of.question_dimension("How is the light and shadow regarding …?") == "light & shadow"
    assert of.question_dimension("How realistic is the image regarding the authenticity?") == (
        "irreality"
    )
    assert of.question_dimension("How is the color regarding …?") == "overall tone"
    assert of.question_dimension("What content is deficient regarding …?") == "content deficiency"
    assert of.question_dimension("How is the weather?") is None
    for dim in of.fb.DIMENSIONS:  # the standard wording of every dimension reads back
        assert of.question_dimension(of.qa_question(dim)) == dim
    assert of.final_verdict("Real-looking sky, but the hands… Final judgement: fake.") == "fake"
    assert of.final_verdict("It is fake? No: the final judgement is real") == "real"
    assert of.final_verdict("I cannot tell.") is None
    items = [{"sample_id": "cv-a/coffee", "blob": "blobs/ab/x.png"},
             {"sample_id": "cv-a_coffee", "blob": "blobs/cd/y.jpg"},
             {"sample_id": "Glide-01370.jpg", "blob": "blobs/ef/z.jpg"}]  # fmt: skip
    assert of.image_ids(items) == {
        "Glide-01370.jpg": "Glide-01370.jpg",  # already a file name: kept
        "cv-a/coffee": "cv-a_coffee.png",
        "cv-a_coffee": "cv-a_coffee.jpg",
    }


def _img(path: Path, colour=(200, 30, 30)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (24, 24), colour).save(path)


def write_release(root: Path) -> None:
    """A small release in the public format, with golden answers filled (as the authors have
    them) for two fakes, one withheld, and bad records."""
    ev = root / "Evaluation"
    ev.mkdir(parents=True)
    for name in ("Glide-00001.jpg", "sd-00002.png", "sd-00003.png", "sd-00004.png"):
        _img(root / "FakeBench_images" / "fake_images" / name)
    _img(root / "FakeBench_images" / "real_images" / "000000000001.jpg", (20, 120, 20))
    fakeclass = [
        {"image_id": "Glide-00001.jpg", "question": of.Q_FAKE, "answer": "yes", "authenticity": 0},
        {"image_id": "sd-00002.png", "question": of.Q_WHAT, "answer": "fake", "authenticity": 0},
        {"image_id": "000000000001.jpg", "question": of.Q_REAL, "answer": "yes", "authenticity": 1},
        {"image_id": "sd-00003.png", "question": of.Q_REAL, "answer": "no", "authenticity": 0},
        {"image_id": "missing-00009.jpg", "question": of.Q_WHAT, "answer": "fake", "authenticity": 0},
        {"image_id": "sd-00002.png", "question": of.Q_WHAT, "answer": "fake", "authenticity": 0},
        {"image_id": "sd-00004.png", "question": "Is it AI?", "answer": "yes", "authenticity": 0},
        ["not", "an", "object"],
    ]  # fmt: skip
    (ev / "FakeClass.json").write_text(json.dumps(fakeclass, indent=4), encoding="utf-8")

    def clue(iid, gen, text):
        return {"image_caption": "Ä café.", "content_categories": "things",
                "telltale_clues": text, "telltale_categories": "edge, texture" if text else "",
                "image_id": iid, "generation_model": gen, "faultfinding_mode": of.FAULT_FINDING,
                "inference_mode": of.INFERENCE}  # fmt: skip

    fakeclue = [
        clue("Glide-00001.jpg", "Glide", "The edge of the cup is jagged. The wall is too smooth."),
        clue("sd-00002.png", "sd", "The shadow falls the wrong way."),
        clue("sd-00003.png", "sd", ""),  # withheld
    ]
    (ev / "FakeClue.json").write_text(json.dumps(fakeclue), encoding="utf-8")
    fakeqa = [
        {"Q1": of.qa_question("texture"), "A1": "The wall is too smooth.",
         "Q2": "How is the edge regarding the authenticity of this image?",
         "A2": "The edge of the cup is jagged.",
         "Q3": "How is the weather regarding the authenticity of this image?", "A3": "Fine.",
         "Q4": of.qa_question("irreality"), "A4": "", "image_id": "Glide-00001.jpg"},
        # the public release: every answer withheld
        {"Q1": of.qa_question("texture"), "A1": "", "Q2": of.qa_question("edge"), "A2": "",
         "image_id": "sd-00002.png"},
    ]  # fmt: skip
    (ev / "FakeQA.json").write_text(json.dumps(fakeqa), encoding="utf-8")


def test_release_items_read_the_format_and_bad_records_are_error_rows(tmp_path):
    write_release(tmp_path / "rel")
    store = RunStore(str(tmp_path / "run"))
    got = of.release_items(
        store, str(tmp_path / "rel"), str(tmp_path / "rel" / "FakeBench_images"),
        ["inference", "fault_finding"],
    )  # fmt: skip
    good = {r["item_id"]: r for r in got if r.get("status") != "error"}
    bad = {r["item_id"]: r["error"] for r in got if r.get("status") == "error"}
    assert sorted(k for k in good if k.startswith("fakeclass/")) == [
        "fakeclass/000000000001.jpg", "fakeclass/Glide-00001.jpg", "fakeclass/sd-00002.png",
        "fakeclass/sd-00003.png",
    ]  # fmt: skip
    real = good["fakeclass/000000000001.jpg"]
    assert (real["label"], real["form"], real["answer"]) == ("real", "yes_no", "yes")
    assert good["fakeclass/sd-00002.png"]["form"] == "what"
    assert good["fakeclass/Glide-00001.jpg"]["generator"] == "Glide"
    assert store.get_blob(real["blob"])[:3] == b"\xff\xd8\xff"  # the JPEG itself, in the store
    assert "missing-00009.jpg is not in" in bad["fakeclass/missing-00009.jpg"]
    assert "repeats image_id sd-00002.png" in bad["fakeclass/sd-00002.png#5"]
    assert "'Is it AI?' is none of the three" in bad["fakeclass/sd-00004.png"]
    assert "is not a JSON object" in bad["fakeclass/record-7"]
    clue = good["fakeclue/Glide-00001.jpg"]
    assert clue["question"] == of.INFERENCE and clue["dimensions"] == ["edge", "texture"]
    assert good["fakeclue/Glide-00001.jpg/fault_finding"]["question"] == of.FAULT_FINDING
    assert "1 FakeClue records have no telltale_clues" in bad["fakeclue/golden-withheld"]
    withheld = good["fakeclue/sd-00003.png"]  # scored for its verdict only
    assert (withheld["answer"], withheld["golden_source"]) == (None, "withheld")
    assert "fakeclue/sd-00003.png/fault_finding" not in good
    assert good["fakeqa/Glide-00001.jpg/Q1"]["dimension"] == "texture"
    assert good["fakeqa/Glide-00001.jpg/Q2"]["dimension"] == "edge"
    assert "names none of the 14 dimensions" in bad["fakeqa/Glide-00001.jpg/Q3"]
    # an empty slot of an answered record is a dimension without a clue (no item, no error);
    # a record with every answer empty is the public release's withheld answers
    assert not any(k.startswith("fakeqa/Glide-00001.jpg/Q4") for k in (*good, *bad))
    assert "2 FakeQA questions have no answer" in bad["fakeqa/golden-withheld"]


def test_public_release_scores_fakeclass_and_the_withheld_clues_verdict(tmp_path):
    """The release as published (golden clues withheld for one fake here) and a model's answer
    files: FakeClass by §3.2's rule, computed by hand; FakeClue with a golden clue as text and
    verdict; the withheld one for its verdict only, never as text."""
    write_release(tmp_path / "rel")
    ans = tmp_path / "answers"
    ans.mkdir()
    (ans / "test_FakeClass.json").write_text(json.dumps([
        {"image_id": "Glide-00001.jpg", "answer": "Yes, it is fake."},  # fake? yes: right
        {"image_id": "sd-00002.png", "answer": "It is real."},  # what? fake: wrong
        {"image_id": "000000000001.jpg", "answer": "Yes."},  # real? yes: right
        {"image_id": "sd-00003.png", "answer": "I can't say yes or no."},  # real? no: wrong
    ], indent=4), encoding="utf-8")  # fmt: skip
    (ans / "test_FakeClue.json").write_text(json.dumps([
        {"image_id": "Glide-00001.jpg", "faultfinding_mode": "x",
         "inference_mode": "The edge of the cup is jagged. Final judgement: fake"},
        {"image_id": "sd-00002.png", "faultfinding_mode": "x", "inference_mode": "Fine. real"},
        {"image_id": "sd-00003.png", "faultfinding_mode": "x",
         "inference_mode": "Smooth skin, odd hands. Final judgement: fake"},
    ]), encoding="utf-8")  # fmt: skip
    (ans / "test_FakeQA.json").write_text(json.dumps([
        {"image_id": "Glide-00001.jpg", "A1": "The wall is too smooth.", "A1_org": "…"},
    ]), encoding="utf-8")  # fmt: skip
    model = {"name": "files", "kind": "official", "answers": str(ans)}
    release = {"queries": str(tmp_path / "rel" / "Evaluation"), "images": str(tmp_path / "rel")}
    store, _, _ = run_local(
        fb_config(tmp_path / "run", models=[model], official=release, clue_modes=["inference"])
    )
    sc = pivot_scores(ok(store, "fakebench_scores"))
    assert (sc["files/fakeclass/all=all"]["accuracy"], sc["files/fakeclass/all=all"]["n"]) == (
        0.5,
        4,
    )
    assert sc["files/fakeclass/label=real"]["accuracy"] == 1.0
    assert sc["files/fakeclass/label=fake"]["accuracy"] == pytest.approx(1 / 3)
    assert sc["files/fakeclass/generator=sd"]["n"] == 2
    inf = sc["files/fakeclue/mode=inference"]
    assert (inf["n"], inf["accuracy"]) == (2, 0.5) and inf["rouge_l"] > 0
    only = sc["files/fakeclue/verdict=inference"]
    assert (only["n"], only["accuracy"], only["bleu1"], only["average"]) == (1, 1.0, None, None)
    assert "withheld" in only["similarity_reason"]
    qa = sc["files/fakeqa/dimension=texture"]
    assert qa["bleu1"] == pytest.approx(1.0)  # A1 is the golden answer word for word
    missing = {r["answer_id"]: r["error"] for r in errors(store, "fakebench_answers")}
    assert "A2 (or A2_org) is missing" in missing["files/fakeqa/Glide-00001.jpg/Q2"]
    from forenset.cli import app as main_app

    res = CliRunner().invoke(main_app, ["fakebench", str(tmp_path / "run")], terminal_width=250)
    assert res.exit_code == 0, res.output
    assert (
        "withheld (FakeBench's public release): the verdict only (files fakeclue inference "
        "(verdict only))" in " ".join(res.output.split())
    )


def test_answer_files_map_to_items_and_bad_records_are_error_rows(tmp_path):
    write_release(tmp_path / "rel")
    store = RunStore(str(tmp_path / "run"))
    items = [
        r for r in of.release_items(store, str(tmp_path / "rel"), str(tmp_path / "rel"),
                                    ["inference", "fault_finding"])
        if r.get("status") != "error"
    ]  # fmt: skip
    ans = tmp_path / "answers"
    ans.mkdir()
    (ans / "test_FakeClass.json").write_text(json.dumps([
        {"image_id": "Glide-00001.jpg", "answer": "Yes, it is fake."},
        {"image_id": "sd-00002.png", "answer": 42},
        {"image_id": "nowhere.png", "answer": "no"},
        {"image_id": "Glide-00001.jpg", "answer": "No."},
    ], ensure_ascii=False), encoding="utf-8")  # fmt: skip
    (ans / "test_FakeClue.json").write_text(json.dumps([
        {"image_id": "Glide-00001.jpg", "faultfinding_mode": "This is a fake image because …",
         "inference_mode": "Jagged edges, smooth walls. Final judgement: fake"},
    ]), encoding="utf-8")  # fmt: skip
    # no test_FakeQA.json
    got = of.answer_rows("m", str(ans), items)
    good = {r["item_id"]: r for r in got if r["status"] == "ok"}
    bad = {r["answer_id"]: r["error"] for r in got if r["status"] == "error"}
    assert good["fakeclass/Glide-00001.jpg"]["response"] == "Yes, it is fake."
    inf = good["fakeclue/Glide-00001.jpg"]
    assert (inf["verdict"], inf["label"]) == ("fake", "fake")
    assert good["fakeclue/Glide-00001.jpg/fault_finding"]["verdict"] is None
    assert "answer is not a string" in bad["m/fakeclass/sd-00002.png"]
    assert "image nowhere.png has no fakeclass item" in bad["m/fakeclass/record-2"]
    assert "repeats image Glide-00001.jpg" in bad["m/fakeclass/record-3"]
    assert "test_FakeQA.json is not in" in bad["m/fakeqa/file-missing"]


# -- end to end: export, the official scripts, import, scoring ---------------------------------------
STUB = '''
"""Stands in for google.generativeai (the model the release's scripts call): replies come from
$FAKEBENCH_REPLIES, a JSON object {image file name: {prompt prefix: reply}}."""
import json, os


def configure(**kw):
    pass


class _Reply:
    def __init__(self, text):
        self.text = text

    def resolve(self):
        pass


class GenerativeModel:
    def __init__(self, name):
        self.table = json.load(open(os.environ["FAKEBENCH_REPLIES"], encoding="utf-8"))

    def generate_content(self, parts, stream=False):
        prompt, img = parts
        mine = self.table[os.path.basename(img.filename)]
        return _Reply(next(r for p, r in mine.items() if prompt.startswith(p)))
'''

# What each reply scores under §3.2's keyword rule, by hand (the release's scripts only collect
# replies; the paper states the rule): the reply's yes/no (or fake/real) keywords must be
# exactly the answer.
FAKECLASS_REPLIES = {
    ("yes", "Yes, this image is fake."): True,
    ("yes", "No, I think it is a real photo."): False,
    ("no", "no, it is not."): True,
    ("no", "I cannot answer yes or no."): False,
    ("fake", "The image is fake."): True,
    ("fake", "It looks real, not fake."): False,
    ("real", "Real."): True,
    ("real", "fake"): False,
}


def replies_for(export: Path, pick: int) -> tuple[dict, float]:
    """Per exported image, scripted replies, and the expected FakeClass accuracy."""
    fc = json.loads((export / "Evaluation" / "FakeClass.json").read_text(encoding="utf-8"))
    table, right = {}, []
    for n, rec in enumerate(fc):
        options = [(k, ok) for k, ok in FAKECLASS_REPLIES.items() if k[0] == rec["answer"]]
        (_, reply), good = options[(n + pick) % len(options)]
        table.setdefault(rec["image_id"], {})[rec["question"]] = reply
        right.append(good)
    for rec in json.loads((export / "Evaluation" / "FakeClue.json").read_text(encoding="utf-8")):
        table.setdefault(rec["image_id"], {}).update({
            of.FAULT_FINDING: "This is a fake image because the edges are jagged.",
            of.INFERENCE: "Local: jagged edges. Global: smooth walls. Final judgement: fake",
        })  # fmt: skip
    for rec in json.loads((export / "Evaluation" / "FakeQA.json").read_text(encoding="utf-8")):
        table.setdefault(rec["image_id"], {})["Answer this question"] = "The edge is jagged."
    return table, sum(right) / len(right)


def run_official_script(
    script: str, export: Path, tmp: Path, replies: dict
) -> subprocess.CompletedProcess:
    """The release's script, unchanged but for the image folder (its README's own step: "put all
    images together under one folder and change the testing dir correspondingly"), run from the
    export as from the repository, its model replaced by the stub."""
    code = subprocess.run(["git", "-C", str(REPO), "show", f"HEAD:{script}"], check=True,
                          capture_output=True, text=True).stdout  # fmt: skip
    assert code.count('path = "FakeBench_images/fake_images"') == 1
    code = code.replace('path = "FakeBench_images/fake_images"', 'path = "all_images"')
    (export / script).write_text(code, encoding="utf-8")
    stub = tmp / "stub" / "google" / "generativeai"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "__init__.py").write_text(STUB, encoding="utf-8")
    (tmp / "replies.json").write_text(json.dumps(replies), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": f"{tmp / 'stub'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "FAKEBENCH_REPLIES": str(tmp / "replies.json")}  # fmt: skip
    return subprocess.run([sys.executable, script], cwd=export, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_official_round_trip(tmp_path):
    run = tmp_path / "run"
    store, _, _ = run_local(fb_config(run))
    items = ok(store, "fakebench_items")
    assert {i["task"] for i in items} == {"fakeclass", "fakeclue", "fakeqa"}
    export = tmp_path / "export"
    res = CliRunner().invoke(app, ["fakebench-export", str(run), "--official", str(export)])
    assert res.exit_code == 0, res.output

    # the format: keys, wording, encoding, one FakeQA record per image
    ev = export / "Evaluation"
    fc_text = (ev / "FakeClass.json").read_text(encoding="utf-8")
    assert fc_text.startswith('[\n    {\n        "image_id": ')  # indented by 4, as released
    fc = json.loads(fc_text)
    n_class = sum(i["task"] == "fakeclass" for i in items)
    assert len(fc) == n_class and all(list(r) == ["image_id", "question", "answer", "authenticity"]
                                      for r in fc)  # fmt: skip
    assert {r["question"] for r in fc} <= {of.Q_FAKE, of.Q_REAL, of.Q_WHAT}
    for r in fc:
        assert r["authenticity"] == (0 if r["answer"] in ("fake",) or (
            r["question"] == of.Q_FAKE and r["answer"] == "yes") or (
            r["question"] == of.Q_REAL and r["answer"] == "no") else 1)  # fmt: skip
        folder = "fake_images" if r["authenticity"] == 0 else "real_images"
        assert (export / "FakeBench_images" / folder / r["image_id"]).is_file()
    clue = json.loads((ev / "FakeClue.json").read_text(encoding="utf-8"))
    assert all(list(r) == ["image_caption", "content_categories", "telltale_clues",
                           "telltale_categories", "image_id", "generation_model",
                           "faultfinding_mode", "inference_mode"] for r in clue)  # fmt: skip
    assert all(r["faultfinding_mode"] == of.FAULT_FINDING and r["inference_mode"] == of.INFERENCE
               and r["telltale_clues"] for r in clue)  # fmt: skip
    qa = json.loads((ev / "FakeQA.json").read_text(encoding="utf-8"))
    qa_items = [i for i in items if i["task"] == "fakeqa"]
    assert len(qa) == len({i["sample_id"] for i in qa_items})  # one record per image
    # the release's slot layout: all 14 dimensions per image, slot k asks dimension k; a
    # dimension without a clue keeps its question with an empty answer
    assert sum(bool(r[k]) for r in qa for k in r if k.startswith("A")) == len(qa_items)
    by_id = json.loads((export / of.ID_MAP).read_text(encoding="utf-8"))  # image_id -> sample
    for r in qa:
        ks = [k for k in r if k != "image_id"]
        assert ks == [x for k in range(1, 15) for x in (f"Q{k}", f"A{k}")]
        for k, dim in enumerate(of.fb.DIMENSIONS, start=1):
            assert r[f"Q{k}"] == of.qa_question(dim)
            has = [i for i in qa_items if i["sample_id"] == by_id[r["image_id"]]
                   and i["dimension"] == dim]  # fmt: skip
            assert r[f"A{k}"] == (has[0]["answer"] if has else "")
    assert any(not r[f"A{k}"] for r in qa for k in range(1, 15))  # the fixture has gaps to fill
    ids = json.loads((export / of.ID_MAP).read_text(encoding="utf-8"))
    assert set(ids.values()) == {i["sample_id"] for i in items}

    # a model's answers in the official format: from the release's own scripts when the fetched
    # repository is here, else written by the test in the same format
    answers = tmp_path / "answers"
    answers.mkdir()
    replies, want = replies_for(export, pick=1)
    if (REPO / ".git").exists() or (REPO / "HEAD").exists():
        (export / "all_images").mkdir()
        for p in (export / "FakeBench_images").glob("*/*"):
            (export / "all_images" / p.name).write_bytes(p.read_bytes())
        for script in ("eval_FakeClass.py", "eval_FakeClue.py"):
            done = run_official_script(script, export, tmp_path, replies)
            assert done.returncode == 0, done.stderr[-2000:]
        # eval_FakeQA.py reads the export (Q keys, the image) and then stops at its own bug,
        # `test_obj.append(...)` on a dict, whatever the input: it writes no answer file
        done = run_official_script("eval_FakeQA.py", export, tmp_path, replies)
        assert "'dict' object has no attribute 'append'" in done.stderr
        for name in ("test_FakeClass.json", "test_FakeClue.json"):
            (answers / name).write_bytes((export / name).read_bytes())
    else:
        (answers / "test_FakeClass.json").write_text(json.dumps(
            [{"image_id": r["image_id"], "answer": replies[r["image_id"]][r["question"]]}
             for r in fc], indent=4, ensure_ascii=False), encoding="utf-8")  # fmt: skip
        (answers / "test_FakeClue.json").write_text(json.dumps(
            [{"image_id": r["image_id"], "faultfinding_mode": replies[r["image_id"]][of.FAULT_FINDING],
              "inference_mode": replies[r["image_id"]][of.INFERENCE]} for r in clue]),
            encoding="utf-8")  # fmt: skip
    # FakeQA in the runner's intended shape: one record per image, A<k> and A<k>_org
    (answers / "test_FakeQA.json").write_text(json.dumps([
        {"image_id": r["image_id"],
         **{f"A{k}{s}": "The edge is jagged." for k in range(1, (len(r) - 1) // 2 + 1)
            for s in ("", "_org")}} for r in qa]), encoding="utf-8")  # fmt: skip

    model = {"name": "gemini-files", "kind": "official", "answers": str(answers)}
    # (1) the run's own items, the answers mapped back through the image ids
    store, _, _ = run_local(fb_config(run, models=[model]))
    ans = ok(store, "fakebench_answers")
    assert not errors(store, "fakebench_answers")
    assert len(ans) == len(items) and {a["backend"] for a in ans} == {"official"}
    sc = pivot_scores(ok(store, "fakebench_scores"))
    assert sc["gemini-files/fakeclass/all=all"]["accuracy"] == pytest.approx(want)
    assert sc["gemini-files/fakeclue/mode=inference"]["accuracy"] == 1.0  # every verdict "fake"
    own = sc

    # (2) the export read as the official release, in a fresh run: the same numbers
    other = tmp_path / "other"
    release = {"queries": str(export), "images": str(export / "FakeBench_images")}
    store, _, _ = run_local(fb_config(other, models=[model], official=release))
    rel_items = ok(store, "fakebench_items")
    assert {i["golden_source"] for i in rel_items} == {"official"}
    assert len(rel_items) == len(items)
    sc = pivot_scores(ok(store, "fakebench_scores"))
    for key in (
        "fakeclass/all=all",
        "fakeclass/label=real",
        "fakeclass/form=what",
        "fakeclue/mode=inference",
        "fakeclue/mode=fault_finding",
        "fakeqa/all=all",
    ):
        for m in ("accuracy", "bleu1", "rouge_l", "n"):
            assert sc[f"gemini-files/{key}"][m] == pytest.approx(own[f"gemini-files/{key}"][m]), (
                key,
                m,
            )


def test_export_official_needs_items(tmp_path):
    run = tmp_path / "run"
    run_local(validate_config(small_config_dict(run, evaluation={"enabled": False},
                                                fakebench={"enabled": False})))  # fmt: skip
    res = CliRunner().invoke(app, ["fakebench-export", str(run), "--official", str(tmp_path / "o")])
    assert res.exit_code != 0 and "no fakebench_items" in res.output
    assert "Traceback" not in res.output
