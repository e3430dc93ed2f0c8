"""``python -m tfperf`` runs the CLI."""

import sys

from tfperf.cli import main

sys.exit(main())
