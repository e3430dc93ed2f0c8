"""What people and programs read: consoles and JSON (:mod:`~tfperf.report.console`), and a
run's report document and self-contained HTML page (:mod:`~tfperf.report.html`)."""
