from forenset.text.checks import (
    validate_authenticity_explanation,
    validate_complex_explanation,
    validate_differences,
    validate_judgment,
    validate_simple_explanation,
)


def test_differences():
    ok = {
        "differences": [
            {
                "region": "the red mug on the desk",
                "change_type": "recolored",
                "description": "red in image 1, green in image 2",
                "salience": 3,
                "bbox": [0.1, 0.2, 0.3, 0.4],
            }
        ]
    }
    assert validate_differences(ok) == []
    bad = {
        "identical": True,
        "differences": [
            {**ok["differences"][0], "region": "the left part", "bbox": [0.5, 0.2, 0.3, 0.4]}
        ],
    }
    f = validate_differences(bad)
    assert any("identical" in x for x in f) and any("bbox" in x for x in f)
    assert any("concrete" in x for x in f)


def test_judgment_consistency():
    ok = dict(
        match_score=0.9,
        offtarget_penalty=0.1,
        final_score=0.8,
        verdict="KEEP",
        failure_category="none",
        rationale="The mug turned green as asked.",
    )
    assert validate_judgment(ok) == []
    assert validate_judgment({**ok, "final_score": 1.0})
    assert validate_judgment({**ok, "verdict": "DISCARD"})
    assert validate_judgment({**ok, "failure_category": "off_target"})
    assert validate_judgment({**ok, "offtarget_penalty": 0.8})


def test_explanations():
    text = (
        "The mug on the desk has a green body whose edge blends into the desk with a soft "
        "halo, and its shadow still falls to the left while the lamp lights it from the "
        "left too, so the light and shadow disagree. The handle is smeared and loses the "
        "fine glaze highlights visible on the rest of the mug."
    )
    cues = [
        {"entity": "the mug", "evidence": "halo at the edge"},
        {"entity": "the handle", "evidence": "smeared"},
    ]
    assert validate_complex_explanation({"explanation": text, "cues": cues}) == []
    f = validate_complex_explanation(
        {
            "explanation": text + " It probably came from a model.",
            "cues": cues + [{"entity": "the window", "evidence": "x"}],
        }
    )
    assert any("hedges" in x for x in f) and any("window" in x for x in f)
    assert validate_authenticity_explanation({"explanation": text, "cues": cues}) == []
    simple = {
        "explanation": "The mug's colour bleeds into the desk around its edge.",
        "entity": "the mug",
    }
    assert validate_simple_explanation(simple) == []
    f = validate_simple_explanation(
        {"explanation": "Diffusion artifacts in pixel noise show it.", "entity": "the mug"}
    )
    assert any("jargon" in x for x in f) and any("not mentioned" in x for x in f)
