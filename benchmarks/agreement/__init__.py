"""Agreement with people, and pair accuracies: how the metrics rank human-judged stories and (human, negative) pairs.

``union_correlation``, ``plot_coherence_correlation``, ``story_quality_correlation``, ``continuation_quality``,
``cross_metric``, ``deltascore_stories`` -- Pearson, Spearman and Kendall against the human judgments
``union_pair_accuracy``, ``union_development``, ``wp_extra_pairs``, ``wp_rank_pairs``, ``wp_drift``
                         -- human stories against their perturbed or machine-written counterparts
``explain_hit_rate``     -- how often the leave-one-out blame (``storyeval explain``) ranks a planted flaw's sentence first

Imports: ``benchmarks.common``, ``benchmarks.correlation`` and ``benchmarks.checkpoints`` (the test stories of
``reference_scores``); never ``speed`` or ``reward``.
"""
