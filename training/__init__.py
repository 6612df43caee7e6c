"""Training code for storyeval. The ``training/`` folder installs as the package ``storyeval_training``,
so it never collides with another top-level ``training``.

``builders``  -- `datasets` builders for ROCStories and WritingPrompts
``negatives`` -- UNION's negative-sample construction
``loop``      -- the accelerate training loop the ``train_*`` scripts and the plot generator share
"""
