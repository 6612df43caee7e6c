"""Gradio demo of the story_quality suite (the Space's entry point).

evaluate's ``launch_gradio_widget`` uses ``gr.inputs``, which Gradio 4 removed,
so the demo is built with ``gr.Blocks`` in ``storyeval.demo``.
"""
from storyeval.demo import build_demo
from storyeval.resources import download_missing_nltk

download_missing_nltk()  # a Space starts without NLTK's data

build_demo(title="Story quality").launch()
