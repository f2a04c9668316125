"""Export settings: a pydantic model the build config embeds (``export:``) and the CLI overrides."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from forenset.exports.formats import formats


class ExportSettings(BaseModel):
    """Every field has a default so that a config without ``export:`` still validates."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    formats: list[str] = ["parquet"]  # written at the end of a build (CLI: --format)
    eval_subset: str | None = Field(
        None, pattern=r"^\d+:\d+$"
    )  # "N:M" = N fakes + M reals per split (all when fewer)
    balanced: bool = False  # SFT: equal real and fake counts per split
    # SFT (XPlainVerse App. 16): this share of the training split, half real / half fake
    train_fraction: float | None = Field(None, gt=0, le=1)
    seed: int | None = None  # sampling seed; None: the build seed
    rows_per_group: int = Field(100, ge=1)  # HF Parquet row-group size
    rows_per_file: int = Field(5000, ge=1)  # HF Parquet shard size
    include_perturbed: bool = True  # HF: a list column of perturbed variants
    image_url_prefix: str = "/data/local-files/?d="  # Label Studio: URL before "images/<file>"

    @field_validator("formats")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        known = ("parquet", *formats())
        bad = [f for f in v if f not in known]
        if bad:
            raise ValueError(f"unknown export format(s) {bad}; known: {', '.join(known)}")
        return v


def parse_eval_subset(spec: str | None) -> tuple[int, int] | None:
    """'10000:8500' -> (10000 fakes, 8500 reals); None/'' -> None (no subsetting)."""
    if not spec:
        return None
    parts = spec.split(":")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"eval subset must look like N_FAKE:M_REAL (got {spec!r})")
    return int(parts[0]), int(parts[1])
