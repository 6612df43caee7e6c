"""Int8 scoring of the story classifiers on the CPU: the export and its runtime (``runtime``), a scorer that
runs in int8 by default (``scorer``), and one that scores a cached export without torch (``cached``).
Part of the scoring layer: imports what storyeval.scoring may."""
