"""Registry coverage: every registered op obeys the op contract and is documented."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from forenset.perturbations import FAMILIES, REGISTRY, SPLITS, PerturbationConfig, op_pool
from forenset.perturbations.docs_table import BEGIN, END, catalogue_markdown
from forenset.seeds import rng_for

DOC = Path(__file__).resolve().parents[2] / "docs" / "perturbations.md"
BANDS = {s: PerturbationConfig().schedule(s).severity for s in SPLITS}
OPS = sorted(REGISTRY)


def test_catalogue_size_and_families() -> None:
    assert len(REGISTRY) >= 35
    assert {op.family for op in REGISTRY.values()} == set(FAMILIES)
    for split in SPLITS:  # every split admits something new except nothing is removed
        assert any(op.first_split == split for op in REGISTRY.values())


@pytest.mark.parametrize("name", OPS)
def test_op_contract(name: str, small_img: np.ndarray) -> None:
    op = REGISTRY[name]
    split = op.first_split
    params = op.sample_params(split, rng_for("p", name), BANDS[split])
    a = op.apply(small_img, params, rng_for("a", name))
    b = op.apply(small_img, params, rng_for("a", name))
    assert a.dtype == np.uint8 and a.shape == small_img.shape
    assert np.array_equal(a, b), "same seed must give the same image"
    # params JSON round-trip through the pydantic model
    js = params.model_dump_json()
    again = op.params_model.model_validate_json(js)
    assert again == params
    assert json.loads(js) == params.model_dump(mode="json")
    # sampling is deterministic too
    assert op.sample_params(split, rng_for("p", name), BANDS[split]) == params


@pytest.mark.parametrize("name", OPS)
def test_admission_is_cumulative(name: str) -> None:
    op = REGISTRY[name]
    first = SPLITS.index(op.first_split)
    expected = set(SPLITS[first:])
    assert {s for s in SPLITS if op.admitted(s)} == expected
    cfg = PerturbationConfig()
    in_pool = {s for s in SPLITS if name in {o.name for o in op_pool(s, cfg)}}
    assert in_pool == expected


def test_pools_nest() -> None:
    cfg = PerturbationConfig()
    pools = [{o.name for o in op_pool(s, cfg)} for s in SPLITS]
    assert pools[0] < pools[1] < pools[2]


@pytest.mark.parametrize("name", OPS)
def test_severity_bands_progress(name: str) -> None:
    """Each numeric param moves monotonically easy -> hard from train to test band."""
    op = REGISTRY[name]
    for fname, finfo in op.params_model.model_fields.items():
        extra = finfo.json_schema_extra
        if not (isinstance(extra, dict) and "easy" in extra):
            continue
        easy, hard = float(extra["easy"]), float(extra["hard"])
        sign = 1.0 if hard >= easy else -1.0
        means = []
        for split in SPLITS:
            vals = [
                getattr(op.sample_params(split, rng_for(name, split, k), BANDS[split]), fname)
                for k in range(40)
            ]
            lo, hi = min(easy, hard), max(easy, hard)
            assert all(lo <= v <= hi for v in vals)
            means.append(sign * float(np.mean(vals)))
        if abs(hard - easy) >= 2 or not extra.get("integer"):
            assert means[0] < means[1] < means[2], (fname, means)


def _doc_table_names() -> set[str]:
    text = DOC.read_text(encoding="utf-8")
    assert BEGIN in text and END in text
    table = text.split(BEGIN, 1)[1].split(END, 1)[0]
    return set(re.findall(r"^\| `([a-z0-9_]+)` \|", table, flags=re.M))


def test_every_op_is_documented() -> None:
    missing = sorted(set(REGISTRY) - _doc_table_names())
    assert not missing, f"ops missing from docs/perturbations.md: {missing}"


def test_doc_table_is_current() -> None:
    table = DOC.read_text(encoding="utf-8").split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert table == catalogue_markdown(), "run: python -m forenset.perturbations.docs_table"


def test_placement_follows_step4_and_appendix12() -> None:
    """XPlainVerse Step 4: train = the xTransfer-style attack + noise, blur, compression,
    photometric; validation adds the FOA-style attack and further corruptions; test adds the
    geometric and frequency-domain corruptions (affine, ringing/halo) and a further attack."""
    first = {name: op.first_split for name, op in REGISTRY.items()}
    train = {op.family for op in REGISTRY.values() if op.first_split == "train"}
    assert train == {"adversarial", "noise", "blur", "compression", "photometric"}
    assert [n for n, op in REGISTRY.items() if op.family == "adversarial"] == ["uap", "foa", "pgd"]
    assert (first["uap"], first["foa"], first["pgd"]) == ("train", "validation", "test")
    for op in REGISTRY.values():
        if op.family in ("geometric", "frequency"):
            assert op.first_split == "test", op.name
    assert {first[n] for n in ("affine", "ringing_overshoot", "unsharp_halo")} == {"test"}
    val_new = {op.family for op in REGISTRY.values() if op.first_split == "validation"}
    assert {"adversarial", "weather", "propagation"} <= val_new


def test_albumentations_ops_never_ask_pypi_for_updates(tmp_path) -> None:
    """albumentations asks pypi.org for a newer version on import: offline, that is a warning
    per process (a 2 s wait where packets are dropped). An op run in a fresh interpreter with
    every proxy pointing at a closed port warns nothing and reaches no server; a value the user
    set for the library's switch is kept."""
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as s:  # a port that refuses: every request through it fails at once
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    code = (
        "import os, sys, warnings, numpy as np\n"
        "warnings.simplefilter('error' if sys.argv[1:] == ['strict'] else 'default')\n"
        "from forenset.perturbations import REGISTRY\n"
        "from forenset.seeds import rng_for\n"
        "op = REGISTRY['affine']\n"
        "img = np.full((32, 32, 3), 120, np.uint8)\n"
        "op.apply(img, op.sample_params(op.first_split, rng_for('p'), (0.5, 0.5)), rng_for('a'))\n"
        "print(os.environ['NO_ALBUMENTATIONS_UPDATE'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NO_ALBUMENTATIONS_UPDATE"}
    env.update(https_proxy=closed, HTTPS_PROXY=closed, http_proxy=closed, HTTP_PROXY=closed)
    unset = subprocess.run([sys.executable, "-c", code, "strict"], env=env, capture_output=True, text=True,
                           timeout=120)  # fmt: skip
    assert unset.returncode == 0 and unset.stdout.strip() == "1", unset.stderr[-2000:]
    assert "version info" not in unset.stderr and "Warning" not in unset.stderr
    kept = subprocess.run([sys.executable, "-c", code], env={**env, "NO_ALBUMENTATIONS_UPDATE": "0"},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    # the user's own value wins: albumentations then checks, and (offline) says so
    assert kept.stdout.strip() == "0" and "Error fetching version info" in kept.stderr
