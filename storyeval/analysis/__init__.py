"""What is made of scores: systems compared (``compare``), sentences blamed (``explain``), percentiles among
human-written stories (``percentiles``) and every metric in one call (``suite``).
May import storyeval.scoring and everything below it; never the public face (api, metric_base) or cli."""
