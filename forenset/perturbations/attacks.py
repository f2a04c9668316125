"""Torch-only adversarial perturbations against pluggable surrogate encoders.

Imported lazily (only when an adversarial op runs) so that ``forenset.perturbations`` stays
light. No torchvision: it fails to import beside the CPU torch wheel here.

* X-Transfer-style universal perturbation (UAP): one delta, trained against an encoder
  ensemble by minimising the cosine similarity of clean vs perturbed global embeddings
  (arXiv 2505.05528; simplified: the whole ensemble every step instead of bandit-selected
  surrogates). Stored as ``.npy`` (HxWx3 float32, unit L-inf: delta / eps) or ``.pt``.
* PGD embedding attack (untargeted, per image): from a random start in the L-inf ball, signed
  steps that lower the cosine similarity of the clean and perturbed global embeddings over the
  ensemble (Madry et al.'s PGD with an embedding loss instead of a classifier's).
* FOA-style targeted per-image attack: maximise global cosine to a target image plus
  ``ot_weight`` x optimal-transport similarity (Sinkhorn) between k-means clusters of patch
  tokens, on random crops, with signed steps projected to an L-inf ball (implemented from
  the FOA-Attack paper; its repository has no licence).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from forenset.errors import ConfigurationError


class SurrogateEncoder(Protocol):
    """What the attacks need: input_size, and (global BxD, patches BxNxD) from Bx3xHxW in [0,1]."""

    input_size: int

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...


_MEAN = (0.48145466, 0.4578275, 0.40821073)  # CLIP normalisation, also used by the tiny nets
_STD = (0.26862954, 0.26130258, 0.27577711)


def _normalise(x: torch.Tensor) -> torch.Tensor:
    mean = torch.tensor(_MEAN, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    std = torch.tensor(_STD, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    return (x - mean) / std


class TinyConvEncoder(nn.Module):
    """Random-init conv net: a stand-in surrogate for tests and the default offline build."""

    def __init__(self, input_size: int = 64, dim: int = 32) -> None:
        super().__init__()
        self.input_size = input_size
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1),
            nn.GELU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.GELU(),
            nn.Conv2d(32, dim, 3, stride=2, padding=1),
        )
        self.head = nn.Linear(dim, dim)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = self.body(_normalise(x))
        patches = f.flatten(2).transpose(1, 2)
        return self.head(patches.mean(1)), patches


class TinyViTEncoder(nn.Module):
    """Random-init ViT-ish encoder (patch embed, cls token, 2 pre-norm blocks)."""

    def __init__(self, input_size: int = 64, patch: int = 8, dim: int = 48, depth: int = 2):
        super().__init__()
        self.input_size = input_size
        n = (input_size // patch) ** 2
        self.embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(
            dim, nhead=4, dim_feedforward=dim * 2, dropout=0.0, batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = self.embed(_normalise(x)).flatten(2).transpose(1, 2)
        t = torch.cat([self.cls.expand(t.shape[0], -1, -1), t], dim=1) + self.pos
        t = self.norm(self.blocks(t))
        return t[:, 0], t[:, 1:]


class OpenClipEncoder:
    """open_clip visual tower as a surrogate (optional; needs open_clip + weights locally)."""

    def __init__(self, model_name: str, pretrained: str, device: str) -> None:
        import open_clip  # optional dependency, not installed by default

        model, _, _ = open_clip.create_model_and_transforms(model_name, pretrained=pretrained)
        self.visual = model.visual.to(device).eval()
        self.visual.output_tokens = True
        size = self.visual.image_size
        self.input_size = int(size[0] if isinstance(size, tuple | list) else size)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pooled, tokens = self.visual(_normalise(x))
        return pooled, tokens


class TimmEncoder:
    """timm model as a surrogate (optional): tokens from forward_features, pooled pre-logits."""

    def __init__(self, name: str, device: str) -> None:
        import timm  # optional dependency

        self.model = timm.create_model(name, pretrained=True, num_classes=0).to(device).eval()
        self.input_size = int(self.model.default_cfg["input_size"][-1])

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        feats = self.model.forward_features(_normalise(x))
        if feats.ndim == 4:  # CNN: B,C,H,W -> tokens
            feats = feats.flatten(2).transpose(1, 2)
        pooled = self.model.forward_head(feats, pre_logits=True) if feats.ndim == 3 else feats
        return pooled, feats


class HFVisionEncoder:
    """A transformers image model from a local folder (``save_pretrained`` layout) as a
    surrogate: CLIP (its vision tower), SigLIP, ViT, DINOv2, ConvNeXt... Tokens are the last
    hidden state, the global embedding is the pooled output (or the token mean)."""

    def __init__(self, path: str, device: str) -> None:
        import json

        from forenset.runtime import transformers_names

        (AutoModel,) = transformers_names("AutoModel")

        try:
            model = AutoModel.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError) as e:  # no folder, no weights, an unknown architecture
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ConfigurationError(
                f"hf:{path} is not a loadable transformers model ({first})"
            ) from None
        vision = getattr(model, "vision_model", None)
        takes = getattr(vision if vision is not None else model, "main_input_name", None)
        if takes != "pixel_values":  # a text model (BERT, MiniLM…) loads but cannot see images
            kind = getattr(model.config, "model_type", type(model).__name__)
            raise ConfigurationError(
                f"hf:{path} is a {kind} model whose input is {takes!r}, not images: give an image "
                "model folder (CLIP, SigLIP, ViT, DINOv2, ConvNeXt...)"
            )
        self.model = (vision if vision is not None else model).to(device).eval()
        proj = getattr(model, "visual_projection", None)  # CLIP: image embedding space
        self.projection = proj.to(device).eval() if proj is not None else None
        for p in self.model.parameters():
            p.requires_grad_(False)
        cfg = model.config
        vcfg = getattr(cfg, "vision_config", None) or cfg
        size = getattr(vcfg, "image_size", 224)
        self.input_size = int(size[0] if isinstance(size, tuple | list) else size)
        self.mean, self.std = _MEAN, _STD
        pre = Path(path) / "preprocessor_config.json"
        if pre.exists():  # the model's own normalisation when it ships one
            d = json.loads(pre.read_text(encoding="utf-8"))
            self.mean = tuple(d.get("image_mean", _MEAN))
            self.std = tuple(d.get("image_std", _STD))

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = torch.tensor(self.mean, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
        std = torch.tensor(self.std, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
        if x.shape[-1] != self.input_size or x.shape[-2] != self.input_size:
            x = F.interpolate(x, size=(self.input_size,) * 2, mode="bilinear", align_corners=False)
        out = self.model(pixel_values=(x - mean) / std)
        tokens = out.last_hidden_state
        if tokens.ndim == 4:  # CNN feature map B,C,H,W -> tokens
            tokens = tokens.flatten(2).transpose(1, 2)
        pooled = getattr(out, "pooler_output", None)
        if pooled is None:
            pooled = tokens.mean(1)
        return pooled.flatten(1), tokens

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The image embedding (CLIP-I): projected when the model has a projection."""
        g = self.encode(x)[0]
        return self.projection(g) if self.projection is not None else g


class OpenClipDirEncoder(OpenClipEncoder):
    """An open_clip checkpoint folder (``open_clip_config.json`` + weights) on local disk."""

    def __init__(self, path: str, device: str) -> None:  # noqa: D107
        import open_clip  # optional dependency, not installed by default

        model, _ = open_clip.create_model_from_pretrained(f"local-dir:{path}")
        self.visual = model.visual.to(device).eval()
        self.visual.output_tokens = True
        size = self.visual.image_size
        self.input_size = int(size[0] if isinstance(size, tuple | list) else size)


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


_TORCH_LOCK = threading.RLock()  # torch's thread count and global RNG are process-wide


@functools.lru_cache(maxsize=16)
def load_encoder(spec: str, device: str = "cpu", input_size: int = 64) -> SurrogateEncoder:
    """Build an encoder from a spec: ``tiny_conv:SEED``, ``tiny_vit:SEED`` (random-init, seeded),
    ``hf:PATH`` (a transformers image model saved in a local folder), ``open_clip_dir:PATH``
    (an open_clip checkpoint folder), ``open_clip:MODEL/PRETRAINED`` or ``timm:NAME``."""
    kind, _, arg = spec.partition(":")
    if kind in ("tiny_conv", "tiny_vit"):
        seed = int(arg or 0)
        with _TORCH_LOCK, torch.random.fork_rng(devices=[]):  # the global torch RNG is shared
            torch.manual_seed(seed)
            net = TinyConvEncoder(input_size) if kind == "tiny_conv" else TinyViTEncoder(input_size)
        net = net.to(device).eval()
        for p in net.parameters():
            p.requires_grad_(False)
        return net
    if kind == "hf":
        return HFVisionEncoder(arg, device)
    if kind == "open_clip_dir":
        return OpenClipDirEncoder(arg, device)
    if kind == "open_clip":
        name, _, pretrained = arg.partition("/")
        return OpenClipEncoder(name, pretrained, device)
    if kind == "timm":
        return TimmEncoder(arg, device)
    raise ValueError(f"unknown encoder spec {spec!r}")


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """One intra-op thread for bit-identical CPU results (torch CPU kernels vary by threads).

    The thread count is process-wide, so concurrent shard threads would race on it (one
    restoring N threads while another attacks): the lock serialises the torch section.
    """
    with _TORCH_LOCK:
        old = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(old)


def _to_tensor(imgs: Sequence[np.ndarray], device: str) -> torch.Tensor:
    arr = np.stack([np.asarray(i, dtype=np.float32) / 255.0 for i in imgs])
    return torch.from_numpy(arr).permute(0, 3, 1, 2).contiguous().to(device)


def _resize(x: torch.Tensor, size: int) -> torch.Tensor:
    return F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)


# ---------------------------------------------------------------- universal perturbation


def train_uap(
    images: Sequence[np.ndarray],
    encoders: Sequence[str],
    *,
    size: int = 64,
    eps: float = 12 / 255,
    steps: int = 30,
    step_size: float | None = None,
    batch: int = 8,
    seed: int = 0,
    device: str = "auto",
) -> np.ndarray:
    """Train a universal perturbation; returns HxWx3 float32 with L-inf 1 (= delta / eps).

    Each step draws a batch of random crops (numpy rng from ``seed``), perturbs them with the
    (resized) UAP and descends the mean clean/perturbed cosine similarity over the ensemble.
    """
    dev = resolve_device(device)
    rng = np.random.Generator(np.random.PCG64(seed))
    encs = [load_encoder(s, dev) for s in encoders]
    alpha = step_size if step_size is not None else eps / 8
    data = [_to_tensor([im], dev) for im in images]
    delta = torch.zeros(1, 3, size, size, device=dev)
    with single_thread():
        for _ in range(steps):
            crops = []
            for _ in range(batch):
                x = data[int(rng.integers(len(data)))]
                crops.append(_resize(_random_crop(x, rng, 0.6), size))
            xb = torch.cat(crops)
            delta.requires_grad_(True)
            loss = torch.zeros((), device=dev)
            for enc in encs:
                s = enc.input_size
                g_clean, _ = enc.encode(_resize(xb, s))
                g_adv, _ = enc.encode(_resize((xb + delta).clamp(0, 1), s))
                loss = loss + F.cosine_similarity(g_clean.detach(), g_adv, dim=-1).mean()
            (grad,) = torch.autograd.grad(loss, delta)
            with torch.no_grad():
                delta = (delta - alpha * grad.sign()).clamp(-eps, eps)
    uap = (delta.detach()[0].permute(1, 2, 0).cpu().numpy() / eps).astype(np.float32)
    return np.clip(uap, -1.0, 1.0)


def save_uap(uap: np.ndarray, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".pt":
        torch.save(torch.from_numpy(uap), path)
    else:
        np.save(path, uap)
    return path


def load_uap(path: str | Path) -> np.ndarray:
    path = Path(path)
    if path.suffix == ".pt":
        arr = torch.load(path, map_location="cpu", weights_only=True).numpy()
    else:
        arr = np.load(path)
    arr = np.asarray(arr, dtype=np.float32)
    if arr.ndim == 3 and arr.shape[0] == 3 and arr.shape[-1] != 3:
        arr = arr.transpose(1, 2, 0)
    if arr.ndim != 3 or arr.shape[-1] != 3:
        raise ValueError(f"UAP must be HxWx3 (or 3xHxW); got {arr.shape}")
    peak = float(np.abs(arr).max())
    return arr / peak if peak > 1.0 else arr


# ---------------------------------------------------------------- FOA-style targeted attack


def _random_crop(x: torch.Tensor, rng: np.random.Generator, min_scale: float) -> torch.Tensor:
    h, w = x.shape[-2:]
    s = float(rng.uniform(min_scale, 1.0))
    ch, cw = max(2, int(h * s)), max(2, int(w * s))
    top = int(rng.integers(0, h - ch + 1))
    left = int(rng.integers(0, w - cw + 1))
    return x[..., top : top + ch, left : left + cw]


def kmeans_centres(tokens: torch.Tensor, k: int, iters: int = 5) -> torch.Tensor:
    """k-means over N x D tokens (deterministic evenly spaced init). Assignments carry no
    gradient; the returned centres (k x D) are means of assigned tokens, so they do."""
    n = tokens.shape[0]
    k = min(k, n)
    idx = torch.linspace(0, n - 1, k, device=tokens.device).round().long()
    centres = tokens[idx].detach()
    assign = None
    for _ in range(iters):
        d = torch.cdist(tokens.detach(), centres)
        assign = d.argmin(1)
        onehot = F.one_hot(assign, k).to(tokens.dtype)
        counts = onehot.sum(0, keepdim=True).T
        new = (onehot.T @ tokens.detach()) / counts.clamp(min=1)
        centres = torch.where(counts > 0, new, centres)
    assert assign is not None
    onehot = F.one_hot(assign, k).to(tokens.dtype)
    counts = onehot.sum(0, keepdim=True).T
    keep = counts[:, 0] > 0
    return ((onehot.T @ tokens) / counts.clamp(min=1))[keep]


def sinkhorn_similarity(a: torch.Tensor, b: torch.Tensor, reg: float = 0.1, iters: int = 30):
    """Entropic OT between two point sets (uniform weights) with cost 1 - cosine; returns the
    transport-weighted cosine similarity (higher = better aligned)."""
    sim = F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T
    cost = 1.0 - sim
    kmat = torch.exp(-cost / reg)
    mu = torch.full((a.shape[0],), 1.0 / a.shape[0], device=a.device, dtype=a.dtype)
    nu = torch.full((b.shape[0],), 1.0 / b.shape[0], device=a.device, dtype=a.dtype)
    u = torch.ones_like(mu)
    v = torch.ones_like(nu)
    for _ in range(iters):
        u = mu / (kmat @ v).clamp(min=1e-12)
        v = nu / (kmat.T @ u).clamp(min=1e-12)
    plan = u[:, None] * kmat * v[None, :]
    return (plan * sim).sum()


def foa_attack_batch(
    images: Sequence[np.ndarray],
    targets: Sequence[np.ndarray],
    encoders: Sequence[str],
    *,
    eps: float,
    step_size: float,
    steps: int,
    clusters: int = 10,
    ot_weight: float = 0.2,
    crop_min: float = 0.7,
    rng: np.random.Generator,
    device: str = "auto",
) -> list[np.ndarray]:
    """Targeted attack on a batch of same-size uint8 images (eps/step_size in [0,1] units).

    Batched on the GPU when present. One random crop box per step is shared by the batch, so a
    batch is not bit-identical to per-image calls.
    """
    dev = resolve_device(device)
    encs = [load_encoder(s, dev) for s in encoders]
    x = _to_tensor(images, dev)
    tgt_feats = []
    with torch.no_grad():
        for enc in encs:
            tx = torch.cat([_resize(_to_tensor([t], dev), enc.input_size) for t in targets])
            g, p = enc.encode(tx)
            cents = [kmeans_centres(p[i], clusters) for i in range(p.shape[0])]
            tgt_feats.append((g, cents))
    delta = torch.zeros_like(x)
    for _ in range(steps):
        delta.requires_grad_(True)
        crop = _random_crop((x + delta).clamp(0, 1), rng, crop_min)
        loss = torch.zeros((), device=dev)
        for enc, (g_t, c_t) in zip(encs, tgt_feats, strict=True):
            g, p = enc.encode(_resize(crop, enc.input_size))
            loss = loss + F.cosine_similarity(g, g_t, dim=-1).sum()
            if ot_weight:
                for i in range(p.shape[0]):
                    c = kmeans_centres(p[i], clusters)
                    loss = loss + ot_weight * sinkhorn_similarity(c, c_t[i])
        (grad,) = torch.autograd.grad(loss, delta)
        with torch.no_grad():
            delta = (delta + step_size * grad.sign()).clamp(-eps, eps)
            delta = (x + delta).clamp(0, 1) - x
    adv = (x + delta.detach()).clamp(0, 1).permute(0, 2, 3, 1).cpu().numpy()
    return [np.clip(np.rint(a * 255.0), 0, 255).astype(np.uint8) for a in adv]


def foa_attack(
    img: np.ndarray, target: np.ndarray, encoders: Sequence[str], **kw: object
) -> np.ndarray:
    """One image (CPU single-threaded for bit-identity)."""
    with single_thread():
        return foa_attack_batch([img], [target], encoders, **kw)[0]  # type: ignore[arg-type]


# ---------------------------------------------------------------- PGD embedding attack


def pgd_attack(
    img: np.ndarray,
    encoders: Sequence[str],
    *,
    eps: float,
    step_size: float,
    steps: int,
    rng: np.random.Generator,
    device: str = "auto",
) -> np.ndarray:
    """Untargeted PGD on one uint8 image (eps/step_size in [0,1] units): push its global
    embeddings away from the clean ones. CPU single-threaded for bit-identity."""
    dev = resolve_device(device)
    with single_thread():
        encs = [load_encoder(s, dev) for s in encoders]
        x = _to_tensor([img], dev)
        with torch.no_grad():
            clean = [enc.encode(_resize(x, enc.input_size))[0] for enc in encs]
        start = rng.uniform(-eps, eps, size=tuple(x.shape)).astype(np.float32)
        delta = torch.from_numpy(start).to(dev)
        delta = (x + delta).clamp(0, 1) - x
        for _ in range(steps):
            delta.requires_grad_(True)
            loss = torch.zeros((), device=dev)
            for enc, g0 in zip(encs, clean, strict=True):
                g, _ = enc.encode(_resize((x + delta).clamp(0, 1), enc.input_size))
                loss = loss - F.cosine_similarity(g, g0, dim=-1).sum()
            (grad,) = torch.autograd.grad(loss, delta)
            with torch.no_grad():
                delta = (delta + step_size * grad.sign()).clamp(-eps, eps)
                delta = (x + delta).clamp(0, 1) - x
        adv = (x + delta.detach()).clamp(0, 1)[0].permute(1, 2, 0).cpu().numpy()
    return np.clip(np.rint(adv * 255.0), 0, 255).astype(np.uint8)
