"""The small shared core: what both sides of the process boundary import, and nothing else.

Pure Python, no TensorFlow, no tfperf package above it: the knob table and the typed config
(:mod:`~tfperf.core.knobs`, :mod:`~tfperf.core.config`), the words parent and worker share
(:mod:`~tfperf.core.protocol`), errors and exit codes (:mod:`~tfperf.core.errors`), statistics
(:mod:`~tfperf.core.stats`), strict JSON (:mod:`~tfperf.core.strictjson`), paths
(:mod:`~tfperf.core.paths`), the built-in workload catalog (:mod:`~tfperf.core.workloads`), and the
facts both sides read about this host: instruction sets (:mod:`~tfperf.core.isa`), TensorFlow's
CPU log (:mod:`~tfperf.core.tflog`), allocators (:mod:`~tfperf.core.allocators`), the speed
variables of an environment (:mod:`~tfperf.core.perfenv`), GPU sampling (:mod:`~tfperf.core.gpu`)
and the input-bound rules (:mod:`~tfperf.core.inputbound`); version numbers read through
``packaging`` (:mod:`~tfperf.core.versions`, parent side only).
"""
