"""Code that runs inside the user's own process, next to their TensorFlow.

The one place besides :mod:`tfperf.worker` allowed to import TensorFlow or Keras: the Keras
callback that reports whether training waits for its input pipeline
(:mod:`~tfperf.inprocess.callback`). It imports only the shared core.
"""
