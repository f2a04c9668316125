"""Op registry: every perturbation is one function, one pydantic params model, one line here.

A params model declares, per numeric field, an *easy* and a *hard* end (``sev_field``). A split
draws each parameter from its own severity band (a sub-interval of [0, 1] between easy and hard),
so validation is harsher than train and test harsher than validation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import JsonDict

SPLITS: tuple[str, ...] = ("train", "validation", "test")

FAMILIES: tuple[str, ...] = (
    "noise",
    "blur",
    "compression",
    "photometric",
    "geometric",
    "frequency",
    "weather",
    "propagation",
    "adversarial",
)

OpFn = Callable[..., np.ndarray]


class OpParams(BaseModel):
    """Base for every op's params model: strict, JSON round-trippable."""

    model_config = ConfigDict(extra="forbid")


def sev_field(easy: float, hard: float, *, integer: bool = False, odd: bool = False) -> Any:
    """A numeric field whose value spans ``easy`` -> ``hard`` with severity 0 -> 1."""
    lo, hi = (easy, hard) if easy <= hard else (hard, easy)
    extra: JsonDict = {"easy": easy, "hard": hard, "integer": integer, "odd": odd}
    default = int(round(easy)) if integer else float(easy)
    if odd and default % 2 == 0:
        default += 1
    return Field(default=default, ge=lo, le=hi, json_schema_extra=extra)


def choice_field(choices: list[Any]) -> Any:
    """A categorical field sampled uniformly (the first choice is the default)."""
    return Field(default=choices[0], json_schema_extra={"choices": list(choices)})


def split_index(split: str) -> int:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return SPLITS.index(split)


def _value_at(extra: dict[str, Any], severity: float) -> float | int:
    easy, hard = float(extra["easy"]), float(extra["hard"])
    v = easy + severity * (hard - easy)
    if not extra.get("integer"):
        return float(v)
    lo, hi = min(easy, hard), max(easy, hard)
    iv = int(round(v))
    if extra.get("odd") and iv % 2 == 0:
        # move toward the harder end when possible, stay inside the range
        step = 1 if hard >= easy else -1
        iv = iv + step if lo <= iv + step <= hi else iv - step
    return int(min(max(iv, lo), hi))


@dataclass(frozen=True)
class Op:
    """A registered perturbation."""

    name: str
    family: str
    first_split: str
    params_model: type[OpParams]
    fn: OpFn
    doc: str = ""

    def admitted(self, split: str) -> bool:
        """Cumulative admission: an op admitted in train is also in validation and test."""
        return split_index(split) >= split_index(self.first_split)

    def sample_params(
        self,
        split: str,
        rng: np.random.Generator,
        band: tuple[float, float],
        overrides: dict[str, Any] | None = None,
    ) -> OpParams:
        """Draw concrete params for ``split``: each numeric field at a severity in ``band``."""
        split_index(split)
        lo, hi = band
        values: dict[str, Any] = {}
        for fname, finfo in self.params_model.model_fields.items():
            extra = finfo.json_schema_extra
            if not isinstance(extra, dict):
                continue
            if "choices" in extra:
                choices = list(extra["choices"])  # type: ignore[arg-type]
                values[fname] = choices[int(rng.integers(len(choices)))]
            elif "easy" in extra:
                values[fname] = _value_at(extra, float(rng.uniform(lo, hi)))
        refine = getattr(self.params_model, "refine", None)
        if callable(refine):  # derived fields (e.g. a platform chain) drawn from the same rng
            values = refine(values, rng)
        values.update(overrides or {})
        return self.params_model(**values)

    def apply(self, img: np.ndarray, params: OpParams | dict[str, Any], rng: np.random.Generator):
        """Validate params through the model, run the op, check the output contract."""
        p = params if isinstance(params, OpParams) else self.params_model(**params)
        out = self.fn(img, rng=rng, **p.model_dump())
        if out.shape != img.shape or out.dtype != np.uint8:
            raise RuntimeError(
                f"op {self.name} broke the contract: {img.shape}/{img.dtype} -> "
                f"{out.shape}/{out.dtype}"
            )
        return out

    def ranges(self) -> dict[str, str]:
        """Human-readable parameter ranges (easy -> hard, or the choices) for docs."""
        out: dict[str, str] = {}
        for fname, finfo in self.params_model.model_fields.items():
            extra = finfo.json_schema_extra
            if isinstance(extra, dict) and "choices" in extra:
                out[fname] = "{" + ", ".join(str(c) for c in extra["choices"]) + "}"  # type: ignore[union-attr]
            elif isinstance(extra, dict) and "derived" in extra:
                out[fname] = str(extra["derived"])
            elif isinstance(extra, dict) and "easy" in extra:
                out[fname] = f"{_fmt(extra['easy'])} → {_fmt(extra['hard'])}"
            else:
                default = finfo.get_default(call_default_factory=True)
                out[fname] = f"= {default!r} (from config)"
        return out


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


REGISTRY: dict[str, Op] = {}


def register(
    name: str, family: str, first_split: str, params_model: type[OpParams], fn: OpFn
) -> Op:
    """Add one op; names are unique, family and split must be known."""
    if name in REGISTRY:
        raise ValueError(f"duplicate op {name}")
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family}")
    split_index(first_split)
    doc = (fn.__doc__ or "").strip().splitlines()[0].replace("``", "`") if fn.__doc__ else ""
    op = Op(name, family, first_split, params_model, fn, doc)
    REGISTRY[name] = op
    return op


def to_u8(x: np.ndarray) -> np.ndarray:
    """Round and clip a float image in [0, 255] to uint8."""
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def child_seed(rng: np.random.Generator) -> int:
    """A 32-bit seed for libraries that want an int (albumentations)."""
    return int(rng.integers(0, 2**32 - 1))


def albumentations() -> Any:
    """The ``albumentations`` module, imported with its update check off. On import it asks
    pypi.org for a newer version (2 s timeout): on an offline or firewalled node that is one
    "Error fetching version info" warning, or a 2 s wait, per process, and where PyPI answers a
    "new version available" warning beside a pinned 2.0.8. ``NO_ALBUMENTATIONS_UPDATE`` is the
    library's only switch; a value the user set is kept."""
    import os

    os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
    import albumentations as A

    return A


def run_albumentations(transform: Any, img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Run one albumentations transform (built with fixed values) seeded from ``rng``."""
    transform.set_random_seed(child_seed(rng))
    return transform(image=img)["image"]
