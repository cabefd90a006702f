"""``python -m prefixspec``: the command line."""

import sys

from prefixspec.commands.entry import main

sys.exit(main())
