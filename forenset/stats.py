"""Dataset statistics as SQL over the stage views (shared by `status --details` and the report)."""

from __future__ import annotations

from typing import Any

import duckdb

# XPlainVerse Step 3: ~609K candidates -> ~265K retained, "a discard rate of approximately 56.5%".
PAPER_DISCARD_RATE = 0.565


def discard_line(kept: int, discarded: int) -> str:
    """The build's overall Edit-Check discard rate beside the paper's, as one sentence."""
    total = kept + discarded
    if not total:
        return "Edit-Check discard rate: no candidates judged yet (XPlainVerse: 56.5 %)"
    return (
        f"Edit-Check discard rate: {discarded / total:.1%} ({discarded} of {total} candidates; "
        f"XPlainVerse: {PAPER_DISCARD_RATE:.1%})"
    )


def gate_line(gate: str, kept: int, discarded: int) -> str:
    """A later gate's discard rate (one after Edit-Check, ``Stage.gate``), as one sentence."""
    total = kept + discarded
    if not total:
        return f"{gate} gate: no candidates examined yet"
    return f"{gate} gate discard rate: {discarded / total:.1%} ({discarded} of {total} candidates)"


QUERIES: dict[str, str] = {
    "discard_by_generator": """
        SELECT generator, count(*) AS candidates, sum(CASE WHEN keep THEN 0 ELSE 1 END) AS discarded,
               round(avg(CASE WHEN keep THEN 0 ELSE 1 END), 3) AS discard_rate
        FROM verdicts WHERE status = 'ok' GROUP BY 1 ORDER BY 1""",
    "discard_by_family": """
        SELECT family, kind, count(*) AS candidates, round(avg(CASE WHEN keep THEN 0 ELSE 1 END), 3) AS discard_rate
        FROM verdicts WHERE status = 'ok' GROUP BY 1, 2 ORDER BY 1, 2""",
    "failure_categories": """
        SELECT failure_category, verdict, count(*) AS n FROM verdicts WHERE status = 'ok'
        GROUP BY 1, 2 ORDER BY n DESC""",
    # the numbers behind each category (judgments.measurements, the strength-aware rule judge);
    # judge_contradicts_pixels: model judges' rows whose category the pixels do not support
    "category_evidence": """
        SELECT pixel_category, count(*) AS n,
               round(median(CAST(json_extract(measurements, '$.coverage') AS DOUBLE)), 3) AS median_coverage,
               round(median(CAST(json_extract(measurements, '$.weak_coverage') AS DOUBLE)), 3) AS median_touched,
               round(median(CAST(json_extract(measurements, '$.outside_frac') AS DOUBLE)), 4) AS median_outside,
               round(max(CAST(json_extract(measurements, '$.blockiness') AS DOUBLE)), 3) AS max_blockiness,
               round(max(CAST(json_extract(measurements, '$.noise_residual') AS DOUBLE)), 3) AS max_noise,
               round(max(CAST(json_extract(measurements, '$.colour_cast') AS DOUBLE)), 3) AS max_colour_cast,
               count(*) FILTER (NOT category_grounded) AS judge_contradicts_pixels
        FROM judgments WHERE status = 'ok' AND measurements IS NOT NULL GROUP BY 1 ORDER BY n DESC""",
    "salience_histogram": """
        SELECT CAST(json_extract(d.value, '$.salience') AS INTEGER) AS salience, count(*) AS n
        FROM diffs, json_each(diffs.differences) AS d WHERE diffs.status = 'ok' GROUP BY 1 ORDER BY 1""",
    "fidelity_by_verdict": """
        SELECT CASE WHEN keep THEN 'retained' ELSE 'discarded' END AS outcome, count(*) AS n,
               round(avg(psnr), 2) AS mean_psnr, round(avg(ssim), 4) AS mean_ssim
        FROM verdicts WHERE status = 'ok' GROUP BY 1
        UNION ALL
        SELECT 'discarded, edit present', count(*), round(avg(psnr), 2), round(avg(ssim), 4)
        FROM verdicts WHERE status = 'ok' AND NOT keep AND failure_category <> 'edit_missing'
        ORDER BY 1""",
    # XPlainVerse Table 2 as preservation: whole-image and off-target (outside the instruction's
    # target box) PSNR/SSIM, LPIPS, CLIP-I; OOD = generator families held out in splits
    "preservation_by_verdict": """
        SELECT CASE WHEN v.generator_family IN (SELECT generator_family FROM splits WHERE holdout)
                    THEN 'OOD' ELSE 'ID' END AS setting,
               CASE WHEN v.keep THEN 'retained' ELSE 'discarded' END AS outcome, count(*) AS n,
               round(avg(d.psnr), 2) AS psnr, round(avg(d.ssim), 4) AS ssim,
               round(avg(d.psnr_outside), 2) AS psnr_outside,
               round(avg(d.ssim_outside), 4) AS ssim_outside,
               round(avg(d.lpips), 4) AS lpips, round(avg(d.clip_i), 4) AS clip_i,
               any_value(d.fidelity_note) AS note
        FROM verdicts v JOIN diffs d USING (candidate_id)
        WHERE v.status = 'ok' AND d.status = 'ok' GROUP BY 1, 2 ORDER BY 1, 2 DESC""",
    "fidelity_by_category": """
        SELECT failure_category, count(*) AS n, round(avg(psnr), 2) AS mean_psnr, round(avg(ssim), 4) AS mean_ssim
        FROM verdicts WHERE status = 'ok' GROUP BY 1 ORDER BY mean_psnr""",
    "hallucination_by_extractor": """
        SELECT json_extract_string(grounding, '$.extractor') AS extractor, count(*) AS records,
               round(avg(CAST(json_extract(grounding, '$.hallucination_rate') AS DOUBLE)), 4) AS hallucination_rate,
               sum(json_array_length(json_extract(grounding, '$.missed'))) AS missed_changes
        FROM diffs WHERE status = 'ok' GROUP BY 1 ORDER BY 1""",
    "edit_family_balance": """
        SELECT family, kind, count(*) AS n, round(count(*) / sum(count(*)) OVER (), 3) AS share
        FROM instructions WHERE status = 'ok' GROUP BY 1, 2 ORDER BY 1, 2""",
    # an instruction reaches only the generators that execute its kind (backends' edit_kinds)
    "edits_by_kind_and_generator": """
        SELECT c.kind, c.generator, count(*) AS candidates,
               sum(CASE WHEN c.status = 'ok' THEN 1 ELSE 0 END) AS ok,
               sum(CASE WHEN v.keep THEN 1 ELSE 0 END) AS kept
        FROM candidates c LEFT JOIN verdicts v ON v.candidate_id = c.candidate_id AND v.status = 'ok'
        WHERE c.kind IS DISTINCT FROM 't2i' GROUP BY 1, 2 ORDER BY 1, 2""",
    "prompts_by_category": """
        SELECT category, count(*) AS prompts, count(DISTINCT media_form) AS media_forms
        FROM prompts WHERE status = 'ok' GROUP BY 1 ORDER BY 1""",
    "spend_by_stage": """
        SELECT 'captions' AS stage, count(*) AS rows, sum(input_tokens) AS input_tokens,
               sum(output_tokens) AS output_tokens, round(sum(cost_usd), 4) AS cost_usd,
               round(avg(CASE WHEN cached THEN 1 ELSE 0 END), 3) AS cached_share FROM captions
        UNION ALL SELECT 'instructions', count(*), sum(input_tokens), sum(output_tokens), round(sum(cost_usd), 4),
               round(avg(CASE WHEN cached THEN 1 ELSE 0 END), 3) FROM instructions
        UNION ALL SELECT 'diffs', count(*), sum(input_tokens), sum(output_tokens), round(sum(cost_usd), 4),
               round(avg(CASE WHEN cached THEN 1 ELSE 0 END), 3) FROM diffs
        UNION ALL SELECT 'judgments', count(*), sum(input_tokens), sum(output_tokens), round(sum(cost_usd), 4),
               round(avg(CASE WHEN cached THEN 1 ELSE 0 END), 3) FROM judgments
        UNION ALL SELECT 'explanations', count(*), sum(input_tokens), sum(output_tokens), round(sum(cost_usd), 4),
               round(avg(CASE WHEN cached THEN 1 ELSE 0 END), 3) FROM explanations""",
    # identical bytes from several generators, kept once in splits (generators lists them all)
    "duplicate_candidates": """
        SELECT array_to_string(generators, ' + ') AS generators, count(*) AS samples
        FROM splits WHERE status = 'ok' AND label = 'fake' AND len(generators) > 1
        GROUP BY 1 ORDER BY 2 DESC, 1""",
    "splits": """
        SELECT split, label, count(*) AS n, count(DISTINCT generator) AS generators
        FROM splits WHERE status = 'ok' GROUP BY 1, 2 ORDER BY 1, 2""",
}


def run(con: duckdb.DuckDBPyConnection, name: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    cur = con.execute(QUERIES[name])
    return [d[0] for d in cur.description], cur.fetchall()
