"""Server-side logs (format ``serverlog``): what the serving engine logged about one request, per JSON line.

Our own JSON-lines form, for logs a server or a logging hook writes (vLLM's request logger and
output processors hold these values; no standard file format exists). Keys, with their aliases:

====================================  ======================================================
``request_id`` / ``id``               exchange id
``ts`` / ``timestamp``                when
``model``                             served model name (picks the tool-parser family)
``route``                             ``chat.completions`` (default) / ``messages`` / ``responses``
``request``                           the request body, when logged (else ``{}``, lacks ``request``)
``prompt``                            the rendered prompt text
``prompt_token_ids``                  its token ids
``output_text`` / ``text``            the raw completion, special tokens included
``output_token_ids`` / ``token_ids``  its token ids
``steps`` / ``deltas``                the raw text of each streaming step (or its token ids)
``step_token_ids`` / ``delta_token_ids``  the token ids of each streaming step (list of lists)
====================================  ======================================================

**Token ids only.** With a tokenizer (``--tokenizer``: a ``tokenizers.Tokenizer``), what is logged
only as ids is decoded, special tokens kept (``skip_special_tokens=False``): the prompt, the
output, and the steps. Without one, those texts stay null and ``capture_lacks`` names them
(``raw_completion``, ``prompt``), so the exchange is not re-streamed.

**Steps from token ids** (:func:`decode_steps`), exactly the ``recorded`` chunking: each step's
text is the difference between the decode of every id up to the end of the step and the decode up
to the end of the step before, decoded over a window that starts a few tokens back (as vLLM's
incremental detokenizer does: a leading-space rule of the decoder then affects both decodes the
same). When a step ends inside a multi-byte character (its last ids decode to U+FFFD), that step
holds only the text up to the last whole character and the held-back bytes come out with the next
step, whole: a step may then be ``""``, and no step ever holds a broken character. The steps joined
equal the decode of all the ids (a U+FFFD still pending at the very end goes out with the last
step). Output ids not logged are taken as the steps' ids in order.

A server log has no served side (what the client received): ``capture_lacks`` includes ``served``.
"""

from __future__ import annotations

from typing import Any

from replay.capture.v1 import ROUTES, CaptureError

__all__ = ["WINDOW", "decode_steps", "record_from_log"]

#: Tokens before the last step boundary that the incremental decode starts from.
WINDOW = 6


def _decode(tokenizer: Any, ids: list[int]) -> str:
    return tokenizer.decode(ids, skip_special_tokens=False)


def _vocab_size(tokenizer: Any) -> int | None:
    """Ids the tokenizer knows, added tokens included (``tokenizers.Tokenizer.get_vocab_size``,
    else ``len()`` of a transformers tokenizer); None when it says neither."""
    try:
        if hasattr(tokenizer, "get_vocab_size"):
            return int(tokenizer.get_vocab_size(with_added_tokens=True))
        return int(len(tokenizer))
    except Exception:  # noqa: BLE001 - no size known: the decode itself is then the check
        return None


def _check_ids(tokenizer: Any, ids: list[int] | None, where: str) -> None:
    """Raises :class:`CaptureError` (``bad-token-id``) for an id the tokenizer cannot decode: a
    negative one, or one past its vocabulary (a log written with another model's tokenizer)."""
    if not ids:
        return
    size = _vocab_size(tokenizer)
    for i, v in enumerate(ids):
        if v < 0 or (size is not None and v >= size):
            bound = f"0..{size - 1}" if size is not None else "not negative"
            raise CaptureError("bad-token-id", f"{where}[{i}] = {v}: out of range for the tokenizer (ids {bound}); was it logged with another tokenizer?")


def decode_steps(tokenizer: Any, step_ids: list[list[int]]) -> list[str]:
    """The text of each streaming step from the token ids of each step (rules: module docstring).

    ``tokenizer``: anything with ``decode(ids, skip_special_tokens=False) -> str`` (a
    ``tokenizers.Tokenizer``). Returns one string per step; ``"".join`` of them equals the decode of
    all the ids. Cost: two decodes of at most ``WINDOW`` + step-length ids per step.
    """
    ids: list[int] = []
    out: list[str] = []
    prefix = 0  # start of the decode window (token index)
    emitted = ""  # text of the window's decode already given out
    for step in step_ids:
        ids.extend(step)
        now = _decode(tokenizer, ids[prefix:])
        stable = now.rstrip("\ufffd")  # a character cut at the end of the step waits for its bytes
        if stable.startswith(emitted):
            out.append(stable[len(emitted):])
            emitted = stable
        else:  # the window's earlier text changed: hold this step back
            out.append("")
        if stable == now == emitted:  # everything out: slide the window
            prefix = max(0, len(ids) - WINDOW)
            emitted = _decode(tokenizer, ids[prefix:])
    now = _decode(tokenizer, ids[prefix:])
    if out and now != emitted:  # held back to the very end: out with the last step
        common = 0
        while common < min(len(now), len(emitted)) and now[common] == emitted[common]:
            common += 1
        out[-1] += now[common:]
    return out


def _ids(value: Any, where: str) -> list[int] | None:
    if value is None:
        return None
    if not (isinstance(value, list) and all(type(v) is int for v in value)):
        raise CaptureError("bad-field", f"{where} must be a list of integers")
    return value


def _first(obj: dict, *keys: str) -> Any:
    for k in keys:
        if obj.get(k) is not None:
            return obj[k]
    return None


#: Keys of which a server-log line has at least one (what the server logged of the prompt or output).
LOG_KEYS = ("prompt", "prompt_token_ids", "output_text", "text", "output_token_ids", "token_ids", "steps", "deltas", "step_token_ids", "delta_token_ids")


def record_from_log(obj: dict, tokenizer: Any = None) -> list[dict]:
    """The v1-form record of one server-log line (keys: module docstring). ``tokenizer``: decodes
    what was logged as ids only; None leaves it undecoded (and said in ``capture_lacks``).
    Raises :class:`CaptureError` (``bad-field``) for a value of the wrong type, ``bad-token-id``
    for a token id out of the tokenizer's range, and ``bad-field`` for a line with none of
    :data:`LOG_KEYS` (not a server log)."""
    if not any(obj.get(k) is not None for k in LOG_KEYS):
        raise CaptureError("bad-field", f"not a server log line: none of {', '.join(LOG_KEYS)}; keys: {', '.join(list(obj)[:6])}")
    request = obj.get("request")
    lacks: list[str] = ["served"]
    if request is None:
        request = {}
        lacks.insert(0, "request")
    elif not isinstance(request, dict):
        raise CaptureError("request-not-object", f"'request' is a {type(request).__name__}, not an object")
    route = obj.get("route") or ("responses" if "input" in request and "messages" not in request else "chat.completions")
    if route not in ROUTES:
        raise CaptureError("bad-field", f"route must be one of {', '.join(ROUTES)}; got {route!r:.60}")

    prompt = _first(obj, "prompt")
    prompt_ids = _ids(obj.get("prompt_token_ids"), "prompt_token_ids")
    text = _first(obj, "output_text", "text")
    out_ids = _ids(_first(obj, "output_token_ids", "token_ids"), "output_token_ids")
    steps = _first(obj, "steps", "deltas")
    step_ids = _first(obj, "step_token_ids", "delta_token_ids")
    if step_ids is None and isinstance(steps, list) and steps and all(isinstance(x, list) for x in steps):
        step_ids, steps = steps, None  # per-step deltas logged as token ids under `steps`
    if step_ids is not None:
        if not (isinstance(step_ids, list) and all(isinstance(s, list) and all(type(v) is int for v in s) for s in step_ids)):
            raise CaptureError("bad-field", "step_token_ids must be a list of lists of integers")
        if out_ids is None:
            out_ids = [v for s in step_ids for v in s]
    if tokenizer is not None:
        _check_ids(tokenizer, prompt_ids if prompt is None else None, "prompt_token_ids")
        _check_ids(tokenizer, out_ids if text is None else None, "output_token_ids")
        if steps is None and step_ids is not None:
            _check_ids(tokenizer, [v for st in step_ids for v in st], "step_token_ids (flattened)")
        if prompt is None and prompt_ids is not None:
            prompt = _decode(tokenizer, prompt_ids)
        if steps is None and step_ids is not None:
            steps = decode_steps(tokenizer, step_ids)
        if text is None and out_ids is not None:
            text = _decode(tokenizer, out_ids)
    if text is None and steps is not None and all(isinstance(s, str) for s in steps):
        text = "".join(steps)
    if text is None:
        lacks.append("raw_completion")
    if prompt is None:
        lacks.append("prompt")
    rec: dict[str, Any] = {
        "route": route,
        "request": request,
        "server": {
            "prompt": prompt,
            "prompt_token_ids": prompt_ids,
            "output_text": text,
            "output_token_ids": out_ids,
            "steps": steps,
        },
        "capture_lacks": lacks,
    }
    for key, src in (("id", ("request_id", "id")), ("ts", ("ts", "timestamp")), ("model", ("model",))):
        v = _first(obj, *src)
        if v is not None:
            rec[key] = v
    return [rec]
