"""``python -m gateway.cli``: the same entry point as the ``hygieia`` console script."""

from gateway.cli import main

main()
