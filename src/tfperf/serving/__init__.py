"""Serving under load (parent side): the server under test, the load generator, the SLO search.

The public names: :class:`LoadScenario`, :func:`measure_load`, :func:`search_slo`,
:func:`measure_on` (a harness already started), :class:`LoadLevel`, :class:`LoadResult`,
:class:`Harness` and :func:`pinned`. Modules: ``generator`` (closed and open loops and their
accounting, against any server), ``harness`` (K worker processes behind one dispatcher),
``levels`` (the results and their statistics), ``tail`` (when a percentile stands and how long
a level runs), ``floor`` (the harness's own floor), ``load`` (sweeps and the SLO search),
``run`` (a load run recorded), ``remote`` (a server the user runs). Nothing
here imports TensorFlow: the instances are workers (``tfperf.worker.requests``).
"""

from tfperf.serving.harness import Harness, pinned
from tfperf.serving.levels import LoadLevel, LoadResult
from tfperf.serving.load import LoadScenario, measure_load, measure_on, search_slo

__all__ = [
    "Harness",
    "LoadLevel",
    "LoadResult",
    "LoadScenario",
    "measure_load",
    "measure_on",
    "pinned",
    "search_slo",
]
