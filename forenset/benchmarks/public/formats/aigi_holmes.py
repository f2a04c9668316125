"""AIGI-Holmes (Zhou et al., ICCV 2025; github.com/wyczzy/AIGI-Holmes, data at
huggingface.co/datasets/zzy0123/AIGI-Holmes-Dataset).

Layout read (the repository README's "recommended directory structure", checked; the dataset's
own files were not seen): ``TestSet/<generator>/0_real/*`` and ``TestSet/<generator>/1_fake/*``
(FLUX, Infinity, Janus, Janus-Pro-1B/7B, LlamaGen, PixArt-XL, SD35-L, Show-o, VAR). ``path`` is
the ``TestSet`` folder (or the folder holding it). One ``judgement`` item per image: label from
the folder (``0_real`` real, ``1_fake`` fake), generator from the folder above.

Reference explanations (optional, ``annotations``): a JSONL in the ms-swift format that the
README trains with (``{"messages": [{"role": "user", ...}, {"role": "assistant", "content":
...}], "images": ["<path>"]}``); an image whose path (relative to ``path``) is named there gets
the assistant turn as its reference. That file's layout is an assumption (not verified).
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
    sub = os.path.join(root, "TestSet")
    return sub if os.path.isdir(sub) else root


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
    base = test_root(root)
    out = [os.path.join(base, rel) for _, _, rel in listing(root)]
    if annotations:
        out.append(rec.given(root, annotations))
    return out


def references(root: str, annotations: str | None) -> dict[str, str]:
    """Image path (relative to the test root) -> the assistant turn, from an ms-swift JSONL."""
    if not annotations:
        return {}
    path = rec.annotation_file(root, annotations, (), "AIGI-Holmes explanation file")
    text = rec.decode_text(paths.read_local(path, rec.MAX_ANNOTATION_BYTES), os.path.basename(path))
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            r = paths.json_loads(line, "a line of the explanation file")
        except ValueError:
            continue  # a line that is not a record names no image: nothing to attach
        if not isinstance(r, dict):
            continue
        msgs, images = r.get("messages"), r.get("images")
        if not isinstance(msgs, list) or not isinstance(images, list) or len(images) != 1:
            continue
        said = [
            m.get("content") for m in msgs if isinstance(m, dict) and m.get("role") == "assistant"
        ]
        if said and isinstance(said[-1], str) and isinstance(images[0], str):
            out[images[0].replace("\\", "/").removeprefix("TestSet/")] = said[-1].strip()
    return out


def read(
    root: str, annotations: str | None = None, limit: int | None = None
) -> Iterator[dict[str, Any]]:
    """AIGI-Holmes's test images as judgement items (module doc); a bad file is an error row."""
    base = test_root(root)
    refs = references(root, annotations)
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
            choices=None, answer=label, asks=None, reference=refs.get(rel), regions=None,
            images=[image],
        )  # fmt: skip
