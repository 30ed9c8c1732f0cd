"""Cases drawn from public bug reports: the reference parsers give the expected calls.

Hermes and DeepSeek V3.1 here; the other families check their cases in their own test modules,
all with :func:`strategies.check_public_bug_cases`.
"""

from __future__ import annotations

import pytest

from replay.parsers import DeepSeekV31Parser, HermesParser
from strategies import check_public_bug_cases


@pytest.mark.parametrize("cls, names", [(HermesParser, ("hermes",)), (DeepSeekV31Parser, ("deepseekv31",))], ids=["hermes", "deepseek_v31"])
def test_public_bug_cases(cls, names):
    check_public_bug_cases(cls, names)
