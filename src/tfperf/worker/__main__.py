"""``python -m tfperf.worker --cmd-fd R --res-fd W``: serve one configuration (see ``serve``).

The process ends with ``os._exit`` once ``serve`` returns: every answer is written by then,
and the interpreter's teardown with TensorFlow loaded (its thread pools, its modules) took 1 to
3 s of a tune's time per worker closed, for nothing the parent reads; the session serve made
is never deleted either (``serve._LEFT_FOR_EXIT``), for deleting its dataset iterators waits
for tf.data's autotune thread.
"""

import os
import sys

from tfperf.worker.serve import main

if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
