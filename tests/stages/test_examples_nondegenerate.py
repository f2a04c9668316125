"""The shipped benchmark examples give non-degenerate tables (issue 31 §3).

Each example in ``examples/`` with a benchmark section is built scaled down: the same config
(generators, splits, robustness levels, policies), smaller images, fewer safety prompts and
set sizes scaled to the photos at hand, with ``sources.csv_if_present`` pointed at tiles of
the bundled photos (what ``scripts/fetch_real_photos.sh`` makes of Debian's wallpapers, without
the download). A build fails the test when a table it feeds is degenerate: an evaluation set
without reals or fakes, a size not reached, a robustness group with one class, an empty SafeIMG
D_real, text-to-image fakes left unexplained, FakeBench short of its items, a forensic reward
policy not above the constant one. ``problems`` is the check; it holds for the full examples too.
The same builds, and the default demo scaled alike, are checked for explanation defects (a
repeated 4-word phrase, a sentence stating what its row did not measure: issue 38 §3).

Examples whose scaled configs agree on everything but their benchmark sections (eval and
fakebench: the same photos, edits, splits) share one build with both sections on: a section
only adds its own downstream stages, so each example's tables are the ones its own build
would give, at one build's cost.
"""

from __future__ import annotations

import copy
import csv
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from forenset.config import validate_config
from forenset.images import decode_rgb, encode_png
from forenset.store.run_store import RunStore
from forenset.tasks.sources import load_sample_bytes, sample_manifest
from tests.helpers import rows, run_local
from tests.text.explanation_facts import build_defects

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FETCHED = "data/real-photos/photos.csv"  # where scripts/fetch_real_photos.sh writes its listing
BENCHMARKS = {"evaluation", "safeimg", "fakebench", "reward"}
# the scaled-down sizes (the examples ask 40 + 34, 40 + 40, 100 with ~264 photos; here 30)
SCALED = {"evaluation": {"fakes": 3, "reals": 2}, "fakebench": {"fakes": 4, "reals": 3}}
REWARD_IMAGES = 10


def benchmark_of(doc: dict[str, Any]) -> str | None:
    if (
        (doc.get("evaluation") or {}).get("enabled")
        and doc.get("generators")
        and any(g.get("t2i_size") for g in doc["generators"])
    ):
        return "safeimg"  # the SafeIMG half: the evaluation stages on text-to-image fakes
    for key in ("evaluation", "fakebench", "reward"):
        if (doc.get(key) or {}).get("enabled"):
            return key
    return None


def shipped() -> list[str]:
    out = []
    for p in sorted(EXAMPLES.glob("*.yaml")):
        if benchmark_of(yaml.safe_load(p.read_text())):
            out.append(p.stem)
    return out


@pytest.fixture(scope="module")
def tiles(tmp_path_factory) -> str:
    """The two upper quadrant tiles of each bundled photo, listed like the fetch script's CSV
    (20 tiles + the 10 photos: every check's sizes are reached, at the fewest photos)."""
    out = tmp_path_factory.mktemp("real-photos")
    (out / "tiles").mkdir()
    listing = []
    for s in sample_manifest():
        img = decode_rgb(load_sample_bytes(s["loader"]))
        h, w = img.shape[0] // 2, img.shape[1] // 2
        for j in range(1):
            for i in range(2):
                name = f"tiles/{s['name']}--{j}-{i}.png"
                (out / name).write_bytes(encode_png(img[j * h : (j + 1) * h, i * w : (i + 1) * w]))
                listing.append({"path": name, "caption": "", "license": s["license"]})
    with open(out / "photos.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, ["path", "caption", "license"])
        w.writeheader()
        w.writerows(listing)
    return str(out / "photos.csv")


def scaled(name: str, tiles_csv: str, run_dir: Path) -> tuple[dict[str, Any], str]:
    """The example's config, scaled down; and its benchmark."""
    doc = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    bench = benchmark_of(doc)
    assert bench
    src = doc["sources"]
    assert FETCHED in src.get("csv_if_present", []), f"{name}.yaml does not list {FETCHED}"
    src["csv_if_present"] = [tiles_csv]
    src["max_side"] = 64
    doc["run_dir"] = str(run_dir)
    if "instructions" in doc:  # one edit per photo and generator: the bulk of the build
        doc["instructions"].update(min_edits=1, max_edits=1)
    t2i = any(g.get("t2i_size") for g in doc.get("generators", []))
    if "scenarios" in doc and not t2i:  # safety prompts that no generator renders: no table
        doc.pop("scenarios")
        doc.pop("prompts", None)
    elif "scenarios" in doc:
        doc["scenarios"]["per_category"] = 2
    for g in doc.get("generators", []):
        if g.get("t2i_size"):
            g["t2i_size"] = [32, 32]
    if bench in SCALED:
        doc[bench].update(SCALED[bench])
    if bench == "reward":
        doc["reward"].update(images=REWARD_IMAGES, image_size=64, triplets_per_image=1)
        doc["reward"]["elo_shuffles"] = 5
        for g in doc["reward"]["generators"]:
            g["t2i_size"] = [32, 32]
    return doc, bench


def problems(store: RunStore, doc: dict[str, Any], bench: str) -> list[str]:
    """Why the build's benchmark tables would be degenerate (none: they are not)."""
    out: list[str] = []
    if bench in ("evaluation", "safeimg"):
        ev = doc["evaluation"]
        items = [r for r in rows(store, "eval_sets") if r["status"] == "ok"]
        sets = ("id", "ood") if bench == "evaluation" else ("id",)
        for s in sets:
            clean = Counter(
                r["label"] for r in items if r["eval_set"] == s and r["variant"] == "0x"
            )
            if bench == "evaluation" and (clean["fake"], clean["real"]) != (
                ev["fakes"],
                ev["reals"],
            ):
                out.append(f"{s} set: {clean['fake']} fakes + {clean['real']} reals, asked "
                           f"{ev['fakes']} + {ev['reals']}")  # fmt: skip
            if not clean["fake"] or not clean["real"]:
                out.append(f"{s} set has {dict(clean)}: one class")
            for v in {r["variant"] for r in items if r["eval_set"] == s}:
                n = Counter(r["label"] for r in items if r["eval_set"] == s and r["variant"] == v)
                if len(n) < 2:
                    out.append(f"{s} set, robustness group {v}: one class ({dict(n)})")
    if bench == "safeimg":
        from forenset.benchmarks.safeimg.sets import run_safeimg, simulate_annotations

        simulate_annotations(store, 7)
        res = run_safeimg(store, seed=7, out=Path(store.root) / "safeimg-check")
        if not res["counts"]["D_real"]:
            out.append(f"SafeIMG D_real is empty ({res['counts']})")
        if not res["counts"]["D_SafeIMG"]:
            out.append(f"SafeIMG D_SafeIMG is empty ({res['counts']})")
        bad = [
            r["error"]
            for r in rows(store, "explanations")
            if r["status"] != "ok" and r["label"] == "fake"
        ]
        if bad:
            out.append(f"{len(bad)} fake explanations are errors, e.g. {bad[0]}")
    if bench == "fakebench":
        fb = doc["fakebench"]
        items = [r for r in rows(store, "fakebench_items") if r["status"] == "ok"]
        fc = Counter(r["label"] for r in items if r["task"] == "fakeclass")
        if (fc["fake"], fc["real"]) != (fb["fakes"], fb["reals"]):
            out.append(f"FakeClass has {fc['fake']} + {fc['real']}, asked "
                       f"{fb['fakes']} + {fb['reals']}")  # fmt: skip
        if not any(r["task"] == "fakeqa" for r in items):
            out.append("FakeQA has no items")
    if bench == "reward":
        want = doc["reward"]["images"]
        got = Counter(r["label"] for r in rows(store, "reward_images") if r["status"] == "ok")
        if (got["real"], got["fake"]) != (want, want):
            out.append(f"reward images: {dict(got)}, asked {want} + {want}")
        acc = {
            r["subject"]: r["value"]
            for r in rows(store, "reward_scores")
            if r["table"] == "policy_accuracy" and r["group"] == "overall"
        }
        consts = [p["name"] for p in doc["reward"]["policies"] if p.get("kind") == "constant"]
        forensic = [p["name"] for p in doc["reward"]["policies"] if p.get("kind") == "detector"]
        floor = max((acc.get(c) or 0.0) for c in consts) if consts else 0.0
        for p in forensic:
            if acc.get(p) is None or acc[p] <= floor:
                out.append(
                    f"reward policy {p}: accuracy {acc.get(p)}, not above the constant {floor}"
                )
    return out


def test_every_benchmark_example_is_checked():
    assert set(shipped()) >= {"eval", "safeimg", "fakebench", "reward"}
    assert {
        benchmark_of(yaml.safe_load((EXAMPLES / f"{n}.yaml").read_text())) for n in shipped()
    } == BENCHMARKS


def upstream(doc: dict[str, Any]) -> str:
    """A scaled config without its benchmark sections and run_dir: what decides the images."""
    keys = {"evaluation", "fakebench", "reward", "run_dir"}
    return yaml.safe_dump({k: v for k, v in doc.items() if k not in keys}, sort_keys=True)


@pytest.fixture(scope="module")
def builds(tiles, tmp_path_factory) -> dict[str, Any]:
    """One build per distinct upstream, every example of it with its section on (lazy)."""
    made: dict[str, Any] = {}
    docs = {n: scaled(n, tiles, Path("unused")) for n in shipped()}

    def build(name: str) -> tuple[RunStore, dict[str, Any], str]:
        doc, bench = docs[name]
        key = upstream(doc)
        if key not in made:
            union = {k: v for k, v in doc.items()}
            for other, (d, _) in docs.items():
                if other != name and upstream(d) == key:
                    union |= {k: d[k] for k in ("evaluation", "fakebench", "reward") if k in d}
            union["run_dir"] = str(tmp_path_factory.mktemp("run") / "run")
            store, stats, _ = run_local(validate_config(union))
            assert not [s for s, st in stats.items() if st.failed], stats
            made[key] = store
        return made[key], doc, bench

    return {"build": build, "docs": docs}


def test_eval_and_fakebench_share_one_build(tiles):
    """The sharing above is real: their scaled configs differ only in benchmark sections."""
    a, b = (scaled(n, tiles, Path("unused"))[0] for n in ("eval", "fakebench"))
    assert upstream(a) == upstream(b)


@pytest.mark.parametrize("name", shipped())
def test_example_tables_are_not_degenerate(name, builds):
    store, doc, bench = builds["build"](name)
    assert problems(store, doc, bench) == []


@pytest.mark.parametrize("name", ["eval", "reward"])
def test_the_check_fails_on_a_size_not_reached(name, builds):
    """Asked one more than the build made, the same tables are reported short."""
    store, doc, bench = builds["build"](name)
    more = copy.deepcopy(doc)
    more[bench]["reals" if bench == "evaluation" else "images"] += 1
    found = problems(store, more, bench)
    assert found and all("asked" in p for p in found), found


@pytest.mark.parametrize("name", shipped())
def test_example_explanations_have_no_defects(name, builds):
    """Issue 38 §3: no explanation of a shipped example repeats a 4-word phrase, and every
    sentence states a fact its row measured (tests/text/explanation_facts.py)."""
    store, _, _ = builds["build"](name)
    assert [r for r in rows(store, "explanations") if r["status"] == "ok"]
    # a text the stage's own validator refuses is an error row, not a shipped explanation
    assert [r["error"] for r in rows(store, "explanations") if r["status"] != "ok"] == []
    assert build_defects(store) == []


def test_default_demo_explanations_have_no_defects(tmp_path):
    """The default build (forenset/data/demo.yaml) scaled like the examples: its bundled photos
    at 64 px, one edit per photo and generator, no safety prompts (no text-to-image there)."""
    from forenset.config import DEFAULT_CONFIG

    doc = yaml.safe_load(Path(DEFAULT_CONFIG).read_text())
    doc["sources"]["max_side"] = 64
    doc["instructions"].update(min_edits=1, max_edits=1)
    doc.pop("scenarios", None)
    doc.pop("prompts", None)
    doc["run_dir"] = str(tmp_path / "run")
    store, stats, _ = run_local(validate_config(doc))
    assert not [s for s, st in stats.items() if st.failed], stats
    kinds = Counter(r["kind"] for r in rows(store, "explanations") if r["status"] == "ok")
    assert kinds["complex"] and kinds["simple"] and kinds["authenticity"], kinds
    assert [r["error"] for r in rows(store, "explanations") if r["status"] != "ok"] == []
    assert build_defects(store) == []
