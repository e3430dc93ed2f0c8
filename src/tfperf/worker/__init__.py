"""The worker side of the process boundary: everything that imports TensorFlow, LiteRT or
OpenVINO and runs in a worker process. Nothing outside this package imports it, and it imports
only :mod:`tfperf.core`.

Entry points (each run by the parent as ``python -m ...``): :mod:`tfperf.worker` (serve one
configuration, :mod:`~tfperf.worker.serve`), :mod:`tfperf.worker.probe` (the doctor's install
audit), :mod:`tfperf.worker.peak` (the machine's matmul peak), :mod:`tfperf.worker.export` (a
Keras file to a SavedModel) and :mod:`tfperf.worker.pipeline.main` (the input-pipeline
analysis). Loading and preparing a workload: :mod:`~tfperf.worker.loading`,
:mod:`~tfperf.worker.workload` (the records), :mod:`~tfperf.worker.fingerprint`,
:mod:`~tfperf.worker.inputs`, :mod:`~tfperf.worker.models`, :mod:`~tfperf.worker.trainmodels`
(the built-in training factories), :mod:`~tfperf.worker.flops`,
:mod:`~tfperf.worker.prepare`, :mod:`~tfperf.worker.tfrun`, :mod:`~tfperf.worker.litert` and
:mod:`~tfperf.worker.convert` (other runtimes and precisions).
"""
