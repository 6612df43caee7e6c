"""What is made of scores: systems compared (``compare``), sentences blamed (``explain``), percentiles among
human-written stories (``percentiles``), every metric in one call (``suite``), and scoring at scale: a Ray Data
dataset on a pool of actors (``ray_data``), each rank of an accelerate job its own stories (``ranks``), both
through one row scorer that gives a row with no letters NaN and a reason (``rows``).
May import storyeval.scoring and everything below it; never the public face (api, metric_base) or cli."""
