"""Write the OpenTelemetry capture fixtures with the real instrumentations (not run by CI).

Usage (with the ``writers`` extra installed: ``pip install -e '.[writers]'``)::

    python tests/writers/otel_writer.py [--out tests/data/captures] [--source NAME ...]

For each source below, a child process (an instrumentation patches the ``openai`` SDK for good, so
one per source) starts :class:`tests.writers.fake_openai.FakeOpenAI`, instruments the ``openai`` SDK
with the source's package, runs the 4 exchanges of :data:`tests.writers.fake_openai.EXCHANGES` and
writes, in ``<out>/<source>/``:

- ``traces.jsonl`` (and ``logs.jsonl`` for the event mode): OTLP JSON as the OpenTelemetry
  Collector's file exporter writes it, one ``{"resourceSpans": [...]}`` (``{"resourceLogs":
  [...]}``) export per line, one export per exchange. The export is the SDK's own OTLP protobuf
  encoding (``opentelemetry-exporter-otlp-proto-common``: ``encode_spans`` / ``encode_logs``) in
  protobuf's JSON mapping (``google.protobuf.json_format``), with trace and span ids written as hex
  as OTLP/JSON requires (the protobuf mapping writes bytes as base64);
- ``expected.jsonl``: what the fake server received and sent, one line per exchange.

Besides the 4 exchanges, every run makes one embeddings call after the last exchange (its span
shares the last line), and the ``otel-genai-*`` runs wrap exchanges 1 and 2 in an ``invoke_agent``
span with an ``execute_tool`` span between them (``opentelemetry-util-genai``'s
``TelemetryHandler``, as an agent framework does): spans a reader must skip, never exchanges.

Sources: ``otel-genai-spans`` and ``otel-genai-events``: ``opentelemetry-instrumentation-openai-v2``
with ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` and
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` ``span_only`` / ``event_only`` (content on
the span's attributes, or on the ``gen_ai.client.inference.operation.details`` log record);
``openllmetry``: traceloop's ``opentelemetry-instrumentation-openai`` (``TRACELOOP_TRACE_CONTENT``
on, its default), whose current releases write the GenAI attributes above (``gen_ai.input.messages``,
flat ``gen_ai.tool.definitions``); ``openllmetry-indexed``: the same package in a release that
still wrote the indexed ``gen_ai.prompt.{i}.*`` / ``llm.request.functions.{i}.*`` attributes, run
from its own virtualenv (``--python``: the writers extra pins the current release):
``python -m venv V && V/bin/pip install 'opentelemetry-instrumentation-openai==0.47.0'
'opentelemetry-sdk==1.36.0' 'opentelemetry-api==1.36.0' 'opentelemetry-exporter-otlp-proto-common==1.36.0'
'opentelemetry-proto==1.36.0' 'opentelemetry-instrumentation==0.57b0'
'opentelemetry-semantic-conventions-ai==0.4.13' openai`` then
``--source openllmetry-indexed --python V/bin/python``; ``openinference``:
``openinference-instrumentation-openai``.

The committed fixtures were written by (pin; re-run and update this line when regenerating):
openai 3.63.0, opentelemetry-sdk 1.45.2, opentelemetry-exporter-otlp-proto-common 1.45.2,
opentelemetry-instrumentation-openai-v2 2.4b0 (opentelemetry-util-genai 1.1b0),
opentelemetry-instrumentation-openai 0.62.4 (``openllmetry-indexed``: 0.47.0 with opentelemetry-sdk and
opentelemetry-exporter-otlp-proto-common 1.36.0, opentelemetry-instrumentation 0.57b0,
opentelemetry-semantic-conventions-ai 0.4.13),
openinference-instrumentation-openai 0.1.66, protobuf 7.36.2.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent / "data" / "captures"

#: source name -> environment of its child process.
SOURCES: dict[str, dict[str, str]] = {
    "otel-genai-spans": {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                         "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only"},
    "otel-genai-events": {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                          "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "event_only"},
    "openllmetry": {"TRACELOOP_TRACE_CONTENT": "true"},
    "openllmetry-indexed": {"TRACELOOP_TRACE_CONTENT": "true"},
    "openinference": {},
}

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(obj: Any) -> Any:
    """OTLP/JSON ids: protobuf's JSON mapping writes bytes fields as base64; OTLP/JSON (and the
    collector) write trace and span ids as lowercase hex."""
    if isinstance(obj, dict):
        return {k: (base64.b64decode(v).hex() if k in _ID_KEYS and isinstance(v, str) else _hex_ids(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_hex_ids(v) for v in obj]
    return obj


def _line(message: Any) -> str:
    from google.protobuf.json_format import MessageToDict

    return json.dumps(_hex_ids(MessageToDict(message)), ensure_ascii=False, separators=(",", ":"))


def _instrument(source: str, tracer_provider: Any, logger_provider: Any) -> None:
    if source.startswith("otel-genai"):
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    elif source.startswith("openllmetry"):
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=tracer_provider)
    elif source == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=tracer_provider)
    else:
        raise ValueError(f"unknown source {source!r}")


def run_source(source: str, out: Path) -> None:
    """Write ``out/<source>/`` (files: module docstring), in this process."""
    import openai
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

    try:
        from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
    except ImportError:  # opentelemetry-sdk before 1.39 (the openllmetry-indexed virtualenv)
        from opentelemetry.sdk._logs.export import InMemoryLogExporter as InMemoryLogRecordExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    sys.path.insert(0, str(HERE.parent.parent))
    from tests.writers.fake_openai import EMBEDDING_MODEL, EXCHANGES, FakeOpenAI, write_expected

    resource = Resource.create({"service.name": f"replay-fixture-{source}"})
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tp = TracerProvider(resource=resource)
    tp.add_span_processor(SimpleSpanProcessor(spans))
    lp = LoggerProvider(resource=resource)
    lp.add_log_record_processor(SimpleLogRecordProcessor(logs))
    _instrument(source, tp, lp)
    folder = out / source
    folder.mkdir(parents=True, exist_ok=True)
    trace_lines: list[str] = []
    log_lines: list[str] = []
    handler = None
    if source.startswith("otel-genai"):  # an agent framework's spans around the calls, as util-genai writes them
        from opentelemetry.util.genai.handler import TelemetryHandler

        handler = TelemetryHandler(tracer_provider=tp, logger_provider=lp)
    with FakeOpenAI() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-fixture", max_retries=0)
        agent = handler.invoke_local_agent(request_model=EXCHANGES[0]["request"]["model"], agent_name="weather") if handler else None
        for n, ex in enumerate(EXCHANGES, 1):
            if n == 2 and handler is not None:  # the agent runs the tool the model called, then asks again
                with handler.tool("get_weather", tool_call_id="call_w1", tool_type="function"):
                    pass
            res = client.chat.completions.create(**ex["request"])
            if ex["request"].get("stream"):
                for _chunk in res:
                    pass
            if n == 2 and agent is not None:
                agent.stop()
            if n == len(EXCHANGES):  # an embedding call: a span that is not an exchange
                client.embeddings.create(model=EMBEDDING_MODEL, input="Lisbon")
            tp.force_flush()
            lp.force_flush()
            if got := spans.get_finished_spans():
                trace_lines.append(_line(encode_spans(got)))
                spans.clear()
            if got := logs.get_finished_logs():
                log_lines.append(_line(encode_logs(got)))
                logs.clear()
        expected = server.expected()
    (folder / "traces.jsonl").write_text("".join(ln + "\n" for ln in trace_lines))
    if log_lines:
        (folder / "logs.jsonl").write_text("".join(ln + "\n" for ln in log_lines))
    write_expected(folder, expected)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--source", action="append", choices=sorted(SOURCES))
    ap.add_argument("--python", default=sys.executable, help="the interpreter that runs the writers (default: this one)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        run_source(args.child, args.out)
        return 0
    for source in args.source or [s for s in SOURCES if s != "openllmetry-indexed"]:  # that one needs --python
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELOOP_"))}
        env.update(SOURCES[source])
        subprocess.run([args.python, __file__, "--out", str(args.out), "--child", source], env=env, check=True)
        print(f"wrote {args.out / source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
