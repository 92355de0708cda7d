"""The run's report: its typed records (report.json), report.md and report.html, report diffs, the skip ledger, error maps, the machine line."""
