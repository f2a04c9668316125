"""Offline generators: classical manipulations driven by the instruction, computed from the image.

Each kind edits the instruction's ``change_bbox`` region: copy-move duplication, splicing from
a donor photo, local planar warp, liquify deformation, inpainting removal, recolouring and
local relighting. ``faults`` turns a generator into a *faulty* one that fails in known ways
(edit missing, partial, off-target global change, strong artefacts) and says so in ``truth``,
so Edit-Check can be measured against ground truth.

``blend`` is the generator family's rendering pipeline and marks every kind it runs, so two
families never make the same bytes (identical bytes across families would leave a held-out
family nothing of its own to test): ``feather`` composites in RGB through a Gaussian-feathered
mask with bilinear resampling; ``poisson`` blends pastes, removals and deformations in the
gradient domain (``cv2.seamlessClone``, bicubic resampling) and recolours and relights in Lab
(a Poisson blend would erase a uniform colour or light change: its boundary is the original).
A ``strength`` above 1 hardens the mask's edge, so it marks every kind too.
"""

from __future__ import annotations

import time
from typing import Any

import cv2
import numpy as np
from PIL import Image

from forenset.backends.image.base import EditRequest, GenerateRequest, ImageResult
from forenset.backends.image.generator import GeneratorConfig
from forenset.seeds import rng_for
from forenset.text.instructions import OFFLINE_KINDS

HUES = {
    "red": 0,
    "orange": 15,
    "yellow": 28,
    "green": 60,
    "cyan": 90,
    "blue": 115,
    "purple": 140,
    "magenta": 160,
}
FAULTS = ("missing", "partial", "offtarget", "artifacts")


def box_px(b: list[float], w: int, h: int) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = b
    X0, Y0 = int(np.clip(round(x0 * w), 0, w - 2)), int(np.clip(round(y0 * h), 0, h - 2))
    X1, Y1 = int(np.clip(round(x1 * w), X0 + 2, w)), int(np.clip(round(y1 * h), Y0 + 2, h))
    return X0, Y0, X1, Y1


def ellipse_mask(
    h: int, w: int, box: tuple[int, int, int, int], feather: float = 0.15
) -> np.ndarray:
    """A soft elliptical mask (float 0..1) filling the box."""
    x0, y0, x1, y1 = box
    m = np.zeros((h, w), np.float32)
    center = (int(round((x0 + x1) / 2)), int(round((y0 + y1) / 2)))
    axes = (max(1, (x1 - x0) // 2), max(1, (y1 - y0) // 2))
    cv2.ellipse(m, center, axes, 0, 0, 360, 1.0, -1)
    k = max(1.0, feather * min(x1 - x0, y1 - y0))
    return np.clip(cv2.GaussianBlur(m, (0, 0), k), 0, 1)


class OfflineEditor:
    """One classical generator. ``name`` is the backend kind recorded in rows."""

    name = "offline"
    tasks = frozenset({"edit"})
    edit_kinds = frozenset(OFFLINE_KINDS)  # the seven classical manipulations it implements

    @classmethod
    def from_generator(cls, generator: GeneratorConfig) -> OfflineEditor:
        """Offline generators are configured by the generator entry itself."""
        return cls(generator)

    def __init__(self, cfg: GeneratorConfig):
        self.cfg = cfg

    # -- contract ------------------------------------------------------------
    def generate(self, requests: list[GenerateRequest]) -> list[ImageResult]:
        return [
            ImageResult(
                None,
                "error",
                "the offline backend edits photos; it cannot generate from text",
                False,
            )
            for _ in requests
        ]

    def edit(self, requests: list[EditRequest]) -> list[ImageResult]:
        return [self._edit_one(r) for r in requests]

    # -- one edit ----------------------------------------------------------------
    def _edit_one(self, req: EditRequest) -> ImageResult:
        t0 = time.perf_counter()
        rng = rng_for(req.seed, self.cfg.name)
        img = np.asarray(req.image.convert("RGB")).astype(np.float32)
        ins = req.instruction
        fault = self._pick_fault(rng)
        strength = self.cfg.strength
        box = list(ins["change_bbox"])
        if fault == "partial":  # only a corner of the target is edited
            w, h = box[2] - box[0], box[3] - box[1]
            fx, fy = rng.integers(2), rng.integers(2)
            x0, y0 = box[0] + fx * w * 0.62, box[1] + fy * h * 0.62
            box = [x0, y0, x0 + w * 0.38, y0 + h * 0.38]
        if fault == "offtarget":
            box = [1 - box[2], 1 - box[3], 1 - box[0], 1 - box[1]]  # the edit lands elsewhere
        try:
            out = self.apply(ins["kind"], img, box, ins, strength, rng, req.donor)
        except (ValueError, cv2.error) as e:
            return ImageResult(
                None, "error", f"{ins['kind']} failed: {e}", False, time.perf_counter() - t0
            )
        if fault == "missing":
            out = img + rng.normal(0, 0.6, img.shape).astype(np.float32)  # re-encoded, unedited
        elif fault == "offtarget":
            out = self._global_rewrite(out, rng)
        elif fault == "artifacts":
            out = self._artifacts(out, rng)
        res = np.clip(out + 0.5, 0, 255).astype(np.uint8)
        return ImageResult(
            Image.fromarray(res),
            latency_s=time.perf_counter() - t0,
            model=self.cfg.model,
            params={
                "kind": ins["kind"],
                "strength": strength,
                "inpaint": self.cfg.inpaint,
                "blend": self.cfg.blend,
                "box": box,
            },
            truth={"fault": fault or "none", "expected": "DISCARD" if fault else "KEEP"},
        )

    def _pick_fault(self, rng: np.random.Generator) -> str | None:
        f = self.cfg.faults
        u = rng.random()
        acc = 0.0
        for name in FAULTS:
            acc += getattr(f, name)
            if u < acc:
                return name
        return None

    # -- manipulations -------------------------------------------------------------
    def apply(
        self,
        kind: str,
        img: np.ndarray,
        box: list[float],
        ins: dict[str, Any],
        strength: float,
        rng: np.random.Generator,
        donor: Image.Image | None,
    ) -> np.ndarray:
        h, w = img.shape[:2]
        B = box_px(box, w, h)
        p = ins.get("params") or {}
        if kind == "recolor":
            return self.recolor(img, B, p.get("colour", "red"), strength)
        if kind == "removal":
            return self.remove(img, B, strength)
        if kind == "copy_move":
            src = box_px(ins["bbox"], w, h)
            return self.paste(img, img[src[1] : src[3], src[0] : src[2]], B, strength)
        if kind == "splice":
            d = np.asarray((donor or Image.fromarray(img[:, ::-1].astype(np.uint8))).convert("RGB"))
            db = p.get("donor_bbox", [0.3, 0.3, 0.7, 0.7])
            dh, dw = d.shape[:2]
            s = box_px(db, dw, dh)
            return self.paste(img, d[s[1] : s[3], s[0] : s[2]].astype(np.float32), B, strength)
        if kind == "local_warp":
            return self.warp(img, B, strength, rng)
        if kind == "liquify":
            return self.liquify(img, B, strength, p.get("mode", "bulge"))
        if kind == "lighting":
            return self.relight(img, B, strength, float(p.get("gain", 0.45)))
        raise ValueError(f"unknown edit kind {kind!r}")

    @property
    def poisson(self) -> bool:
        return self.cfg.blend == "poisson"

    @property
    def interp(self) -> int:
        """The family's resampling: bilinear (feather) or bicubic (poisson)."""
        return cv2.INTER_CUBIC if self.poisson else cv2.INTER_LINEAR

    @staticmethod
    def feather(base: float, strength: float) -> float:
        """A mask's feather: narrower above strength 1 (a harder, more visible edit edge)."""
        return base / max(1.0, strength)

    def recolor(self, img: np.ndarray, B, colour: str, strength: float) -> np.ndarray:
        h, w = img.shape[:2]
        m = ellipse_mask(h, w, B, self.feather(0.15, strength))[..., None] * min(1.0, strength)
        if self.poisson:  # Lab: the target's chroma, the photo's own lightness (shading kept)
            lab = cv2.cvtColor(np.clip(img, 0, 255).astype(np.float32) / 255, cv2.COLOR_RGB2Lab)
            ref = np.array([[[HUES.get(colour, 0), 200, 200]]], dtype=np.uint8)
            ref_rgb = cv2.cvtColor(ref, cv2.COLOR_HSV2RGB).astype(np.float32) / 255
            target = cv2.cvtColor(ref_rgb, cv2.COLOR_RGB2Lab)[0, 0]
            lab[..., 1], lab[..., 2] = target[1], target[2]
            lab[..., 0] = np.clip(np.maximum(lab[..., 0], 35), 0, 100)
            col = cv2.cvtColor(lab, cv2.COLOR_Lab2RGB) * 255
            return img * (1 - m) + col * m
        u8 = np.clip(img, 0, 255).astype(np.uint8)
        hsv = cv2.cvtColor(u8, cv2.COLOR_RGB2HSV).astype(np.float32)
        hsv[..., 0] = HUES.get(colour, 0)
        hsv[..., 1] = np.clip(np.maximum(hsv[..., 1], 150), 0, 255)
        hsv[..., 2] = np.clip(np.maximum(hsv[..., 2], 90), 0, 255)
        col = cv2.cvtColor(hsv.astype(np.uint8), cv2.COLOR_HSV2RGB).astype(np.float32)
        return img * (1 - m) + col * m

    def remove(self, img: np.ndarray, B, strength: float) -> np.ndarray:
        h, w = img.shape[:2]
        # fill the whole box (and a rim around it) from what surrounds it: inpainting only the
        # inscribed ellipse filled it from the box's corners — the object's own pixels where
        # the object fills its box — and repainted the object in its own colours
        x0, y0, x1, y1 = B
        d = max(2, int(0.04 * min(x1 - x0, y1 - y0)))
        m = np.zeros((h, w), np.uint8)
        m[max(0, y0 - d) : y1 + d, max(0, x0 - d) : x1 + d] = 255
        flag = cv2.INPAINT_TELEA if self.cfg.inpaint == "telea" else cv2.INPAINT_NS
        # inpaint at reduced size for speed, then upsample only the filled area
        scale = min(1.0, 256 / max(h, w))
        small = cv2.resize(
            np.clip(img, 0, 255).astype(np.uint8),
            None,
            fx=scale,
            fy=scale,
            interpolation=cv2.INTER_AREA,
        )
        sm = cv2.resize(m, (small.shape[1], small.shape[0]), interpolation=cv2.INTER_NEAREST)
        filled = cv2.inpaint(small, sm, 5, flag)
        filled = cv2.resize(filled, (w, h), interpolation=cv2.INTER_CUBIC).astype(np.float32)
        if self.poisson:
            return self.clone(img, filled, B)
        # blended over the box as filled (feathered on the rim outside it), not an inscribed
        # ellipse, which left the object's corners and edge in place
        k = max(1.0, self.feather(0.04, strength) * min(x1 - x0, y1 - y0))
        a = np.clip(cv2.GaussianBlur(m.astype(np.float32) / 255, (0, 0), k), 0, 1)
        a = a[..., None] * min(1.0, strength)
        return img * (1 - a) + filled * a

    def clone(self, img: np.ndarray, edited: np.ndarray, B) -> np.ndarray:
        """The box of a whole-image edit, blended into the photo in the gradient domain."""
        x0, y0, x1, y1 = B
        return self.paste(img, edited[y0:y1, x0:x1], B, 1.0)

    def paste(self, img: np.ndarray, patch: np.ndarray, B, strength: float) -> np.ndarray:
        x0, y0, x1, y1 = B
        patch = cv2.resize(
            np.ascontiguousarray(patch), (x1 - x0, y1 - y0), interpolation=self.interp
        )
        if self.poisson and min(x1 - x0, y1 - y0) > 8:
            h, w = img.shape[:2]
            mask = np.zeros(patch.shape[:2], np.uint8)
            axes = (max(1, int((x1 - x0) * 0.45)), max(1, int((y1 - y0) * 0.45)))
            cv2.ellipse(mask, ((x1 - x0) // 2, (y1 - y0) // 2), axes, 0, 0, 360, 255, -1)
            center = ((x0 + x1) // 2, (y0 + y1) // 2)
            dst = np.clip(img, 0, 255).astype(np.uint8)
            out = cv2.seamlessClone(
                np.clip(patch, 0, 255).astype(np.uint8), dst, mask, center, cv2.NORMAL_CLONE
            )
            return out.astype(np.float32)
        out = img.copy()
        box = (0, 0, x1 - x0, y1 - y0)
        m = ellipse_mask(y1 - y0, x1 - x0, box, self.feather(0.1, strength))[..., None]
        m = m * min(1.0, strength)
        out[y0:y1, x0:x1] = img[y0:y1, x0:x1] * (1 - m) + patch * m
        return out

    def warp(self, img: np.ndarray, B, strength: float, rng: np.random.Generator) -> np.ndarray:
        x0, y0, x1, y1 = B
        bw, bh = x1 - x0, y1 - y0
        src = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32)
        jit = rng.uniform(-0.18, 0.18, (4, 2)) * np.array([bw, bh]) * strength
        dst = (src + jit).astype(np.float32)
        M = cv2.getPerspectiveTransform(src, dst)
        h, w = img.shape[:2]
        warped = cv2.warpPerspective(
            img, M, (w, h), flags=self.interp, borderMode=cv2.BORDER_REFLECT
        )
        if self.poisson:
            return self.clone(img, warped, B)
        m = ellipse_mask(h, w, B, self.feather(0.12, strength))[..., None]
        return img * (1 - m) + warped * m

    def liquify(self, img: np.ndarray, B, strength: float, mode: str) -> np.ndarray:
        x0, y0, x1, y1 = B
        h, w = img.shape[:2]
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        rx, ry = max(2, (x1 - x0) / 2), max(2, (y1 - y0) / 2)
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        dx, dy = (xx - cx) / rx, (yy - cy) / ry
        r2 = dx * dx + dy * dy
        k = 0.55 * min(1.5, strength) * np.exp(-r2 * 2.0)
        k = k if mode == "bulge" else -k
        mapx = cx + (xx - cx) * (1 - k)
        mapy = cy + (yy - cy) * (1 - k)
        out = cv2.remap(img, mapx, mapy, self.interp, borderMode=cv2.BORDER_REFLECT)
        return self.clone(img, out, B) if self.poisson else out

    def relight(self, img: np.ndarray, B, strength: float, gain: float) -> np.ndarray:
        h, w = img.shape[:2]
        m = ellipse_mask(h, w, B, self.feather(0.35, strength))[..., None]
        factor = 1 + gain * min(1.5, strength) * m
        if self.poisson:  # lightness only (Lab L), the colours' chroma kept
            lab = cv2.cvtColor(np.clip(img, 0, 255).astype(np.float32) / 255, cv2.COLOR_RGB2Lab)
            lift = 10 * gain * m[..., 0] if gain > 0 else 0
            lab[..., 0] = np.clip(lab[..., 0] * factor[..., 0] + lift, 0, 100)
            return cv2.cvtColor(lab, cv2.COLOR_Lab2RGB) * 255
        return img * factor + (25 * gain * m if gain > 0 else 0)

    # -- injected faults -----------------------------------------------------------
    def _global_rewrite(self, img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A scene-wide rewrite: tone curve + colour cast + slight geometric drift."""
        gamma = rng.choice([0.6, 1.6])
        cast = rng.uniform(-30, 30, 3).astype(np.float32)
        out = 255 * (np.clip(img, 0, 255) / 255) ** gamma + cast
        h, w = img.shape[:2]
        M = np.array([[1.02, 0, -w * 0.01], [0, 1.02, -h * 0.01]], dtype=np.float32)
        return cv2.warpAffine(out, M, (w, h), borderMode=cv2.BORDER_REFLECT)

    def _artifacts(self, img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Strong generator artefacts: blocking from a very low JPEG quality plus grain."""
        u8 = np.clip(img, 0, 255).astype(np.uint8)
        ok, enc = cv2.imencode(".jpg", u8[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 4])
        dec = cv2.imdecode(enc, cv2.IMREAD_COLOR)
        if dec is None:
            raise RuntimeError("the artefact pass could not decode its own JPEG")
        out = dec[..., ::-1].astype(np.float32)
        return out + rng.normal(0, 14, img.shape).astype(np.float32)
