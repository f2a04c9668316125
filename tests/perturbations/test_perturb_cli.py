"""The Typer sub-app: preview grid and propagate folder."""

from __future__ import annotations

import numpy as np
from PIL import Image
from typer.testing import CliRunner

from forenset.perturbations.cli import app
from forenset.perturbations.photos import photo

runner = CliRunner()


def test_preview_writes_grid(tmp_path) -> None:
    src = tmp_path / "imgs"
    src.mkdir()
    for name in ("chelsea", "coffee"):
        Image.fromarray(photo(name, 80)).save(src / f"{name}.png")
    out = tmp_path / "grid.png"
    res = runner.invoke(
        app,
        ["preview", "--split", "train", "--out", str(out), "--images", str(src), "--cell", "48"],
    )
    assert res.exit_code == 0, res.output
    with Image.open(out) as im:
        assert im.width % 48 == 0 and im.height > 48 * 5


def test_propagate_folder(tmp_path) -> None:
    src, dst = tmp_path / "in", tmp_path / "out"
    (src / "sub").mkdir(parents=True)
    Image.fromarray(photo("chelsea", 64)).save(src / "a.jpg")
    Image.fromarray(photo("rocket", 64)).save(src / "sub" / "b.png")
    (src / "broken.png").write_bytes(b"not an image")
    res = runner.invoke(app, ["propagate", str(src), str(dst), "--level", "2"])
    assert res.exit_code == 1  # the broken file is reported, the others are written
    assert "broken.png" in res.output
    for rel in ("a.png", "sub/b.png"):
        with Image.open(dst / rel) as im:
            out = np.asarray(im.convert("RGB"))
        assert out.shape == (64, 64, 3)
    ok = runner.invoke(app, ["propagate", str(src / "sub"), str(tmp_path / "o2"), "--level", "0"])
    assert ok.exit_code == 0
    with Image.open(tmp_path / "o2" / "b.png") as im:
        assert np.array_equal(np.asarray(im.convert("RGB")), photo("rocket", 64))


def test_train_uap_then_use_it(tmp_path) -> None:
    out = tmp_path / "u.npy"
    res = runner.invoke(app, ["train-uap", "--out", str(out), "--steps", "2", "--size", "32"])
    assert res.exit_code == 0, res.output
    uap = np.load(out)
    assert uap.shape == (32, 32, 3) and np.abs(uap).max() <= 1.0
    from forenset.perturbations import REGISTRY
    from forenset.seeds import rng_for

    img = photo("coffee", 48)
    adv = REGISTRY["uap"].apply(img, {"eps": 6.0, "uap_path": str(out)}, rng_for("u"))
    assert 0 < np.abs(adv.astype(int) - img.astype(int)).max() <= 6
