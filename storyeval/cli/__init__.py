"""The ``storyeval`` command (``main``: score, compare, register, demo, push; ``shards``: score-shards on Ray),
the Gradio demos (``demo``) and the Hub push (``hub``). The top layer: may import every other; nothing imports it."""
