"""The internal backend contract: one async attempt, raising LLMCallError on failure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from forenset.backends.llm.types import ChatRequest, ModelSpec

# Extra turns after the first user turn, e.g. a repair: [("assistant", bad), ("user", why)].
Turns = list[tuple[str, str]]


@dataclass
class RawReply:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    # "length" when the reply was cut at max_tokens (OpenAI "length", Gemini "MAX_TOKENS")
    finish_reason: str | None = None
    output_mode: str | None = None  # how structured output was asked for (OUTPUT_MODES)


class ChatBackend(Protocol):
    name: str

    async def complete(self, spec: ModelSpec, req: ChatRequest, extra: Turns) -> RawReply:
        """One attempt. Raises LLMCallError (retryable or terminal); never retries itself."""
        ...


def image_mime(data: bytes) -> str:
    """MIME type from magic bytes (PNG, JPEG, WEBP, GIF); PNG when unknown."""
    if data[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:4] == b"GIF8":
        return "image/gif"
    return "image/png"
