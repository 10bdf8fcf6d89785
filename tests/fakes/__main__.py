"""``python -m tests.fakes anthropic|telegram|discord ...``: see :mod:`tests.fakes.serve`."""

import sys

from tests.fakes.serve import main

sys.exit(main())
