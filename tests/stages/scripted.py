"""A scripted 'model' behind the loopback fakes, and LLM settings for them.

The scripted model answers each template from what its request carries (the caption, the
instruction, the two images), like a competent model would, so the stages' validators pass;
individual tests then break one answer on purpose (a hallucinated target, a difference where
nothing changed) and check what the stage makes of it. Only the HTTP edge is faked.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from PIL import Image

MODEL_STAGES = ("captions", "instructions", "diffs", "judgments", "explanations")
SAMPLES = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "forenset" / "data" / "samples.yaml").read_text()
)
REJECTED = "Your previous reply was rejected"


def squash(text: str) -> str:
    return " ".join(text.split())


def sample_for(text: str) -> dict[str, Any] | None:
    flat = squash(text)
    return next((s for s in SAMPLES if squash(s["caption"]) in flat), None)


def change_box(real: bytes, fake: bytes) -> tuple[list[float] | None, list[float]]:
    """(box around the changed pixels or None, a box where nothing changed) as fractions."""
    a = np.asarray(Image.open(io.BytesIO(real)).convert("L"), dtype=np.float32)
    b = np.asarray(Image.open(io.BytesIO(fake)).convert("L").resize(a.shape[::-1]), np.float32)
    moved = np.abs(a - b) > 24
    h, w = moved.shape
    box = None
    if moved.mean() > 0.002:
        ys, xs = np.nonzero(moved)
        box = [xs.min() / w, ys.min() / h, (xs.max() + 1) / w, (ys.max() + 1) / h]
    calm = None
    for x0 in np.linspace(0, 0.8, 5):
        for y0 in np.linspace(0, 0.8, 5):
            x, y = int(x0 * w), int(y0 * h)
            if not moved[y : y + int(0.2 * h), x : x + int(0.2 * w)].any():
                calm = [float(x0), float(y0), float(x0) + 0.2, float(y0) + 0.2]
                break
        if calm:
            break
    return box, calm or [0.0, 0.0, 0.05, 0.05]


class ScriptedModel:
    """Routes a chat request to an answer by the template's system text."""

    def __init__(self, module: Any):
        self.m = module  # fake_openai or fake_gemini: request_text / request_images helpers
        self.hallucinate_target_once = False  # instructions: first set names a missing entity
        self.hallucinate_difference = False  # diffs: add a difference where nothing changed
        self.hedge_caption_once = False  # captions: first caption speculates ("probably")
        self.calls: dict[str, int] = {}

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        text = self.m.request_text(body)
        last = self.m.last_user_text(body)
        for key, marker, fn in (
            ("caption", "You describe photographs", self.caption),
            ("instructions", "You design image manipulations", self.instructions),
            ("difficulty", "You rate edit instructions", self.difficulty),
            ("diffs", "You compare two images", self.diffs),
            ("judge", "You audit image edits", self.judge),
            ("complex", "forensic image analyst", self.complex),
            ("simple", "no technical background", self.simple),
            ("authenticity", "examine genuine photographs", self.authenticity),
        ):
            if marker in text:
                self.calls[key] = self.calls.get(key, 0) + 1
                return fn(text, last, self.m.request_images(body))
        raise AssertionError(f"unrouted request: {text[:120]!r}")

    def caption(self, text, last, images):
        if self.hedge_caption_once and REJECTED not in last:
            return {"caption": "This is probably a grey wall, maybe a floor.", "entities": []}
        return {
            "caption": "A flat grey surface fills the frame under even, diffuse light from above. "
            "Three small dark shapes sit near the lower edge, and a thin pale line crosses the "
            "upper half from left to right without any visible texture or shadow.",
            "entities": ["grey surface", "dark shapes", "pale line"],
        }

    def instructions(self, text, last, images):
        s = sample_for(text)
        if s is None:  # a caption no sample has: nothing to ground on
            ents = ["unicorn", "dragon"]
        else:
            ents = [e["name"] for e in s["entities"] if e["name"] in s["caption"]][:2]
        if self.hallucinate_target_once and REJECTED not in last:
            ents = ["unicorn"] + ents[1:]
        a, b = ents[0], ents[1]
        return {
            "instructions": [
                {
                    "text": f"Recolour the {a} to blue.",
                    "family": "object",
                    "kind": "recolor",
                    "target": f"the {a}",
                    "location_hint": "where it stands in the frame",
                    "expected_change": f"the {a} appears blue",
                },
                {
                    "text": f"Remove the {b} and fill its area with the background.",
                    "family": "object",
                    "kind": "removal",
                    "target": f"the {b}",
                    "location_hint": "where it stands in the frame",
                    "expected_change": f"the {b} is gone",
                },
            ]
        }

    def difficulty(self, text, last, images):
        n = len(re.findall(r"^\d+\. \[", text, flags=re.MULTILINE))
        return {
            "ratings": [{"index": i, "difficulty": 4, "reason": "small area"} for i in range(n)]
        }

    def diffs(self, text, last, images):
        box, calm = change_box(images[0], images[1])
        out = []
        if box is not None:
            out.append(
                {
                    "region": "the edited object",
                    "change_type": "recolored",
                    "description": "its colour and surface look different in image 2",
                    "salience": 4,
                    "bbox": box,
                }
            )
        if self.hallucinate_difference:
            out.append(
                {
                    "region": "the white vase",
                    "change_type": "added",
                    "description": "a small new object appears in image 2",
                    "salience": 2,
                    "bbox": calm,
                }
            )
        return {"differences": out, "identical": not out}

    def judge(self, text, last, images):
        return {
            "match_score": 0.8,
            "offtarget_penalty": 0.1,
            "final_score": 0.75,
            "verdict": "KEEP",
            "failure_category": "none",
            "rationale": "the requested change is listed at the target",
        }

    def complex(self, text, last, images):
        ins = re.search(r'Edit instruction used: "(.*?)"', text).group(1).rstrip(".")
        what = ins[0].lower() + ins[1:]
        body = (
            f"Close inspection shows that someone chose to {what}: the edges of that area are "
            "too clean, the texture stops abruptly at its border, and the light on it does not "
            "match the soft light that falls across the rest of the scene, so the area reads "
            "as painted over rather than photographed."
        )
        return {"explanation": body, "cues": [{"entity": what, "evidence": "clean edges"}]}

    def simple(self, text, last, images):
        what = re.search(r"someone chose to (.*?):", text).group(1)
        return {
            "explanation": f"Look where someone chose to {what}; that spot does not match "
            "the rest of the picture",
            "entity": what,
        }

    def authenticity(self, text, last, images):
        cap = squash(re.search(r'Caption: """(.*?)"""', text, flags=re.S).group(1))
        body = f"{cap} The light, shadows and fine texture are consistent across the whole frame."
        return {"explanation": body, "cues": [{"entity": cap.split(".")[0], "evidence": "light"}]}


def llm(backend: str, srv: Any, **kw: Any) -> dict[str, Any]:
    """An LLMSettings dict for one fake server, fast retries."""
    spec = {
        "backend": backend,
        "model": f"{backend}-fake",
        "base_url": srv.base_url,
        "api_key_env": "FAKE_OPENAI_KEY" if backend == "openai" else "FAKE_GEMINI_KEY",
        "timeout_s": 10.0,
    }
    return {
        "pool": [spec],
        "max_retries": 1,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "max_error_rate": 1.0,
        "error_window": 50,
        **kw,
    }


class ScriptedSafetyModel:
    """scenario_expansion and prompt_5w1h answers built from the request's own lists."""

    def __init__(self, module: Any, bad_media_once: bool = False):
        self.m = module
        self.bad_media_once = bad_media_once
        self.calls: dict[str, int] = {}

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        text = self.m.request_text(body)
        if "Propose " in text and "scenario instances" in text:
            self.calls["scenarios"] = self.calls.get("scenarios", 0) + 1
            return self.scenarios(text, self.m.last_user_text(body))
        if "News-narration" in text or "news-narration" in text:
            self.calls["prompts"] = self.calls.get("prompts", 0) + 1
            return self.prompt(text)
        raise AssertionError(f"unrouted request: {text[:120]!r}")

    def scenarios(self, text: str, last: str) -> dict[str, Any]:
        contents = re.search(r"Content list: (.*)", text).group(1).split("; ")
        media = re.search(r"Media forms: (.*)", text).group(1).split("; ")
        n = int(re.search(r"Propose (\d+) distinct", text).group(1))
        out = [
            {
                "content": contents[i % len(contents)],
                "media_form": media[i % len(media)],
                "detail": f"seen from a footbridge, stage {i + 1} of the clean-up",
                "risk_focus": "misdirected rescue resources",
            }
            for i in range(n)
        ]
        if self.bad_media_once and REJECTED not in last:
            out[0]["media_form"] = "oil painting"
        return {"scenarios": out}

    def prompt(self, text: str) -> dict[str, Any]:
        m = re.search(r"Scenario: (.*), shown as (.*?)\. Detail:", text)
        content, media = m.group(1), m.group(2)
        f = {
            "who": "two paramedics in reflective jackets",
            "what": content,
            "when": "Tuesday 4 August 2026 at 14:05",
            "where": "a busy bus station concourse",
            "why": "a burst water main under the road",
            "how": "framed at head height with a clock on the wall that reads 14:05",
        }
        prompt = (
            f"A {media} of {f['what']}, with {f['who']} at work, on {f['when']}, in "
            f"{f['where']}; it happened because of {f['why']}. The picture is {f['how']}, "
            "sharp and photorealistic, with wet reflections on the ground."
        )
        return {**f, "prompt": prompt}
