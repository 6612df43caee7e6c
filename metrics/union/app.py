"""Gradio demo of the UNION metric (the Space's entry point).

evaluate's ``launch_gradio_widget`` uses ``gr.inputs``, which Gradio 4 removed,
so the demo is built with ``gr.Blocks`` in ``storyeval.demo``.
"""
from storyeval.demo import build_demo

build_demo(metrics=("union",), title="UNION").launch()
