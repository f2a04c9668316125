"""Loading a transformers model from a local folder, for the model-based scorers.

Scorers never download: a model is named by a local path (CI and clusters have no hub access,
and a path pins exactly which weights computed a number). A path that is not a folder is a
``ConfigurationError`` (every row would fail the same way), not a row error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from forenset.errors import ConfigurationError
from forenset.runtime import HF_LOCK, transformers_names

__all__ = [
    "LocalModelScorer",
    "SentenceConfig",
    "encode_batches",
    "length_batches",
    "max_tokens",
    "transformers_names",
]

# padded tokens per forward pass, per text of ``batch_size``: a batch of short texts is full
# at ``batch_size`` texts, a batch of long ones at fewer (see length_batches)
TOKENS_PER_TEXT = 64


def local_model_dir(path: str | Path, what: str) -> Path:
    """The folder of a locally saved model, or a ConfigurationError naming ``what``."""
    p = Path(path).expanduser()
    if not p.is_dir():
        raise ConfigurationError(f"{what} model path {str(path)!r} is not a local folder")
    if not (p / "config.json").is_file():
        raise ConfigurationError(f"{what} model folder {str(path)!r} has no config.json")
    return p


def load_tokenizer(path: Path, what: str) -> Any:
    """AutoTokenizer from a local folder only (``local_files_only=True``)."""
    (AutoTokenizer,) = transformers_names("AutoTokenizer")
    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"{what} tokenizer in {str(path)!r} cannot load: {exc}") from exc


class LocalModelScorer:
    """What the model-based scorers share: a local model folder (or None: null scores with the
    reason), a tokenizer and a model loaded on first use, batched passes on one device."""

    what: ClassVar[str]  # the metric, in error messages

    def __init__(
        self, model_path: str | Path | None, *, batch_size: int = 32, device: str = "cpu"
    ) -> None:
        import torch

        self.path = None if model_path is None else local_model_dir(model_path, self.what)
        self.model_label = "" if self.path is None else str(model_path)
        self.batch_size = max(1, int(batch_size))
        self.device = torch.device(device)
        self._tok: Any = None
        self._model: Any = None

    def _load(self) -> None:
        if self._model is not None or self.path is None:
            return
        with HF_LOCK:  # one load per scorer, whichever thread asks first
            if self._model is None:
                self._tok = load_tokenizer(self.path, self.what)
                self._model = self._load_model(self.path).to(self.device).eval()

    def _load_model(self, path: Path) -> Any:
        """The model from ``path`` (local files only), checked for this metric."""
        raise TypeError(f"{type(self).__name__} must define _load_model()")


def max_tokens(tokenizer: Any, model: Any) -> int:
    """Longest input both the tokenizer and the position embeddings accept."""
    limit = int(getattr(tokenizer, "model_max_length", 512) or 512)
    pos = getattr(model.config, "max_position_embeddings", None)
    if isinstance(pos, int) and pos > 0:
        # RoBERTa-style models reserve padding_idx + 1 positions: 514 -> 512 usable.
        offset = 2 if getattr(model.config, "model_type", "") in {"roberta", "xlm-roberta"} else 0
        limit = min(limit, pos - offset)
    return max(limit, 2)


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices of texts grouped for forward passes: sorted by token count, each batch at most
    ``batch_size`` texts and at most ``batch_size * TOKENS_PER_TEXT`` padded tokens (a text
    longer than that goes alone).

    Why: a batch is padded to its longest text, and an encoder's cost is its padded tokens.
    Fixed-size batches of length-sorted texts (bert-score, sentence-transformers) still pad
    every short text of the batch that holds the few long ones to their length: with a
    tenth of the replies near 400 tokens and the rest near 30, that batch alone costs more
    than all the others."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    budget = batch_size * TOKENS_PER_TEXT
    batches: list[list[int]] = []
    cur: list[int] = []
    for i in order:  # ascending: the newcomer is the batch's longest
        if cur and (len(cur) >= batch_size or (len(cur) + 1) * lengths[i] > budget):
            batches.append(cur)
            cur = []
        cur.append(i)
    if cur:
        batches.append(cur)
    return batches


def encode_batches(
    tokenizer: Any, texts: Sequence[str], limit: int, batch_size: int, *, special: bool = False
) -> Iterator[tuple[list[int], dict[str, Any], list[list[int]] | None]]:
    """(indices, padded tensors, special-token masks) per forward pass: every text is
    tokenized once (truncated at ``limit``), then batched by length and padded per batch."""
    enc = tokenizer(
        [t.strip() for t in texts],
        truncation=True,
        max_length=limit,
        return_special_tokens_mask=special,
    )
    ids = enc["input_ids"]
    masks = enc.pop("special_tokens_mask", None) if special else None
    keys = [k for k in enc.keys() if k != "special_tokens_mask"]
    for idx in length_batches([len(x) for x in ids], batch_size):
        rows = {k: [enc[k][i] for i in idx] for k in keys}
        padded = tokenizer.pad(rows, return_tensors="pt")
        yield idx, dict(padded), ([masks[i] for i in idx] if masks is not None else None)


POOLINGS = ("mean", "cls", "max", "mean_sqrt_len")


@dataclass(frozen=True)
class SentenceConfig:
    """A sentence-transformers folder's own settings (sentence_bert_config.json,
    1_Pooling/config.json, modules.json): all-MiniLM-L6-v2 was trained and is evaluated at
    max_seq_length 256 with mean pooling and a Normalize module, so its embeddings are only
    the published ones when encoded the same way. A plain transformers folder has none."""

    max_seq_length: int | None = None
    pooling: str = "mean"
    normalize: bool = False
    do_lower_case: bool = False

    @classmethod
    def read(cls, folder: Path) -> SentenceConfig:
        def load(name: str) -> Any:  # a JSON object, or a list (modules.json)
            f = folder / name
            try:
                return json.loads(f.read_text()) if f.is_file() else {}
            except (OSError, ValueError) as exc:
                raise ConfigurationError(f"{f} cannot be read: {exc}") from exc

        bert = load("sentence_bert_config.json")
        modules = load("modules.json") or []
        pool_dir = next(
            (m.get("path") for m in modules if str(m.get("type", "")).endswith(".Pooling")),
            "1_Pooling",
        )
        pool = load(f"{pool_dir}/config.json") if pool_dir else {}
        pooling = "mean"
        for mode in ("cls_token", "max_tokens", "mean_sqrt_len_tokens", "mean_tokens"):
            if pool.get(f"pooling_mode_{mode}"):
                pooling = {"cls_token": "cls", "max_tokens": "max",
                           "mean_sqrt_len_tokens": "mean_sqrt_len", "mean_tokens": "mean"}[mode]  # fmt: skip
                break
        seq = bert.get("max_seq_length")
        return cls(
            max_seq_length=int(seq) if seq else None,
            pooling=pooling,
            normalize=any(str(m.get("type", "")).endswith(".Normalize") for m in modules),
            do_lower_case=bool(bert.get("do_lower_case", False)),
        )

    def pool(self, hidden: Any, mask: Any) -> Any:
        """Sentence vectors from last hidden states (batch, tokens, dim) and the attention mask."""
        m = mask.unsqueeze(-1).to(hidden.dtype)
        if self.pooling == "cls":
            return hidden[:, 0]
        if self.pooling == "max":
            return hidden.masked_fill(m == 0, -1e9).max(1).values
        summed, n = (hidden * m).sum(1), m.sum(1).clamp(min=1e-9)
        return summed / (n.sqrt() if self.pooling == "mean_sqrt_len" else n)
