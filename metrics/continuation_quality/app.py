"""Gradio demo of the continuation-quality metric (the Space's entry point)."""
import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("continuation_quality.py")
launch_gradio_widget(module)
