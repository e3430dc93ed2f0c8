"""tfperf: make TensorFlow run as fast as the machine allows.

The parent process (this package's CLI and library API) never imports TensorFlow; anything that
needs TensorFlow runs in a worker subprocess. Importing :mod:`tfperf` is therefore cheap.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
