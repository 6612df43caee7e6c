"""BibTeX of the papers the metrics follow, in one place: the metric modules, their cards and the model cards cite these."""

UNION = """\
@inproceedings{guan-huang-2020-union,
  title = {{UNION}: An Unreferenced Metric for Evaluating Open-ended Story Generation},
  author = {Guan, Jian and Huang, Minlie},
  booktitle = {Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing (EMNLP)},
  year = {2020},
  pages = {9157--9166}
}
"""

PLOT_COHERENCE = """\
@inproceedings{ghazarian-etal-2021-plot,
  title = {Plot-guided Adversarial Example Construction for Evaluating Open-domain Story Generation},
  author = {Ghazarian, Sarik and Liu, Zixi and S M, Akash and Weischedel, Ralph and Galstyan, Aram and Peng, Nanyun},
  booktitle = {Proceedings of the 2021 Conference of the North American Chapter of the Association for Computational Linguistics: Human Language Technologies (NAACL-HLT)},
  year = {2021},
  pages = {4334--4344}
}
"""

CONTINUATION_QUALITY = """\
@inproceedings{sagarkar-etal-2018-quality,
  title = {Quality Signals in Generated Stories},
  author = {Sagarkar, Manasvi and Wieting, John and Tu, Lifu and Gimpel, Kevin},
  booktitle = {Proceedings of the Seventh Joint Conference on Lexical and Computational Semantics (*SEM 2018)},
  year = {2018},
  pages = {192--202}
}
"""

BY_METRIC = {"union": UNION, "plot_coherence": PLOT_COHERENCE, "continuation_quality": CONTINUATION_QUALITY}
