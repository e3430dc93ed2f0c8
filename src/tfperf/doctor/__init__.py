"""``tfperf doctor``: audit the machine and its TensorFlow install, each finding with its fix.

:mod:`~tfperf.doctor.install` runs the worker's probe and turns any failure into facts;
:mod:`~tfperf.doctor.rules` turns machine and install facts into findings;
:mod:`~tfperf.doctor.audit` puts them together (:func:`~tfperf.doctor.audit.run_doctor`).
"""
