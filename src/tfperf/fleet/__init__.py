"""``tfperf fleet``: the audit, the benchmark and the tune of every machine of a Ray cluster.

The parent side only: it connects to an existing Ray cluster (:mod:`tfperf.fleet.cluster`),
ships the user's model to every node (:mod:`tfperf.fleet.payload`), runs one task per node that
runs the ordinary ``tfperf`` command there (:mod:`tfperf.fleet.node`, dispatched by
:mod:`tfperf.fleet.dispatch`), records each node's result in the local store as it arrives
(:mod:`tfperf.fleet.record`), groups the hosts by kind of machine (:mod:`tfperf.fleet.kinds`)
and names the outliers (:mod:`tfperf.fleet.matrix`). :mod:`tfperf.fleet.commands` holds the
three commands and the report. Ray is imported only inside the functions that need it, so
nothing else in tfperf pays for it, and ``tfperf --help`` does not load it.
"""
