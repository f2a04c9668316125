"""eval_sets: the paper's ID/OOD composition, the seeded draw, and gathering-stage planning."""

from __future__ import annotations

import pytest

from forenset.config import validate_config
from forenset.tasks.eval_sets import EvaluationConfig, draw, set_sizes
from tests.conftest import small_config_dict
from tests.helpers import rows, run_local


@pytest.mark.parametrize(
    ("avail", "cfg", "want"),
    [
        ((20_000, 20_000), {}, (10_000, 8_500)),  # the paper's sets
        ((5_000, 8_500), {}, (5_000, 4_250)),  # short on fakes: both halve
        ((100, 10), {}, (11, 10)),  # short on reals: 10 / 8500 of each
        ((100, 10), {"keep_composition": False}, (100, 10)),
        ((0, 50), {}, (0, 0)),  # no fakes: an empty set, not a reals-only one
        ((7, 3), {"fakes": 4, "reals": 2}, (4, 2)),
    ],
)
def test_set_sizes_keep_the_paper_composition(avail, cfg, want):
    assert set_sizes(*avail, EvaluationConfig(**cfg)) == want


def test_draw_is_seeded_nested_and_order_free():
    items = [{"sample_id": f"s{i}"} for i in range(50)]
    a = draw(items, 10, 7, "id")
    assert draw(list(reversed(items)), 10, 7, "id") == a
    assert draw(items, 20, 7, "id")[:10] == a  # a larger set contains the smaller one
    assert draw(items, 10, 8, "id") != a and draw(items, 10, 7, "ood") != a


def config(tmp_path, **evaluation):
    return small_config_dict(
        tmp_path / "run",
        splits={
            "fractions": {"train": 0.5, "validation": 0.25, "test": 0.25},
            "holdout_families": ["faulty"],
        },
        evaluation={"enabled": True, "fakes": 4, "reals": 2, **evaluation},
    )


def test_id_and_ood_sets_from_the_test_split(tmp_path):
    store, stats, executed = run_local(validate_config(config(tmp_path)))
    assert executed["eval_sets"] == 2 and stats["eval_sets"].failed == 0
    splits = [r for r in rows(store, "splits") if r["status"] == "ok" and r["split"] == "test"]
    got = rows(store, "eval_sets")
    for eval_set, holdout in (("id", False), ("ood", True)):
        fakes = [r for r in splits if r["label"] == "fake" and r["holdout"] == holdout]
        reals = [r for r in splits if r["label"] == "real"]
        n_fake, n_real = set_sizes(len(fakes), len(reals), EvaluationConfig(fakes=4, reals=2))
        mine = [r for r in got if r["eval_set"] == eval_set]
        assert sum(r["label"] == "fake" for r in mine) == n_fake
        assert sum(r["label"] == "real" for r in mine) == n_real
        assert {r["sample_id"] for r in mine if r["label"] == "fake"} <= {
            r["sample_id"] for r in fakes
        }
        assert all(r["split"] == "test" for r in mine)
        fams = {r["generator_family"] for r in mine if r["label"] == "fake"}
        assert fams <= ({"faulty"} if holdout else {"classical"})
    assert any(r["eval_set"] == "id" for r in got)


def test_gathering_stage_runs_once_all_inputs_are_in_and_resumes(tmp_path):
    d = config(tmp_path)
    run_local(validate_config(d))
    _, _, executed = run_local(validate_config(d))
    assert executed["eval_sets"] == 0  # every splits shard unchanged: nothing to redraw
    d2 = dict(d, evaluation={**d["evaluation"], "fakes": 3})
    _, _, executed = run_local(validate_config(d2))
    assert executed["eval_sets"] == 2 and executed["splits"] == 0
    gens = d["generators"] + [{"name": "cv-new", "family": "classical", "inpaint": "ns"}]
    store, _, executed = run_local(validate_config(dict(d2, generators=gens)))
    assert executed["eval_sets"] == 2  # a new generator's test fakes may enter the ID set
    assert executed["sources"] == 0


def test_disabled_evaluation_plans_nothing(tmp_path):
    d = config(tmp_path, enabled=False)
    _, stats, executed = run_local(validate_config(d))
    assert stats["eval_sets"].planned == 0 and executed["eval_sets"] == 0


def test_a_failed_input_stage_leaves_the_gathering_stage_unplanned(tmp_path, monkeypatch):
    from forenset.tasks.splits import Splits

    def boom(self, batch, shard=None):
        raise RuntimeError("disk gone")

    monkeypatch.setattr(Splits, "process", boom)
    _, stats, executed = run_local(validate_config(config(tmp_path)))
    assert executed["eval_sets"] == 0
    assert any("input stage(s) splits failed" in f for f in stats["eval_sets"].failures)


@pytest.mark.parametrize(
    ("levels", "message"),
    [([4], "must be 0-3"), ([-1], "must be 0-3"), ([1, 1], "unique"), ([], "at least one")],
)
def test_propagation_levels_are_validated(levels, message):
    with pytest.raises(ValueError, match=message):
        EvaluationConfig(propagation=levels)


def test_propagation_levels_default_to_clean_only_and_are_sorted():
    assert EvaluationConfig().propagation == [0]
    assert EvaluationConfig(propagation=[3, 0, 1]).propagation == [0, 1, 3]


def test_propagated_variants_of_every_drawn_sample(tmp_path):
    import numpy as np

    from forenset.images import decode_rgb

    clean_store, _, _ = run_local(validate_config(config(tmp_path / "clean")))
    clean = rows(clean_store, "eval_sets")
    assert clean and {(r["variant"], r["propagation"]) for r in clean} == {("0x", 0)}

    builds = []
    for name in ("a", "b"):
        store, stats, _ = run_local(validate_config(config(tmp_path / name, propagation=[0, 1, 3])))
        assert stats["eval_sets"].failed == 0
        got = {r["eval_item_id"]: r for r in rows(store, "eval_sets")}
        assert all(r["status"] == "ok" for r in got.values())
        builds.append((store, got))
    (store, got), (store_b, got_b) = builds

    zero = {i: r for i, r in got.items() if r["propagation"] == 0}
    # level 0 is the clean set, its ids as without propagation
    assert set(zero) == {r["eval_item_id"] for r in clean}
    assert all(i == f"{r['eval_set']}/{r['sample_id']}" for i, r in zero.items())
    assert len(got) == 3 * len(zero)
    for iid, r in zero.items():
        assert r["variant"] == "0x"
        img0 = decode_rgb(store.get_blob(r["blob"]))
        for level in (1, 3):
            v = got[f"{iid}@{level}x"]
            assert (v["variant"], v["propagation"]) == (f"{level}x", level)
            for k in ("eval_set", "sample_id", "label", "generator", "rank", "split"):
                assert v[k] == r[k]
            img = decode_rgb(store.get_blob(v["blob"]))
            assert img.shape == img0.shape and not np.array_equal(img, img0)
            # deterministic: the second build propagated the same image
            again = got_b[f"{iid}@{level}x"]
            assert again["seed"] == v["seed"]
            assert np.array_equal(decode_rgb(store_b.get_blob(again["blob"])), img)
        assert got[f"{iid}@1x"]["blob"] != got[f"{iid}@3x"]["blob"]
