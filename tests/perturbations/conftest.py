from __future__ import annotations

import numpy as np
import pytest

from forenset.perturbations.photos import photo


@pytest.fixture(scope="session")
def small_img() -> np.ndarray:
    """Non-square real photo (72x96) so shape bugs (H/W swaps) show up."""
    import cv2

    return cv2.resize(photo("astronaut"), (96, 72), interpolation=cv2.INTER_AREA)
