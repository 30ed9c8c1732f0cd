"""Write the LiteLLM capture fixtures with the real ``litellm`` package (tests/data/captures/litellm*/).

Run: ``python tests/writers/litellm_writer.py OUT_DIR`` in a virtualenv with the ``writers``
extra (``pip install -e '.[writers]'``; the spend-log helper imports ``litellm.proxy``, which
needs the proxy's server packages: fastapi, backoff, apscheduler, pyjwt, python-multipart,
cryptography, pynacl, websockets, rq, mcp, restrictedpython, expression, semver, soundfile). No
network: the model cost map is LiteLLM's bundled copy (``LITELLM_LOCAL_MODEL_COST_MAP``) and
the model is :class:`fake_upstream.FakeUpstream` on 127.0.0.1.

``litellm.completion`` sends each of :data:`scenarios.SCENARIOS` (streamed ones read to the end)
with a ``CustomLogger`` registered; its ``log_success_event`` receives the
``StandardLoggingPayload`` (``kwargs["standard_logging_object"]``) and the call's kwargs, from
which LiteLLM's own spend-tracking helper
(``litellm.proxy.spend_tracking.spend_tracking_utils.get_logging_payload``, with
``store_prompts_in_spend_logs`` on, as the proxy's ``general_settings`` set it) builds the
spend-log row the proxy writes to Postgres. Each call carries ``proxy_server_request`` (the body
the client sent to the proxy), as the proxy passes it. Files written under ``OUT_DIR/files``:

- ``standard-logging.jsonl``: one payload a line, as a custom callback writes it;
- ``bucket/<YYYY-MM-DD>/<id>.json``: one payload per object, as the S3/GCS bucket loggers lay
  them out (date folder, one JSON object per request);
- ``spend-logs-rows.jsonl``: the rows as the helper returns them (JSON columns as JSON text;
  the release decides the layout: the body in ``proxy_server_request`` in current releases, as
  JSON text in ``metadata.proxy_server_request`` in older ones such as 1.67);
- ``spend-logs.json``: ``GET /spend/logs``: a JSON array of the rows with their JSON columns
  parsed (Prisma ``Json`` fields);
- ``spend-logs-v2.json``: ``GET /spend/logs/v2``: the page ``{data, total, page, page_size,
  total_pages, total_is_capped}`` (``_build_ui_spend_logs_response``).

``OUT_DIR/expected.jsonl``: per scenario, its name, the body the client sent
(``client_request``) and what the fake upstream received and sent (``upstream``).
``OUT_DIR/WRITER.md`` names the release that wrote the files.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ["STORE_PROMPTS_IN_SPEND_LOGS"] = "True"

from fake_upstream import FakeUpstream  # noqa: E402
from scenarios import SCENARIOS, TOOLS  # noqa: E402

import litellm  # noqa: E402
from litellm.integrations.custom_logger import CustomLogger  # noqa: E402
from litellm.proxy import proxy_server  # noqa: E402
from litellm.proxy.spend_tracking.spend_tracking_utils import get_logging_payload  # noqa: E402

MODEL = "gpt-4o-mini"  # in LiteLLM's bundled cost map: the payload has no cost-failure traceback


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).isoformat()
    return str(value)


class Keep(CustomLogger):
    """Keeps each success event's payload and spend-log row."""

    def __init__(self) -> None:
        super().__init__()
        self.payloads: list[dict] = []
        self.rows: list[dict] = []

    def log_success_event(self, kwargs, response_obj, start_time, end_time):  # noqa: ANN001 - LiteLLM's signature
        self.payloads.append(json.loads(json.dumps(kwargs["standard_logging_object"], default=_json_default)))
        row = get_logging_payload(kwargs=kwargs, response_obj=response_obj, start_time=start_time, end_time=end_time)
        self.rows.append(json.loads(json.dumps(dict(row), default=_json_default)))


def _parsed_row(row: dict) -> dict:
    """A row as ``GET /spend/logs`` returns it: JSON-text columns parsed, as Prisma reads Json."""
    out = dict(row)
    for k in ("metadata", "messages", "response", "proxy_server_request", "request_tags"):
        if isinstance(out.get(k), str):
            try:
                out[k] = json.loads(out[k])
            except ValueError:
                pass
    return out


def main(out_dir: Path) -> None:
    files = out_dir / "files"
    files.mkdir(parents=True, exist_ok=True)
    proxy_server.general_settings["store_prompts_in_spend_logs"] = True
    keep = Keep()
    litellm.callbacks = [keep]
    expected = []
    with FakeUpstream() as up:
        for name, messages, stream, answer in SCENARIOS:
            up.script(answer)
            body = {"model": MODEL, "messages": messages, "tools": TOOLS, **({"stream": True} if stream else {})}
            n = len(keep.payloads)
            resp = litellm.completion(
                model=f"openai/{MODEL}", api_base=up.base_url + "/v1", api_key="sk-fake", messages=messages,
                tools=TOOLS, stream=stream,
                proxy_server_request={"url": "http://127.0.0.1:4000/chat/completions", "method": "POST",
                                      "headers": {"content-type": "application/json"}, "body": body},
            )
            if stream:
                for _chunk in resp:
                    pass
            deadline = time.monotonic() + 30
            while len(keep.payloads) == n and time.monotonic() < deadline:  # success callbacks run on a thread
                time.sleep(0.05)
            if len(keep.payloads) != n + 1:
                raise SystemExit(f"{name}: LiteLLM logged {len(keep.payloads) - n} payloads, expected 1")
            expected.append({"name": name, "client_request": body, "upstream": up.log[-1]})
    with open(files / "standard-logging.jsonl", "w") as fh:
        for p in keep.payloads:
            fh.write(json.dumps(p) + "\n")
    for p in keep.payloads:
        day = datetime.fromtimestamp(p["startTime"], timezone.utc).strftime("%Y-%m-%d")
        (files / "bucket" / day).mkdir(parents=True, exist_ok=True)
        (files / "bucket" / day / f"{p['id']}.json").write_text(json.dumps(p))
    with open(files / "spend-logs-rows.jsonl", "w") as fh:
        for r in keep.rows:
            fh.write(json.dumps(r) + "\n")
    parsed = [_parsed_row(r) for r in keep.rows]
    (files / "spend-logs.json").write_text(json.dumps(parsed))
    page = {"data": parsed, "total": len(parsed), "page": 1, "page_size": 50, "total_pages": 1, "total_is_capped": False}
    (files / "spend-logs-v2.json").write_text(json.dumps(page))
    with open(out_dir / "expected.jsonl", "w") as fh:
        for e in expected:
            fh.write(json.dumps(e) + "\n")
    import openai

    (out_dir / "WRITER.md").write_text(
        f"Written by `python tests/writers/litellm_writer.py` with litellm {litellm.__version__ if hasattr(litellm, '__version__') else _version('litellm')}"
        f" (openai {openai.__version__}), Python {sys.version.split()[0]}.\n"
    )


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: litellm_writer.py OUT_DIR")
    main(Path(sys.argv[1]))
