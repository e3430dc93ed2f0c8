"""What people and programs read: consoles and JSON (:mod:`~tfperf.report.console`), a run's
report document and self-contained HTML page (:mod:`~tfperf.report.html`), portable result
files written by ``--export`` and read back by ``compare`` (:mod:`~tfperf.report.export`), and a
finished run logged to MLflow (:mod:`~tfperf.report.mlflow_log`)."""
