"""Gradio demo of the UNION metric (the Space's entry point)."""
import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("union.py", "roc")
launch_gradio_widget(module)
