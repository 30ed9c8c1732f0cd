"""``python -m replay``: the same CLI as the ``replay`` console script (useful in a checkout
that is not installed, or to run one checkout's code while another is installed)."""

from replay.cli import app

app(prog_name="replay")
