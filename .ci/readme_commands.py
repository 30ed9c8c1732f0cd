"""Print the commands of README.md's "Set up and run" section, one a line.

The section's first fenced ``bash`` block is what a new user types; ``.ci/run`` must run exactly
these lines, which tests/test_packaging.py checks. Raises SystemExit when the README has no such
section or block.
"""

from __future__ import annotations

import sys
from pathlib import Path


def setup_commands(readme: Path) -> list[str]:
    """The non-empty, non-comment lines of the first fenced ``bash`` block after the
    ``## Set up and run`` heading of ``readme``."""
    lines = readme.read_text(encoding="utf-8").splitlines()
    try:
        start = lines.index("## Set up and run")
    except ValueError:
        raise SystemExit(f"{readme}: no '## Set up and run' section") from None
    out: list[str] = []
    inside = False
    for line in lines[start + 1:]:
        if not inside and line.startswith("## "):
            break
        if line.strip() == "```bash" and not inside:
            inside = True
            continue
        if inside:
            if line.strip() == "```":
                return out
            text = line.split("  #", 1)[0].strip()
            if text and not text.startswith("#"):
                out.append(text)
    raise SystemExit(f"{readme}: no fenced bash block under '## Set up and run'")


if __name__ == "__main__":
    print("\n".join(setup_commands(Path(sys.argv[1]))))
