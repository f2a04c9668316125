"""Loading a transformers model from a local folder, for the model-based scorers.

Scorers never download: a model is named by a local path (CI and clusters have no hub access,
and a path pins exactly which weights computed a number). A path that is not a folder is a
``ConfigurationError`` (every row would fail the same way), not a row error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from forenset.errors import ConfigurationError


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
    from transformers import AutoTokenizer

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
