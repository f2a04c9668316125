"""What the benchmark families share, so that no stage imports another stage.

The offline detector: forensic features from pixels (``forensic``), a trainable classifier over
them (``detector``), its training on the run's train split (``training``), and the parser of
VLM detector replies (``answers``: ``<reasoning>…</reasoning><answer>real|fake</answer>``).
Offline means no weights and no keys: every number is computed from the image itself, so every
benchmark has a detector baseline that runs anywhere. Also: the detector config
(``responders``), predictions files of the user's own model (``predictions``), tagged input
reads (``reads``), the scorer library (``scorers``) and the families' CLI helpers (``cli``).
"""

from __future__ import annotations

from forenset.benchmarks.common.answers import ParsedAnswer, format_reply, parse_answer

__all__ = ["ParsedAnswer", "format_reply", "parse_answer"]
