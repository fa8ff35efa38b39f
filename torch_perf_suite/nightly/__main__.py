"""`python -m torch_perf_suite.nightly`: the nightly's command (command.py)."""

import sys

from .command import main

sys.exit(main())
