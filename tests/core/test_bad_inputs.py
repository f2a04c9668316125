"""Bad source files become clear per-row errors or are normalised; the build goes on."""

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from forenset.config import validate_config
from tests.conftest import small_config_dict
from tests.helpers import rows, run_local


def _png(arr, mode=None):
    b = io.BytesIO()
    Image.fromarray(arr, mode).save(b, "PNG") if mode else Image.fromarray(arr).save(b, "PNG")
    return b.getvalue()


@pytest.fixture
def corpus(tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    rng = np.random.default_rng(0)
    photo = (rng.random((80, 120, 3)) * 255).astype(np.uint8)
    good = _png(photo)
    (d / "good.png").write_bytes(good)
    (d / "dup.png").write_bytes(good)
    (d / "zero.png").write_bytes(b"")
    (d / "text.jpg").write_bytes(b"this is not an image at all")
    (d / "truncated.png").write_bytes(good[: len(good) // 2])

    # a PNG header claiming 100000 x 100000 pixels
    def chunk(kind, data):
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    bomb = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b"\x00" * 100))
        + chunk(b"IEND", b"")
    )
    (d / "bomb.png").write_bytes(bomb)
    Image.fromarray(photo).convert("CMYK").save(d / "cmyk.jpg", "JPEG")
    Image.fromarray((rng.random((60, 90)) * 65535).astype(np.uint16)).save(d / "deep16.png")
    Image.fromarray(photo[..., 0]).save(d / "grey.png")
    rgba = np.dstack([photo, np.full(photo.shape[:2], 128, np.uint8)])
    Image.fromarray(rgba, "RGBA").save(d / "alpha.png")
    im = Image.fromarray(photo)
    exif = im.getexif()
    exif[0x0112] = 6  # rotate 90 degrees
    im.save(d / "rotated.jpg", "JPEG", exif=exif.tobytes())
    big = (rng.random((700, 300, 3)) * 255).astype(np.uint8)
    Image.fromarray(big).save(d / "big.png")
    return d


def test_bad_inputs_are_rows_not_crashes(tmp_path, corpus):
    cfg = validate_config(
        small_config_dict(
            tmp_path / "run",
            sources={
                "samples": "none",
                "folders": [str(corpus)],
                "max_side": 200,
                "max_pixels": 10_000_000,
            },
        )
    )
    store, stats, _ = run_local(cfg)
    src = {r["name"]: r for r in rows(store, "sources")}
    assert len(src) == 12
    err = {n: r["error"] for n, r in src.items() if r["status"] == "error"}
    assert set(err) - {"dup.png", "good.png"} == {
        "zero.png",
        "text.jpg",
        "truncated.png",
        "bomb.png",
    }
    assert len(set(err) & {"dup.png", "good.png"}) == 1  # exactly one of the identical pair
    assert "empty file" in next(v for k, v in err.items() if k == "zero.png")
    assert "not a recognised image" in err["text.jpg"]
    assert "truncated" in err["truncated.png"]
    assert "decompression bomb" in err["bomb.png"]
    assert "duplicate of" in (err.get("dup.png") or err.get("good.png"))
    assert all(not r["retryable"] for r in src.values() if r["status"] == "error")
    ok = {n: r for n, r in src.items() if r["status"] == "ok"}
    assert "cmyk_to_rgb" in ok["cmyk.jpg"]["normalisations"]
    assert "I;16_to_8bit" in ok["deep16.png"]["normalisations"]
    assert "grey_to_rgb" in ok["grey.png"]["normalisations"]
    assert "alpha_on_white" in ok["alpha.png"]["normalisations"]
    rot = ok["rotated.jpg"]
    assert any(s.startswith("exif_transpose") for s in rot["normalisations"])
    assert (rot["width"], rot["height"]) == (80, 120)
    assert max(ok["big.png"]["width"], ok["big.png"]["height"]) == 200
    # the build went on: captions exist for every decodable image
    assert len(rows(store, "captions")) == len(ok)
    assert {r["caption_source"] for r in rows(store, "captions")} == {"offline"}
    assert stats["explanations"].rows > 0
