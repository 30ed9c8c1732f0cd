"""``replay repro``: shrink, mask, write the test file, prove it (:func:`repro`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replay.adapters.vllm import COMMON_SPECIAL
from replay.repro.core import DEFAULT_SECONDS, Shrunk, load, mask, shrink
from replay.repro.judge import Judge, ReproError
from replay.repro.testfile import Expected, Proof, framework_facts, run_test, style_of, vllm_facts, write_test

__all__ = ["Repro", "repro", "FIXED_SIDES"]

#: Values of ``--fixed``: a side of the run, or ``reference`` (its reference parser, in process).
FIXED_SIDES = ("old", "new", "reference")


@dataclass
class Repro:
    """What :func:`repro` made: the shrunk case, the test files written (``files``: broken
    side's first, then the fixed side's when its style differs), and the two proofs."""

    exchange_id: str
    check: str
    side: str
    broken: str
    fixed: str
    shrunk: Shrunk
    files: list[Path] = field(default_factory=list)
    broken_proof: Proof | None = None
    fixed_proof: Proof | None = None
    markers: tuple[str, ...] = ()  # the family markers (kept whole: their chars cannot shrink)

    def marker_chars(self) -> int:
        """Chars of the shrunk completion that are family markers."""
        from replay.repro.shrink import atoms

        return sum(len(a) for a, _ in atoms([self.shrunk.after.text], self.markers) if len(a) > 1)

    def lines(self) -> list[str]:
        """The terminal report: sizes before and after, masking, the files and the proofs."""
        s = self.shrunk.sizes()
        out = [
            f"{self.exchange_id}: {self.check} on the {self.side} side ({self.broken}), shrunk with {self.shrunk.judged} candidates judged"
            + (" (stopped at the time bound: not 1-minimal)" if self.shrunk.timed_out else ""),
            f"  completion {s['chars'][0]} -> {s['chars'][1]} chars ({self.marker_chars()} of them in family markers), deltas {s['deltas'][0]} -> {s['deltas'][1]}, "
            f"tools {s['tools'][0]} -> {s['tools'][1]}, messages {s['messages'][0]} -> {s['messages'][1]}",
        ]
        if self.shrunk.masked and self.shrunk.exact_text:
            out.append(f"  user text masked, except what the failure needs as captured: {', '.join(self.shrunk.exact_text)}")
        elif self.shrunk.masked:
            out.append("  user text masked (the failure does not depend on it)")
        else:
            out.append("  user text as captured (--keep-text)")
        for f in self.files:
            out.append(f"  wrote {f}")
        if self.broken_proof is not None:
            out.append(f"  on the broken side ({self.broken}): {self.broken_proof.word()}")
        if self.fixed_proof is not None:
            out.append(f"  on the fixed side ({self.fixed}): {self.fixed_proof.word()}")
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "exchange_id": self.exchange_id,
            "check": self.check,
            "side": self.side,
            "broken": self.broken,
            "fixed": self.fixed,
            "sizes": self.shrunk.sizes(),
            "marker_chars": self.marker_chars(),
            "judged": self.shrunk.judged,
            "timed_out": self.shrunk.timed_out,
            "masked": self.shrunk.masked,
            "exact_text": self.shrunk.exact_text,
            "files": [str(f) for f in self.files],
            "broken_result": self.broken_proof.word() if self.broken_proof else None,
            "fixed_result": self.fixed_proof.word() if self.fixed_proof else None,
        }


def _describe(parser: str | None, python: str | None, facts: dict[str, str] | None = None) -> str:
    what = parser or "built-in"
    if facts:
        what += f" ({facts.get('framework', 'SGLang')} {facts['version']})"
    return what + (f" in {python}" if python else " in this interpreter")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_") or "x"


def _expected(judge: Judge, shrunk: Shrunk, check: str, whole: bool = False) -> Expected:
    ref = judge.reference_parse(shrunk.after)
    if ref is None:
        raise ReproError("the reference does not parse the shrunk completion")
    calls = []
    for c in ref.calls:
        try:
            calls.append((c.name, json.loads(c.arguments)))
        except (TypeError, ValueError):
            calls.append((c.name, c.arguments))
    return Expected(tuple(calls), ref.content or "", tuple(judge.markers()), check == "content-leak", whole=whole or check == "semantic-diff")


def repro(
    run_dir: str | Path,
    exchange_id: str,
    check: str,
    *,
    side: str | None = None,
    fixed: str = "reference",
    out: str | Path | None = None,
    keep_text: bool = False,
    seconds: float = DEFAULT_SECONDS,
) -> Repro:
    """Shrink the failure of ``check`` on ``exchange_id`` of the run ``run_dir`` (on ``side``,
    default the side the run finds wrong), write its test file(s) into ``out`` (default
    ``<run>/repro``) and prove them: the file in the broken side's style must fail by an
    assertion in that side's interpreter, and pass in the ``fixed`` side's (``old``, ``new`` or
    ``reference``; when that side's style differs, a second file of its style holding the same
    case is written and run there). ``keep_text``: write the user text as captured (default:
    masked, :func:`replay.repro.core.mask`). ``seconds``: the time bound of the shrinking.

    Raises :class:`ReproError` (no file is left) when the run has no such failure, when the
    failure needs the exact user text and ``keep_text`` is not given, or when the written test
    does not fail on the broken side or does not pass on the fixed one."""
    if fixed not in FIXED_SIDES:
        raise ReproError(f"--fixed {fixed}: expected one of {', '.join(FIXED_SIDES)}")
    lo = load(run_dir, exchange_id, check, side, fixed)
    if fixed == lo.side:
        raise ReproError(f"--fixed {fixed}: that is the side being shrunk")
    whole = lo.chunking == "parse"  # the failure is in the side's whole-text parse: judge and test that
    judge = Judge(lo.spec, lo.side, check, lo.ex, fixed=fixed, whole=whole)
    try:
        shrunk = shrink(lo, judge, seconds)
        if not keep_text:
            shrunk = mask(lo, judge, shrunk)
            if shrunk.exact_text == ["*"]:
                raise ReproError(
                    f"{exchange_id}: the failure depends on the exact text (masking the user text makes it pass); "
                    "pass --keep-text to write it as captured"
                )
        expected = _expected(judge, shrunk, check, whole)
        family = judge.family()
        markers = tuple(judge.markers())
    finally:
        judge.close()
    opts = lo.options
    b_parser, b_python = lo.side_parser, lo.side_python
    b_path = tuple(opts.get(f"{lo.side}_pythonpath") or ())
    if fixed == "reference":
        f_parser, f_python, f_path = opts.get("reference_parser"), None, ()
    else:
        f_parser, f_python, f_path = opts.get(f"{fixed}_parser"), opts.get(f"{fixed}_python"), tuple(opts.get(f"{fixed}_pythonpath") or ())
    folder = Path(out) if out is not None else Path(run_dir) / "repro"
    base = f"test_repro_{_slug(str(exchange_id))}_{_slug(check)}"
    b_style, f_style = style_of(b_parser), style_of(f_parser)
    facts_of = {"sglang": framework_facts, "vllm": vllm_facts}
    b_facts = facts_of[b_style](b_python, b_parser, b_path) if b_style in facts_of else None
    f_facts = facts_of[f_style](f_python, f_parser, f_path) if f_style in facts_of else None
    result = Repro(str(exchange_id), check, lo.side, _describe(b_parser, b_python, b_facts), _describe(f_parser, f_python, f_facts), shrunk, markers=markers)
    case = {
        "check": check,
        "exchange_id": exchange_id,
        # the file names the releases, not this machine's interpreter paths (it goes upstream)
        "broken": _describe(b_parser, None, b_facts).removesuffix(" in this interpreter"),
        "fixed": _describe(f_parser, None, f_facts).removesuffix(" in this interpreter"),
        "sizes": shrunk.sizes(),
        "masked": shrunk.masked,
        "deltas": list(shrunk.after.deltas),
        "tools": list(shrunk.after.tools),
        "model": lo.ex.get("model"),
        # a vLLM-style file builds its tokenizer offline with these as special tokens (its parser
        # looks their ids up in get_vocab()): the family's markers and the common end-of-turn tokens
        "special_tokens": list(dict.fromkeys((*markers, *COMMON_SPECIAL))),
    }

    def write(style: str, parser: str | None, facts: dict[str, str] | None, name: str) -> Path:
        c = dict(case)
        if style == "sglang":
            assert facts is not None and parser is not None
            c.update(parser=parser.split("/", 1)[1], detector_module=facts["module"], detector_class=facts["class"])
        elif style == "vllm":
            assert parser is not None
            c["parser"] = parser.split("/", 1)[1].split("?", 1)[0]
        else:
            c["parser"] = parser or family
        return write_test(folder / name, style, c, expected)

    written: list[Path] = []
    try:
        broken_file = write(b_style, b_parser, b_facts, f"{base}.py")
        written.append(broken_file)
        result.broken_proof = run_test(broken_file, b_python, with_replay=b_style == "protocol", pythonpath=b_path)
        if not result.broken_proof.failed:
            raise ReproError(
                f"the written test does not fail on the broken side ({result.broken}): it {result.broken_proof.word()}; not written\n"
                + result.broken_proof.output
            )
        same = f_style == b_style and {
            "sglang": lambda: (b_facts or {}).get("module") == (f_facts or {}).get("module") and (b_facts or {}).get("class") == (f_facts or {}).get("class"),
            "vllm": lambda: (b_parser or "").split("?")[0] == (f_parser or "").split("?")[0],
            "protocol": lambda: (b_parser or family) == (f_parser or family),
        }[b_style]()
        if same:  # the same file names the fixed side's parser too: it runs there as written
            fixed_file = broken_file
        else:
            fixed_file = write(f_style, f_parser, f_facts, f"{base}_{f_style}.py")
            written.append(fixed_file)
        result.fixed_proof = run_test(fixed_file, f_python, with_replay=f_style == "protocol", pythonpath=f_path)
        if not result.fixed_proof.passed:
            raise ReproError(
                f"the written test does not pass on the fixed side ({result.fixed}): it {result.fixed_proof.word()}; not written\n"
                + result.fixed_proof.output
            )
    except BaseException:
        for f in written:
            f.unlink(missing_ok=True)
        raise
    result.files = written
    return result
