"""The combined storyeval demo (the Space's entry point): all metrics side by side."""
from storyeval.demo import build_demo
from storyeval.resources import download_missing_nltk

download_missing_nltk()  # a Space starts without NLTK's data

build_demo().launch()
