"""``tfperf tune``: search the configuration space for the fastest correct way to run a model.

The package, phase by phase: :mod:`~tfperf.tuning.options` (what a tune is asked to do),
:mod:`~tfperf.tuning.space` (which values are worth trying here), :mod:`~tfperf.tuning.search`
(the staged or Optuna search), :mod:`~tfperf.tuning.workers` and :mod:`~tfperf.tuning.evaluate`
(trying a candidate for real), :mod:`~tfperf.tuning.conclude` and
:mod:`~tfperf.tuning.keepdefault` (the answer), and :mod:`~tfperf.tuning.tuner`, which runs them in
order.
"""

from tfperf.tuning.evaluate import Progress
from tfperf.tuning.options import TuneOptions
from tfperf.tuning.tuner import TuneInterrupted, tune

__all__ = ["Progress", "TuneInterrupted", "TuneOptions", "tune"]
