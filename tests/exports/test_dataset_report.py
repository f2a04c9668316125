"""The HTML report over a real small build, rendered in headless Chromium; diversity metrics;
the Prefect summary artifact."""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser

import pytest

from forenset.report.text_metrics import bleu, distinct_n, mention_rate, self_bleu, tokens
from tests.helpers import dump_dom, needs_chromium, rows

CHECK_SCRIPT = """<script>
window.addEventListener('load', () => {
  const imgs = Array.from(document.images);
  const ok = imgs.filter(i => i.complete && i.naturalWidth > 0).length;
  const el = document.createElement('div');
  el.id = 'img-check';
  el.textContent = ok + '/' + imgs.length;
  document.body.appendChild(el);
});
</script>"""


class _Imgs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.srcs: list[str] = []
        self.h2: list[str] = []
        self._in_h2 = False

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.srcs.append(dict(attrs).get("src", ""))
        self._in_h2 = tag == "h2"

    def handle_data(self, data):
        if self._in_h2:
            self.h2.append(data)
            self._in_h2 = False


def test_bleu_and_distinct_by_hand():
    a = tokens("the red car is parked near the old house")
    assert bleu(a, [a]) == pytest.approx(1.0)
    assert bleu(a, [tokens("completely unrelated words only here")]) == 0.0
    part = bleu(a, [tokens("the red car is parked near a new shop")])
    assert 0.0 < part < 1.0
    same = ["a cat sits on the mat today"] * 4
    varied = [
        "a cat sits on the mat today",
        "lighting from the left disagrees with the shadow",
        "the edges of the pasted bottle are too sharp",
        "grain differs between sky and the building",
    ]
    assert self_bleu(same) == pytest.approx(1.0)
    assert self_bleu(varied) < 0.2
    assert self_bleu(["only one"]) is None
    # bigrams: "a b", "b a", "a b" -> 2 unique of 3
    assert distinct_n(["a b a b"], 2) == pytest.approx(2 / 3)
    assert mention_rate([["cat"], [], None, ["sky", "dog"]]) == 0.5


def test_report_sections_and_numbers(built, samples, tmp_path):
    from forenset.report.html import write_report

    store, _ = built
    out = write_report(store, tmp_path / "report.html", gallery=3)
    text = out.read_text()
    p = _Imgs()
    p.feed(text)
    assert all(s.startswith("data:image/png;base64,") for s in p.srcs)  # self-contained
    assert not re.search(r"""(src|href)=["']https?:""", text)
    heads = " ".join(p.h2)
    for h in (
        "Counts per stage",
        "Funnel",
        "discard rates",
        "salience",
        "Perturbations",
        "Explanations",
        "Gallery",
    ):
        assert h in heads
    verdicts = [r for r in rows(store, "verdicts") if r["status"] == "ok"]
    dropped = sum(not r["keep"] for r in verdicts)
    assert f"Edit-Check discard rate: {dropped / len(verdicts):.1%}" in text
    assert "XPlainVerse: 56.5%" in text
    fakes = sum(s["label"] == "fake" for s in samples)
    # 5 plots, the funnel's among them (+ F1 ID vs OOD when the evaluation ran on sets large enough to be meaningful),
    # then real | fake (| perturbed) per gallery sample
    assert text.count("<figcaption>real</figcaption>") == min(3, fakes)
    n_pert = text.count("<figcaption>perturbed: ")
    n_eval = 0
    if store.manifest("eval_scores"):
        from forenset.benchmarks.evaluation.report import table5
        from forenset.store.views import connect

        t5 = table5(connect(store, ["eval_scores"]))
        n_eval = int(any(v is not None for f1 in t5.f1.values() for v in f1))
    assert len(p.srcs) == 5 + n_eval + 2 * min(3, fakes) + n_pert
    # the per-split table matches the splits stage
    ok = [r for r in rows(store, "splits") if r["status"] == "ok"]
    for split in {r["split"] for r in ok}:
        n_real = sum(r["split"] == split and r["label"] == "real" for r in ok)
        n_fake = sum(r["split"] == split and r["label"] == "fake" for r in ok)
        row = (
            f'<tr><td>{split}</td><td class="n">{n_real}</td><td class="n">{n_fake}</td>'
            f'<td class="n">{n_real + n_fake}</td></tr>'
        )
        assert row in text
    from forenset.exports.data import verdict_source

    j = [r for r in rows(store, verdict_source()[0]) if r["status"] == "ok"]
    discarded = sum(not r["keep"] for r in j)
    assert f'<td class="n">{len(j)}</td>' in text and f'<td class="n">{discarded}</td>' in text


@needs_chromium
def test_report_images_decode_in_headless_chromium(built, tmp_path):
    from forenset.report.html import write_report

    store, _ = built
    out = write_report(store, tmp_path / "report.html", gallery=2)
    text = out.read_text()
    n_img = text.count("<img ")
    proc = dump_dom(text, CHECK_SCRIPT, tmp_path, timeout=90)
    m = re.search(r'<div id="img-check">(\d+)/(\d+)</div>', proc.stdout)
    assert m, f"no image check in the DOM (rc {proc.returncode}): {proc.stderr[-1500:]}"
    decoded, total = int(m.group(1)), int(m.group(2))
    assert total == n_img > 0
    assert decoded == total


def test_summary_markdown_and_noop_outside_flow():
    from forenset.report.artifact import create_summary_artifact, summary_markdown

    stats = {
        "sources": {"planned": 2, "run": 2, "rows": 4, "ok": 4, "error": 0, "seconds": 0.5},
        "judgments": {
            "planned": 1,
            "run": 1,
            "rows": 6,
            "ok": 6,
            "kept": 4,
            "discarded": 2,
            "failures": ["judgments:s0: RuntimeError: boom"],
        },
    }
    export = {"path": "/x/exports/parquet", "counts": {"train": 3, "test": 1}, "skipped": False}
    md = summary_markdown(stats, export)
    assert "| judgments | 1 | 1 |  |  | 6 | 6 |  | 4 | 2 |" in md
    assert "- train: 3 samples" in md and "boom" in md
    assert create_summary_artifact(stats, export) is None  # outside a flow: nothing, no error


@pytest.mark.slow
def test_summary_artifact_created_in_flow():
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.runtime import flow_run

    from forenset.report.artifact import create_summary_artifact

    @flow(name="artifact-check")
    def f() -> str:
        create_summary_artifact(
            {"sources": {"planned": 1, "run": 1, "rows": 3, "ok": 3}},
            {"path": "/p", "counts": {"train": 3}},
        )
        return flow_run.id

    run_id = f()
    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["forenset-build-summary"]))
        )
    mine = [
        a for a in arts if str(a.flow_run_id) == str(run_id)
    ]  # other tests' builds share the API
    assert mine and mine[0].type == "markdown"
    assert "| sources | 1 | 1 |" in mine[0].data and "- train: 3 samples" in mine[0].data


def test_report_survives_missing_blobs_and_empty_stages(built, tmp_path):
    from forenset.report.html import render_report
    from forenset.store.run_store import RunStore

    store, _ = built
    copy = tmp_path / "run"
    shutil.copytree(store.root, copy)
    c = RunStore(str(copy))
    c.write_manifest("perturbations", [])  # as if the stage had not run yet
    for blob in {r["source_blob"] for r in rows(c, "splits")}:
        (copy / blob).unlink()  # every real photo gone from the blob store
    text = render_report(c, gallery=2)
    assert "(image missing from the blob store)" in text
    assert "<h2>Perturbations</h2>" in text and "<h2>Gallery" in text


def test_report_has_every_section_on_a_complete_build(built):
    """Each section reads its own tables: a complete build must not leave any "not available"
    (a view missing from the report's connection once showed up only there)."""
    from forenset import stats
    from forenset.report.html import SHOWN_ABOVE, render_report

    store, _ = built
    assert {"instructions", "prompts", "captions"} <= set(store.stages_present())
    text = render_report(store, gallery=1)
    bad = [m.start() for m in re.finditer("not available", text)]
    assert not bad, [text[max(0, i - 120) : i + 160] for i in bad]
    for name in stats.QUERIES:  # those the report shows above are not repeated
        head = f"<h3>{name.replace('_', ' ')}</h3><div class='tw'><table>"
        assert (head in text) != (name in SHOWN_ABOVE), f"section {name} has no table"
    # the three sections that once failed show rows, not just headers
    for name, table_name in (
        ("edit_family_balance", "instructions"),
        ("prompts_by_category", "prompts"),
    ):
        body = text.split(f"<h3>{name.replace('_', ' ')}</h3>", 1)[1].split("</table>", 1)[0]
        assert rows(store, table_name) and body.count("<tr>") > 1, name
    spend = text.split("<h3>spend by stage</h3>", 1)[1].split("</table>", 1)[0]
    for stage in ("captions", "instructions", "diffs", "judgments", "explanations"):
        assert f"<td>{stage}</td>" in spend
