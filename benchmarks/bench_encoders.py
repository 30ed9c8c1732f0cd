"""Load time and per-request render time of the reference encoders.

Run: ``python benchmarks/bench_encoders.py [--repeat 200]``

For each encoder (mistral-common v7 and tekken, Harmony, Mistral's generated v7 chat template
through transformers for comparison) it prints the seconds to build the renderer (tokenizer load;
Harmony's first run also rebuilds o200k_base.tiktoken into the cache) and the mean milliseconds of
one ``render_ids`` (or ``render``) of a request with 4 tools and 2 messages, plus the mean
milliseconds to tokenize a chat-template prompt with the encoder's tokenizer (what every old/new
row costs when ids are compared).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's replay, not an installed one

PARAMS = {"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["path"]}
TOOLS = [
    {"type": "function", "function": {"name": f"tool_{i}", "description": f"Tool number {i}", "parameters": PARAMS}} for i in range(4)
]
MESSAGES = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Read README.md and fix the typo."}]


def timed(fn, repeat: int) -> float:
    """Mean milliseconds of ``fn()`` over ``repeat`` calls (after one warm-up call)."""
    fn()
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    from mistral_common.integrations.chat_templates.chat_templates import convert_tokenizer_to_chat_template

    from replay.render.chat_template import ChatTemplateRenderer
    from replay.render.mistral import mistral_tokenizer_file
    from replay.render.specs import renderer_from_spec

    for spec in ("mistral-common:v7", "mistral-common:tekken", "harmony"):
        t0 = time.perf_counter()
        r = renderer_from_spec(spec)
        load = time.perf_counter() - t0
        ms = timed(lambda: r.render_ids(MESSAGES, TOOLS), args.repeat)
        text = r.render(MESSAGES, TOOLS)
        tok_ms = timed(lambda: r.tokenizer.ids(text), args.repeat)
        print(f"{spec:24} load {load:6.2f} s   render {ms:7.3f} ms   tokenize a prompt {tok_ms:7.3f} ms   ({len(text):,} chars)")
    tmpl = ChatTemplateRenderer(convert_tokenizer_to_chat_template(mistral_tokenizer_file("v7"), use_special_token_variables=False))
    print(f"{'chat template (v7)':24} load      -     render {timed(lambda: tmpl.render(MESSAGES, TOOLS), args.repeat):7.3f} ms")


if __name__ == "__main__":
    main()
