"""FakeBench metrics checked against numbers computed by hand: BLEU-1/2, ROUGE-L, sentence
similarity, and the judge's averaging over rounds (through the fake OpenAI server)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from forenset.backends.llm.types import LLMSettings
from forenset.benchmarks.common.scorers.similarity import NO_MODEL, SentenceSimilarityScorer
from forenset.benchmarks.common.scorers.text_overlap import bleu, overlap_scores, rouge_l
from forenset.benchmarks.fakebench.judged import (
    NO_JUDGE,
    CPRJudgment,
    JudgedPair,
    ModelCPRJudge,
    average_rounds,
)

HYP = "the cat sat on the mat"
REF = "the cat is on the mat"


def test_bleu1_is_clipped_unigram_precision_times_brevity_penalty():
    # unigrams: the x2 (ref has 2), cat, on, mat match; "sat" does not -> 5/6; equal lengths
    assert bleu(HYP, REF, 1) == pytest.approx(5 / 6)
    # "the cat" vs a 6-token reference: precision 1, BP = exp(1 - 6/2)
    assert bleu("the cat", REF, 1) == pytest.approx(math.exp(-2))


def test_bleu2_is_the_geometric_mean_of_uni_and_bigram_precisions():
    # bigrams of HYP: the cat, cat sat, sat on, on the, the mat -> 3 of 5 in REF
    assert bleu(HYP, REF, 2) == pytest.approx(math.sqrt(5 / 6 * 3 / 5))
    # no matching bigram: unsmoothed BLEU-2 is 0 (FakeQA's near-zero values)
    assert bleu("mat the", "the mat", 2) == 0.0


def test_rouge_l_is_the_lcs_f_measure():
    # LCS = "the cat on the mat" (5 tokens): P = R = 5/6
    assert rouge_l(HYP, REF) == pytest.approx(5 / 6)
    # "cat mat" vs REF: LCS 2, P = 2/2, R = 2/6 -> F = 2PR/(P+R) = 0.5
    assert rouge_l("cat mat", REF) == pytest.approx(0.5)


def test_empty_prediction_earns_nothing_and_scores_name_the_libraries():
    got = overlap_scores("", REF)
    assert {m: s.value for m, s in got.items()} == {"bleu1": 0.0, "bleu2": 0.0, "rouge_l": 0.0}
    assert all("sacrebleu" in s.model and "rouge-score" in s.model for s in got.values())


def test_similarity_is_the_cosine_of_mean_pooled_embeddings(encoder_dir):
    from transformers import AutoModel, AutoTokenizer

    scorer = SentenceSimilarityScorer(encoder_dir)
    a, b = "the cat is on the wall", "a dog looks blurry"
    s_same, s_diff, s_empty = scorer.score([a, a, ""], [a, b, b])
    assert s_same.value == pytest.approx(1.0, abs=1e-5)
    assert s_empty.value == 0.0 and s_empty.details == {"empty": True}
    # by hand: mean of the last hidden states over the tokens, then cosine
    tok = AutoTokenizer.from_pretrained(str(encoder_dir))
    model = AutoModel.from_pretrained(str(encoder_dir)).eval()
    with torch.no_grad():
        va = model(**tok(a, return_tensors="pt")).last_hidden_state[0].mean(0)
        vb = model(**tok(b, return_tensors="pt")).last_hidden_state[0].mean(0)
    assert s_diff.value == pytest.approx(float(torch.dot(va, vb) / va.norm() / vb.norm()), abs=1e-5)
    assert s_diff.model == str(encoder_dir)


def test_similarity_without_a_model_is_null_with_the_reason():
    (s,) = SentenceSimilarityScorer(None).score(["x"], ["y"])
    assert s.value is None and s.reason == NO_MODEL


def test_average_rounds_means_the_valid_rounds_only():
    r = [
        CPRJudgment(completeness=2, preciseness=1, relevance=2),
        CPRJudgment(completeness=1, preciseness=1, relevance=0),
        None,
        CPRJudgment(completeness=0, preciseness=2, relevance=2),
        CPRJudgment(completeness=2, preciseness=0, relevance=1),
    ]
    got = average_rounds(r, model="m", backend="openai")
    assert got["completeness"].value == pytest.approx(5 / 4)
    assert got["preciseness"].value == pytest.approx(4 / 4)
    assert got["relevance"].value == pytest.approx(5 / 4)
    assert got["completeness"].details == {"rounds": 4, "failed_rounds": 1}
    none = average_rounds([None, None], model="m", backend="openai", error="HTTP 500")
    assert all(s.value is None and "HTTP 500" in s.reason for s in none.values())
    assert NO_JUDGE.startswith("no judge")


def test_model_judge_asks_five_separate_rounds_and_averages(openai_server):
    scripted = iter([(2, 2, 2), (1, 2, 0), (0, 1, 2), (2, 2, 1), (1, 0, 2)] * 2)

    def reply(body):
        c, p, r = next(scripted)
        return {"completeness": c, "preciseness": p, "relevance": r}

    openai_server.reply = reply
    settings = LLMSettings.model_validate(
        {
            "pool": [
                {
                    "backend": "openai",
                    "model": "judge",
                    "base_url": openai_server.base_url,
                    "api_key_env": "FAKE_SCORER_KEY",
                    "max_concurrency": 1,
                }
            ],
            "max_retries": 0,
        }
    )
    judge = ModelCPRJudge(settings, rounds=5, build_seed=1)
    (got,) = judge.evaluate([JudgedPair("img1", "Why?", "the edge is soft", "the edge is sharp")])
    assert len(openai_server.requests) == 5
    seeds = {b.get("seed") for b in openai_server.requests}
    assert len(seeds) == 5  # one sample per round, not five cache hits
    assert "the edge is sharp" in json.dumps(openai_server.requests[0])
    assert got["completeness"].value == pytest.approx(6 / 5)
    assert got["preciseness"].value == pytest.approx(7 / 5)
    assert got["relevance"].value == pytest.approx(7 / 5)
    assert got["relevance"].model == "judge"
