"""Sentence encoders read their sentence-transformers folder settings, and transformers names
are imported under one lock (the import race of transformers 5 in worker threads)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

from forenset.benchmarks.common.scorers.encoders import SentenceConfig
from forenset.benchmarks.common.scorers.similarity import SentenceSimilarityScorer

LONG = " ".join(["the red cup left of a small blue image"] * 6)  # 54 word pieces
REF = "a red cup on a table"


def with_settings(src, dst, *, seq=8, pooling="mean_tokens", normalize=True):
    shutil.copytree(src, dst)
    (dst / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": seq}))
    (dst / "1_Pooling").mkdir()
    (dst / "1_Pooling" / "config.json").write_text(json.dumps({f"pooling_mode_{pooling}": True}))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})  # fmt: skip
    (dst / "modules.json").write_text(json.dumps(modules))
    return dst


def test_the_folders_settings_are_read(encoder_dir, tmp_path):
    cfg = SentenceConfig.read(with_settings(encoder_dir, tmp_path / "st", pooling="cls_token"))
    assert cfg == SentenceConfig(max_seq_length=8, pooling="cls", normalize=True)
    assert SentenceConfig.read(encoder_dir) == SentenceConfig()  # a plain transformers folder


def test_max_seq_length_truncates_where_the_folder_says(encoder_dir, tmp_path):
    st = SentenceSimilarityScorer(with_settings(encoder_dir, tmp_path / "st", seq=8))
    plain = SentenceSimilarityScorer(encoder_dir)
    head = LONG.split()[:6]  # 6 words -> [CLS] + 6 pieces + [SEP] = 8 tokens
    cut = " ".join(head)
    [a, b] = st.score([LONG, cut], [REF, REF])
    assert a.value == pytest.approx(b.value, abs=1e-6)  # nothing after token 8 counts
    [c, d] = plain.score([LONG, cut], [REF, REF])
    assert abs(c.value - d.value) > 1e-3  # without the setting, the whole text counts


def test_pooling_follows_the_folder(encoder_dir, tmp_path):
    mean = SentenceSimilarityScorer(with_settings(encoder_dir, tmp_path / "m", seq=64))
    cls = SentenceSimilarityScorer(with_settings(encoder_dir, tmp_path / "c", seq=64,
                                                 pooling="cls_token"))  # fmt: skip
    ids = mean.embed([LONG])
    assert not torch.allclose(ids, cls.embed([LONG]))
    mean._load()
    enc = mean._tok([LONG], return_tensors="pt", truncation=True, max_length=64)
    with torch.inference_mode():
        h = mean._model(**enc).last_hidden_state[0]
    want = torch.nn.functional.normalize(h.mean(0), dim=-1)
    assert torch.allclose(ids[0], want, atol=1e-6)


RACE = textwrap.dedent(
    """
    import sys, threading
    from forenset.benchmarks.common.scorers.bertscore import BertScorer
    from forenset.benchmarks.common.scorers.similarity import SentenceSimilarityScorer

    path = sys.argv[1]
    barrier = threading.Barrier(4)
    errors = []

    def work(i):
        scorer = (SentenceSimilarityScorer if i % 2 else BertScorer)(path)
        barrier.wait()
        try:
            scorer.score(["a red cup"], ["a blue cup"])
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(errors)
    sys.exit(1 if errors else 0)
    """
)


def test_four_threads_loading_scorers_at_once_do_not_race_the_transformers_import(
    encoder_dir, tmp_path
):
    """A fresh interpreter (transformers not yet imported), four threads loading scorers at
    once: before the import lock this failed with "cannot import name 'AutoModel'"."""
    for _ in range(1):
        run = subprocess.run(
            [sys.executable, "-c", RACE, str(encoder_dir)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr[-2000:]
