"""What the recipes train and are checked on, and the commands that build it.

``builders/``  -- `datasets` builders for ROCStories and WritingPrompts (``wp_extra``: human and machine-written WP stories)
``negatives/`` -- UNION's perturbations; ``build_negatives`` writes the (human, negative) pairs
``plots/``     -- the plot-guided pipeline: plots, the plot-to-story generator, adversarial filtering
``wp_machine_pairs``, ``mix_pairs``, ``named_sets``, ``technique_counts``
               -- (human, machine-written) pairs, pair folders mixed by technique, the named sets of held-out pairs
``continuation_data``, ``continuation_pairs``
               -- continuation quality's rated pairs and Story Cloze items, and its encoder's self-supervised pairs
``lowercase_names`` -- the runtime's list of first names that lower-cased text masks
``plot_pairs`` -- the plot-coherence classifier's (human, implausible) groups as train / validation pairs
``wp_kinds``   -- WP's ordered pairs of three kinds (origin, damage, strength), split by story alike for every kind
``transfer``   -- distillation's transfer stories, and a teacher's scores of them cached with its identity

Imports: ``paths``, ``selection``, ``export.provenance`` and ``export.model_card`` (a negatives folder's card), and
``loop`` (the plot generator trains on it); never ``recipes`` or export's commands, which import this package.
"""
