"""Explanation diversity per split and kind in the HTML report and the dataset card (issue 38 §3)."""

from __future__ import annotations

import pytest

from forenset.exports.hf import explanation_lines
from forenset.report.text_metrics import distinct_n, diversity, duplicate_share
from tests.helpers import rows


def test_duplicate_share_and_diversity_by_hand():
    assert duplicate_share(["a b", "a b", "c d", "a b"]) == pytest.approx(0.5)
    assert duplicate_share(["x", "y"]) == 0.0
    assert duplicate_share([]) is None
    got = diversity(
        [
            ("train", "simple", "a b c"),
            ("train", "simple", "a b c"),
            ("train", "complex", "in the upper left, then in the upper left"),
            ("test", "simple", "x y"),
        ]
    )
    assert got == [
        ["test", "simple", 1, 1, 0.0, 1.0, 0],
        [
            "train",
            "complex",
            1,
            1,
            0.0,
            distinct_n(["in the upper left then in the upper left"]),
            1,
        ],
        ["train", "simple", 2, 1, 0.5, 0.5, 0],
    ]


def _expected(items):
    return {(r[0], r[1]): r for r in diversity(items)}


def test_report_and_card_show_diversity_per_split(built, samples):
    from forenset.report.html import render_report

    store, _ = built
    ok = [r for r in rows(store, "explanations") if r["status"] == "ok"]
    want = _expected([(r["split"], r["kind"], r["text"]) for r in ok])
    assert {s for s, _ in want} >= {"train", "test"} and len(want) >= 4
    text = render_report(store, gallery=0)
    section = text.split("<h3>Explanation diversity per split</h3>", 1)[1].split("</table>", 1)[0]
    for (split, kind), r in want.items():
        cells = "".join(
            f'<td class="n">{v:.3f}</td>' if isinstance(v, float) else f'<td class="n">{v}</td>'
            for v in r[2:]
        )
        assert f"<tr><td>{split}</td><td>{kind}</td>{cells}</tr>" in section

    card = "\n".join(explanation_lines(samples))
    items = [
        (s["split"], k, s[f"explanation_{k}"])
        for s in samples
        for k in ("complex", "simple", "authenticity")
        if s.get(f"explanation_{k}")
    ]
    for (split, kind), r in _expected(items).items():
        vals = " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in r[2:])
        assert f"| {split} | {kind} | {vals} |" in card
    assert "## Explanation diversity" in card
