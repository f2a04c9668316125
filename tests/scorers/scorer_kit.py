"""Tiny random-weight encoders and tokenizers built in memory and saved to a folder (no hub)."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizerFast

WORDS = (
    "the a an of is are and on in at with to it its this that looks look looked "
    "hand hands sign text letters cyclist shadow light lighting window face wall sky tree car "
    "road person man woman child dog cat edge edges texture reflection "
    "blurry blurred smeared warped distorted bent inconsistent wrong unnatural repeated "
    "missing soft sharp bright dark red blue left right small large fine real fake image "
    ". , ; ' ! ?"
).split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tiny_tokenizer() -> BertTokenizerFast:
    vocab = {t: i for i, t in enumerate([*SPECIALS, *WORDS, *(f"##{c}" for c in "sdy")])}
    return BertTokenizerFast(vocab=vocab, do_lower_case=True, model_max_length=64)


def _config(tok: BertTokenizerFast, **kw) -> BertConfig:
    base = dict(
        vocab_size=len(tok.get_vocab()),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    return BertConfig(**{**base, **kw})


def save_encoder(folder: Path, seed: int = 0) -> Path:
    """A 2-layer, 16-dim BERT with random weights and its tokenizer, saved for AutoModel."""
    tok = tiny_tokenizer()
    torch.manual_seed(seed)
    BertModel(_config(tok)).eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def save_regressor(
    folder: Path, seed: int = 0, *, num_labels: int = 1, bias: float | None = None
) -> Path:
    """A tiny sequence-regression BERT (SLE's shape); ``bias`` fixes its output to that value."""
    tok = tiny_tokenizer()
    torch.manual_seed(seed)
    model = BertForSequenceClassification(_config(tok, num_labels=num_labels)).eval()
    if bias is not None:
        with torch.no_grad():
            model.classifier.weight.zero_()
            model.classifier.bias.fill_(bias)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
