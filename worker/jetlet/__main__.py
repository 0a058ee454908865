"""``python -m jetlet``: the ``jetlet`` command line (:mod:`jetlet.cli`)."""

from __future__ import annotations

import sys

from jetlet import cli

if __name__ == "__main__":
    sys.exit(cli.main())
