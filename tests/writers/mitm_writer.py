"""Write the mitmproxy capture fixtures with the real mitmproxy (not run by CI).

Usage (``mitmproxy`` installed, in this or another virtualenv; ``openai`` in this one)::

    python tests/writers/mitm_writer.py [--out tests/data/captures] [--mitmdump PATH]

Starts :class:`tests.writers.fake_openai.FakeOpenAI`, then ``mitmdump --mode reverse:<fake server>
-w flows.mitm --set hardump=flows.har`` in front of it (mitmproxy's own ``io.FlowWriter``: the
native tnetstring dump; its ``SaveHar`` addon: the HAR), runs the 4 exchanges of
:data:`tests.writers.fake_openai.EXCHANGES` through the proxy with the ``openai`` SDK, plus one
``GET /v1/models`` (a flow that is not an exchange), stops mitmdump (which writes the HAR on exit) and
writes ``<out>/mitmproxy/``: ``flows.mitm``, ``flows.har`` and ``expected.jsonl`` (what the fake
server received and sent). mitmproxy buffers a response before passing it on unless
``stream_large_bodies`` is set, so a streamed response is kept as one SSE text.

The committed fixtures were written by mitmproxy 11.0.2 (mitmdump) and openai 3.63.0.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent / "data" / "captures"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--mitmdump", default=shutil.which("mitmdump") or "mitmdump")
    args = ap.parse_args(argv)
    import urllib.error
    import urllib.request

    import openai

    sys.path.insert(0, str(HERE.parent.parent))
    from tests.writers.fake_openai import EXCHANGES, FakeOpenAI, write_expected

    folder = args.out / "mitmproxy"
    folder.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    with FakeOpenAI() as server:
        upstream = server.base_url.removesuffix("/v1")
        proc = subprocess.Popen([args.mitmdump, "--mode", f"reverse:{upstream}", "--listen-host", "127.0.0.1", "--listen-port", str(port),
                                 "-w", str(folder / "flows.mitm"), "--set", f"hardump={folder / 'flows.har'}", "-q"])
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            base = f"http://127.0.0.1:{port}/v1"
            client = openai.OpenAI(base_url=base, api_key="sk-fixture", max_retries=0)
            for ex in EXCHANGES:
                res = client.chat.completions.create(**ex["request"])
                if ex["request"].get("stream"):
                    for _chunk in res:
                        pass
            try:  # not an exchange: the fake server answers 404
                urllib.request.urlopen(f"{base}/models", timeout=10)
            except urllib.error.HTTPError:
                pass
        finally:
            proc.terminate()  # mitmdump writes the HAR when it shuts down
            proc.wait(timeout=30)
        expected = server.expected()
    write_expected(folder, expected)
    print(f"wrote {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
