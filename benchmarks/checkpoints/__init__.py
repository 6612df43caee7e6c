"""Measurements that go with a checkpoint rather than compare it with people.

``reference_scores`` -- the scores of the held-out human stories that percentiles are read against, kept in the checkpoint's folder
``training_curve``   -- a run's held-out figures step by step, from its saved state
``teacher_scores_rebuild`` -- a distilled student's teacher scores, scored again and compared with those it learned from

Imports: ``benchmarks.common`` only; ``agreement`` imports this package.
"""
