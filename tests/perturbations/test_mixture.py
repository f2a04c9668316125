"""Mixture protocol: schedule frequencies, chunk sizes, records, determinism, replay."""

from __future__ import annotations

import json
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
from pydantic import ValidationError

from forenset.perturbations import (
    REGISTRY,
    SPLITS,
    PerturbationConfig,
    SplitSchedule,
    apply_record,
    perturb_image,
    plan,
)
from forenset.perturbations.mixture import op_pool, sample_ops, sample_schedule
from forenset.seeds import derive_seed, rng_for

N = 10_000


@pytest.mark.parametrize("split", SPLITS)
def test_schedule_frequencies_and_chunk_sizes(split: str) -> None:
    cfg = PerturbationConfig()
    s = cfg.schedule(split)
    rng = rng_for("freq", split)
    kinds, sizes = [], []
    for _ in range(N):
        k, n = sample_schedule(split, rng, cfg)
        kinds.append(k)
        if k == "chunk":
            sizes.append(n)
    for kind, p in (("single", s.single), ("pair", s.pair), ("chunk", s.chunk)):
        freq = kinds.count(kind) / N
        tol = 4 * np.sqrt(p * (1 - p) / N) + 1e-3
        assert abs(freq - p) < tol, (kind, freq, p)
    assert min(sizes) == s.chunk_min and max(sizes) == s.chunk_max


def test_defaults_match_issue() -> None:
    cfg = PerturbationConfig()
    got = {
        sp: (cfg.schedule(sp).single, cfg.schedule(sp).pair, cfg.schedule(sp).chunk)
        for sp in SPLITS
    }
    assert got == {
        "train": (0.85, 0.10, 0.05),
        "validation": (0.75, 0.15, 0.10),
        "test": (0.70, 0.20, 0.10),
    }
    sizes = {sp: (cfg.schedule(sp).chunk_min, cfg.schedule(sp).chunk_max) for sp in SPLITS}
    assert sizes == {"train": (6, 8), "validation": (8, 12), "test": (13, 17)}


def test_configured_probabilities_are_used() -> None:
    sched = SplitSchedule(
        single=0.2, pair=0.3, chunk=0.5, chunk_min=3, chunk_max=4, severity=(0, 1)
    )
    cfg = PerturbationConfig(train=sched)
    rng = rng_for("cfg")
    draws = [sample_schedule("train", rng, cfg) for _ in range(N)]
    for kind, p in (("single", 0.2), ("pair", 0.3), ("chunk", 0.5)):
        assert abs(sum(k == kind for k, _ in draws) / N - p) < 0.03
    assert {n for k, n in draws if k == "chunk"} == {3, 4}


def test_config_validation() -> None:
    with pytest.raises(ValidationError):
        PerturbationConfig(bogus=1)
    with pytest.raises(ValidationError):
        SplitSchedule(single=0.5, pair=0.1, chunk=0.1, chunk_min=1, chunk_max=2, severity=(0, 1))
    with pytest.raises(ValidationError):
        PerturbationConfig(include=["no_such_op"])


@pytest.mark.parametrize("split", SPLITS)
def test_plans_respect_pool_and_adversarial_rules(split: str) -> None:
    cfg = PerturbationConfig()
    pool = {o.name for o in op_pool(split, cfg)}
    s = cfg.schedule(split)
    for k in range(300):
        rec = plan(split, derive_seed(7, split, k), cfg)
        names = [o["name"] for o in rec["ops"]]
        assert set(names) <= pool and len(set(names)) == len(names)
        n = {"single": 1, "pair": 2}.get(rec["schedule"])
        if n is None:
            assert s.chunk_min <= len(names) <= s.chunk_max
        else:
            assert len(names) == n
        adv = [i for i, o in enumerate(rec["ops"]) if o["family"] == "adversarial"]
        assert len(adv) <= 1 and (not adv or adv[0] == len(names) - 1)
        json.dumps(rec)


def test_sample_ops_puts_single_adversarial_last() -> None:
    pool = list(REGISTRY.values())
    for k in range(200):
        ops = sample_ops(pool, 20, rng_for("ops", k))
        fams = [o.family for o in ops]
        assert len(ops) == 20 and fams.count("adversarial") <= 1
        if "adversarial" in fams:
            assert fams[-1] == "adversarial"


def test_adversarial_can_be_disabled() -> None:
    cfg = PerturbationConfig(adversarial={"enabled": False})
    assert all(o.family != "adversarial" for o in op_pool("test", cfg))


def test_perturb_image_contract_and_replay(small_img: np.ndarray) -> None:
    cfg = PerturbationConfig()
    for split in SPLITS:
        for k in range(4):
            seed = derive_seed(1, split, f"img{k}")
            out, rec = perturb_image(small_img, split=split, seed=seed, config=cfg)
            assert out.dtype == np.uint8 and out.shape == small_img.shape
            assert set(rec) == {"schedule", "ops", "seed"} and rec["seed"] == seed
            assert all(set(o) == {"name", "family", "params"} for o in rec["ops"])
            again, rec2 = perturb_image(small_img, split=split, seed=seed, config=cfg)
            assert rec2 == rec and np.array_equal(again, out)
            replayed = apply_record(small_img, json.loads(json.dumps(rec)))
            assert np.array_equal(replayed, out)


def test_different_seeds_differ(small_img: np.ndarray) -> None:
    cfg = PerturbationConfig()
    recs = [plan("test", derive_seed(3, "test", k), cfg) for k in range(20)]
    assert len({json.dumps(r["ops"]) for r in recs}) == 20


def test_bad_input_is_a_clear_error() -> None:
    cfg = PerturbationConfig()
    with pytest.raises(ValueError, match="uint8 HxWx3"):
        perturb_image(np.zeros((32, 32), np.uint8), split="train", seed=1, config=cfg)
    with pytest.raises(ValueError, match="uint8 HxWx3"):
        perturb_image(np.zeros((32, 32, 3), np.float32), split="train", seed=1, config=cfg)
    with pytest.raises(ValueError, match="unknown split"):
        perturb_image(np.zeros((32, 32, 3), np.uint8), split="dev", seed=1, config=cfg)


def _digest(args: tuple[str, int]) -> str:
    import hashlib

    from forenset.perturbations.photos import photo

    split, seed = args
    out, _ = perturb_image(photo("coffee", 64), split=split, seed=seed, config=PerturbationConfig())
    return hashlib.sha256(out.tobytes()).hexdigest()


def test_bit_identical_across_processes() -> None:
    jobs = [(s, derive_seed(11, s, k)) for s in SPLITS for k in range(3)]
    local = [_digest(j) for j in jobs]
    with ProcessPoolExecutor(max_workers=2) as ex:
        remote = list(ex.map(_digest, jobs))
    assert remote == local
