"""SFT export: one JSONL per track (complex, simple) and split, sharing ids and image files.

Prompts are XPlainVerse App. 16's zero-shot detection prompts with their format instruction,
verbatim — the ``detect_complex`` / ``detect_simple`` templates an ``llm`` detector is sent —
because App. 16 fine-tunes with the zero-shot prompt templates and output schema. Target:
``<reasoning>…</reasoning><answer>real|fake</answer>``. Fakes use the track's own explanation;
reals use the authenticity explanation in both tracks (there is no lay version). A sample
without the needed explanation is left out and counted under ``missing``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from forenset.exports.data import write_images, write_jsonl
from forenset.store.run_store import RunStore
from forenset.text.templates import load_template

TRACKS = ("complex", "simple")
TEMPLATES = {"complex": "detect_complex", "simple": "detect_simple"}  # App. 16 prompts


def prompt_for(track: str) -> str:
    """The track's App. 16 prompt with the format instruction, as an ``llm`` detector is sent it."""
    return load_template(TEMPLATES[track]).user


PROMPTS = {t: prompt_for(t) for t in TRACKS}


def target(reasoning: str, label: str) -> str:
    return f"<reasoning>{reasoning.strip()}</reasoning><answer>{label}</answer>"


def reasoning_for(s: dict[str, Any], track: str) -> str | None:
    if s["label"] == "real":
        return s.get("explanation_authenticity")
    return s.get(f"explanation_{track}")


def sft_record(s: dict[str, Any], track: str, image: str) -> dict[str, Any] | None:
    text = reasoning_for(s, track)
    if not text:
        return None
    prompt, answer = PROMPTS[track], target(text, s["label"])
    return {
        "id": s["sample_id"],
        "split": s["split"],
        "label": s["label"],
        "generator": s["generator"],
        "image": image,
        "images": [image],
        "prompt": prompt,
        "target": answer,
        "messages": [
            {"role": "user", "content": f"<image>{prompt}"},
            {"role": "assistant", "content": answer},
        ],
    }


def has_both_tracks(s: dict[str, Any]) -> bool:
    """Whether a sample has a target in both tracks (so the two files share it)."""
    return all(reasoning_for(s, t) for t in TRACKS)


def export_sft(store: RunStore, samples: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """Write ``out/<track>/<split>.jsonl`` and ``out/images/``; returns counts per track/split."""
    refs = write_images(store, [s["blob"] for s in samples], out)
    counts: dict[str, dict[str, int]] = {}
    missing: Counter[str] = Counter()
    for track in TRACKS:
        for old in (out / track).glob("*.jsonl") if (out / track).exists() else []:
            old.unlink()  # a split that has no rows now must not keep an old file
        by_split: dict[str, list[dict[str, Any]]] = {}
        for s in samples:
            rec = sft_record(s, track, refs[s["blob"]])
            if rec is None:
                missing[track] += 1
                continue
            by_split.setdefault(s["split"], []).append(rec)
        for split, recs in by_split.items():
            write_jsonl(out / track / f"{split}.jsonl", recs)
        counts[track] = {k: len(v) for k, v in sorted(by_split.items())}
    return {
        "format": "sft",
        "path": str(out),
        "counts": counts,
        "missing": dict(missing),
        "images": len(set(refs.values())),
    }
