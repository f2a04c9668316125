"""``edit_strength.can_show``: the instructions stage does not ask for a change the target
cannot show (the judge's "no visible change possible" floor, measured on the source alone)."""

import numpy as np

from forenset.backends.edit_strength import can_show, measure


def _scene(level: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    img = np.full((96, 96, 3), 128, np.uint8)
    img[24:72, 24:72] = level
    return np.clip(img + rng.normal(0, 2, img.shape), 0, 255).astype(np.uint8)


def _ask(text: str) -> dict:
    return {"kind": "lighting", "text": text, "change_bbox": [0.25, 0.25, 0.75, 0.75]}


def test_a_near_black_target_cannot_show_a_darken_but_can_show_a_brighten():
    img = _scene(3)
    ok, share = can_show(img, _ask("Darken the box as if a shadow fell on it."))
    assert not ok and share < 0.15
    assert can_show(img, _ask("Brighten the box as if a spotlight lit it."))[0]


def test_a_near_white_target_cannot_show_a_brighten():
    img = _scene(252)
    assert not can_show(img, _ask("Brighten the box as if a spotlight lit it."))[0]
    assert can_show(img, _ask("Darken the box as if a shadow fell on it."))[0]


def test_can_show_agrees_with_the_judges_verifiable_floor():
    for level in (3, 60, 128, 252):
        img = _scene(level)
        for text in ("Darken the box.", "Brighten the box."):
            ins = _ask(text)
            ok, share = can_show(img, ins)
            m = measure(img, img, ins)
            assert ok == m["verifiable"] and abs(share - m["capable_share"]) < 1e-3


def test_a_recolour_to_the_colour_the_target_already_has_is_not_asked():
    from forenset.tasks.instructions import recolour_shows

    rng = np.random.default_rng(1)
    img = np.full((96, 96, 3), 128.0)
    img[27:69, 27:69] = (200, 30, 30)  # a red target on a grainy grey ground
    img = np.clip(img + rng.normal(0, 6, img.shape), 0, 255).astype(np.uint8)

    def ask(colour):
        return {
            "kind": "recolor",
            "text": f"Paint the box {colour}.",
            "change_bbox": [0.28, 0.28, 0.72, 0.72],
            "params": {"colour": colour},
        }

    assert recolour_shows(img, ask("red")) is not None
    assert recolour_shows(img, ask("blue")) is None
