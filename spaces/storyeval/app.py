"""The combined storyeval demo (the Space's entry point): all metrics side by side."""
from storyeval.demo import build_demo

build_demo().launch()
