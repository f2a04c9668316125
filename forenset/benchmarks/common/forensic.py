"""Forensic features of an RGB uint8 image, computed from its pixels alone.

Four families, each a classic trace that editing leaves behind:

* **noise residuals** — the image minus its 3x3 median: sensor noise and fine texture. Inpainting,
  resampling and blur smooth it; splicing brings in a different noise level; demosaicing makes
  the colour channels' residuals correlate, and edits break that.
* **DCT / JPEG statistics** — 8x8 block DCT coefficient histograms (quantisation empties the
  small bins), band energies and blockiness across the 8-pixel grid.
* **error-level analysis (ELA)** — the difference to a JPEG re-encoding at a fixed quality:
  regions compressed a different number of times respond differently.
* **local inconsistency map** — per 16x16 block noise level and ELA response, z-scored against
  the image's own median (robust: median / MAD), so a region that departs from the rest of the
  *same* image stands out whatever the photo's content.

Everything is deterministic (no RNG; OpenCV, SciPy and Pillow's libjpeg are bit-stable on the
same build). ``FEATURE_VERSION`` changes whenever a feature's definition does, so a trained
detector's fingerprint says which features it was trained on.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image

FEATURE_VERSION = "forensic-features-v1"
BLOCK = 16  # side of the inconsistency map's blocks, in pixels
ELA_QUALITY = 90  # the fixed JPEG quality of the error-level re-encoding
Z_REGION = 2.5  # |z| from which a block counts as inconsistent (for the region features)
_EPS = 1e-6
_MAD_TO_SIGMA = 1.4826  # MAD of a normal distribution -> its standard deviation
_HIST_EDGES = np.array([0.0, 0.5, 1.5, 3.0, 6.0, 12.0, 24.0, 48.0, np.inf])  # |DCT AC| bins


def as_rgb8(image: np.ndarray | Image.Image) -> np.ndarray:
    """An HxWx3 uint8 array from an RGB/grey array or a PIL image (features need one layout)."""
    arr = np.asarray(image.convert("RGB")) if isinstance(image, Image.Image) else np.asarray(image)
    if arr.ndim == 2:
        arr = np.stack([arr] * 3, -1)
    if arr.ndim != 3 or arr.shape[2] < 3:
        raise ValueError(f"expected an RGB image, got an array of shape {arr.shape}")
    if arr.dtype != np.uint8:
        raise ValueError(f"expected uint8 pixels, got {arr.dtype}")
    if min(arr.shape[:2]) < 2 * BLOCK:
        raise ValueError(f"image {arr.shape[1]}x{arr.shape[0]} is smaller than {2 * BLOCK} px")
    return np.ascontiguousarray(arr[..., :3])


# -- the four families -----------------------------------------------------------------------


def noise_residual(img: np.ndarray) -> np.ndarray:
    """Per-channel high-pass residual (pixel minus its 3x3 median), float32 HxWx3.

    The median keeps edges, so what remains is mostly noise and fine texture, not structure."""
    return img.astype(np.float32) - cv2.medianBlur(img, 3).astype(np.float32)


def ela_residual(img: np.ndarray, quality: int = ELA_QUALITY) -> np.ndarray:
    """|image - JPEG(image, quality)| per channel, float32 HxWx3 (Pillow's libjpeg, 4:4:4)."""
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=quality, subsampling=0)
    again = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))
    return np.abs(img.astype(np.float32) - again.astype(np.float32))


def block_dct(grey: np.ndarray) -> np.ndarray:
    """Orthonormal 8x8 block DCT-II of a grey image: (n_blocks, 8, 8), JPEG's grid from (0, 0)."""
    h, w = (grey.shape[0] // 8) * 8, (grey.shape[1] // 8) * 8
    g = grey[:h, :w].astype(np.float32) - 128.0
    blocks = g.reshape(h // 8, 8, w // 8, 8).transpose(0, 2, 1, 3).reshape(-1, 8, 8)
    from scipy import fft  # here, not at import: the config imports stages that name this module

    return fft.dctn(blocks, axes=(1, 2), norm="ortho")


def blockiness(grey: np.ndarray) -> tuple[float, float]:
    """log ratio of the mean |step| across 8-px grid lines to the mean |step| elsewhere,
    horizontally and vertically: JPEG blocking makes the grid lines' steps larger."""
    g = grey.astype(np.float32)
    out = []
    for d in (np.abs(np.diff(g, axis=1)), np.abs(np.diff(g, axis=0)).T):
        on = (np.arange(d.shape[1]) % 8) == 7  # the step between pixel 8k+7 and 8k+8
        out.append(float(np.log((d[:, on].mean() + _EPS) / (d[:, ~on].mean() + _EPS))))
    return out[0], out[1]


def _blocks(a: np.ndarray, size: int = BLOCK) -> np.ndarray:
    """(rows, cols, size*size) view of the full blocks of a 2-D array."""
    h, w = (a.shape[0] // size) * size, (a.shape[1] // size) * size
    b = a[:h, :w].reshape(h // size, size, w // size, size).transpose(0, 2, 1, 3)
    return b.reshape(h // size, w // size, size * size)


def robust_z(values: np.ndarray) -> np.ndarray:
    """(v - median) / (1.4826 * MAD): how many sigmas each block sits from the image's norm.

    The MAD is floored at 5 % of the median's magnitude so a near-uniform map does not turn
    rounding noise into huge z-scores."""
    med = float(np.median(values))
    mad = float(np.median(np.abs(values - med))) * _MAD_TO_SIGMA
    scale = max(mad, 0.05 * abs(med), _EPS)
    return (values - med) / scale


# The measures of the inconsistency map, in the order of its layers, with the words an
# explanation uses for them.
MAP_MEASURES: tuple[str, ...] = ("noise", "sharpness", "ela", "chroma")
MEASURE_WORDS = {
    "noise": "noise residual energy",
    "sharpness": "fine-detail sharpness (high- to mid-frequency energy)",
    "ela": "JPEG error level",
    "chroma": "colour-channel noise correlation",
}


@dataclass(frozen=True)
class InconsistencyMap:
    """Per-block evidence, one (rows, cols) layer per measure of ``MAP_MEASURES``.

    ``values`` are the raw per-block measures, ``z`` their robust z-scores against the image's
    own median. ``block`` is the block side in pixels and ``shape`` the analysed image's
    (height, width), to turn block indices into fractions of the image."""

    values: dict[str, np.ndarray]
    z: dict[str, np.ndarray]
    block: int
    shape: tuple[int, int]

    @property
    def score(self) -> np.ndarray:
        """The strongest |z| of any measure per block: where the image disagrees with itself."""
        return np.max(np.abs(np.stack([self.z[m] for m in MAP_MEASURES])), axis=0)


def noise_level(grey: np.ndarray) -> np.ndarray:
    """Immerkær's per-pixel noise response |I * N| (N: the 3x3 Laplacian-difference mask).

    The mask cancels constant and linear intensity, so smooth gradients read as noise-free and
    what remains is sensor noise and fine texture — which blur, resampling and inpainting
    remove. float32 HxW, in grey levels (scaled so its mean estimates the noise sigma)."""
    k = np.array([[1, -2, 1], [-2, 4, -2], [1, -2, 1]], np.float32) * (np.sqrt(np.pi / 2) / 6)
    return np.abs(cv2.filter2D(grey.astype(np.float32), -1, k, borderType=cv2.BORDER_REFLECT))


def mid_band(grey: np.ndarray) -> np.ndarray:
    """|difference of Gaussians (sigma 1 and 2.5)|: mid-frequency structure, float32 HxW."""
    g = grey.astype(np.float32)
    return np.abs(cv2.GaussianBlur(g, (0, 0), 1.0) - cv2.GaussianBlur(g, (0, 0), 2.5))


def _block_corr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of two (rows, cols, n) block stacks along the last axis."""
    a = a - a.mean(axis=2, keepdims=True)
    b = b - b.mean(axis=2, keepdims=True)
    return (a * b).sum(axis=2) / np.sqrt((a * a).sum(axis=2) * (b * b).sum(axis=2) + 1.0)


def inconsistency_map(
    img: np.ndarray,
    residual: np.ndarray | None = None,
    ela: np.ndarray | None = None,
    block: int = BLOCK,
) -> InconsistencyMap:
    """Robust z-scores of each block's noise, sharpness, ELA response and colour-noise
    correlation against the whole image.

    Levels are in logs so that "twice as noisy" and "half as noisy" weigh the same; sharpness
    (noise over mid-band energy) tells a blurred or resampled textured area from a naturally
    flat one, which has little of both."""
    img = as_rgb8(img)
    residual = noise_residual(img) if residual is None else residual
    ela = ela_residual(img) if ela is None else ela
    grey = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)
    noise = np.log(_blocks(noise_level(grey), block).mean(axis=2) + 0.25)
    mid = np.log(_blocks(mid_band(grey), block).mean(axis=2) + 0.25)
    r, g, b = (_blocks(residual[..., c], block) for c in range(3))
    values = {
        "noise": noise,
        "sharpness": noise - mid,
        "ela": np.log(_blocks(ela.mean(axis=2), block).mean(axis=2) + 0.25),
        "chroma": (_block_corr(r, g) + _block_corr(g, b)) / 2,
    }
    return InconsistencyMap(
        values=values,
        z={m: robust_z(v) for m, v in values.items()},
        block=block,
        shape=(img.shape[0], img.shape[1]),
    )


def largest_cluster(mask: np.ndarray) -> float:
    """The largest 8-connected group of true blocks, as a share of the map."""
    n, _, st, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    return float(st[1:, cv2.CC_STAT_AREA].max()) / mask.size if n > 1 else 0.0


_MAP_STATS = ("min", "max", "p5", "p95", "low_share", "high_share", "low_cluster", "high_cluster")


def _map_stats(z: np.ndarray) -> list[float]:
    """Signed extremes, tails and clusters of one z layer: a local edit is a *cluster* of
    blocks on one side (smoother, noisier), not scattered outliers. Squashed with asinh so one
    flat block cannot dominate."""
    lo, hi = z < -Z_REGION, z > Z_REGION
    return [
        float(np.arcsinh(z.min())),
        float(np.arcsinh(z.max())),
        float(np.arcsinh(np.percentile(z, 5))),
        float(np.arcsinh(np.percentile(z, 95))),
        float(lo.mean()),
        float(hi.mean()),
        largest_cluster(lo),
        largest_cluster(hi),
    ]


# -- the feature vector ----------------------------------------------------------------------


def _feature_names() -> tuple[str, ...]:
    names: list[str] = []
    for c in "rgb":
        names += [f"res_{c}_log_std", f"res_{c}_log_mad", f"res_{c}_kurtosis"]
    names += ["res_corr_rg", "res_corr_gb", "res_corr_rb", "noise_log_mean", "sharpness_log"]
    names += ["dct_low_frac", "dct_mid_frac", "dct_high_frac"]
    names += [f"dct_hist_{i}" for i in range(len(_HIST_EDGES) - 1)]
    names += ["dct_zero_peak_01", "dct_zero_peak_10", "dct_zero_peak_11"]
    names += ["blockiness_h", "blockiness_v"]
    names += [f"ela_{c}_log_mean" for c in "rgb"] + ["ela_log_std", "ela_log_p99"]
    for m in MAP_MEASURES:
        names += [f"map_{m}_{s}" for s in _MAP_STATS] + [f"map_{m}_spread"]
    return tuple(names)


FEATURE_NAMES: tuple[str, ...] = _feature_names()


def _zero_peak(c: np.ndarray) -> float:
    """How much the histogram of one DCT coefficient piles up at 0 against its neighbours +-1..2:
    JPEG quantisation of that coefficient makes a spike at 0 with empty bins beside it."""
    r = np.rint(c).astype(np.int64)
    zero = float((r == 0).sum())
    near = float(np.isin(np.abs(r), (1, 2)).sum()) / 4
    return float(np.log((zero + 1) / (near + 1)))


def features(image: np.ndarray | Image.Image) -> np.ndarray:
    """The feature vector (``FEATURE_NAMES`` order, float64, all finite) of one RGB image.

    Scale-free where it can be (logs, ratios, shares), so crops of different sizes compare."""
    img = as_rgb8(image)
    res = noise_residual(img)
    ela = ela_residual(img)
    grey = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)
    out: list[float] = []

    flat = res.reshape(-1, 3).astype(np.float64)
    std = flat.std(axis=0)
    mad = np.median(np.abs(flat - np.median(flat, axis=0)), axis=0)
    from scipy import stats

    kurt = np.where(std > _EPS, stats.kurtosis(flat, axis=0), 0.0)
    for c in range(3):
        out += [float(np.log(std[c] + 0.05)), float(np.log(mad[c] + 0.05))]
        out += [float(np.tanh(kurt[c] / 20))]  # squashed: a flat crop's kurtosis is huge
    cc = np.asarray(np.corrcoef(flat.T)) if std.min() > _EPS else np.eye(3)
    noise = float(noise_level(grey).mean())
    out += [float(cc[0, 1]), float(cc[1, 2]), float(cc[0, 2]), float(np.log(noise + 0.25))]
    out += [float(np.log((noise + 0.25) / (float(mid_band(grey).mean()) + 0.25)))]

    d = block_dct(grey)
    e = d**2
    u, v = np.meshgrid(np.arange(8), np.arange(8), indexing="ij")
    band = u + v
    ac = e[:, band > 0].sum() + _EPS
    out += [float(e[:, (band > 0) & (band <= 2)].sum() / ac)]
    out += [float(e[:, (band > 2) & (band <= 6)].sum() / ac), float(e[:, band > 6].sum() / ac)]
    hist, _ = np.histogram(np.abs(d[:, band > 0]), bins=_HIST_EDGES)
    out += list((hist / max(1, hist.sum())).astype(float))
    out += [_zero_peak(d[:, 0, 1]), _zero_peak(d[:, 1, 0]), _zero_peak(d[:, 1, 1])]
    out += list(blockiness(grey))

    out += [float(np.log(ela[..., c].mean() + 0.05)) for c in range(3)]
    out += [float(np.log(ela.std() + 0.05)), float(np.log(np.percentile(ela, 99) + 0.05))]

    m = inconsistency_map(img, res, ela)
    for name in MAP_MEASURES:
        out += _map_stats(m.z[name]) + [float(np.std(m.values[name]))]

    vec = np.asarray(out, dtype=np.float64)
    if vec.shape != (len(FEATURE_NAMES),):  # pragma: no cover - a definition out of step
        raise AssertionError(f"{vec.shape[0]} features for {len(FEATURE_NAMES)} names")
    return np.nan_to_num(vec, nan=0.0, posinf=0.0, neginf=0.0)


def feature_matrix(images: list[np.ndarray] | list[Image.Image]) -> np.ndarray:
    """Stacked ``features`` of many images, (n, n_features)."""
    return (
        np.stack([features(im) for im in images]) if images else np.zeros((0, len(FEATURE_NAMES)))
    )
