"""Plot-guided implausible stories (Ghazarian et al., NAACL 2021).

``extraction``   -- plots from story text: ROC storylines (yake keywords), WP verb-argument plots
``manipulation`` -- the paper's plot manipulations and the sampler that composes 2-4 of them
``build_plots``  -- the command that writes (story, plot, manipulated plot) datasets
``generator``    -- the plot-conditioned seq2seq generator: training, and N candidate stories per manipulated plot
``adversarial_filter`` -- keeps the hardest candidates (Zellers et al., 2018) as classifier negatives

The classifier itself is trained by ``storyeval_training.recipes.train_plot_coherence``.

Imports: the rest of ``data`` (builders, UNION's substitution lexicon, technique counts), ``loop`` (the generator's
training), ``paths`` and ``export.provenance``.
"""
