"""Benchmarks: correlation with human judgments, speed and memory. Run each as ``python -m benchmarks.<name>``;
results go to ``benchmarks/results/<name>.json`` and ``python -m benchmarks.report`` summarises them in BENCHMARKS.md."""
