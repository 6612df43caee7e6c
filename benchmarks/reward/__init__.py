"""The metrics as rewards: which degenerate outputs beat human stories (``reward_gaming``), and what the guard
costs in agreement with people (``reward_guard_correlation``).

Imports: ``benchmarks.common`` and ``benchmarks.correlation``; never ``agreement``, ``speed`` or ``checkpoints``.
"""
