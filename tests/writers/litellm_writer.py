"""Write the LiteLLM capture fixtures with the real ``litellm`` package (tests/data/captures/litellm*/).

Run: ``python tests/writers/litellm_writer.py OUT_DIR`` in a virtualenv with the ``writers``
extra (``pip install -e '.[writers]'``; the spend-log helper imports ``litellm.proxy``, which
needs the proxy's server packages: fastapi, backoff, apscheduler, pyjwt, python-multipart,
cryptography, pynacl, websockets, rq, mcp, restrictedpython, expression, semver, soundfile). No
network: the model cost map is LiteLLM's bundled copy (``LITELLM_LOCAL_MODEL_COST_MAP``) and
the model is :class:`fake_openai.FakeOpenAI` on 127.0.0.1, scripted with :data:`scenarios.SCENARIOS`.

``litellm.completion`` sends each of :data:`scenarios.SCENARIOS` (streamed ones read to the end)
with a ``CustomLogger`` registered; its ``log_success_event`` receives the
``StandardLoggingPayload`` (``kwargs["standard_logging_object"]``) and the call's kwargs, from
which LiteLLM's own spend-tracking helper
(``litellm.proxy.spend_tracking.spend_tracking_utils.get_logging_payload``, with
``store_prompts_in_spend_logs`` on, as the proxy's ``general_settings`` set it) builds the
spend-log row the proxy writes to Postgres. Each call carries ``proxy_server_request`` (the body
the client sent to the proxy), as the proxy passes it. Files written under ``OUT_DIR/files``:

- ``standard-logging.jsonl``: one payload a line, as a custom callback writes it;
- ``bucket/<YYYY-MM-DD>/<time>_<id>.json``: one payload per object, named and written by the S3
  logger's own helpers (``get_s3_object_key``, ``safe_dumps``): date folder, one JSON object per
  request;
- ``spend-logs-rows.jsonl``: the rows as the helper returns them (JSON columns as JSON text;
  the release decides the layout: the body in ``proxy_server_request`` in current releases, as
  JSON text in ``metadata.proxy_server_request`` in older ones such as 1.67);
- ``spend-logs.json``: ``GET /spend/logs``: a JSON array of the rows with their JSON columns
  parsed (Prisma ``Json`` fields);
- ``spend-logs-v2.json``: ``GET /spend/logs/v2``: the page ``{data, total, page, page_size,
  total_pages, total_is_capped}`` (``_build_ui_spend_logs_response``).

``OUT_DIR/expected.jsonl``: per scenario, what the fake server received (the body LiteLLM
forwarded) and sent (:meth:`fake_openai.FakeOpenAI.expected`'s record), with the scenario's
``name`` and the body the client sent to the proxy (``client_request``).
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

from fake_openai import FakeOpenAI  # noqa: E402
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
        self.objects: list[tuple[str, str]] = []  # (bucket object key, body)

    def log_success_event(self, kwargs, response_obj, start_time, end_time):  # noqa: ANN001 - LiteLLM's signature
        # LiteLLM swallows a callback's exceptions: everything is built before anything is kept, and
        # main() checks that each call left one payload, one object and one row
        payload = kwargs["standard_logging_object"]
        obj = _bucket_object(payload, start_time)
        row = get_logging_payload(kwargs=kwargs, response_obj=response_obj, start_time=start_time, end_time=end_time)
        self.objects.append(obj)
        self.rows.append(json.loads(json.dumps(dict(row), default=_json_default)))
        self.payloads.append(json.loads(json.dumps(payload, default=_json_default)))


def _bucket_object(payload: dict, start_time: datetime) -> tuple[str, str]:
    """(object key, body) as LiteLLM's S3 logger names and writes one payload
    (``litellm/integrations/s3.py`` ``get_s3_object_key``, ``s3_v2.py``: ``safe_dumps``); releases
    without those helpers: ``<YYYY-MM-DD>/<id>.json`` and ``json.dumps``."""
    try:
        from litellm.integrations.s3 import get_s3_object_key
        from litellm.litellm_core_utils.safe_json_dumps import safe_dumps
        from litellm.utils import get_logging_id

        # (s3_path, prefix, start_time, s3_file_name): positional, the prefix's name changed (team_alias_prefix in 1.67)
        return get_s3_object_key("", "", start_time, get_logging_id(start_time, payload) or ""), safe_dumps(payload)
    except ImportError:
        return f"{start_time.strftime('%Y-%m-%d')}/{payload['id']}.json", json.dumps(payload, default=_json_default)


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
    with FakeOpenAI(SCENARIOS) as up:
        for sc in SCENARIOS:
            name, messages, stream = sc["name"], sc["messages"], sc["stream"]
            body = {"model": MODEL, "messages": messages, "tools": TOOLS, **({"stream": True} if stream else {})}
            n = len(keep.payloads)
            resp = litellm.completion(
                model=f"openai/{MODEL}", api_base=up.base_url, api_key="sk-fake", messages=messages,
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
            if not len(keep.payloads) == len(keep.rows) == len(keep.objects) == n + 1:
                raise SystemExit(f"{name}: the callback kept {len(keep.payloads) - n} payloads, {len(keep.rows) - n} rows, "
                                 f"{len(keep.objects) - n} objects; expected 1 each (LiteLLM logs a callback's exception and goes on)")
            expected.append({**up.expected()[-1], "name": name, "client_request": body})
    with open(files / "standard-logging.jsonl", "w") as fh:
        for p in keep.payloads:
            fh.write(json.dumps(p) + "\n")
    for key, body in keep.objects:
        (files / "bucket" / key).parent.mkdir(parents=True, exist_ok=True)
        (files / "bucket" / key).write_text(body)
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
