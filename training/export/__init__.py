"""What goes out with a checkpoint, and the commands that write it after a run.

``provenance``         -- the machine and the code behind every measured figure (training and benchmark results)
``model_card``         -- model and dataset cards, rendered from ``card_templates/`` and the run's records
``export_state``       -- a checkpoint and its card from a saved state of a run, while it goes on or after it stopped
``window_aggregation`` -- how a checkpoint combines its window scores, chosen on validation pairs and written into it

Imports: this package spans the two ends of the layers. ``provenance`` and ``model_card`` import nothing else of
``storyeval_training``, so every layer (and ``benchmarks/``) may use them. ``export_state`` and
``window_aggregation`` act on what a recipe trained: they import the recipes and nothing imports them.
"""
