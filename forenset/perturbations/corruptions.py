"""Corruptions re-implemented from ``imagecorruptions`` with an explicit numpy Generator.

Adapted from imagecorruptions 1.1.2 (https://github.com/bethgelab/imagecorruptions,
Apache-2.0, itself based on Hendrycks & Dietterich's ImageNet-C code, Apache-2.0).
The released package cannot be used here (needs ``pkg_resources``, ``np.float_``,
``multichannel=``; draws from numpy's global RNG); see docs/perturbations.md.
Changes: every random draw uses the ``rng`` argument; severities are continuous
parameters instead of the 1..5 table; ``zoom_blur``/``clipped_zoom`` use OpenCV instead of
scipy.ndimage.zoom; ``snow``'s ImageMagick motion blur is an OpenCV line kernel.
Inputs/outputs of the helpers are float32 images in [0, 1] unless stated.
"""

from __future__ import annotations

import cv2
import numpy as np


def disk(radius: float, alias_blur: float = 0.1) -> np.ndarray:
    """Anti-aliased disk kernel (imagecorruptions ``disk``)."""
    if radius <= 8:
        ax = np.arange(-8, 8 + 1)
        ksize = (3, 3)
    else:
        r = int(np.ceil(radius))
        ax = np.arange(-r, r + 1)
        ksize = (5, 5)
    xx, yy = np.meshgrid(ax, ax)
    k = ((xx**2 + yy**2) <= radius**2).astype(np.float32)
    k /= k.sum()
    return cv2.GaussianBlur(k, ksize=ksize, sigmaX=alias_blur)


def plasma_fractal(mapsize: int, wibbledecay: float, rng: np.random.Generator) -> np.ndarray:
    """Diamond-square height map in [0, 1] (imagecorruptions ``plasma_fractal``)."""
    assert mapsize & (mapsize - 1) == 0, "mapsize must be a power of two"
    maparray = np.zeros((mapsize, mapsize), dtype=np.float64)
    stepsize = mapsize
    wibble = 100.0

    def wibbledmean(array: np.ndarray) -> np.ndarray:
        return array / 4 + wibble * rng.uniform(-wibble, wibble, array.shape)

    while stepsize >= 2:
        half = stepsize // 2
        # squares
        cornerref = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        squareaccum = cornerref + np.roll(cornerref, shift=-1, axis=0)
        squareaccum += np.roll(squareaccum, shift=-1, axis=1)
        maparray[half:mapsize:stepsize, half:mapsize:stepsize] = wibbledmean(squareaccum)
        # diamonds
        drgrid = maparray[half:mapsize:stepsize, half:mapsize:stepsize]
        ulgrid = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        ltsum = drgrid + np.roll(drgrid, 1, axis=0) + ulgrid + np.roll(ulgrid, -1, axis=1)
        maparray[0:mapsize:stepsize, half:mapsize:stepsize] = wibbledmean(ltsum)
        ttsum = drgrid + np.roll(drgrid, 1, axis=1) + ulgrid + np.roll(ulgrid, -1, axis=0)
        maparray[half:mapsize:stepsize, 0:mapsize:stepsize] = wibbledmean(ttsum)
        stepsize //= 2
        wibble /= wibbledecay
    maparray -= maparray.min()
    return maparray / max(maparray.max(), 1e-12)


def clipped_zoom(x: np.ndarray, zoom: float) -> np.ndarray:
    """Zoom into the centre by ``zoom`` >= 1 keeping the size (OpenCV resize)."""
    h, w = x.shape[:2]
    ch, cw = max(1, int(np.ceil(h / zoom))), max(1, int(np.ceil(w / zoom)))
    top, left = (h - ch) // 2, (w - cw) // 2
    crop = x[top : top + ch, left : left + cw]
    out = cv2.resize(crop, (w, h), interpolation=cv2.INTER_LINEAR)
    return out.reshape(x.shape)


def motion_kernel(length: int, angle_deg: float) -> np.ndarray:
    """Normalised line kernel of ``length`` pixels at ``angle_deg``."""
    length = max(1, int(length))
    size = length if length % 2 == 1 else length + 1
    k = np.zeros((size, size), np.float32)
    c = size // 2
    t = np.deg2rad(angle_deg)
    dx, dy = np.cos(t), np.sin(t)
    for s in np.linspace(-(length - 1) / 2, (length - 1) / 2, num=max(length, 2) * 2):
        k[int(round(c + s * dy)), int(round(c + s * dx))] = 1.0
    return k / k.sum()


def gaussian_noise(x: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    return np.clip(x + rng.normal(size=x.shape, scale=sigma), 0, 1)


def shot_noise(x: np.ndarray, photons: float, rng: np.random.Generator) -> np.ndarray:
    return np.clip(rng.poisson(x * photons) / photons, 0, 1)


def impulse_noise(x: np.ndarray, amount: float, rng: np.random.Generator) -> np.ndarray:
    """Salt & pepper per value, as ``skimage.util.random_noise(mode='s&p')`` does."""
    out = x.copy()
    hit = rng.random(x.shape) < amount
    salt = rng.random(x.shape) < 0.5
    out[hit & salt] = 1.0
    out[hit & ~salt] = 0.0
    return out


def speckle_noise(x: np.ndarray, scale: float, rng: np.random.Generator) -> np.ndarray:
    return np.clip(x + x * rng.normal(size=x.shape, scale=scale), 0, 1)


def defocus_blur(x: np.ndarray, radius: float, alias_blur: float) -> np.ndarray:
    k = disk(radius, alias_blur)
    return np.clip(cv2.filter2D(x, -1, k, borderType=cv2.BORDER_REFLECT), 0, 1)


def zoom_blur(x: np.ndarray, max_zoom: float, n_steps: int) -> np.ndarray:
    acc = x.copy()
    for z in np.linspace(1.0, max_zoom, num=n_steps + 1)[1:]:
        acc += clipped_zoom(x, float(z))
    return np.clip(acc / (n_steps + 1), 0, 1)


def contrast(x: np.ndarray, factor: float) -> np.ndarray:
    means = x.mean(axis=(0, 1), keepdims=True)
    return np.clip((x - means) * factor + means, 0, 1)


def brightness(x: np.ndarray, delta: float) -> np.ndarray:
    hsv = cv2.cvtColor(x, cv2.COLOR_RGB2HSV)
    hsv[..., 2] = np.clip(hsv[..., 2] + delta, 0, 1)
    return np.clip(cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB), 0, 1)


def saturate(x: np.ndarray, factor: float) -> np.ndarray:
    hsv = cv2.cvtColor(x, cv2.COLOR_RGB2HSV)
    hsv[..., 1] = np.clip(hsv[..., 1] * factor, 0, 1)
    return np.clip(cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB), 0, 1)


def fog(x: np.ndarray, strength: float, decay: float, rng: np.random.Generator) -> np.ndarray:
    h, w = x.shape[:2]
    mapsize = 1 << int(np.ceil(np.log2(max(h, w, 2))))
    max_val = x.max()
    layer = plasma_fractal(mapsize, decay, rng)[:h, :w][..., None].astype(np.float32)
    return np.clip((x + strength * layer) * max_val / (max_val + strength), 0, 1)


def snow(
    x: np.ndarray,
    loc: float,
    zoom: float,
    threshold: float,
    blur_len: int,
    blend: float,
    rng: np.random.Generator,
) -> np.ndarray:
    h, w = x.shape[:2]
    layer: np.ndarray = rng.normal(size=(h, w), loc=loc, scale=0.3).astype(np.float32)
    layer = clipped_zoom(layer, zoom)
    layer[layer < threshold] = 0
    angle = float(rng.uniform(-135, -45))
    layer = cv2.filter2D(np.clip(layer, 0, 1), -1, motion_kernel(blur_len, angle))
    gray = cv2.cvtColor(x, cv2.COLOR_RGB2GRAY)[..., None]
    x = blend * x + (1 - blend) * np.maximum(x, gray * 1.5 + 0.5)
    layer = layer[..., None]
    return np.clip(x + layer + np.rot90(layer, k=2), 0, 1)
