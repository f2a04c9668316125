"""``forenset perturb ...``: preview grids, standalone propagation, split quality, UAP training."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import typer
from PIL import Image, ImageDraw

from ..seeds import derive_seed, rng_for
from .config import PerturbationConfig
from .mixture import perturb_image
from .registry import FAMILIES, REGISTRY, SPLITS

app = typer.Typer(help="Perturbation catalogue: preview, propagate, quality summary, UAP.")

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff"}


def _load_config(path: Path | None) -> PerturbationConfig:
    if path is None:
        return PerturbationConfig()
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        import yaml

        return PerturbationConfig.model_validate(yaml.safe_load(text) or {})
    return PerturbationConfig.model_validate_json(text)


def _read_rgb(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB")).copy()


def _list_images(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES
    )


def _square(img: np.ndarray, size: int) -> np.ndarray:
    import cv2

    h, w = img.shape[:2]
    s = min(h, w)
    sq = img[(h - s) // 2 : (h - s) // 2 + s, (w - s) // 2 : (w - s) // 2 + s]
    return cv2.resize(sq, (size, size), interpolation=cv2.INTER_AREA)


def preview_grid(
    images: list[np.ndarray], split: str, config: PerturbationConfig, cell: int = 160, seed: int = 0
) -> Image.Image:
    """Rows: one per family (clean, then each admitted op once) + a row of full mixtures."""
    label_h = 14
    rows: list[list[tuple[np.ndarray, str]]] = []
    for fi, fam in enumerate(FAMILIES):
        ops = [o for o in REGISTRY.values() if o.family == fam and o.admitted(split)]
        if not ops:
            continue
        src = _square(images[fi % len(images)], cell)
        row = [(src, f"{fam}: clean")]
        cfg = config.model_copy(update={"include": [o.name for o in ops]})
        for o in ops:
            one = cfg.model_copy(update={"include": [o.name]})
            out, _ = perturb_image(
                src, split=split, seed=derive_seed(seed, fam, o.name), config=one
            )
            row.append((out, o.name))
        rows.append(row)
    mix_row = []
    src = _square(images[0], cell)
    mix_row.append((src, "mixture: clean"))
    for k in range(6):
        out, rec = perturb_image(src, split=split, seed=derive_seed(seed, "mix", k), config=config)
        mix_row.append((out, f"{rec['schedule']} x{len(rec['ops'])}"))
    rows.append(mix_row)
    ncols = max(len(r) for r in rows)
    canvas = Image.new("RGB", (ncols * cell, len(rows) * (cell + label_h)), "white")
    draw = ImageDraw.Draw(canvas)
    for r, row in enumerate(rows):
        for c, (img, label) in enumerate(row):
            x, y = c * cell, r * (cell + label_h)
            canvas.paste(Image.fromarray(img), (x, y + label_h))
            draw.text((x + 2, y + 1), label[:26], fill="black")
    return canvas


@app.command()
def preview(
    split: str = typer.Option("test", help="split whose op set and severity band to show"),
    out: Path = typer.Option(Path("grid.png"), help="output PNG"),
    images: Path | None = typer.Option(None, help="folder of images (default: skimage photos)"),
    config: Path | None = typer.Option(None, help="PerturbationConfig as JSON/YAML"),
    cell: int = typer.Option(160, help="cell size in pixels"),
    seed: int = typer.Option(0),
) -> None:
    """Write a labelled grid of clean/perturbed examples per family."""
    if split not in SPLITS:
        raise typer.BadParameter(f"split must be one of {SPLITS}")
    if images is not None:
        paths = _list_images(images)
        if not paths:
            raise typer.BadParameter(f"no images in {images}")
        imgs = [_read_rgb(p) for p in paths[: len(FAMILIES)]]
    else:
        from .photos import photos

        # one photo per family row (geometric changes are easier to see on the astronaut)
        order = ("astronaut", "chelsea", "coffee", "rocket", "astronaut", "immunohistochemistry")
        imgs = photos(names=order + ("chelsea", "coffee", "hubble_deep_field"))
    grid = preview_grid(imgs, split, _load_config(config), cell=cell, seed=seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    grid.save(out)
    typer.echo(f"wrote {out} ({grid.width}x{grid.height})")


@app.command()
def propagate(
    in_dir: Path = typer.Argument(..., exists=True, file_okay=False),
    out_dir: Path = typer.Argument(...),
    level: int = typer.Option(1, min=0, help="re-sharing rounds (0 = copy)"),
    seed: int = typer.Option(0, help="seed; each file draws from (seed, level, relative path)"),
) -> None:
    """Write a propagated copy (PNG, same relative path) of every image in IN_DIR."""
    from .propagation import propagate as run_propagation

    paths = _list_images(in_dir)
    failures = 0
    for p in paths:
        rel = p.relative_to(in_dir)
        dst = (out_dir / rel).with_suffix(".png")
        try:
            img = _read_rgb(p)
            out = run_propagation(img, level, rng_for(seed, "propagate", level, rel.as_posix()))
            dst.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(out).save(dst)
        except Exception as e:  # a bad file is reported and skipped, not fatal
            failures += 1
            typer.echo(f"error {rel}: {type(e).__name__}: {e}", err=True)
    typer.echo(
        f"propagated {len(paths) - failures}/{len(paths)} images at level {level} -> {out_dir}"
    )
    if failures:
        raise typer.Exit(code=1)


@app.command()
def summary(
    n: int = typer.Option(8, help="perturbations per image per split"),
    size: int = typer.Option(128),
    config: Path | None = typer.Option(None),
    seed: int = typer.Option(0),
) -> None:
    """Mean PSNR/SSIM per split on scikit-image photos (should fall train -> test)."""
    from .photos import photos
    from .quality import summarize_splits

    res = summarize_splits(photos(size), _load_config(config), seeds_per_image=n, build_seed=seed)
    typer.echo(json.dumps(res, indent=2))


@app.command("train-uap")
def train_uap_cmd(
    out: Path = typer.Option(Path("uap.npy"), help=".npy or .pt"),
    encoders: list[str] = typer.Option(
        ["tiny_conv:0", "tiny_vit:1"],
        help="Surrogate specs: tiny_conv:SEED, tiny_vit:SEED, hf:PATH (a local transformers "
        "image model folder), open_clip_dir:PATH.",
    ),
    images: Path | None = typer.Option(None, help="training images (default: skimage photos)"),
    size: int = typer.Option(64),
    steps: int = typer.Option(100),
    eps: float = typer.Option(12.0, help="L-inf radius in 0..255 units used while training"),
    seed: int = typer.Option(0),
    device: str = typer.Option("auto"),
) -> None:
    """Train an X-Transfer-style UAP against an encoder ensemble and store it."""
    from .attacks import save_uap, train_uap

    if images is not None:
        imgs = [_read_rgb(p) for p in _list_images(images)]
    else:
        from .photos import photos

        imgs = photos(256)
    uap = train_uap(imgs, encoders, size=size, eps=eps / 255, steps=steps, seed=seed, device=device)
    typer.echo(f"wrote {save_uap(uap, out)} {uap.shape}")
