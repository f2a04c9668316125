"""BERTScore-F1 by greedy matching over a tiny random encoder saved to a temp folder."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from forenset.benchmarks.common.scorers.bertscore import NO_MODEL, BertScorer, greedy_match
from forenset.benchmarks.common.scorers.encoders import TOKENS_PER_TEXT, length_batches
from forenset.errors import ConfigurationError

CANDS = [
    "The hands are blurry.",
    "the sign text is warped and the shadow is wrong",
    "a",
    "fine",
    "The hands are blurry.",
]
REFS = [
    "The hand looks smeared.",
    "The sign letters are distorted.",
    "the cyclist",
    "the sky is blue and the wall is red",
    "the cyclist",
]


def test_greedy_match_by_hand():
    cand = torch.tensor([[1.0, 0.0]])
    ref = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p, r, f = greedy_match(cand, ref, torch.ones(1), torch.ones(2))
    # sim = [[1, 0]]: P = max over ref of the one cand token = 1; R = (1 + 0) / 2
    assert (p, r) == (1.0, 0.5) and f == pytest.approx(2 * 0.5 / 1.5)
    cand = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    ref = torch.tensor([[0.0, 1.0], [0.8, 0.6]])
    # sim = [[0, .8], [.8, .96]]; weights (1, 0) drop cand token 2 from P (a special token)
    p, r, f = greedy_match(cand, ref, torch.tensor([1.0, 0.0]), torch.ones(2))
    assert p == pytest.approx(0.8) and r == pytest.approx((0.8 + 0.96) / 2)
    assert greedy_match(cand, ref, torch.zeros(2), torch.ones(2)) == (0.0, 0.0, 0.0)


def numpy_bertscore(folder, cand: str, ref: str) -> tuple[float, float, float]:
    """The definition written out with numpy loops, one text per forward pass."""
    tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model = AutoModel.from_pretrained(str(folder), local_files_only=True).eval()

    def embed(text):
        enc = tok(text, return_tensors="pt", return_special_tokens_mask=True)
        special = enc.pop("special_tokens_mask")[0].numpy().astype(bool)
        with torch.no_grad():
            h = model(**enc, output_hidden_states=True).hidden_states[-1][0].numpy()
        return h / np.linalg.norm(h, axis=1, keepdims=True), special

    (c, cs), (r, rs) = embed(cand), embed(ref)
    best_c = [max(float(c[i] @ r[j]) for j in range(len(r))) for i in range(len(c)) if not cs[i]]
    best_r = [max(float(r[j] @ c[i]) for i in range(len(c))) for j in range(len(r)) if not rs[j]]
    p, rec = float(np.mean(best_c)), float(np.mean(best_r))
    return p, rec, 2 * p * rec / (p + rec)


def test_matches_an_explicit_numpy_computation(encoder_dir):
    scores = BertScorer(encoder_dir, batch_size=3).score(CANDS, REFS)
    for s, c, r in zip(scores, CANDS, REFS, strict=True):
        p, rec, f = numpy_bertscore(encoder_dir, c, r)
        assert s.details["precision"] == pytest.approx(p, abs=1e-5)
        assert s.details["recall"] == pytest.approx(rec, abs=1e-5)
        assert s.value == pytest.approx(f, abs=1e-5)
        assert (s.metric, s.model, s.backend) == ("bertscore_f1", str(encoder_dir), "transformers")


def test_identical_texts_score_one_and_order_matters_for_p_and_r(encoder_dir):
    scorer = BertScorer(encoder_dir)
    [same] = scorer.score(["The sign text is warped."], ["The sign text is warped."])
    assert same.value == pytest.approx(1.0, abs=1e-6)
    [ab], [ba] = scorer.score([CANDS[1]], [REFS[1]]), scorer.score([REFS[1]], [CANDS[1]])
    assert ab.details["precision"] == pytest.approx(ba.details["recall"], abs=1e-6)
    assert ab.value == pytest.approx(ba.value, abs=1e-6)


def test_batched_equals_one_by_one(encoder_dir):
    batched = BertScorer(encoder_dir, batch_size=4).score(CANDS, REFS)
    single = BertScorer(encoder_dir, batch_size=1)
    one = [single.score([c], [r])[0] for c, r in zip(CANDS, REFS, strict=True)]
    for b, o in zip(batched, one, strict=True):
        assert b.value == pytest.approx(o.value, abs=1e-6)
        assert b.details["precision"] == pytest.approx(o.details["precision"], abs=1e-6)


def test_empty_text_scores_zero(encoder_dir):
    [s] = BertScorer(encoder_dir).score([""], ["The hands are blurry."])
    assert s.value == 0.0


def test_no_model_is_null_with_reason_and_a_bad_path_is_a_configuration_error(tmp_path):
    scores = BertScorer(None).score(["a", "b"], ["c", "d"])
    assert [s.value for s in scores] == [None, None]
    assert {s.reason for s in scores} == {NO_MODEL} == {"no BERTScore model configured"}
    with pytest.raises(ConfigurationError, match="not a local folder"):
        BertScorer(tmp_path / "missing")
    with pytest.raises(ConfigurationError, match="no config.json"):
        BertScorer(tmp_path)
    with pytest.raises(ValueError, match="2 candidates"):
        BertScorer(None).score(["a", "b"], ["c"])


@pytest.mark.parametrize("idf", [False, True])
def test_agrees_with_the_bert_score_package_when_installed(encoder_dir, idf):
    bert_score = pytest.importorskip("bert_score")  # optional: not a forenset dependency
    cands, refs = CANDS[:4], REFS[:4]  # distinct pairs (bert-score dedupes internally too)
    mine = BertScorer(encoder_dir, idf=idf).score(cands, refs)
    P, R, F = bert_score.score(
        cands, refs, model_type=str(encoder_dir), num_layers=2, idf=idf, batch_size=2
    )
    for s, p, r, f in zip(mine, P, R, F, strict=True):
        assert s.details["precision"] == pytest.approx(float(p), abs=1e-5)
        assert s.details["recall"] == pytest.approx(float(r), abs=1e-5)
        assert s.value == pytest.approx(float(f), abs=1e-5)


def test_length_batches_group_by_length_within_the_token_budget():
    lengths = [30, 400, 28, 31, 410, 29, 5, 395, 33, 30]
    batches = length_batches(lengths, batch_size=4)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        longest = max(lengths[i] for i in b)
        assert len(b) <= 4 and (len(b) == 1 or len(b) * longest <= 4 * TOKENS_PER_TEXT)
    # the long texts never share a batch with the short ones
    assert all(len({lengths[i] > 100 for i in b}) == 1 for b in batches)


def test_long_and_short_texts_score_as_one_by_one(encoder_dir):
    short = ["a cat on a mat.", "the sky is blue.", "hands look wrong."]
    long = " ".join(["the edges of the sign are warped and the text is smeared."] * 20)
    cands, refs = [*short, long, short[0]], [long, *short, short[1]]
    batched = [s.value for s in BertScorer(encoder_dir, batch_size=8).score(cands, refs)]
    alone = BertScorer(encoder_dir, batch_size=1)
    single = [alone.score([c], [r])[0].value for c, r in zip(cands, refs, strict=True)]
    assert np.allclose(batched, single, atol=1e-6)
