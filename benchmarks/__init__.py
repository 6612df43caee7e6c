"""Benchmarks, grouped by what they measure. Run each as ``python -m benchmarks.<group>.<name>``; results go to
``benchmarks/results/<name>.json`` and ``python -m benchmarks.report`` summarises them in BENCHMARKS.md. A run an
experiment log reports (``experiments/<log>.md``) goes to ``results/experiments/<log>/<name>.json``: ``--output <log>/<name>``
(``common.results_path``).

``agreement/``   -- agreement with human judgments, and pair accuracies
``speed/``       -- speed and memory
``reward/``      -- the metrics as rewards: gaming, and the guard's cost
``checkpoints/`` -- what goes with a checkpoint: the reference scores of its percentiles, its run's training curve, its teacher's scores
``common``, ``correlation`` -- the shared helpers (checkpoint options, results files; the human sets and coefficients)
``report``       -- BENCHMARKS.md's summary, generated from ``results/``

Layers: ``common`` and ``correlation`` import no other benchmark; ``checkpoints`` imports them; ``agreement``,
``speed`` and ``reward`` import those and never one another; ``report`` imports only the shared helpers.
"""
