"""Write the Langfuse capture fixtures with langfuse's own OpenAI integration (not run by CI).

Usage, in a virtualenv with ``langfuse`` and ``openai`` (the ``writers`` extra)::

    python tests/writers/langfuse_writer.py [--out tests/data/captures]

Runs the 4 exchanges of :data:`tests.writers.fake_openai.EXCHANGES` through ``from langfuse.openai
import openai`` against :class:`tests.writers.fake_openai.FakeOpenAI`, exchanges 1 and 2 inside a
``span`` observation (an agent step) and, after the last, one embeddings call: observations that
are not exchanges. The Langfuse client exports through OpenTelemetry; it is given an in-memory span
exporter (``Langfuse(span_exporter=...)``) instead of a Langfuse server, and each exported span is
turned into the observation the Langfuse server stores for it, as its OTel ingestion maps the
``langfuse.observation.*`` attributes (``input`` / ``output`` JSON-decoded, a text that is not JSON
kept as text; ``type`` upper-cased; ``model.name`` -> ``model``; ``model.parameters`` ->
``modelParameters``; ``usage_details`` -> ``usageDetails`` with ``input`` / ``output`` / ``total``;
``metadata.*`` -> ``metadata``; ``completion_start_time`` -> ``completionStartTime``; span times ->
``startTime`` / ``endTime``), built and serialized with the SDK's own API types
(``langfuse.api.ObservationV2``, ``ObservationsV2Response``: camelCase JSON). Written to
``<out>/langfuse/``: ``observations.json`` (one page of ``GET /api/public/v2/observations``:
``{"data": [...], "meta": {"cursor": null}}``), ``export.jsonl`` (the bucket export: one observation
a line) and ``expected.jsonl`` (what the fake server received and sent).

The committed fixtures were written by langfuse 5.2.0 and openai 3.63.0.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent / "data" / "captures"


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _time(ns: int | None) -> datetime | None:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc) if ns else None


def observation(span: Any) -> Any:
    """The ``ObservationV2`` the Langfuse server stores for one exported span (module docstring)."""
    from langfuse.api import ObservationV2

    a = dict(span.attributes or {})
    p = "langfuse.observation."
    usage = _maybe_json(a.get(p + "usage_details")) or None
    if isinstance(usage, dict):
        usage = {k: v for k, v in {"input": usage.get("prompt_tokens"), "output": usage.get("completion_tokens"),
                                   "total": usage.get("total_tokens")}.items() if isinstance(v, int)}
    metadata = {k[len(p + "metadata."):]: _maybe_json(v) for k, v in a.items() if k.startswith(p + "metadata.")}
    params = _maybe_json(a.get(p + "model.parameters"))
    start = _maybe_json(a.get(p + "completion_start_time"))
    return ObservationV2(
        id=format(span.context.span_id, "016x"), trace_id=format(span.context.trace_id, "032x"),
        parent_observation_id=format(span.parent.span_id, "016x") if span.parent else None,
        type=str(a.get(p + "type", "span")).upper(), name=span.name, level="DEFAULT",
        start_time=_time(span.start_time), end_time=_time(span.end_time),
        completion_start_time=datetime.fromisoformat(start.replace("Z", "+00:00")) if isinstance(start, str) else None,
        input=_maybe_json(a.get(p + "input")), output=_maybe_json(a.get(p + "output")),
        metadata=metadata or None, model=a.get(p + "model.name"),
        model_parameters={k: str(v) for k, v in params.items()} if isinstance(params, dict) else None,
        usage_details=usage or None, environment="default", project_id="fixture-project",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from langfuse import Langfuse
    from langfuse.api import ObservationsV2Response

    sys.path.insert(0, str(HERE.parent.parent))
    from tests.writers.fake_openai import EMBEDDING_MODEL, EXCHANGES, FakeOpenAI, write_expected

    exporter = InMemorySpanExporter()
    lf = Langfuse(public_key="pk-lf-fixture", secret_key="sk-lf-fixture", base_url="http://127.0.0.1:9", span_exporter=exporter)
    from langfuse.openai import openai

    with FakeOpenAI() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-fixture", max_retries=0)
        agent = lf.start_as_current_observation(as_type="span", name="weather-agent")
        agent.__enter__()
        for n, ex in enumerate(EXCHANGES, 1):
            res = client.chat.completions.create(**ex["request"])
            if ex["request"].get("stream"):
                for _chunk in res:
                    pass
            if n == 2:
                agent.__exit__(None, None, None)
        client.embeddings.create(model=EMBEDDING_MODEL, input="Lisbon")
        lf.flush()
        expected = server.expected()
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time)
    observations = [observation(s) for s in spans]
    folder = args.out / "langfuse"
    folder.mkdir(parents=True, exist_ok=True)
    dump = lambda o: o.model_dump(mode="json", by_alias=True, exclude_none=True)  # noqa: E731 - as the API's JSON
    page = ObservationsV2Response(data=observations, meta={"cursor": None})
    (folder / "observations.json").write_text(json.dumps(page.model_dump(mode="json", by_alias=True, exclude_none=True), ensure_ascii=False, indent=2) + "\n")
    (folder / "export.jsonl").write_text("".join(json.dumps(dump(o), ensure_ascii=False, separators=(",", ":")) + "\n" for o in observations))
    write_expected(folder, expected)
    print(f"wrote {folder}: {len(observations)} observations")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
