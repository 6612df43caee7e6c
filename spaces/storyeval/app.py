"""The combined storyeval demo (the Space's entry point): all metrics side by side."""
from storyeval.checkpoints.resources import download_missing_nltk
from storyeval.cli.demo import build_demo

download_missing_nltk()  # a Space starts without NLTK's data

build_demo().launch()
