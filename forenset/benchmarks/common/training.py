"""The offline forensic detector trained on the run's train split, shared by every family whose
model lists name a ``detector`` responder (a detection stage's detectors, a judged benchmark's
policies, a question benchmark's models), so no stage builds another stage to train it.

The draw is ``train_per_class`` samples per label, the first of a ranking seeded by (build seed,
the fixed purpose label of :func:`training_draw`, detector name, sample id): the same draw,
hence the same detector, whichever family asks. ``train_per_class`` caps each label; the split
is rarely balanced (several edits and renders per real photo), so the classifier weighs the
classes equally (``detector.CLASS_WEIGHT``) rather than drawing the larger class down to the
smaller and discarding the rest. A trained detector is cached per process by its training
fingerprint (classifier and the drawn samples), so the shards of a worker train it once.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import TYPE_CHECKING, Any

from forenset.benchmarks.common.answers import LABELS
from forenset.benchmarks.common.responders import DetectorConfig
from forenset.images import decode_rgb
from forenset.seeds import derive_seed
from forenset.tasks.base import StageContext, StageRowError

if TYPE_CHECKING:  # scikit-learn stays unloaded until a detector trains
    from forenset.benchmarks.common.detector import ForensicDetector

# Trained offline detectors of this process, by training fingerprint.
_TRAINED: dict[str, ForensicDetector] = {}
_TRAIN_LOCK = threading.Lock()


def training_draw(
    seed: int, d: DetectorConfig, train: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``train_per_class`` samples per label, the first of a seeded ranking. The purpose label
    stays the one the first draw was seeded with: changing it would change every detector."""
    chosen = []
    for label in LABELS:
        pool = sorted(
            (r for r in train if r["label"] == label),
            key=lambda r: (
                derive_seed(seed, "detections", d.name, r["sample_id"]),
                r["sample_id"],
            ),
        )
        chosen.extend(pool[: d.train_per_class])
    return chosen


def trained_detector(
    ctx: StageContext, d: DetectorConfig, train: list[dict[str, Any]]
) -> ForensicDetector:
    """The detector trained on this draw, once per process (the id and ood shards share it)."""
    # scikit-learn loads here, not when the build config is read
    from forenset.benchmarks.common.detector import ForensicDetector

    chosen = training_draw(ctx.seed, d, train)
    counts = {lab: sum(r["label"] == lab for r in chosen) for lab in LABELS}
    if min(counts.values()) == 0:
        raise StageRowError(
            f"detector {d.name} cannot be trained: the train split has {counts['real']} "
            f"real and {counts['fake']} fake samples, and training needs both"
        )
    key = hashlib.sha256(
        json.dumps(
            [d.classifier, sorted((r["sample_id"], r["label"], r["blob"]) for r in chosen)]
        ).encode()
    ).hexdigest()
    with _TRAIN_LOCK:
        det = _TRAINED.get(key)
        if det is None:
            images = [decode_rgb(ctx.store.get_blob(r["blob"])) for r in chosen]
            det = ForensicDetector(d.classifier).fit(images, [r["label"] for r in chosen])
            _TRAINED[key] = det
    return det
