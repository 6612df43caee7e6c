"""Texts to scores: the story scorer (``sequence``: batching, ``windows``), the continuation scorer, devices and
precisions, the settings string each score carries (``signature``), and the int8 runtimes (``int8/``).
May import storyeval.models, the text layer and storyeval.checkpoints; never analysis, the public face or cli."""
