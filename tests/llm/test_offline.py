"""OfflineChat: registered algorithms behind the same interface and validation."""

from __future__ import annotations

from llm_kit import Caption, settings
from PIL import Image

from forenset.backends.llm import ChatRequest, ModelSpec, register_offline_task, run_chat


def _caption_from_pixels(req: ChatRequest) -> Caption:
    import io

    img = Image.open(io.BytesIO(req.images[0])).convert("RGB")
    r, g, b = img.resize((1, 1)).getpixel((0, 0))
    colour = max((("red", r), ("green", g), ("blue", b)), key=lambda kv: kv[1])[0]
    return Caption(caption=f"a mostly {colour} image", objects=[colour], salience=1)


def test_offline_dispatch_validates_and_labels(stage):
    from llm_kit import png

    register_offline_task("offline_caption_test", _caption_from_pixels)
    register_offline_task("offline_text_test", lambda req: f"{req.user.upper()}")
    register_offline_task("offline_bad_json", lambda req: '{"caption": 1}')
    register_offline_task("offline_crash", lambda req: 1 / 0)
    spec = ModelSpec(backend="offline", model="rules-v1")
    reqs = [
        ChatRequest(
            task="offline_caption_test",
            item_id="a",
            system="",
            user="",
            images=[png((10, 200, 10))],
            response_model=Caption,
        ),
        ChatRequest(task="offline_text_test", item_id="b", system="", user="hello"),
        ChatRequest(
            task="offline_bad_json", item_id="c", system="", user="", response_model=Caption
        ),
        ChatRequest(task="offline_crash", item_id="d", system="", user=""),
        ChatRequest(task="never_registered", item_id="e", system="", user=""),
    ]
    out = run_chat(reqs, settings(spec), build_seed=0, stage=stage, cache=None)
    assert out[0].status == "ok" and out[0].parsed.objects == ["green"]
    assert (out[0].backend, out[0].model, out[0].cost_usd) == ("offline", "rules-v1", 0.0)
    assert out[1].text == "HELLO"
    assert out[0].trace()["backend"] == "offline" and out[3].trace()["status"] == "error"
    assert out[2].status == "error" and "schema" in out[2].error
    assert out[3].status == "error" and "ZeroDivisionError" in out[3].error
    assert out[4].status == "error" and "never_registered" in out[4].error
