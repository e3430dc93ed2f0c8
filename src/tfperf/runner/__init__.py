"""The parent's machinery for running workers, one of each.

:mod:`~tfperf.runner.launcher` starts every child process (deadline, group kill, how it
ended); :mod:`~tfperf.runner.handle` talks to one worker over its pipes;
:mod:`~tfperf.runner.envpolicy` gives workers a deliberate environment;
:mod:`~tfperf.runner.identity` checks every worker loaded the same model;
:mod:`~tfperf.runner.rounds` runs interleaved rounds; :mod:`~tfperf.runner.measure` measures
several configs side by side in one or several worker processes each;
:mod:`~tfperf.runner.recorder` records a run in the store as it happens.
"""
