"""Generator families that differ, held-out bytes that stay held out, and the build's funnel
(issue 38 parts 2 and 4).

One small build (run without Prefect) holds two classical generators and ``cv-twin``, a
generator of a held-out family configured exactly like ``cv-telea``: every edit of theirs is
byte-identical, the case where a held-out split tests nothing unless splits keeps the bytes
with the held-out family."""

from __future__ import annotations

import html
import re
from collections import Counter, defaultdict

import numpy as np
import pytest
import yaml
from PIL import Image
from typer.testing import CliRunner

from forenset.backends.image.base import EditRequest
from forenset.backends.image.generator import GeneratorConfig
from forenset.backends.image.offline import OfflineEditor
from forenset.config import DEFAULT_CONFIG, validate_config
from forenset.funnel import funnel
from forenset.tasks.splits import assign_split
from forenset.text.instructions import OFFLINE_KINDS
from tests.conftest import small_config_dict
from tests.helpers import rows, run_local

TWIN = {"name": "cv-twin", "family": "twin", "inpaint": "telea"}


@pytest.fixture(scope="module")
def twin_build(tmp_path_factory):
    run = tmp_path_factory.mktemp("twin") / "run"
    cfg = validate_config(
        small_config_dict(
            run,
            generators=[
                {"name": "cv-telea", "family": "classical", "inpaint": "telea"},
                {"name": "cv-ns", "family": "classical", "inpaint": "ns"},
                TWIN,
            ],
            splits={
                "fractions": {"train": 0.5, "validation": 0.25, "test": 0.25},
                "holdout_families": ["twin"],
            },
            evaluation={"enabled": True, "fakes": 2, "reals": 1},
            fakebench={"enabled": False},
            perturbations={"variants": 1},
        )
    )
    store, stats, _ = run_local(cfg)
    assert not any(st.failures for st in stats.values())
    splits = {r["image_id"]: r["split"] for r in rows(store, "splits") if r["label"] == "real"}
    # the check needs photos on both sides of the held-out line
    assert "test" in splits.values() and set(splits.values()) - {"test"}
    return store


def test_identical_generators_are_named_with_their_kinds(twin_build):
    cands = [r for r in rows(twin_build, "candidates") if r["status"] == "ok"]
    same: dict[tuple[str, str], set[str]] = defaultdict(set)
    by = {(r["generator"], r["instruction_id"]): r for r in cands}
    for (g, iid), r in by.items():
        for other in ("cv-telea", "cv-ns", "cv-twin"):
            o = by.get((other, iid))
            if other != g and o and o["blob"] == r["blob"]:
                same[tuple(sorted((g, other)))].add(r["kind"])
    assert same[("cv-telea", "cv-twin")], "cv-twin is configured as cv-telea: identical bytes"
    warnings = funnel(twin_build).warnings
    judged = {r["candidate_id"] for r in rows(twin_build, "verdicts") if r["status"] == "ok"}
    assert judged
    for (a, b), kinds in same.items():
        (line,) = [w for w in warnings if w.startswith(f"generators {a} and {b} produce")]
        assert "identical output for kinds" in line
        assert sorted(re.findall(r"(\w+) \(\d+\)", line)) == sorted(kinds)
    pairs = {
        tuple(re.findall(r"generators (\S+) and (\S+) produce", w)[0])
        for w in warnings
        if w.startswith("generators ")
    }
    assert pairs == set(same)


def test_a_held_out_familys_bytes_never_sit_outside_test(twin_build):
    twin_blobs = {
        r["blob"]
        for r in rows(twin_build, "candidates")
        if r["generator"] == "cv-twin" and r["blob"]
    }
    samples = [r for r in rows(twin_build, "splits") if r["status"] == "ok"]
    outside = [r for r in samples if r["split"] != "test" and r["blob"] in twin_blobs]
    assert not outside, f"held-out bytes in train/validation: {outside[:2]}"
    in_test = [r for r in samples if r["split"] == "test" and r["blob"] in twin_blobs]
    assert in_test, "the test photo's identical edits must reach test"
    assert all(r["generator"] == "cv-twin" and r["holdout"] for r in in_test)
    assert all("cv-telea" in r["generators"] for r in in_test)
    blobs = Counter(r["blob"] for r in samples)  # one image, one row, one split
    assert max(blobs.values()) == 1
    f = {(s.step, s.group): s for s in funnel(twin_build).steps}
    assert f[("splits", "")].why.get("identical_to_holdout", 0) > 0


def test_the_funnel_counts_what_the_tables_hold(twin_build):
    """Footers against a scan of the data: a footer count that drifts from its rows fails."""
    f = {(s.step, s.group): s for s in funnel(twin_build).steps}
    cands = [r for r in rows(twin_build, "candidates") if r["status"] == "ok"]
    assert f[("sources", "")].n == sum(r["status"] == "ok" for r in rows(twin_build, "sources"))
    assert f[("candidates", "")].n == len(cands)
    for g, n in Counter(r["generator"] for r in cands).items():
        assert f[("candidates", g)].n == n
    ver = [r for r in rows(twin_build, "verdicts") if r["status"] == "ok"]
    assert f[("kept", "")].n == sum(r["keep"] for r in ver)
    assert f[("kept", "")].of == len(ver)
    for (g, kind), rs in _group(ver, "generator", "kind").items():
        s = f[("kept", f"{g} {kind}")]
        assert (s.n, s.of) == (sum(r["keep"] for r in rs), len(rs))
        lost = Counter(
            "borderline" if r["verdict"] == "BORDERLINE" else r["failure_category"]
            for r in rs
            if not r["keep"]
        )
        assert s.why == dict(lost)
    sp = [r for r in rows(twin_build, "splits") if r["status"] == "ok"]
    for split in ("train", "validation", "test"):
        for part in ("real", "id", "ood"):
            n = sum(
                r["split"] == split
                and part == ("real" if r["label"] == "real" else "ood" if r["holdout"] else "id")
                for r in sp
            )
            assert f.get(("splits", f"{split} {part}"), _zero()).n == n
    assert f[("splits", "")].n == len(sp)
    # every kept candidate and real photo is a splits row or a counted drop
    reals = sum(r["status"] == "ok" for r in rows(twin_build, "captions"))
    assert f[("splits", "")].of == sum(r["keep"] for r in ver) + reals
    for stage, label in (("perturbations", "perturbed"), ("explanations", "explained")):
        assert f[(label, "")].n == sum(r["status"] == "ok" for r in rows(twin_build, stage))


def _zero():
    from forenset.funnel import Step

    return Step("", "", 0)


def _group(rs, *cols):
    out = defaultdict(list)
    for r in rs:
        out[tuple(r[c] for c in cols)].append(r)
    return out


def test_status_report_and_card_show_the_same_funnel(twin_build, tmp_path):
    from forenset.cli import app
    from forenset.exports.api import run_export
    from forenset.report.html import render_report

    want = [tuple("" if v is None else str(v) for v in row) for row in funnel(twin_build).numbers()]
    res = CliRunner().invoke(app, ["status", twin_build.uri, "--funnel"])
    assert res.exit_code == 0, res.output
    assert _status_rows(res.output) == want
    assert max(len(line) for line in _table_lines(res.output)) <= 80
    page = render_report(twin_build)
    section = page.split("<h2>Funnel")[1].split("<h2>")[0]
    cells = [
        tuple(html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr))
        for tr in re.findall(r"<tr>(.*?)</tr>", section)
    ]
    assert [c for c in cells if c] == want
    assert "<img" in section  # the chart
    run_export(twin_build, "hf", tmp_path / "hf")
    card = (tmp_path / "hf" / "README.md").read_text()
    body = card.split("## Funnel")[1]
    md = [
        tuple(c.strip() for c in line.strip().strip("|").split("|"))
        for line in body.splitlines()
        if line.startswith("| ") and not line.startswith("| step")
    ]
    assert md == want
    for w in funnel(twin_build).warnings:
        assert w in card and html.escape(w) in section and w in " ".join(res.output.split())


def test_eval_says_why_the_ood_set_is_small(twin_build):
    from forenset.cli import app

    (line,) = [w for w in funnel(twin_build).warnings if w.startswith("held-out family twin")]
    res = CliRunner().invoke(app, ["eval", twin_build.uri], terminal_width=400)
    assert res.exit_code == 0, res.output
    assert line in " ".join(res.output.split())


def _table_lines(text: str) -> list[str]:
    start = text.index("funnel (rows kept")
    return [ln for ln in text[start:].splitlines() if ln[:1] in "┏┃┡│└"]


def _status_rows(text: str) -> list[tuple[str, ...]]:
    """The funnel table's rows, its wrapped cells joined again."""
    out: list[list[str]] = []
    for ln in _table_lines(text):
        if not ln.startswith("│"):
            continue
        cells = [c.strip() for c in ln.strip("│").split("│")]
        if cells[0] or not out:
            out.append(cells)
        else:  # a wrapped line: only the cells that continue are filled
            for i, c in enumerate(cells):
                if c:
                    out[-1][i] = f"{out[-1][i]} {c}".strip()
    return [tuple(r) for r in out]


def test_every_offline_family_marks_every_kind():
    """The demo's four generators make four different images of every kind (issue 38: a
    family without its own signature leaves its held-out split nothing to test)."""
    demo = yaml.safe_load(DEFAULT_CONFIG.read_text())
    gens = []
    for g in demo["generators"]:
        g = {**g, "faults": {}}  # the faults' own outputs differ anyway; this is the clean edit
        gens.append(OfflineEditor(GeneratorConfig(**g)))
    rng = np.random.default_rng(0)
    base = (rng.random((96, 128, 3)) * 255).astype(np.uint8)
    base = np.asarray(Image.fromarray(base).resize((128, 96), Image.BILINEAR))
    img = Image.fromarray(base)
    for kind in OFFLINE_KINDS:
        ins = {
            "kind": kind,
            "change_bbox": [0.3, 0.3, 0.7, 0.75],
            "bbox": [0.05, 0.05, 0.3, 0.4],
            "params": {"colour": "blue", "gain": 0.45, "mode": "bulge"},
        }
        outs = {}
        for ed in gens:
            res = ed.edit([EditRequest(img, ins, seed=5, donor=img.transpose(0))])[0]
            assert res.status == "ok", (ed.cfg.name, kind, res.error)
            outs[ed.cfg.name] = np.asarray(res.image).tobytes()
        names = sorted(outs)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                assert outs[a] != outs[b], f"{a} and {b} are identical on {kind}"


def test_the_default_demos_test_split_holds_held_out_rows(tmp_path):
    """The default demo (forenset/data/demo.yaml) keeps a held-out row in test. Built on the
    photos its seed puts in test only (a photo's split is its own; its splice donors come from
    the photos built with it, so splices may differ from the full demo's), without the safety
    path. The full demo's figures are in docs/benchmarks.md."""
    from forenset.store.run_store import RunStore
    from forenset.tasks.base import StageContext
    from forenset.tasks.sources import Sources
    from forenset.worker import execute_shard

    doc = yaml.safe_load(DEFAULT_CONFIG.read_text())
    for key in ("scenarios", "prompts"):
        doc.pop(key, None)
    doc["run_dir"] = str(tmp_path / "ids")
    doc["perturbations"] = {"variants": 0}
    cfg = validate_config(doc)
    ids = RunStore(cfg.run_dir)
    stage = Sources(StageContext(ids, cfg))
    names = {}
    for spec in stage.plan_sources():
        info = execute_shard(stage, spec)
        for r in ids.read_shard(info, columns=["image_id", "name", "status"]).to_pylist():
            if r["status"] == "ok":
                names[r["image_id"]] = r["name"]
    fractions = doc["splits"]["fractions"]
    test = sorted(n for i, n in names.items() if assign_split(doc["seed"], i, fractions) == "test")
    assert test, "the demo's seed puts no bundled photo in test"
    doc["run_dir"] = str(tmp_path / "run")
    doc["sources"] = {**doc["sources"], "samples": test}
    store, stats, _ = run_local(validate_config(doc))
    assert not any(st.failures for st in stats.values())
    ood = [r for r in rows(store, "splits") if r["split"] == "test" and r["holdout"]]
    assert ood and {r["generator_family"] for r in ood} == set(doc["splits"]["holdout_families"])


def test_a_small_held_out_family_is_one_sentence():
    from forenset.funnel import holdout_line

    assert holdout_line([], 0, 1, 10) is None  # nothing held out
    assert holdout_line(["poisson"], 10, 3, 10) is None  # enough to measure
    one = holdout_line(["poisson"], 1, 1, 10)
    assert one == (
        "held-out family poisson: 1 OOD item in test, fewer than intervals.min_n = 10 "
        "(the test split holds 1 source photo): OOD figures are anecdotal"
    )
    none = holdout_line(["poisson", "faulty"], 0, 2, 5)
    assert none is not None and none.startswith("held-out families poisson, faulty: 0 OOD items")
    assert none.endswith("and the OOD set is empty") and "\n" not in none
