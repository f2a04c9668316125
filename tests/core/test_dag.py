"""The whole DAG without Prefect: rows everywhere, determinism, selective recomputation."""

from forenset.config import validate_config
from forenset.stages import stage_classes
from tests.conftest import small_config_dict
from tests.helpers import all_rows, rows, run_local


def test_every_stage_has_rows_and_offline_provenance(small_cfg, small_built):
    store, stats, executed = run_local(small_cfg)  # the shared build, copied: no work, same rows
    for s in stage_classes():
        if s.name.startswith(
            ("reward_", "public_")
        ):  # opt-in families, off here; built in tests/reward, tests/public
            assert stats[s.name].planned == 0, s.name
            continue
        assert stats[s.name].rows > 0, s.name
        assert stats[s.name].failed == 0
    cands = rows(store, "candidates")
    assert {r["backend"] for r in cands} == {"offline"}
    assert {r["generator"] for r in cands} == {"cv-a", "cv-faulty"}
    judg = rows(store, "verdicts")
    assert {r["verdict"] for r in judg} >= {"KEEP", "DISCARD"}
    assert all(r["stage_version"] for r in judg)
    caps = rows(store, "captions")
    assert {r["caption_source"] for r in caps} == {"manifest"}
    ex = rows(store, "explanations")
    assert {r["kind"] for r in ex} == {"complex", "simple", "authenticity"}
    # a real photo and all its fakes share one split
    sp = rows(store, "splits")
    by_img = {}
    for r in sp:
        by_img.setdefault(r["image_id"], set()).add(r["split"])
    assert all(len(v) == 1 for v in by_img.values())


def test_build_is_deterministic_across_run_dirs(tmp_path, small_built):
    a = validate_config(small_config_dict(small_built))  # built in another run dir, copied
    b = validate_config(small_config_dict(tmp_path / "b"))
    sa, _, done = run_local(a)
    assert sum(done.values()) == 0  # only read
    sb, _, ran = run_local(b)
    assert sum(ran.values()) > 0  # built here, from nothing
    assert all_rows(sa) == all_rows(sb)


def test_rerun_does_no_work(small_cfg):
    run_local(small_cfg)
    _, stats, executed = run_local(small_cfg)
    assert sum(executed.values()) == 0
    assert all(s.skipped == s.planned for s in stats.values())


def test_a_copied_run_resumes_with_no_work_and_the_same_rows(small_build_master, small_built):
    """What ``small_built`` rests on: a run directory copied elsewhere is complete there."""
    from forenset.store.run_store import RunStore

    store, stats, executed = run_local(validate_config(small_config_dict(small_built)))
    assert sum(executed.values()) == 0
    assert all(s.skipped == s.planned for s in stats.values())
    assert all_rows(store) == all_rows(RunStore(str(small_build_master)))


def test_changing_one_stage_recomputes_it_and_downstream_only(tmp_path):
    d = small_config_dict(tmp_path / "r")
    store, _, first = run_local(validate_config(d))
    d2 = dict(d, verdicts={"keep_score": 0.5})  # a new threshold: no judge runs again
    _, _, executed = run_local(validate_config(d2))
    upstream = ("sources", "captions", "instructions", "candidates", "diffs", "judgments")
    assert all(executed[s] == 0 for s in upstream)
    assert executed["verdicts"] == first["verdicts"]
    assert executed["splits"] >= 1
    d3 = dict(
        d2, judgments={"max_offtarget_frac": 0.1}
    )  # a changed judge re-judges, nothing upstream
    _, _, executed = run_local(validate_config(d3))
    assert all(executed[s] == 0 for s in upstream[:-1])
    assert executed["judgments"] == first["judgments"]


def test_adding_a_generator_runs_only_its_partitions(small_built):
    d = small_config_dict(small_built)  # built (a copy of the session's build)
    gens = d["generators"] + [{"name": "cv-new", "family": "classical", "inpaint": "ns"}]
    store, _, executed = run_local(validate_config(dict(d, generators=gens)))
    n_instr_shards = len(store.manifest("instructions"))
    assert executed["candidates"] == n_instr_shards  # one new shard per instructions shard
    assert executed["diffs"] == n_instr_shards and executed["judgments"] == n_instr_shards
    assert executed["sources"] == executed["captions"] == executed["instructions"] == 0
    assert {r["generator"] for r in rows(store, "candidates")} == {"cv-a", "cv-faulty", "cv-new"}
    # removing it drops it from the views without touching the others
    store2, _, executed2 = run_local(validate_config(d))
    assert executed2["candidates"] == 0
    assert {r["generator"] for r in rows(store2, "candidates")} == {"cv-a", "cv-faulty"}


def test_faulty_generator_truth_is_recorded(small_cfg, small_built):
    import json

    store, _, _ = run_local(small_cfg)
    faults = {
        json.loads(r["truth"])["fault"]
        for r in rows(store, "candidates")
        if r["generator"] == "cv-faulty"
    }
    assert faults - {"none"}


def test_barrier_mode_gives_the_same_rows(tmp_path, small_built):
    a = validate_config(small_config_dict(small_built))  # the pipelined build, copied
    b = validate_config(small_config_dict(tmp_path / "b"))
    sa, _, _ = run_local(a)
    sb, _, ran = run_local(b, barrier=True)
    assert sum(ran.values()) > 0
    assert all_rows(sa) == all_rows(sb)


def test_regenerating_splits_recomputes_only_splits_and_later(small_built):
    d = small_config_dict(small_built)  # built (a copy of the session's build)
    d2 = dict(
        d,
        splits={
            "fractions": {"train": 0.5, "validation": 0.25, "test": 0.25},
            "holdout_families": ["faulty"],
        },
    )
    store, _, executed = run_local(validate_config(d2))
    before = ("sources", "captions", "instructions", "candidates", "diffs", "judgments", "verdicts")
    assert all(executed[s] == 0 for s in before), dict(executed)
    assert executed["splits"] > 0
    assert {r["split"] for r in rows(store, "splits") if r["generator"] == "cv-faulty"} <= {"test"}
