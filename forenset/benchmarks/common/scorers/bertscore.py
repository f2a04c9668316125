"""BERTScore-F1 between a generated explanation and its reference (Zhang et al., ICLR 2020).

The seed paper reports BERTScore-F1 for complex and simple explanations (§4, §5, App. 15.0.0.5)
as a complement to EntityScore / EvidenceScore. We compute it ourselves over an encoder loaded
from a local folder, instead of depending on the ``bert-score`` package, so tests run offline
with tiny random encoders and every number names the exact weights that produced it.

Greedy matching, as in Zhang et al. §3 and the reference implementation (bert-score 0.3.x):

* tokens are embedded by the encoder (``hidden_states[layer]``, default the last layer) and
  L2-normalised, so a dot product is a cosine;
* each candidate token is matched to its most similar reference token (P), each reference
  token to its most similar candidate token (R); the means are weighted by idf when asked
  (off by default) and special tokens ([CLS], [SEP]) weigh 0 on their own side, yet may be
  matched from the other side, as in bert-score;
* F1 = 2PR / (P + R); baseline rescaling is not applied.

Padding never enters a max (bert-score multiplies padded similarities by 0, which can beat a
negative cosine and makes a result depend on its batch-mates); here each pair is scored on its
own tokens, so batched and one-by-one results agree. An empty text scores 0, as in bert-score.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from forenset.benchmarks.common.scorers.encoders import (
    LocalModelScorer,
    encode_batches,
    max_tokens,
    transformers_names,
)
from forenset.benchmarks.common.scorers.types import Score, null_score

METRIC = "bertscore_f1"
BACKEND = "transformers"
NO_MODEL = "no BERTScore model configured"


@dataclass(frozen=True)
class _Embedded:
    ids: list[int]
    special: list[bool]
    vectors: torch.Tensor  # (tokens, dim), unit rows


def greedy_match(
    cand: torch.Tensor,
    ref: torch.Tensor,
    cand_weights: torch.Tensor,
    ref_weights: torch.Tensor,
) -> tuple[float, float, float]:
    """(P, R, F1) of BERTScore from unit token vectors and per-token weights of each side.

    A side whose weights sum to 0 (an empty text) gives P = R = F1 = 0, as bert-score does.
    """
    if float(cand_weights.sum()) == 0 or float(ref_weights.sum()) == 0:
        return 0.0, 0.0, 0.0
    sim = cand @ ref.T
    p = float((sim.max(dim=1).values * cand_weights).sum() / cand_weights.sum())
    r = float((sim.max(dim=0).values * ref_weights).sum() / ref_weights.sum())
    f = 2 * p * r / (p + r) if p + r != 0 else 0.0
    return p, r, f


class BertScorer(LocalModelScorer):
    """BERTScore over a local encoder; ``model_path=None`` yields null scores with the reason.

    ``layer`` indexes ``hidden_states`` (0 = embeddings; default: the last layer; bert-score's
    ``num_layers``). At most ``batch_size`` texts go in one forward pass (fewer long ones:
    ``length_batches``).
    """

    what = "BERTScore"

    def __init__(
        self,
        model_path: str | Path | None,
        *,
        layer: int | None = None,
        batch_size: int = 32,
        idf: bool = False,
        device: str = "cpu",
    ) -> None:
        super().__init__(model_path, batch_size=batch_size, device=device)
        self.layer = layer
        self.idf = idf

    def _load_model(self, path: Path) -> Any:
        (AutoModel,) = transformers_names("AutoModel")

        model = AutoModel.from_pretrained(str(path), local_files_only=True)
        n = int(model.config.num_hidden_layers)
        if self.layer is not None and not 0 <= self.layer <= n:
            raise ValueError(f"layer {self.layer} out of range 0..{n} for {self.model_label}")
        return model

    def embed(self, texts: Sequence[str]) -> list[_Embedded]:
        """Unit token vectors of each text (specials included): each text tokenized once,
        forward passes over length-grouped batches (``length_batches``)."""
        self._load()
        tok, model = self._tok, self._model
        out: list[_Embedded | None] = [None] * len(texts)
        if not texts:
            return []
        batches = encode_batches(tok, texts, max_tokens(tok, model), self.batch_size, special=True)
        with torch.inference_mode():
            for idx, enc, special in batches:
                assert special is not None
                mask = enc["attention_mask"].bool()
                ids = enc["input_ids"]
                enc = {k: v.to(self.device) for k, v in enc.items()}
                if self.layer is None:
                    h = model(**enc).last_hidden_state
                else:
                    h = model(**enc, output_hidden_states=True).hidden_states[self.layer]
                h = torch.nn.functional.normalize(h.float(), dim=-1).cpu()
                for row, i in enumerate(idx):
                    keep = mask[row]
                    out[i] = _Embedded(
                        ids=ids[row][keep].tolist(),
                        special=[bool(x) for x in special[row]],
                        vectors=h[row][keep],
                    )
        return out  # type: ignore[return-value]

    def _weights(self, e: _Embedded, idf: dict[int, float] | None, default: float) -> torch.Tensor:
        w = [
            0.0 if s else (1.0 if idf is None else idf.get(t, default))
            for t, s in zip(e.ids, e.special, strict=True)
        ]
        return torch.tensor(w, dtype=torch.float32)

    def score(self, candidates: Sequence[str], references: Sequence[str]) -> list[Score]:
        """BERTScore-F1 per (candidate, reference) pair; P and R are in ``details``."""
        if len(candidates) != len(references):
            raise ValueError(f"{len(candidates)} candidates but {len(references)} references")
        if self.path is None:
            return [null_score(METRIC, NO_MODEL, backend=BACKEND) for _ in candidates]
        if not candidates:
            return []
        unique = list(dict.fromkeys([*candidates, *references]))
        emb = dict(zip(unique, self.embed(unique), strict=True))
        idf: dict[int, float] | None = None
        default = 1.0
        if self.idf:  # bert-score's get_idf_dict: log((M + 1) / (docs with the token + 1))
            m = len(references)
            counts = Counter(t for r in references for t in set(emb[r].ids))
            idf = {t: math.log((m + 1) / (c + 1)) for t, c in counts.items()}
            default = math.log(m + 1)
        out = []
        for c, r in zip(candidates, references, strict=True):
            ec, er = emb[c], emb[r]
            p, rec, f = greedy_match(
                ec.vectors,
                er.vectors,
                self._weights(ec, idf, default),
                self._weights(er, idf, default),
            )
            details = {"precision": p, "recall": rec, "idf": self.idf, "layer": self.layer}
            out.append(Score(METRIC, f, self.model_label, BACKEND, details=details))
        return out
