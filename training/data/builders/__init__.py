"""`datasets` builders for the story corpora. Loading scripts are gone from
`datasets`, so the builder classes are used directly (see :func:`load_split`).

Imports: ``paths`` and ``export.provenance`` (the code hash that keys the builders' caches); nothing else of
``storyeval_training``, so every other part of ``data`` may use them."""
from storyeval_training.data.builders.common import FEATURES, InputFormatError, StoryConfig, assign_split, load_split, prepare
from storyeval_training.data.builders.roc import ROCStories
from storyeval_training.data.builders.wp import WritingPrompts
from storyeval_training.data.builders.wp_extra import WritingPromptsMachine

BUILDERS = {"roc": ROCStories, "wp": WritingPrompts}

__all__ = [
    "BUILDERS", "FEATURES", "InputFormatError", "ROCStories", "StoryConfig", "WritingPrompts", "WritingPromptsMachine",
    "assign_split", "load_split", "prepare",
]
