"""What the runtime loads and where it comes from: the metric registry, checkpoint resolution, the bundled
copies and their registration with evaluate, backbones, and the NLTK data and name list the text reads.
The bottom layer: imports nothing of storyeval but ``storyeval.version``."""
