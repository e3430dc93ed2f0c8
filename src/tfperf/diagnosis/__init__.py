"""``tfperf doctor``: audit the machine and its TensorFlow install, each finding with its fix.

:mod:`~tfperf.diagnosis.install` runs the worker's probe and turns any failure into facts;
:mod:`~tfperf.diagnosis.rules` turns machine and install facts into findings;
:mod:`~tfperf.diagnosis.audit` puts them together (:func:`~tfperf.diagnosis.audit.run_doctor`).
"""
