"""AIGI-Holmes (Zhou et al., ICCV 2025; github.com/wyczzy/AIGI-Holmes, data at
huggingface.co/datasets/zzy0123/AIGI-Holmes-Dataset).

Two sources, both in the repository README's "recommended directory structure" (``dataset/``
with ``0_real/``, ``1_fake/`` and ``*.jsonl``; ``TestSet/<generator>/{0_real,1_fake}/``):

* without ``annotations``: the ``TestSet`` folder (``path`` is it or the folder holding it, or
  holds ``TestSet/TestSet`` when ``TestSet.zip`` was unzipped into a folder of its own name),
  one ``judgement`` item per image, label from the class folder (``0_real`` real, ``1_fake``
  fake), generator from the folder above (FLUX, Infinity, Janus, Janus-Pro-1B/7B, LlamaGen,
  PixArt-XL, SD35-L, Show-o, VAR). Verified against the repository's code: the visual expert's
  test loop reads ``<test_dataroot>/<generator>`` as a ``0_real`` / ``1_fake`` image folder
  (``Baselines_AIGI/convert_weight2hf_config.py``, ``Baselines_AIGI/config.yaml``);
* with ``annotations`` (e.g. ``dataset/test.jsonl``): one item per JSONL line,
  ``images: ["<path relative to path>"]`` (a leading ``./`` dropped) and ``mask``; the label
  from a ``0_real`` / ``1_fake`` folder in the image path, else from ``mask`` (a non-empty mask
  path: fake, empty: real, as public loaders of the release read it); the question is the last
  user turn, the reference explanation the last assistant turn, in whichever form the README's
  ms-swift (2.6, its own docs' ``Customization.md``) takes: ``messages`` (role / content),
  ``conversations`` (from / value) or ``query`` / ``response``; generator from the folder above
  the class folder when it is not ``dataset`` / ``TestSet``.

The JSONL's ``images`` and ``mask`` are as public code that reads the release uses them; the
release's own files, and which conversation form its lines use, were not seen: an assumption,
said in the docs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from forenset import paths
from forenset.benchmarks.public.formats import records as rec

NAME = "aigi_holmes"
CLASSES = {"0_real": "real", "1_fake": "fake"}
EXTS = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff")
QUESTION = "Is this image real or AI-generated? Answer real or fake, then explain why."


def test_root(root: str) -> str:
    """The folder holding the generator folders: ``TestSet/TestSet`` (TestSet.zip unzipped into
    a folder of its own name), ``TestSet``, else ``root`` itself."""
    for sub in ("TestSet/TestSet", "TestSet"):
        p = os.path.join(root, sub)
        if os.path.isdir(p) and not os.path.islink(p):
            return p
    return root


def listing(root: str) -> list[tuple[str, str, str]]:
    """(generator, class folder, relative path) of every image, sorted; symlinked folders are
    not followed (a file symlinked out is refused when read)."""
    base = test_root(root)
    out = []
    for gen in sorted(os.listdir(base)):
        gdir = os.path.join(base, gen)
        if not os.path.isdir(gdir) or os.path.islink(gdir):
            continue
        for cls in CLASSES:
            cdir = os.path.join(gdir, cls)
            if not os.path.isdir(cdir) or os.path.islink(cdir):
                continue
            for name in sorted(os.listdir(cdir)):
                if name.lower().endswith(EXTS):
                    out.append((gen, cls, f"{gen}/{cls}/{name}"))
    return out


def files(root: str, annotations: str | None) -> list[str]:
    if annotations:
        return [rec.given(root, annotations)]
    base = test_root(root)
    return [os.path.join(base, rel) for _, _, rel in listing(root)]


def _label(parts: list[str], r: dict[str, Any]) -> str | None:
    for part in parts:
        if part in CLASSES:
            return CLASSES[part]
    mask = r.get("mask")
    if isinstance(mask, str):
        return "fake" if mask.strip() else "real"
    return None


ROLES = {"user": ("user", "human"), "assistant": ("assistant", "gpt")}


def _text(v: Any) -> str | None:
    return v.strip() if isinstance(v, str) and v.strip() else None


def _turn(r: dict[str, Any], role: str) -> str | None:
    """The last ``role`` turn (user: the question, assistant: the reference) in any of the JSONL
    forms the README's ms-swift (2.6) takes: ``messages`` (role / content), ``conversations``
    (from / value, user|human and assistant|gpt), or ``query`` / ``response``."""
    names = ROLES[role]
    for key, who, what in (("messages", "role", "content"), ("conversations", "from", "value")):
        turns = r.get(key)
        if isinstance(turns, list) and turns:
            said = [t.get(what) for t in turns if isinstance(t, dict) and t.get(who) in names]
            return _text(said[-1]) if said else None
    return _text(r.get("query" if role == "user" else "response"))


def _jsonl(root: str, annotations: str, limit: int | None) -> Iterator[dict[str, Any]]:
    """One item per line of an ms-swift JSONL (module doc); a bad line is an error row."""
    path = rec.annotation_file(root, annotations, (), "AIGI-Holmes JSONL")
    text = rec.decode_text(paths.read_local(path, rec.MAX_ANNOTATION_BYTES), os.path.basename(path))
    n = 0
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if limit is not None and n >= limit:
            return
        n += 1
        try:
            r = paths.json_loads(line, f"line {i}")
            if not isinstance(r, dict):
                raise ValueError(f"line {i} is not a JSON object")
            images = r.get("images")
            images = [images] if isinstance(images, str) else images
            if not isinstance(images, list) or len(images) != 1 or not isinstance(images[0], str):
                raise ValueError(f"line {i} names not exactly one image in images")
        except ValueError as e:
            yield rec.error(NAME, "judgement", f"line-{i}", str(e))
            continue
        name = images[0].replace("\\", "/").removeprefix("./")
        parts = name.split("/")
        label = _label(parts, r)
        if label is None:
            yield rec.error(
                NAME, "judgement", name,
                "neither a 0_real / 1_fake folder in the image path nor a mask field (a mask path:"
                " fake, empty: real) gives the class",
            )  # fmt: skip
            continue
        try:
            image = rec.image_path(root, name)
        except (OSError, ValueError) as e:
            yield rec.error(NAME, "judgement", name, rec.reason(e))
            continue
        cls = next((k for k, p in enumerate(parts) if p in CLASSES), None)
        gen = parts[cls - 1] if cls and parts[cls - 1] not in ("dataset", "TestSet") else None
        question = (_turn(r, "user") or QUESTION).replace("<image>", "").strip()
        yield rec.record(
            NAME, "judgement", name,
            label=label, kind=label, category=None, generator=gen, question=question or QUESTION,
            choices=None, answer=label, asks=None, reference=_turn(r, "assistant"),
            regions=None, images=[image],
        )  # fmt: skip


def read(
    root: str, annotations: str | None = None, limit: int | None = None
) -> Iterator[dict[str, Any]]:
    """AIGI-Holmes's items (module doc): the JSONL's lines, else the TestSet's images; a bad
    line or file is an error row."""
    if annotations:
        yield from _jsonl(root, annotations, limit)
        return
    base = test_root(root)
    items = listing(root)
    if not items:
        raise FileNotFoundError(f"no <generator>/0_real or <generator>/1_fake images under {base}")
    for n, (gen, cls, rel) in enumerate(items):
        if limit is not None and n >= limit:
            return
        try:
            image = rec.image_path(base, rel)
        except (OSError, ValueError) as e:
            yield rec.error(NAME, "judgement", rel, rec.reason(e))
            continue
        label = CLASSES[cls]
        yield rec.record(
            NAME, "judgement", rel,
            label=label, kind=label, category=None, generator=gen, question=QUESTION,
            choices=None, answer=label, asks=None, reference=None, regions=None,
            images=[image],
        )  # fmt: skip
