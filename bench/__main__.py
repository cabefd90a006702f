"""``python -m bench``: see ``bench.run``."""

import os
import sys

from bench.run import main

code = main()
sys.stdout.flush()
sys.stderr.flush()
# Everything is written and closed by now. Leaving without the interpreter's
# finalisation skips the "nanobind: leaked ..." report that triton (imported
# by SGLang) prints at shutdown, which says nothing about this run.
os._exit(code)
