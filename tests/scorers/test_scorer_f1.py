"""Detection F1 (fake = positive) and accuracy, with unparseable answers counted as wrong."""

from __future__ import annotations

import pytest

from forenset.benchmarks.common.scorers.classification import (
    detection_by_group,
    detection_scores,
)


def test_hand_computed_f1_with_unparseable_answers():
    truth = ["fake", "fake", "fake", "real", "real"]
    pred = ["fake", None, "real", "real", None]
    # None on a fake -> FN, None on a real -> FP: TP=1, FN=2 (one None), FP=1 (None), TN=1
    r = detection_scores(truth, pred)
    assert (r.tp, r.fn, r.fp, r.tn, r.n, r.n_unparsed) == (1, 2, 1, 1, 5, 2)
    assert r.f1.value == pytest.approx(2 * 1 / (2 * 1 + 2 + 1))  # 0.4
    assert r.accuracy.value == pytest.approx(2 / 5)
    assert (r.f1.backend, r.f1.model.startswith("scikit-learn-")) == ("offline", True)


def test_none_is_never_right_even_where_a_guess_would_be():
    # Answering "real" on a real image is right; refusing to answer is not.
    assert detection_scores(["real"], ["real"]).accuracy.value == 1.0
    r = detection_scores(["real"], [None])
    assert (r.accuracy.value, r.fp, r.tn) == (0.0, 1, 0)
    r = detection_scores(["fake", "fake"], [None, None])
    assert (r.f1.value, r.accuracy.value, r.fn) == (0.0, 0.0, 2)


def test_perfect_and_case_insensitive():
    r = detection_scores(["FAKE", "real", "Fake"], ["fake", "REAL", "fake"])
    assert (r.f1.value, r.accuracy.value) == (1.0, 1.0)


def test_no_fakes_anywhere_gives_zero_f1_not_an_error():
    r = detection_scores(["real", "real"], ["real", "real"])
    assert (r.f1.value, r.accuracy.value, r.tp + r.fp + r.fn) == (0.0, 1.0, 0)


def test_empty_input_is_null_with_reason():
    r = detection_scores([], [])
    assert r.f1.value is None and r.f1.reason == "no predictions to score"
    assert r.accuracy.value is None


def test_bad_labels_raise_instead_of_counting_as_wrong():
    with pytest.raises(ValueError, match="truth"):
        detection_scores(["manipulated"], ["fake"])
    with pytest.raises(ValueError, match="prediction"):
        detection_scores(["fake"], ["uncertain"])
    with pytest.raises(ValueError, match="2 truth"):
        detection_scores(["fake", "real"], ["fake"])


def test_grouped_by_column_tuple_and_function():
    rows = [
        {"split": "ID", "gen": "a", "fam": "blur", "sev": 1, "label": "fake", "pred": "fake"},
        {"split": "ID", "gen": "a", "fam": "blur", "sev": 1, "label": "real", "pred": "real"},
        {"split": "ID", "gen": "b", "fam": "blur", "sev": 3, "label": "fake", "pred": None},
        {"split": "OOD", "gen": "c", "fam": "jpeg", "sev": 3, "label": "fake", "pred": "real"},
        {"split": "OOD", "gen": "c", "fam": "jpeg", "sev": 3, "label": "fake", "pred": "fake"},
    ]
    by_split = detection_by_group(rows, "split")
    assert list(by_split) == ["ID", "OOD"]
    assert by_split["ID"].f1.value == pytest.approx(2 / 3)  # TP 1, FN 1 (None), TN 1
    assert by_split["OOD"].f1.value == pytest.approx(2 / 3)  # TP 1, FN 1
    by_pert = detection_by_group(rows, ("fam", "sev"))
    assert list(by_pert) == [("blur", 1), ("blur", 3), ("jpeg", 3)]
    assert by_pert[("blur", 3)].n_unparsed == 1 and by_pert[("blur", 3)].f1.value == 0.0
    by_fn = detection_by_group(rows, lambda r: r["gen"] == "c", truth="label", pred="pred")
    assert {k: v.n for k, v in by_fn.items()} == {False: 3, True: 2}
    row = by_split["ID"].row()
    assert row["f1"] == by_split["ID"].f1.value and row["n_unparsed"] == 1


def test_light_scorers_load_neither_torch_nor_the_sdks():
    import subprocess
    import sys

    code = (
        "import sys, forenset.benchmarks.common.scorers as s; s.detection_scores; "
        "s.OfflineEntityEvidenceEvaluator; s.ModelEntityEvidenceEvaluator; "
        "print(sorted(m for m in ('torch', 'transformers', 'openai') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
