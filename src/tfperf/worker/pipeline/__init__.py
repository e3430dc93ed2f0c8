"""The worker side of ``tfperf pipeline``: load the user's pipeline, time it, its stages and
its fixes (:mod:`~tfperf.worker.pipeline.main`, run as ``python -m
tfperf.worker.pipeline.main``)."""
