"""Speed and memory: how fast the metrics score and start, on which devices and in which number formats.

``scoring_speed``, ``speed_ceiling``, ``baseline_scorer`` -- stories per second against a BERT-base-sized scorer
``cli_cold_start``       -- the storyeval command's start, import by import
``int8_speed``, ``int8_backends`` -- int8 scoring: speed, and drift from float32
``int8_layers``          -- int8 schemes for one checkpoint, and which layers' int8 weights move its scores most
``window_stride``        -- fewer windows for long stories: a longer stride against the checkpoint's own
``run_issue84.sh``       -- issue 84's speed figures in one sitting, for a quiet machine
``device_parity``        -- the same scores on another device
``generation_speed``, ``negatives_throughput`` -- throughput of the plot generator and of the negatives pipeline

Imports: ``benchmarks.common`` and ``benchmarks.correlation`` (int8's rows on the human sets); never ``agreement``,
``reward`` or ``checkpoints``.
"""
