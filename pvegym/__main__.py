"""``python -m pvegym``: the same command line as the ``pvegym`` script."""

import sys

from pvegym.cli import main

sys.exit(main())
