"""The training commands of the shipped metrics, each run as ``python -m storyeval_training.recipes.<name>``.

``train_union``                -- UNION (console script storyeval-train-union), on the shared loop
``train_plot_coherence``       -- the plot-coherence classifier: UNION's architecture on released or generated negatives
``train_continuation``         -- continuation quality's network on its features (and, with ``--encoder``, a learned encoder's)
``train_continuation_encoder`` -- that learned encoder, a cross-encoder on self-supervised pairs
``fit_suite``                  -- story_quality's learned combination of the metrics' percentiles (or the worst kind's best)
``train_ranker``               -- one scorer on ordered pairs of several kinds (Bradley-Terry), kept where its worst kind is best
``distill``                    -- a fast student that learns a base teacher's logit on transfer stories

Imports: every layer below, ``data``, ``loop``, ``export.provenance``, ``export.model_card``, ``paths`` and
``selection``. Only export's commands (``export_state``, ``window_aggregation``) import the recipes.
"""
