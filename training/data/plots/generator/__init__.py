"""Plot-conditioned story generator (Ghazarian et al., 2021, stage 3).

    storyeval-train-plot-generator --dataset roc --output-dir outputs/plot-generator-roc --max-train-examples 4000
    storyeval-generate-negatives --plots-dir data/plots-roc --model-name-or-path outputs/plot-generator-roc/best \\
        --output-dir data/candidates-roc

The paper fine-tunes BART on (plot -> story) pairs, then samples stories from
manipulated plots: these are the candidate implausible stories that
``adversarial_filter`` narrows down. Offline, the default generator is an
``EncoderDecoderModel`` warm-started from all-MiniLM-L6-v2 on both sides (the
BERT2BERT recipe of Rothe et al., 2020); pass ``facebook/bart-base`` to follow
the paper.

``model``      -- the plot's text form, building and saving a generator, its length limits
``decoding``   -- generated ids back to the corpora's tokenised text
``training``   -- fine-tuning on :mod:`storyeval_training.loop` (``main``: storyeval-train-plot-generator)
``generation`` -- sampling stories from plots (``generate_main``: storyeval-generate-negatives)

Imports: ``data.builders``, ``loop`` and ``export.provenance``.
"""
from storyeval_training.data.plots.generator.decoding import decode_story
from storyeval_training.data.plots.generator.generation import CANDIDATE_FEATURES, generate_main, generate_negatives, generate_stories, parse_generate_args
from storyeval_training.data.plots.generator.model import (
    GENERATOR_INFO,
    MAX_NEW_TOKENS,
    MAX_SOURCE_LENGTH,
    PHRASE_SEPARATOR,
    SENTENCE_MARKER,
    TEMPERATURE,
    TOP_K,
    build_generator,
    has_phrases,
    plot_to_text,
    save_generator,
)
from storyeval_training.data.plots.generator.training import add_extra_train_examples, evaluate_loss, load_story_plots, main, parse_args, train

__all__ = [
    "CANDIDATE_FEATURES", "GENERATOR_INFO", "MAX_NEW_TOKENS", "MAX_SOURCE_LENGTH", "PHRASE_SEPARATOR", "SENTENCE_MARKER",
    "TEMPERATURE", "TOP_K", "add_extra_train_examples", "build_generator", "decode_story", "evaluate_loss", "generate_main", "generate_negatives",
    "generate_stories", "has_phrases", "load_story_plots", "main", "parse_args", "parse_generate_args", "plot_to_text",
    "save_generator", "train",
]
