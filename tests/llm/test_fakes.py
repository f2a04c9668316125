"""The fake servers themselves: computed replies, image routes, server-side rate limit."""

from __future__ import annotations

import base64
import io

from llm_kit import png
from openai import OpenAI
from PIL import Image

from forenset.testing._base import instance_for_schema


def test_schema_echo_satisfies_nested_schema():
    from pydantic import BaseModel, Field

    class Diff(BaseModel):
        region: str
        salience: int = Field(ge=1, le=5)
        kind: str = Field(json_schema_extra={"enum": ["add", "remove"]})

    class Diffs(BaseModel):
        diffs: list[Diff] = Field(min_length=2)
        note: str | None = None

    value = instance_for_schema(Diffs.model_json_schema(), "the request text")
    parsed = Diffs.model_validate(value)
    assert len(parsed.diffs) == 2 and "request" in parsed.diffs[0].region
    other = instance_for_schema(Diffs.model_json_schema(), "another, longer request text")
    assert other != value


def test_openai_images_generate_and_edit(openai_server):
    client = OpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0)
    gen = client.images.generate(model="m", prompt="red barn", size="48x32")
    img = Image.open(io.BytesIO(base64.b64decode(gen.data[0].b64_json)))
    assert img.size == (48, 32)
    src = png((0, 0, 0), (40, 40))
    edit = client.images.edit(model="m", prompt="a box", image=("s.png", src, "image/png"))
    out = Image.open(io.BytesIO(base64.b64decode(edit.data[0].b64_json)))
    assert out.getpixel((0, 0)) == (0, 0, 0) and out.getpixel((20, 20)) != (0, 0, 0)
    assert openai_server.requests[-1]["prompt"] == "a box"


def test_server_rate_limit_answers_429_with_retry_after():
    import openai

    from forenset.testing.fake_openai import FakeOpenAI

    with FakeOpenAI(rate_limit_rps=2) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        codes = []
        for _ in range(4):
            try:
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "x"}]
                )
                codes.append(200)
            except openai.RateLimitError as exc:
                codes.append(429)
                assert float(exc.response.headers["retry-after-ms"]) > 0
        assert codes[:2] == [200, 200] and 429 in codes[2:]
