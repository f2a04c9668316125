"""Capture real replies of llama-cpp-python 0.3.36's server (SmolLM2-135M-Instruct) as fixtures.

Run by hand against a server started as docs/backends.md says; writes
tests/llm/fixtures/llamacpp_replies.json, which the offline tests read (status, body, headers of
each exchange as the real server sent them).

    python tests/realmodels/capture_fixtures.py http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": ["real", "fake"]}},
    "required": ["answer"],
}
CASES = {
    "json_schema_rejected": {
        "messages": [{"role": "user", "content": "Say hi as JSON"}],
        "max_tokens": 20,
        "response_format": {"type": "json_schema", "json_schema": {"name": "X", "schema": SCHEMA}},
    },
    "list_content_rejected": {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "max_tokens": 20,
    },
    "json_object_schema_ok": {
        "messages": [{"role": "user", "content": "Is this photo real or fake? Answer in JSON."}],
        "max_tokens": 60,
        "temperature": 0,
        "response_format": {"type": "json_object", "schema": SCHEMA},
    },
    "finish_length": {
        "messages": [{"role": "user", "content": "Write a long story"}],
        "max_tokens": 8,
        "temperature": 0,
    },
    "judge_reply": {
        "messages": [
            {
                "role": "system",
                "content": "You judge two responses. Start your reply with one word: First, "
                "Second, Tie or BothBad, then explain.",
            },
            {
                "role": "user",
                "content": "Image: a cat on a sofa (a real photo).\nFirst response: Real. The "
                "lighting is natural.\nSecond response: fake. The fur looks painted.\nWhich "
                "response is better?",
            },
        ],
        "max_tokens": 80,
        "temperature": 0,
    },
    "detector_reply": {
        "messages": [
            {
                "role": "system",
                "content": "Answer in this format: <reasoning>your reasoning here</reasoning>"
                "<answer>real or fake</answer>",
            },
            {"role": "user", "content": "The image shows a dog with six legs. Real or fake?"},
        ],
        "max_tokens": 80,
        "temperature": 0,
    },
}


def main(base_url: str) -> None:
    out = {}
    with httpx.Client(base_url=base_url, timeout=120) as client:
        for name, body in CASES.items():
            r = client.post("/chat/completions", json={"model": "smollm2", **body})
            keep = {k: v for k, v in r.headers.items() if k.startswith(("x-", "retry"))}
            out[name] = {
                "request": body,
                "status": r.status_code,
                "body": r.json(),
                "headers": keep,
            }
    dest = Path(__file__).parents[1] / "llm" / "fixtures" / "llamacpp_replies.json"
    dest.parent.mkdir(exist_ok=True)
    dest.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {dest}")


if __name__ == "__main__":
    main(sys.argv[1])
