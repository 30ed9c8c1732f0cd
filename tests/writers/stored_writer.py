"""Write the OpenAI stored-completions fixtures with the openai SDK's own pagination (not run by CI).

Usage, in the project's virtualenv (``openai`` is a test dependency)::

    python tests/writers/stored_writer.py [--out tests/data/captures]

Sends the 4 exchanges of :data:`tests.writers.fake_openai.EXCHANGES` with ``store: true`` and
``metadata`` to :class:`tests.writers.fake_openai.FakeOpenAI` through ``openai.OpenAI`` (the
streamed ones read to the end), then exports what the server stored with
``docs/export_stored_completions.py`` (``client.chat.completions.list()`` and
``client.chat.completions.messages.list(id)``, 2 items a page so that both paginate). Written to
``<out>/openai-stored/``: ``files/completions.jsonl`` (the list pages, one a line),
``files/<completion id>.messages.json`` (each completion's request messages) and ``expected.jsonl``
(what the fake server received and sent).

The committed fixtures were written by openai 3.63.0.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DEFAULT_OUT = HERE.parent / "data" / "captures"
METADATA = {"app": "weather-agent"}


def load_exporter():
    """The module ``docs/export_stored_completions.py`` (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("export_stored_completions", ROOT / "docs" / "export_stored_completions.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    import openai

    sys.path.insert(0, str(ROOT))
    from tests.writers.fake_openai import EXCHANGES, FakeOpenAI, write_expected

    folder = args.out / "openai-stored"
    files = folder / "files"
    files.mkdir(parents=True, exist_ok=True)
    for old in files.iterdir():
        old.unlink()
    with FakeOpenAI() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-fixture", max_retries=0)
        for ex in EXCHANGES:
            res = client.chat.completions.create(**ex["request"], store=True, metadata=METADATA)
            if ex["request"].get("stream"):
                for _chunk in res:
                    pass
        n = load_exporter().export(client, files, page_size=2)
        expected = server.expected()
    write_expected(folder, expected)
    print(f"wrote {folder}: {n} stored completions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
