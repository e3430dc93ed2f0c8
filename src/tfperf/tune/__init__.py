"""``tfperf tune``: search the configuration space for the fastest correct way to run a model.

The package, phase by phase: :mod:`~tfperf.tune.options` (what a tune is asked to do),
:mod:`~tfperf.tune.space` (which values are worth trying here), :mod:`~tfperf.tune.search`
(the staged or Optuna search), :mod:`~tfperf.tune.workers` and :mod:`~tfperf.tune.evaluate`
(trying a candidate for real), :mod:`~tfperf.tune.conclude` and
:mod:`~tfperf.tune.keepdefault` (the answer), and :mod:`~tfperf.tune.tuner`, which runs them in
order.
"""

from tfperf.tune.evaluate import Progress
from tfperf.tune.options import TuneOptions
from tfperf.tune.tuner import TuneInterrupted, tune

__all__ = ["Progress", "TuneInterrupted", "TuneOptions", "tune"]
