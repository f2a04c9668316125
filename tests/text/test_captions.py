from forenset.text.captions import speculation_terms, validate_caption
from forenset.text.models import CaptionResponse

GOOD = (
    "A woman in a white spacesuit stands in the centre of the frame, holding a helmet in her "
    "left hand. Behind her, a red and white flag hangs on a pole at the upper right. Soft "
    "frontal light from the left casts a faint shadow on the wall behind her."
)


def test_factual_caption_passes():
    assert validate_caption(GOOD) == []
    assert CaptionResponse.model_validate({"caption": GOOD, "entities": ["woman"]}).caption


def test_speculation_is_rejected():
    for bad in ("probably", "maybe", "seems to", "appears to", "might"):
        text = GOOD.replace("stands in", f"{bad} stand in")
        failures = validate_caption(text)
        assert any("speculates" in f for f in failures), bad
    assert speculation_terms("It Seems to be a cat, perhaps.") == ["seems to", "perhaps"]
    # words that merely contain a hedge are fine
    assert speculation_terms("The mighty oak appears in the frame.") == []


def test_length_bounds_and_empty():
    assert validate_caption("") == ["caption is empty"]
    assert any("fewer than" in f for f in validate_caption("A cat on a mat."))
    assert any("more than" in f for f in validate_caption(GOOD * 5, max_words=100))
    assert any("entities" in f for f in validate_caption(GOOD, entities=[], min_entities=1))


def test_assistant_meta_text_is_rejected():
    assert any("refusal" in f for f in validate_caption("Sorry, I cannot help. " + GOOD))
