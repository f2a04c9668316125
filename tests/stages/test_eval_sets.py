"""eval_sets: the paper's ID/OOD composition, the seeded draw, and gathering-stage planning."""

from __future__ import annotations

import re

import pytest

from forenset.benchmarks.evaluation.config import EvaluationConfig
from forenset.benchmarks.evaluation.stages.eval_sets import draw, set_sizes
from forenset.config import validate_config
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
        ((0, 50), {"fakes": 4, "reals": 1}, (0, 0)),
        ((9, 0), {"fakes": 4, "reals": 1}, (0, 0)),  # no reals: empty, not a fakes-only set
        ((9, 0), {"fakes": 4, "reals": 0}, (4, 0)),  # reals not asked for
        # short on both: scaled 2 : 0.5 would drop the reals, but each class keeps one
        ((2, 1), {"fakes": 4, "reals": 1}, (2, 1)),
        ((1, 9), {"fakes": 8, "reals": 2}, (1, 1)),
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


def _perturbed_stage(tmp_path, **perturbations):
    """The eval_sets stage over a hand-made splits batch (2 test fakes, 1 test real)."""
    import numpy as np
    import pyarrow as pa

    from forenset.benchmarks.evaluation.stages.eval_sets import EvalSets
    from forenset.images import encode_png
    from forenset.schemas.splits import SCHEMA as SPLITS
    from forenset.store.run_store import RunStore
    from forenset.tasks.base import ShardSpec, StageContext

    cfg = validate_config(
        small_config_dict(
            tmp_path / "run",
            evaluation={"enabled": True, "fakes": 2, "reals": 1, "perturbations": perturbations},
        )
    )
    store = RunStore(str(tmp_path / "run"))
    rng = np.random.default_rng(0)
    rows_in = []
    for sid, label in (("f1", "fake"), ("f2", "fake"), ("r1", "real")):
        img = rng.integers(0, 256, (32, 40, 3), dtype=np.uint8)
        rows_in.append(
            {
                "sample_id": sid, "label": label, "image_id": sid, "generator": "g",
                "generator_family": "classical", "holdout": False, "split": "test",
                "blob": store.put_blob(encode_png(img)), "status": "ok",
            }
        )  # fmt: skip
    batch = pa.Table.from_pylist(
        [{n: r.get(n) for n in SPLITS.names} for r in rows_in], schema=SPLITS
    )
    stage = EvalSets(StageContext(store, cfg))
    shard = ShardSpec("eval_sets", "id", {"eval_set": "id"}, [], {"eval_set": "id"}, "fp")
    return store, stage.process(batch, shard).to_pylist()


def test_perturbed_variants_per_family_and_severity(tmp_path):
    import json

    import numpy as np

    from forenset.images import decode_rgb

    store, got = _perturbed_stage(
        tmp_path,
        families=["noise", "compression"],
        severities=[0.8, 0.2],
        include=["gaussian_noise", "jpeg"],
    )
    by_id = {r["eval_item_id"]: r for r in got}
    clean = [r for r in got if r["variant"] == "0x"]
    assert len(clean) == 3 and all(r["perturbation_family"] is None for r in clean)
    assert len(got) == 3 * (1 + 2 * 2)  # clean + 2 families x 2 severities per sample
    for c in clean:
        img0 = decode_rgb(store.get_blob(c["blob"]))
        params = {}
        for fam, op, field in (
            ("noise", "gaussian_noise", "sigma"),
            ("compression", "jpeg", "quality"),
        ):
            for sev in (0.2, 0.8):
                r = by_id[f"{c['eval_item_id']}@{fam}:{sev:g}"]
                assert r["status"] == "ok", r["error"]
                assert (r["variant"], r["perturbation_family"], r["severity"]) == (
                    f"{fam}:{sev:g}", fam, sev,
                )  # fmt: skip
                assert (r["sample_id"], r["label"], r["propagation"]) == (
                    c["sample_id"], c["label"], 0,
                )  # fmt: skip
                (rec,) = json.loads(r["ops"])
                assert rec["name"] == op and rec["family"] == fam
                params[(fam, sev)] = rec["params"][field]
                img = decode_rgb(store.get_blob(r["blob"]))
                assert img.shape == img0.shape and not np.array_equal(img, img0)
        # severity runs from the easy to the hard end: sigma 0.01 -> 0.25, quality 92 -> 8
        assert params[("noise", 0.2)] == pytest.approx(0.01 + 0.2 * 0.24)
        assert params[("noise", 0.8)] == pytest.approx(0.01 + 0.8 * 0.24)
        assert params[("compression", 0.2)] == round(92 - 0.2 * 84)
        assert params[("compression", 0.8)] == round(92 - 0.8 * 84)
    # deterministic: a second run of the stage writes the same images
    _, again = _perturbed_stage(
        tmp_path / "b", families=["noise", "compression"], severities=[0.2, 0.8],
        include=["gaussian_noise", "jpeg"],
    )  # fmt: skip
    assert {r["eval_item_id"]: r["blob"] for r in again} == {
        r["eval_item_id"]: r["blob"] for r in got
    }


def test_a_family_without_an_admitted_op_is_an_error_row_per_item(tmp_path):
    _, got = _perturbed_stage(tmp_path, families=["blur"], severities=[0.5], include=["jpeg"])
    bad = [r for r in got if r["perturbation_family"] == "blur"]
    assert len(bad) == 3 and all(r["status"] == "error" for r in bad)
    assert bad[0]["error"].startswith("perturbation blur:0.5 failed: ")
    assert (
        "no op of family blur is admitted in the test split among perturbations.include"
        in (bad[0]["error"])
    )


@pytest.mark.parametrize(
    ("perturbations", "message"),
    [
        ({"families": ["smudge"]}, "unknown perturbation families"),
        ({"families": ["noise", "noise"]}, "must be unique"),
        ({"severities": [1.5]}, "severities must be in [0, 1]"),
        ({"severities": []}, "at least one value"),
        ({"include": ["nope"]}, "unknown perturbation ops"),
    ],
)
def test_perturbation_settings_are_validated(perturbations, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        EvaluationConfig(perturbations=perturbations)
