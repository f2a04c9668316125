"""The HF dataset card's licences: grouped per licence and holder (with the source photos and
samples each covers), not one YAML line per tile; the text normalised (no stray accents)."""

from __future__ import annotations

import yaml

from forenset.exports.hf import clean_licence, dataset_card, hf_license, licence_holder

# as scripts/fetch_real_photos.sh writes them: licence; holder (Debian package: /file, tile j-i)
PHOTOS = [
    ("CC-BY-SA-4.0; 2008, Charles Barbin <barbinch@free.fr>\u00b4", "mate-backgrounds", "Storm"),
    ("CC-BY-SA-4.0; 2008, Charles Barbin <barbinch@free.fr>\u00b4", "mate-backgrounds", "Ocean"),
    ("CC-BY-4.0; Aitzol Berasategi, 2018", "lomiri-wallpapers-16.04", "life"),
    ("CC-BY-4.0; Aitzol Berasategi, 2018", "lomiri-wallpapers-16.04", "sunset"),
    ("CC-BY-SA-4.0; 2008, Jean-Franc\u0327ois Fortin Tam", "mate-backgrounds", "Flow"),
]


def tile_samples(tiles: int = 8) -> list[dict]:
    out = []
    for lic, pkg, photo in PHOTOS:
        for t in range(tiles):
            text = (
                f"{lic} (Debian package {pkg} 1.0-1: /usr/share/{photo}.jpg, tile {t // 4}-{t % 4})"
            )
            for label in ("real", "fake"):
                out.append(
                    {
                        "sample_id": f"{photo}-{t}-{label}",
                        "label": label,
                        "split": "train",
                        "generator": "cv-a" if label == "fake" else "real",
                        "license": text,
                        "source_blob": f"{photo}-{t}",  # each tile is its own source image
                    }
                )
    return out


def card_of(samples: list[dict]) -> str:
    return dataset_card(
        samples, {"train": ["data/train-0.parquet"]}, {"train": len(samples)}, {"train": 1},
        include_perturbed=False, title="t",
    )  # fmt: skip


def test_licences_are_grouped_per_holder_not_per_tile():
    samples = tile_samples()
    card = card_of(samples)
    header = card.split("---\n")[1]
    meta = yaml.safe_load(header)
    details = meta["license_details"]
    assert meta["license"] == "other"
    groups = details.split(" | ")
    assert groups == [
        "CC-BY-4.0; Aitzol Berasategi, 2018 (16 source photos, 32 samples)",
        "CC-BY-SA-4.0; 2008, Charles Barbin <barbinch@free.fr> (16 source photos, 32 samples)",
        "CC-BY-SA-4.0; 2008, Jean-François Fortin Tam (8 source photos, 16 samples)",
    ]
    assert "tile" not in details and "\u00b4" not in card and "\u0327" not in card
    # 40 tiles of 5 photos take the header's lines that 5 tiles take: no line per tile
    assert len(header.splitlines()) == len(card_of(tile_samples(1)).split("---\n")[1].splitlines())
    body = card.split("## Source licences", 1)[1]
    rows = [ln for ln in body.splitlines() if ln.startswith("| CC-")]
    assert len(rows) == len(PHOTOS)  # one row per source photo, not per tile
    assert all(r.endswith("| 16 |") for r in rows)


def test_one_known_licence_is_the_card_id():
    got = hf_license(["CC-BY-4.0 (Debian package p 1: /a.jpg, tile 0-0)"] * 3)
    assert got == {"license": "cc-by-4.0"}
    assert hf_license([""]) == {"license": "other", "license_name": "per-source",
                                "license_details": "unknown"}  # fmt: skip


def test_clean_licence_keeps_apostrophes_and_drops_stray_accents():
    assert clean_licence("Jens\u00b4s  photo") == "Jens's photo"
    assert clean_licence("<a@b.fr>\u00b4") == "<a@b.fr>"
    assert clean_licence("Franc\u0327ois") == "François"
    assert licence_holder("public domain (NASA)") == "public domain (NASA)"
