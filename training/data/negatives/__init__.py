"""UNION's negative samples (Guan and Huang, 2020): a human story perturbed into an implausible one.

``repetition``, ``reordering``, ``substitution``, ``negation`` -- the four perturbations
``sampler``    -- composes them on each story, with a random generator of its own, for ``data.build_negatives``

Imports: ``data.builders.common`` (input errors, file reading) and ``export.provenance``; nothing above ``data``.
"""
