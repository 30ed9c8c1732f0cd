"""Generators of capture fixtures written by the upstream packages themselves (not run by CI).

Each generator drives a real writer (an instrumentation, a gateway's logger) against the local fake
server of :mod:`tests.writers.fake_openai` and keeps the files that writer produces under
``tests/data/captures/<source>/``, with ``expected.jsonl``: what the fake server received and sent.
"""
