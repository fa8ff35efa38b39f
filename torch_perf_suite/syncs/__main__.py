import sys

from .cli import main

sys.exit(main())  # python -m torch_perf_suite.syncs TRACE.json[.gz]...
