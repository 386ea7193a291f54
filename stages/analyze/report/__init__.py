"""Report: summary.json, report.html, plots, trace, Model Explorer overlays, terminal lines."""
