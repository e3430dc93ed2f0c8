"""Facts about this machine, read without TensorFlow.

:mod:`~tfperf.machine.facts` collects the CPU, instruction sets, cores and cgroup quota,
memory, GPUs and allocators (:func:`~tfperf.machine.facts.collect_machine`);
:mod:`~tfperf.machine.contention` measures how much CPU other processes take while tfperf
measures.
"""
