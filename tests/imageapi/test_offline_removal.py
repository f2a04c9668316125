"""The classical generator's removal takes the object out of its whole box: the fill comes from
what surrounds the box, not from the object's own corners (an inscribed-ellipse inpaint
repainted an object that fills its box in its own colours)."""

import numpy as np

from forenset.backends.image.generator import GeneratorConfig
from forenset.backends.image.offline import OfflineEditor


def test_a_removed_object_that_fills_its_box_leaves_background_in_the_box():
    img = np.zeros((96, 96, 3), np.float32)
    img[:] = (40, 160, 60)  # green background
    img[30:66, 30:66] = (200, 40, 40)  # a red object filling its box
    ed = OfflineEditor(GeneratorConfig(name="g"))
    out = ed.remove(img, (30, 30, 66, 66), 1.0)
    box = out[30:66, 30:66].reshape(-1, 3)
    # the box now reads as background: close to green everywhere, corners included
    assert np.abs(box.mean(axis=0) - (40, 160, 60)).max() < 25, box.mean(axis=0)
    red = (box[:, 0] > 120) & (box[:, 1] < 100)
    assert red.mean() < 0.05, red.mean()
    # outside the box and its feathered rim nothing changed
    assert np.array_equal(out[:20], img[:20])
