"""Offline detectors: forensic features from pixels, a trainable classifier over them, and the
parser of VLM detector replies (``<reasoning>…</reasoning><answer>real|fake</answer>``).

Offline means no weights and no keys: every number is computed from the image itself, so the
evaluation benchmark has a detector baseline that runs anywhere.
"""

from __future__ import annotations

from forenset.benchmarks.common.answers import ParsedAnswer, format_reply, parse_answer

__all__ = ["ParsedAnswer", "format_reply", "parse_answer"]
