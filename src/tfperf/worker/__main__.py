"""``python -m tfperf.worker --cmd-fd R --res-fd W``: serve one configuration (see ``serve``)."""

import sys

from tfperf.worker.serve import main

if __name__ == "__main__":
    sys.exit(main())
