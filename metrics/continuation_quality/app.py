"""Gradio demo of the continuation-quality metric (the Space's entry point).

evaluate's ``launch_gradio_widget`` uses ``gr.inputs``, which Gradio 4 removed,
so the demo is built with ``gr.Blocks`` in ``storyeval.cli.demo``.
"""
from storyeval.checkpoints.resources import download_missing_nltk
from storyeval.cli.demo import build_demo

download_missing_nltk()  # a Space starts without NLTK's data

build_demo(metrics=("continuation_quality",), title="Continuation quality").launch()
