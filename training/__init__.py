"""Training code for storyeval. The ``training/`` folder installs as the package ``storyeval_training``,
so it never collides with another top-level ``training``.

Layers, top down; a module imports its own layer and those below it (tests/test_layout.py checks it):

``export.export_state``, ``export.window_aggregation``
               -- a checkpoint and its card from a recipe's saved state; a window aggregation chosen and written in
``recipes``    -- the trainers, ``python -m storyeval_training.recipes.<name>``: UNION, plot coherence, continuation
                  quality and its encoder, story_quality's learned combination
``data``       -- `datasets` builders (``data.builders``), UNION's negatives (``data.negatives``), the plot-guided
                  pipeline (``data.plots``, whose generator trains on ``loop``), and the pair sets the recipes use
``loop``       -- the accelerate training loop every trainer shares
``export.provenance``, ``export.model_card``
               -- the machine and code behind a figure, and the cards rendered from a run's records
``paths``, ``selection``
               -- where the data lives, and which evaluation is the best
"""
