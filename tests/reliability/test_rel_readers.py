"""One read policy for every reader (issue 40): the same hostile set — an absolute path, a
``..`` escape, a symlink out of the folder, a FIFO, /dev/zero, a 5,000,000-character name, a NUL
byte and a folder — fed to every reader. A reader of names a record gives (sources, external
candidates, FakeBench's official release) answers each with an error row naming the refusal; a
reader of one whole file named by the operator (gold, Label Studio, reward labels, predictions,
FakeBench answer files) with one sentence. Nothing outside the folder is read, and no reason,
id or message carries the 5 MB name."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

import pytest

from forenset import paths, readers
from forenset.benchmarks.fakebench import official as of
from forenset.store.run_store import RunStore
from tests.stages.test_source_kinds import png, source_rows

LONG = "a" * 5_000_000
SHORT = 2_100  # longest reason or message accepted here (the CLI's cut is 2,000 characters)


def _unblock_fifo_later(path: Path, after_s: float = 20.0) -> threading.Timer:
    """A regression that opens a FIFO blocking would hang: a writer comes after a while, so
    the test fails instead."""

    def release() -> None:
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass

    t = threading.Timer(after_s, release)
    t.daemon = True
    t.start()
    return t


@pytest.fixture
def hostile(tmp_path):
    """A folder with one good image and the hostile entries; (folder, outside, names) where
    names maps each hostile case to the name a listing or record gives for it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.png").write_bytes(png(7))
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "good.png").write_bytes(png(1))
    os.symlink(outside / "secret.png", folder / "link_out.png")
    os.symlink("/dev/zero", folder / "zero.png")
    os.mkfifo(folder / "fifo.png")
    (folder / "adir.png").mkdir()
    timer = _unblock_fifo_later(folder / "fifo.png")
    names = {
        "absolute": str(outside / "secret.png"),
        "etc": "/etc/passwd",
        "dotdot": "../outside/secret.png",
        "deep_dotdot": "../../../../etc/hostname",
        "symlink_out": "link_out.png",
        "fifo": "fifo.png",
        "dev_zero": "zero.png",
        "long": LONG,
        "nul": "a\x00b.png",
        "directory": "adir.png",
    }
    yield folder, outside, names
    timer.cancel()


def _secret_bytes(outside: Path) -> set[bytes]:
    return {(outside / "secret.png").read_bytes(), Path("/etc/passwd").read_bytes()}


def _stored(store: RunStore) -> set[bytes]:
    return {p.read_bytes() for p in (Path(store.root) / "blobs").rglob("*") if p.is_file()}


def _short(text: str | None) -> None:
    assert text and len(text) < SHORT and "\n" not in text.strip(), (text or "")[:300]


def test_listing_reader_refuses_every_hostile_name(hostile):
    """``readers.read_uri`` under a listing's policy: what sources (CSV, COCO, HF, folders)
    and external candidates read every listed image through."""
    folder, outside, names = hostile
    policy = paths.ReadPolicy((str(folder),))
    assert readers.read_uri(readers.join(str(folder), "good.png"), policy) == png(1)
    for case, name in names.items():
        with pytest.raises(paths.InputRefused) as e:
            readers.read_uri(readers.join(str(folder), name), policy)
        _short(str(e.value))
        assert case != "fifo" or "FIFO" in str(e.value)
        assert case != "directory" or "a folder" in str(e.value)
        assert case != "long" or "longer than the 4,096-character cap" in str(e.value)


def test_coco_source_listing_gives_error_rows(hostile, tmp_path):
    """A COCO caption file naming the hostile set: one error row per distinct file, the good
    one read, nothing from outside stored."""
    folder, outside, names = hostile
    images = [{"id": 0, "file_name": "good.png"}]
    images += [{"id": i, "file_name": n} for i, n in enumerate(names.values(), 1)]
    (folder / "captions.json").write_text(json.dumps({"images": images, "annotations": []}))
    got = source_rows(tmp_path / "src", datasets=[f"coco:{folder / 'captions.json'}"])
    ok = [r for r in got if r["status"] == "ok"]
    assert [r["name"] for r in ok] == ["good.png"]
    bad = [r for r in got if r["status"] == "error"]
    # /etc/passwd-like names that resolve to one file are one row plus duplicates
    assert len(bad) >= len(names) - 2
    for r in bad:
        _short(r["error"])
    store = RunStore(str(tmp_path / "src" / "run"))
    assert not (_secret_bytes(outside) & _stored(store))


def _release(root: Path, ids: list[str]) -> Path:
    ev = root / "Evaluation"
    ev.mkdir(parents=True)
    recs = [{"image_id": i, "question": of.Q_FAKE, "answer": "yes", "authenticity": 0} for i in ids]
    (ev / "FakeClass.json").write_text(json.dumps(recs), encoding="utf-8")
    return root


def test_fakebench_official_image_ids_are_refused_as_error_rows(hostile, tmp_path):
    """issue 40: an ``image_id`` of /etc/passwd, ``../../../../etc/hostname``, an absolute
    path, a symlink out, a FIFO, /dev/zero, a folder, a NUL byte or 5,000,000 characters is an
    error row naming the refusal (was: an ok item holding /etc/passwd's bytes, or Errno 36
    failing the whole shard); the good record stays ok."""
    folder, outside, names = hostile
    rel = _release(tmp_path / "rel", ["good.png", *names.values()])
    store = RunStore(str(tmp_path / "run"))
    got = of.release_items(store, str(rel), str(folder), ["inference"])
    fc = [r for r in got if r["task"] == "fakeclass"]
    ok = [r for r in fc if r.get("status") != "error"]
    assert [r["item_id"] for r in ok] == ["fakeclass/good.png"]
    bad = {r["item_id"]: r["error"] for r in fc if r.get("status") == "error"}
    assert len(bad) == len(names)
    for item_id, why in bad.items():
        _short(why)
        assert len(item_id) < 300
        assert "refused" in why, why
    text = " ".join(bad.values())
    for phrase in ("absolute path", "climbs out with '..'", "is outside the listing's folder",
                   "(a FIFO)", "(a folder)", "5,000,000 characters", "NUL byte"):  # fmt: skip
        assert phrase in text, phrase
    assert not (_secret_bytes(outside) & _stored(store))
    # the stage's table takes the rows (one shard, not a failed one)
    from forenset.benchmarks.fakebench.stages.fakebench_items import FakeBenchItems
    from forenset.config import validate_config
    from forenset.tasks.base import StageContext
    from tests.conftest import small_config_dict

    cfg = validate_config(
        small_config_dict(
            tmp_path / "run2",
            evaluation={"enabled": False},
            fakebench={"enabled": True, "models": [], "clue_modes": ["inference"],
                       "official": {"queries": str(rel), "images": str(folder)}},
        )
    )  # fmt: skip
    stage = FakeBenchItems(StageContext(RunStore(cfg.run_dir), cfg))
    table = stage.process(stage.read_inputs(stage.plan_gathered([])[0]))
    assert table.num_rows == len(got)
    assert sorted(table.column("status").to_pylist()).count("ok") == 1


def test_fakebench_answer_files_hostile_and_deep(hostile, tmp_path):
    """The answer folder's files under the same policy: a symlink out, a FIFO, a 100,000-deep
    answer file (RecursionError) are error rows; a 5 MB image_id in an answer record gives a
    short reason."""
    folder, outside, _ = hostile
    rel = _release(tmp_path / "rel", ["good.png"])
    store = RunStore(str(tmp_path / "run"))
    items = [r for r in of.release_items(store, str(rel), str(folder), ["inference"])
             if r.get("status") != "error"]  # fmt: skip
    items.append({**items[0], "task": "fakeclue", "item_id": "fakeclue/good.png",
                  "form": "inference"})  # fmt: skip
    items.append({**items[0], "task": "fakeqa", "item_id": "fakeqa/good.png/Q1",
                  "form": "free", "dimension": "texture"})  # fmt: skip
    ans = tmp_path / "answers"
    ans.mkdir()
    os.symlink("/etc/passwd", ans / "test_FakeClass.json")
    os.mkfifo(ans / "test_FakeClue.json")
    t = _unblock_fifo_later(ans / "test_FakeClue.json")
    (ans / "test_FakeQA.json").write_text("[" * 100_000 + "]" * 100_000)
    try:
        got = {r["answer_id"]: r["error"] for r in of.answer_rows("m", str(ans), items)}
        digest = of.files_digest(str(ans), list(of.ANSWER_FILES.values()))
    finally:
        t.cancel()
    assert "is outside the listing's folder" in got["m/fakeclass/file-unreadable"]
    assert "(a FIFO)" in got["m/fakeclue/file-unreadable"]
    assert "nested too deeply" in got["m/fakeqa/file-unreadable"]
    assert digest["test_FakeClass.json"] == "unreadable"  # the symlink out is not hashed
    assert digest["test_FakeClue.json"] == "unreadable"  # nor the FIFO (no hang)

    (ans / "test_FakeClass.json").unlink()
    (ans / "test_FakeClass.json").write_text(json.dumps([{"image_id": LONG, "answer": "yes"}]))
    got = {r["answer_id"]: r["error"] for r in of.answer_rows("m", str(ans), items[:1])}
    _short(got["m/fakeclass/record-0"])
    assert "more characters" in got["m/fakeclass/record-0"]


def _whole_file_readers(tmp_path, monkeypatch):
    """Each reader of one operator-named file, as a call that raises its one sentence."""
    from forenset.benchmarks.common.predictions import read_predictions
    from forenset.benchmarks.evaluation import gold as gold_mod
    from forenset.benchmarks.reward.stages.reward_labels import read_export
    from forenset.exports.labelstudio import import_annotations

    monkeypatch.setattr(gold_mod, "fake_ids", lambda store: set())
    store = RunStore(str(tmp_path / "run"))
    return {
        "import-gold": lambda p: gold_mod.import_gold(store, Path(p)),
        "import-annotations": lambda p: import_annotations(store, Path(p)),
        "reward labels": lambda p: read_export(p),
        "predictions": lambda p: read_predictions(p, set()),
    }


def test_whole_file_readers_refuse_in_one_sentence(hostile, tmp_path, monkeypatch):
    """The file itself a FIFO, /dev/zero, a folder, a NUL byte in its name or a 5 MB name:
    one sentence each (ForensetError), nothing hangs, no 5 MB message. (An absolute path or a
    ``..`` is the operator's own choice of file here, so it is read.)"""
    from forenset.errors import ForensetError

    folder, _, _ = hostile
    for name, read in _whole_file_readers(tmp_path, monkeypatch).items():
        for bad in (folder / "fifo.png", "/dev/zero", folder / "adir.png",
                    f"{folder}/a\x00b.json", f"{folder}/{LONG}"):  # fmt: skip
            with pytest.raises(ForensetError) as e:
                read(str(bad))
            _short(str(e.value))
            assert "cannot read" in str(e.value), (name, str(e.value)[:300])
    from forenset.benchmarks.common.predictions import file_digest

    assert file_digest(str(folder / "fifo.png")) == "unreadable"  # planning never hangs


def test_wrong_types_in_imports_are_error_rows(tmp_path, monkeypatch):
    """Gold text ``12345`` is no explanation; a reward ``lead_time: "fast"`` cannot pass the
    minimum-lead-time filter; a Label Studio annotation's ``lead_time: "fast"``, integer region
    texts and choices: each an error row, not a value read as something else."""
    from forenset.benchmarks.evaluation import gold as gold_mod
    from forenset.benchmarks.reward.stages.reward_labels import read_export
    from forenset.exports.labelstudio import annotation_rows

    def text(t):
        return [{"from_name": "explanation", "type": "textarea", "value": {"text": t}}]

    doc = [{"id": 1, "data": {"sample_id": "s1"}, "annotations": [
        {"id": 1, "completed_by": "a", "result": text([12345])},
        {"id": 2, "completed_by": "b", "result": text(12345)},
        {"id": 3, "completed_by": "c", "result": text(["Warped sign."]), "lead_time": "fast"},
        {"id": 4, "completed_by": "d", "result": text(["Odd light."]), "lead_time": 20.5},
    ]}]  # fmt: skip
    rows = {r["annotation_id"]: r for r in gold_mod.gold_rows(doc, {"s1"}, "h")}
    assert [rows[i]["problem"] for i in (1, 2, 3)] == ["wrong_type"] * 3
    assert rows[4]["status"] == "ok" and rows[4]["text"] == "Odd light."

    def choice(c):
        return [{"type": "choices", "value": {"choices": [c]}}]

    export = [{"data": {"triplet_id": "t1"}, "annotations": [
        {"completed_by": 1, "result": choice("First"), "lead_time": "fast"},
        {"completed_by": 2, "result": choice("First"), "lead_time": 30},
        {"completed_by": 3, "result": choice("First"), "was_cancelled": "true"},
        {"completed_by": 4, "result": choice("First"), "was_cancelled": "nope"},
    ]}]  # fmt: skip
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(export))
    found, problems = read_export(str(path))
    assert [a["annotator"] for a in found["t1"]] == ["2"]
    assert problems == {"bad_lead_time": ["t1"], "bad_record": ["t1"]}

    ls = [{"id": 1, "data": {"sample_id": "s1"}, "annotations": [
        {"id": 1, "lead_time": "fast", "result": []},
        {"id": 2, "result": [{"id": "r", "type": "textarea", "value": {"text": [5]}}]},
        {"id": 3, "result": [{"type": "choices", "from_name": "triage",
                              "value": {"choices": [1]}}]},
    ]}]  # fmt: skip
    errs = [r["error"] for r in annotation_rows(ls, "h") if r["status"] == "error"]
    assert any("lead_time is 'fast'" in e for e in errs)
    assert "region text is not a list of strings" in errs
    assert "choices is not a list of strings" in errs


def test_reasons_are_cut_once_for_state_json_logs_and_messages(tmp_path, monkeypatch, caplog):
    """A shard that fails with a 5 MB reason: stats, state.json and the log line hold a few
    hundred characters with a marker, not the 5 MB."""
    from forenset.config import validate_config
    from forenset.redact import install_log_redaction
    from forenset.tasks.sources import Sources
    from tests.conftest import small_config_dict
    from tests.helpers import run_local

    def broken(self, batch, shard=None):
        raise OSError(f"cannot open {LONG}")

    monkeypatch.setattr(Sources, "process", broken)
    cfg = validate_config(
        small_config_dict(
            tmp_path / "run",
            sources={"samples": ["astronaut"], "max_side": 48},
            evaluation={"enabled": False},
            fakebench={"enabled": False},
        )
    )
    store, stats, _ = run_local(cfg)
    (failure,) = stats["sources"].failures
    assert len(failure) < 1200 and "more characters]" in failure
    assert (Path(cfg.run_dir) / "state.json").stat().st_size < 20_000

    install_log_redaction()
    with caplog.at_level(logging.ERROR):
        logging.getLogger("forenset.test").error("stage x: %s", LONG)
    (rec,) = [r for r in caplog.records if r.name == "forenset.test"]
    assert len(rec.getMessage()) < 9000 and "more characters]" in rec.getMessage()


def _gold_run(tmp_path: Path) -> tuple[Path, Path]:
    """A run dir holding only a ``splits`` table of three fakes, and a gold export for them."""
    import base64

    import pyarrow as pa

    from forenset.schemas.splits import SCHEMA

    run = tmp_path / "run"
    store = RunStore(str(run))
    rows = [{n: None for n in SCHEMA.names}
            | {"sample_id": f"s{i}", "label": "fake", "status": "ok", "split": "test"}
            for i in range(3)]  # fmt: skip
    info = store.write_shard("splits", "shard-0", pa.Table.from_pylist(rows, schema=SCHEMA),
                             fingerprint="f", counts={"ok": 3})  # fmt: skip
    schema = base64.b64encode(SCHEMA.serialize().to_pybytes()).decode()
    store.write_manifest("splits", [info], {"schema": schema})
    text = [{"from_name": "explanation", "type": "textarea", "value": {"text": ["Blurry hand."]}}]
    doc = [{"id": i, "data": {"sample_id": f"s{i}"},
            "annotations": [{"id": 1, "completed_by": "a", "result": text}]} for i in range(3)]  # fmt: skip
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps(doc))
    return run, gold


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_import_gold_exits_0_fifty_times(tmp_path):
    """issue 40: ``import-gold`` exited 134 in 7 of 62 runs (``terminate called without an
    active exception``: pyarrow's threads at interpreter exit, apache/arrow#34314). It now ends
    with os._exit after flushing: 50 runs (4 at a time), each exit 0 with its whole JSON."""
    import subprocess
    import sys

    run, gold = _gold_run(tmp_path)
    cmd = [sys.executable, "-m", "forenset.cli", "import-gold", str(run), str(gold)]
    codes, outputs = [], []
    for _ in range(50 // 5):
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(5)]  # fmt: skip
        for p in procs:
            out, err = p.communicate(timeout=300)
            codes.append(p.returncode)
            outputs.append((out, err))
    bad = [(c, e[-300:]) for c, (_, e) in zip(codes, outputs, strict=True) if c != 0]
    assert not bad, bad
    assert all(json.loads(out)["counts"] == {"ok": 3, "error": 0} for out, _ in outputs)


def test_fast_exit_keeps_output_and_codes(tmp_path):
    """The fast exit flushes what was printed and keeps the exit code: a good import prints
    its whole JSON and exits 0; a bad file one sentence and 2."""
    import subprocess
    import sys

    run, gold = _gold_run(tmp_path)
    cmd = [sys.executable, "-m", "forenset.cli", "import-gold", str(run)]
    ok = subprocess.run([*cmd, str(gold)], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-500:]
    assert json.loads(ok.stdout)["rows"] == 3
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    bad = subprocess.run([*cmd, str(tmp_path / "deep.json")], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert bad.returncode == 2
    assert "nested too deeply" in bad.stderr and "Traceback" not in bad.stderr


DISK_FULL = """
import errno, sys
from forenset.exports import dataset
from forenset.tasks.sources import Sources

def full(store, settings, partial=None):
    assert partial, "the export of a build with failed shards is partial"
    raise OSError(errno.ENOSPC, "No space left on device", f"{store.root}/exports/x")

def fails(self, batch, shard=None):  # nothing downstream runs: a short build
    raise RuntimeError("injected shard failure")

dataset.export_dataset = full
Sources.process = fails
from forenset.cli import main
sys.argv = ["forenset", "build", sys.argv[1], "--run-dir", sys.argv[2]]
main()
"""


@pytest.mark.usefixtures("prefect_api")
def test_disk_full_during_partial_export_is_one_sentence(tmp_path):
    """issue 40: a full disk while a build with failed shards writes its partial export
    printed Prefect's traceback before ``error: cannot write to run directory …``. The flow now
    ends Failed with that sentence, which ``forenset build`` prints alone (exit 2; Prefect's
    "Finished in state Failed(…)" echo of it is dropped). Run as its
    own process: the CLI's real terminal output, with the export failing by ENOSPC."""
    import subprocess
    import sys

    import yaml

    from tests.conftest import small_config_dict

    cfg = small_config_dict(
        tmp_path / "run",
        sources={"samples": ["astronaut"], "max_side": 48},
        generators=[{"name": "cv-a", "family": "classical"}],
        scenarios={"enabled": False},
        evaluation={"enabled": False},
        fakebench={"enabled": False},
    )
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    (tmp_path / "run_it.py").write_text(DISK_FULL)
    got = subprocess.run(
        [sys.executable, str(tmp_path / "run_it.py"), str(tmp_path / "cfg.yaml"),
         str(tmp_path / "run")],
        capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "300"},
    )  # fmt: skip
    assert got.returncode == 2, (got.returncode, got.stderr[-2000:])
    assert "cannot write to run directory" in got.stderr and "No space left" in got.stderr
    assert "Traceback" not in got.stderr, got.stderr[-3000:]
    lines = [line for line in got.stderr.splitlines() if line.strip()]
    # the sentence only (Rich may wrap it): it starts the output and ends it
    assert lines[0].startswith("error: cannot write to run directory"), lines[:3]
    assert lines[-1].endswith("No space left on device"), lines[-3:]
    assert not any("Finished in state" in line for line in lines), lines  # the sentence only


def test_record_name_rules():
    """What a record may name under a folder: plain relative names (subfolders too)."""
    for good in ("ok.png", "fake_images/x.png", "a:b.png", "x..y.png"):
        assert paths.name_refusal(good) is None, good
    for bad, why in (("/etc/passwd", "absolute"), ("C:/x.png", "absolute"),
                     ("\\\\srv\\x", "absolute"), ("http://h/x.png", "URL"),
                     ("a/../../b", "'..'"), ("..", "'..'"), ("a\\..\\b", "'..'"),
                     ("", "empty"), (7, "int"), ("a\x00b", "NUL"),
                     ("x" * 5000, "4,096-character cap")):  # fmt: skip
        got = paths.name_refusal(bad)
        assert got and why in got and len(got) < 400, (bad, got)
