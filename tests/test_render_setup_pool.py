"""``replay audit`` builds the chat template and tokenizer only in the processes that render.

When the stages run on the ``--jobs`` pool, the audit's own process checks the render options
through the pool's first process (:func:`replay.runner.pool.render_check`) and never imports
``tokenizers`` or transformers itself (they cost ~190 MiB of its RSS on the bench for nothing);
with ``--jobs 1`` (or a run whose stages stay in process) it builds them itself. Either way the
tables and ``run.json`` options are the same, and a bad template or tokenizer fails before
anything is written, naming the option.

Each case runs in a fresh interpreter (``sys.modules`` of a test process holds whatever other
tests imported).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = [ROOT / "samples" / "coding-agent.jsonl", ROOT / "samples" / "model-gateway.jsonl"]
TEMPLATE = ROOT / "samples" / "templates" / "agent-new.jinja"

# Runs an audit as `replay audit` does (a deferred render setup), prints what the process imported.
SCRIPT = r"""
import json, sys
import replay.audit as A
from replay.runspec import build_config, spec_from_options

args = json.loads(sys.argv[1])
import replay.runner.plan as P
P.PRESTART_BYTES = args["prestart_bytes"]  # the samples are small: start the pool before ingest as for a large capture
spec = spec_from_options(chat_templates=[args["template"]], tokenizers=[args["tokenizer"]], chunkings="whole,char", batch_rows=args["batch_rows"],
                         jobs=args["jobs"])
cfg = build_config(spec, load=False)
try:
    result = A.audit(args["captures"], args["out"], cfg)
except ValueError as exc:
    print(json.dumps({"error": str(exc), "class": type(exc).__name__}))
    raise SystemExit(0)
print(json.dumps({
    "tokenizers": "tokenizers" in sys.modules,
    "transformers": "transformers" in sys.modules,
    "deferred": cfg.deferred,
    "options": result.meta["options"],
    "executors": sorted(result.meta["executors"]) if isinstance(result.meta.get("executors"), dict) else None,
    "render_engine": cfg.executor_stats.get("render") if isinstance(cfg.executor_stats.get("render"), dict) else "pool",
}))
"""


def _tokenizer(path: Path) -> Path:
    """A word-level tokenizer.json (any tokenizers.Tokenizer will do: the prompt token counts come from it)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {w: i for i, w in enumerate(["[UNK]", "<|im_start|>", "user", "assistant", "system", "tools", "the", "a", "file", "{", "}"])}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    return path


def _audit(tmp: Path, name: str, *, jobs: int, tokenizer: Path, template: Path = TEMPLATE, prestart_bytes: int = 0) -> dict:
    args = {
        "captures": [str(c) for c in CAPTURES], "out": str(tmp / name), "template": str(template), "tokenizer": str(tokenizer),
        "jobs": jobs, "batch_rows": 2, "prestart_bytes": prestart_bytes,
    }
    got = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(args)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert got.returncode == 0, got.stderr[-3000:]
    return json.loads(got.stdout.strip().splitlines()[-1])


def _rows(run: Path, table: str) -> list[str]:
    import pyarrow.parquet as pq

    rows = pq.read_table(run / f"{table}.parquet").to_pylist()
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def test_the_pool_renders_and_this_process_never_loads_the_tokenizer(tmp_path: Path) -> None:
    tok = _tokenizer(tmp_path / "tok")
    pooled = _audit(tmp_path, "pooled", jobs=2, tokenizer=tok)
    assert pooled["render_engine"] == "pool"  # 8 batches of 2 on the pool of 2
    assert pooled["tokenizers"] is False, "the audit's own process loaded the tokenizer although the pool renders"
    assert pooled["transformers"] is False, "the audit's own process built the chat template although the pool renders"
    assert pooled["deferred"] is True
    local = _audit(tmp_path, "local", jobs=1, tokenizer=tok)
    assert local["tokenizers"] is True and local["deferred"] is False  # --jobs 1: this process renders, so it builds them
    # the pool process's words for run.json are the ones this process records when it builds them itself, in the same place
    assert list(pooled["options"]) == list(local["options"])
    assert {k: v for k, v in pooled["options"].items() if k != "jobs"} == {k: v for k, v in local["options"].items() if k != "jobs"}
    assert pooled["options"]["special_tokens"] == local["options"]["special_tokens"]
    assert pooled["options"]["renderer"] == f"chat-template:{TEMPLATE.name}"
    for table in ("renders", "streams", "calls"):
        assert _rows(tmp_path / "pooled", table) == _rows(tmp_path / "local", table), table
    counts = [json.loads(r)["prompt_tokens"] for r in _rows(tmp_path / "pooled", "renders")]
    assert any(c for c in counts), "the renders carry the tokenizer's prompt token counts"


def test_a_small_capture_renders_here_and_builds_them_here(tmp_path: Path) -> None:
    """Below the pool's start threshold the stages may stay in this process: it builds the
    renderers there (a deferred config builds them at their first use too)."""
    tok = _tokenizer(tmp_path / "tok")
    got = _audit(tmp_path, "small", jobs=2, tokenizer=tok, prestart_bytes=1 << 40)
    assert got["deferred"] is False and got["tokenizers"] is True
    assert got["options"]["tokenizer"] == str(tok)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_bad_tokenizer_or_template_fails_up_front_naming_the_option(tmp_path: Path, jobs: int) -> None:
    bad = tmp_path / "badtok"
    bad.mkdir()
    (bad / "tokenizer.json").write_text('{"model":', encoding="utf-8")
    got = _audit(tmp_path, "bad", jobs=jobs, tokenizer=bad)
    assert got["class"] == "ValueError"
    assert got["error"].startswith(f"--tokenizer {bad}: "), got
    assert not (tmp_path / "bad").exists(), "nothing is written for a run that fails its options"
    broken = tmp_path / "broken.jinja"
    broken.write_text("{% if %}", encoding="utf-8")
    got = _audit(tmp_path, "bad", jobs=jobs, tokenizer=_tokenizer(tmp_path / "tok"), template=broken)
    assert got["error"].startswith(f"--chat-template {broken}: the chat template does not compile"), got
    assert not (tmp_path / "bad").exists()
