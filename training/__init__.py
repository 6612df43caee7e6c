"""Training code for storyeval (installed as ``storyeval_training``).

``builders``  -- `datasets` builders for ROCStories and WritingPrompts
``negatives`` -- UNION's negative-sample construction
"""
