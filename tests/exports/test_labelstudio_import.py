"""Label Studio import: files shaped like real LS 1.23 exports (JSON, JSON_MIN, empty)."""

from __future__ import annotations

import json

import pytest

from forenset.exports.labelstudio import AnnotationImportError, import_annotations
from forenset.store.views import connect


def _fakes(samples):
    return [s["sample_id"] for s in samples if s["label"] == "fake"]


def _task(tid, sample, results, **ann):
    return {
        "id": tid,
        "data": {"image": "/data/local-files/?d=images/x.png", "sample_id": sample},
        "annotations": [
            {
                "id": tid * 10,
                "completed_by": 1,
                "result": results,
                "was_cancelled": False,
                "created_at": "2026-12-05T06:00:00.000000Z",
                "lead_time": 4.25,
                **ann,
            }
        ],
        "predictions": [],
    }


def _box(rid, label="text", origin=None, rotation=0, **v):
    r = {
        "id": rid,
        "from_name": "anomaly",
        "to_name": "image",
        "type": "rectanglelabels",
        "original_width": 96,
        "original_height": 64,
        "image_rotation": 0,
        "value": {
            "x": 10,
            "y": 20,
            "width": 30,
            "height": 40,
            "rotation": rotation,
            "rectanglelabels": [label],
            **v,
        },
    }
    if origin:
        r["origin"] = origin
    return r


def _why(rid, text):
    return {
        "id": rid,
        "from_name": "why",
        "to_name": "image",
        "type": "textarea",
        "value": {"x": 10, "y": 20, "width": 30, "height": 40, "rotation": 0, "text": [text]},
    }


def _triage(choice):
    return {
        "id": "tr",
        "from_name": "triage",
        "to_name": "image",
        "type": "choices",
        "value": {"choices": [choice]},
    }


def test_regions_keep_rotation_origin_id_and_text(built, samples, tmp_path):
    store, _ = built
    a, b = _fakes(samples)[:2]
    doc = [
        _task(
            1,
            a,
            [
                _triage("ann"),
                _box(f"{a}-d1", origin="prediction", rotation=12.5),
                _why(f"{a}-d1", "the sign's letters melt into each other"),
                _box("Xy7Qa", label="physics"),
                _why("Xy7Qa", "shadow points at the sun"),
            ],
        ),
        _task(2, b, [_triage("hard")]),
    ]
    f = tmp_path / "e.json"
    f.write_text(json.dumps(doc))
    info = import_annotations(store, f)
    assert info.counts == {"ok": 4, "error": 0}
    con = connect(store, ["annotations"])
    got = con.execute(
        "SELECT region_id, difference_id, origin, rotation, region_text, rect_label, lead_time "
        "FROM annotations WHERE task = 'bbox' ORDER BY region_id"
    ).fetchall()
    assert got == [
        ("Xy7Qa", None, "drawn", 0.0, "shadow points at the sun", "physics", 4.25),
        (
            f"{a}-d1",
            "d1",
            "prediction",
            12.5,
            "the sign's letters melt into each other",
            "text",
            4.25,
        ),
    ]


def test_bad_samples_and_choices_are_counted_error_rows(built, samples, tmp_path):
    store, _ = built
    fakes = _fakes(samples)
    reals = [s["sample_id"] for s in samples if s["label"] == "real"]
    doc = [
        _task(1, fakes[0], [_triage("maybe")]),  # not a config choice
        _task(2, fakes[0], [_box("r1", label="Hands")]),  # label outside the config (case)
        _task(3, "no-such-sample", [_triage("ann")]),
        _task(4, reals[0], [_triage("ann")]),  # reals are not triaged
        {"id": 5, "data": {"image": "x"}, "annotations": []},  # no sample_id
        _task(6, fakes[1], [_why("lonely", "no box")]),
    ]
    f = tmp_path / "e.json"
    f.write_text(json.dumps(doc))
    # the exported task list names fakes[2]: its task is absent -> deleted in Label Studio
    tasks = tmp_path / "triage_tasks.json"
    tasks.write_text(json.dumps([{"data": {"sample_id": s}} for s in fakes[:3]]))
    info = import_annotations(store, f, tasks_file=tasks)
    assert info.counts == {"ok": 0, "error": 7}
    con = connect(store, ["annotations"])
    errs = dict(con.execute("SELECT sample_id, error FROM annotations ORDER BY 1, 2").fetchall())
    assert "not in the config" in errs[fakes[0]]
    assert "not a generated sample" in errs["no-such-sample"]
    assert "not a generated sample" in errs[reals[0]]
    assert "deleted in Label Studio" in errs[fakes[2]]
    assert "without a box" in errs[fakes[1]]
    assert con.execute("SELECT count(*) FROM annotations WHERE sample_id IS NULL").fetchone() == (
        1,
    )


@pytest.mark.parametrize(
    "content, words",
    [
        ("", "is empty"),
        ("[]", "no tasks"),
        # JSON_MIN: one flat object per annotated task, no data / annotations
        (
            json.dumps(
                [
                    {
                        "image": "/data/x.png",
                        "sample_id": "s",
                        "id": 1,
                        "triage": "ann",
                        "annotator": 1,
                        "annotation_id": 3,
                        "lead_time": 2.0,
                    }
                ]
            ),
            "JSON_MIN",
        ),
        ('{"not": "a list"}', "expected a Label Studio JSON export"),
        ("{oops", "not valid JSON"),
    ],
)
def test_refused_files_keep_earlier_annotations(built, samples, tmp_path, content, words):
    store, _ = built
    good = tmp_path / "good.json"
    good.write_text(json.dumps([_task(1, _fakes(samples)[0], [_triage("ann")])]))
    import_annotations(store, good)
    before = store.manifest("annotations")
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(AnnotationImportError, match=words) as e:
        import_annotations(store, bad)
    assert "\n" not in str(e.value)
    assert store.manifest("annotations") == before
    con = connect(store, ["annotations"])
    assert con.execute("SELECT choice FROM annotations WHERE task = 'triage'").fetchall() == [
        ("ann",)
    ]
