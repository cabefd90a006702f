"""``python -m prefixspec``: the command line."""

import sys

from prefixspec.commands.main import main

sys.exit(main())
