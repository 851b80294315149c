"""``python -m durable.cli``: the ``little`` command without the console script."""

import sys

from durable.cli import main

sys.exit(main())
