"""Sentence similarity (Reimers & Gurevych, 2019) of a generated text and a golden one.

Explanation benchmarks report it as "Sim.": the cosine similarity of the two texts' sentence
embeddings.
The encoder is loaded from a local folder (a Sentence-BERT model such as all-MiniLM-L6-v2 keeps
its transformer in the folder root): texts are embedded as sentence-transformers does with that
folder's own settings (``SentenceConfig``: max_seq_length, pooling, normalisation; a plain
transformers folder gets mean pooling at the model's own length limit), and compared by cosine.
The length matters: all-MiniLM-L6-v2 says 256 tokens, and truncating a 394-token reply at 512
instead gave 0.638 where sentence-transformers gives 0.751. Without a model path the
score is null with the reason, never a made-up number. An empty prediction scores 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from forenset.benchmarks.common.scorers.encoders import (
    LocalModelScorer,
    SentenceConfig,
    encode_batches,
    max_tokens,
    transformers_names,
)
from forenset.benchmarks.common.scorers.types import Score, null_score

METRIC = "similarity"
BACKEND = "transformers"
NO_MODEL = "no sentence-similarity model configured"


class SentenceSimilarityScorer(LocalModelScorer):
    """Cosine of mean-pooled sentence embeddings; ``model_path=None`` gives null scores."""

    what = "sentence similarity"
    no_model = NO_MODEL  # the null scores' reason (a family names its config key)

    def _load_model(self, path: Path) -> Any:
        (AutoModel,) = transformers_names("AutoModel")
        self.sentence = SentenceConfig.read(path)
        return AutoModel.from_pretrained(str(path), local_files_only=True)

    def max_length(self) -> int:
        """The model's limit, or the folder's max_seq_length when it sets a shorter one."""
        limit = max_tokens(self._tok, self._model)
        seq = self.sentence.max_seq_length
        return min(limit, seq) if seq else limit

    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        """Unit sentence vectors, one row per text: each text tokenized once, forward passes
        over length-grouped batches (``length_batches``)."""
        self._load()
        if not texts:
            return torch.zeros(0, 0)
        out = torch.zeros(len(texts), int(self._model.config.hidden_size))
        with torch.inference_mode():
            for idx, enc, _ in encode_batches(self._tok, texts, self.max_length(), self.batch_size):
                enc = {k: v.to(self.device) for k, v in enc.items()}
                h = self._model(**enc).last_hidden_state.float()
                pooled = self.sentence.pool(h, enc["attention_mask"])
                out[idx] = torch.nn.functional.normalize(pooled, dim=-1).cpu()
        return out

    def score(self, predictions: Sequence[str], references: Sequence[str]) -> list[Score]:
        """Cosine similarity per (prediction, reference) pair."""
        if len(predictions) != len(references):
            raise ValueError("predictions and references differ in length")
        if self.path is None:
            return [null_score(METRIC, self.no_model, backend=BACKEND) for _ in predictions]
        live = [i for i, p in enumerate(predictions) if p.strip()]
        out = [Score(METRIC, 0.0, self.model_label, BACKEND, details={"empty": True})] * len(
            predictions
        )
        if not live:
            return list(out)
        # one pass per distinct text (a reference shared by many predictions: once)
        unique = list(dict.fromkeys(t for i in live for t in (predictions[i], references[i])))
        row = {t: j for j, t in enumerate(unique)}
        vecs = self.embed(unique)
        a = vecs[[row[predictions[i]] for i in live]]
        b = vecs[[row[references[i]] for i in live]]
        cos = (a * b).sum(-1).clamp(-1.0, 1.0)
        out = list(out)
        for j, i in enumerate(live):
            out[i] = Score(METRIC, float(cos[j]), self.model_label, BACKEND)
        return out
