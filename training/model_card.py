"""Model cards for the checkpoints we train, filled from the training results.

The card's evaluation section is filled from ``evaluation.json`` in the same
folder, which the correlation benchmark writes; a card is never given
figures that no command measured.
"""
from __future__ import annotations

import json
from pathlib import Path

UNION_CITATION = """@inproceedings{guan-huang-2020-union,
  title = {{UNION}: An Unreferenced Metric for Evaluating Open-ended Story Generation},
  author = {Guan, Jian and Huang, Minlie},
  booktitle = {Proceedings of EMNLP 2020},
  year = {2020},
  pages = {9157--9166}
}"""


def _encoder_text(folder: Path, paper_model: str) -> str:
    """The exported encoder's size, from its own config, against the paper's (12 layers of width 768)."""
    if not (folder / "config.json").is_file():  # a card written before (or without) its weights
        return f"See `config.json` for the encoder's size; the paper used {paper_model} (12 layers of width 768)."
    encoder = json.loads((folder / "config.json").read_text()).get("encoder", {})
    layers, width = encoder.get("num_hidden_layers"), encoder.get("hidden_size")
    relation = "the size of" if (layers, width) == (12, 768) else "smaller than" if (layers or 0) * (width or 0) < 12 * 768 else "larger than"
    return f"An encoder of {layers} layer{'' if layers == 1 else 's'} of width {width}, {relation} the paper's {paper_model} (12 of width 768)."


def _front_matter(dataset: str | None, base_model: str, evaluation: dict | None) -> str:
    name = f"union-{dataset}" if dataset else "union"
    lines = [
        "---",
        "license: apache-2.0",
        "language: en",
        "library_name: storyeval",  # a custom architecture: transformers' pipeline() cannot load it
        f"base_model: {base_model}",
        "tags: [storyeval, union, story-evaluation, reference-free-metric]",
    ]
    if dataset:
        lines.append(f"datasets: [{'rocstories' if dataset == 'roc' else 'writingprompts'}]")
    if evaluation:
        lines += ["model-index:", f"- name: {name}", "  results:"]
        for set_name, coefficients in evaluation.get("correlations", {}).items():
            lines += [
                "  - task: {type: text-classification, name: Story quality (correlation with human judgments)}",
                f"    dataset: {{name: UNION human judgments ({set_name}), type: union-human-{set_name}}}",
                "    metrics:",
            ]
            for name in ("pearson", "spearman", "kendall"):
                lines.append(f"    - {{type: {name}, value: {coefficients[name]:.4f}}}")
    lines.append("---")
    return "\n".join(lines)


def _selection_overlap_text(results: dict) -> str:
    dropped = results.get("train_pairs_dropped_for_selection")
    if dropped is None:  # runs from before training left those stories out
        return "Training pairs were not screened against those pairs' human stories, so some may have been trained on."
    return f"{dropped:,} training pairs whose human story those pairs judge were left out of training."


def _selection_text(results: dict) -> str:
    best = results.get("best_validation") or {}
    if results.get("selected_by") == "selection_pair_accuracy":
        selection_dir = results["args"].get("selection_pairs_dir")
        return (f"""the share of pairs whose human story outscores its negative, on the validation
  split of other held-out pairs (`{selection_dir}`; auto-constructed, never the human
  judgments): {best["selection_pair_accuracy"]:.4f} at step {best.get("step")}, where the run's own validation
  pairs give {best.get("pair_accuracy", float("nan")):.4f}. {_selection_overlap_text(results)}""")
    return (f"""best accuracy on held-out validation pairs (auto-constructed,
  never the human judgments): {best.get("accuracy", float("nan")):.4f} at step {best.get("step")}.""")


def write_union_card(folder: Path, results: dict) -> None:
    folder = Path(folder)
    args = results["args"]
    dataset = args.get("dataset")  # None: pairs from a folder that does not record its corpus
    evaluation_path = folder / "evaluation.json"
    evaluation = json.loads(evaluation_path.read_text()) if evaluation_path.is_file() else None
    base_model = args.get("base_model_name") or args["model_name_or_path"]
    if base_model == "all-MiniLM-L6-v2":
        base_model = "sentence-transformers/all-MiniLM-L6-v2"
    source = (f"the `{dataset}` builder of `storyeval_training` (train split of the\n  seeded 90/5/5 split)" if dataset
              else f"the train split of the pairs in `{args.get('pairs_dir')}`")
    body = f"""
# {f"union-{dataset}" if dataset else "union"}

A UNION checkpoint (Guan & Huang, EMNLP 2020): a reference-free score in [0, 1]
for how plausible a story is, given as the probability that a human wrote it
rather than a perturbed copy. It is the model behind the `storyeval` metric
`evaluate.load("metrics/union", "{dataset or '<this folder>'}")`.

## Intended use

Scoring generated stories (ROCStories-style five-sentence stories for `roc`,
WritingPrompts-style stories for `wp`) as one signal among others. Scores rank
stories; they are not calibrated probabilities of human authorship. Check the
measured correlations below before relying on it: a checkpoint trained on a few
thousand stories may not track human judgments at all.

## Training data and procedure

- Human stories: {source}, delexicalised, with stories whose first sentence opens a
  human-judged evaluation item removed.
- Negatives: UNION's repetition, substitution, reordering and negation alteration,
  composed by the paper's sampler (`storyeval-build-negatives`), one per human story
  and negative seed ({args.get("negative_seeds")}).
- Backbone: `{base_model}`; loss BCE + {args["recon_weight"]} x token reconstruction.
- Hyperparameters: batch {args["per_device_train_batch_size"]}, learning rate {args["learning_rate"]},
  max length {args["max_length"]}, {results["completed_steps"]} steps on {results["train_pairs"]} pairs,
  seed {args["seed"]}.
- Training time: {results["training_minutes"]} minutes on {_machine_text(results)}.{_run_notes(results)}
- Checkpoint selection: {_selection_text(results)}
- Exported in fp16 with its reconstruction head (scorers drop it when they load; training can resume from it).

## Evaluation

{_evaluation_text(evaluation)}

## Limitations

- Trained on perturbations of human stories: it detects repetition, incoherent
  order, contradictions and off-topic sentences, not style or interest.
- Used as a reward for reinforcement learning it can be gamed: a generator can
  learn to copy the surface statistics of human stories without being better.
- It can mark down stories unlike its training stories (longer, from another kind of
  generator) whatever their quality. Check a new kind of generator against human
  ratings before trusting its scores.
- {_encoder_text(folder, "BERT-base")}
- Stories longer than the model window are scored over overlapping windows.

## Citation

```bibtex
{UNION_CITATION}
```
"""
    (folder / "README.md").write_text(_front_matter(dataset, base_model, evaluation) + "\n" + body.lstrip("\n"))


def update_evaluation(folder: Path, metric: str, command: str, correlations: dict) -> None:
    """Write a benchmark's figures to ``evaluation.json`` and re-render the card, if the folder has its training record."""
    folder = Path(folder)
    (folder / "evaluation.json").write_text(json.dumps({"command": command, "correlations": correlations}, indent=2) + "\n")
    results_path = folder / "training_results.json"
    if results_path.is_file():
        writer = {"union": write_union_card, "plot_coherence": write_plot_coherence_card}[metric]
        writer(folder, json.loads(results_path.read_text()))


def _cloze_fitting_text(results: dict) -> str:
    folds = results.get("cloze_cross_fitted_folds")
    if not folds:
        return ("\n  Their features came from the same statistics, fitted on their own stories (before cross-fitting:"
                " the LM had seen each true ending after its context).") if results.get("cloze_pairs") else ""
    return (f"\n  Their features are cross-fitted over {folds} folds of the ROC stories: a pair's LM and PMI statistics"
            " were fitted without its story, as they are for any text scored later.")


def _machine_text(results: dict) -> str:
    """Where the run trained, from the environment its loop recorded. Runs from before the loops
    recorded it (the first bundled checkpoints) ran on the project's 2-core CPU machine."""
    env = results.get("environment")
    if not env:
        return "a 2-core CPU machine"
    where = f"{len(env['gpus'])} x {env['gpus'][0]}" if env.get("gpus") else f"a {env['cores']}-core CPU ({env['cpu']})"
    if env.get("commit"):
        where += f", code at commit {env['commit']}" + (" with uncommitted changes" if env.get("uncommitted_changes") else "")
    return where


def _run_notes(results: dict) -> str:
    """Facts about the run the loop cannot know (interruptions, resumes), from ``notes`` in training_results.json."""
    return "".join(f"\n- {note}" for note in results.get("notes", []))


def _evaluation_text(evaluation: dict | None) -> str:
    if not evaluation:
        return "Not yet measured: run `python benchmarks/union_correlation.py` (see BENCHMARKS.md)."
    rows = ["| human set | Pearson | Spearman | Kendall |", "|---|---|---|---|"]
    for set_name, c in evaluation["correlations"].items():
        rows.append(f"| {set_name} | {c['pearson']:.4f} | {c['spearman']:.4f} | {c['kendall']:.4f} |")
    return f"Correlation with the UNION paper's human judgments (command: `{evaluation['command']}`):\n\n" + "\n".join(rows)


SAGARKAR_CITATION = """@inproceedings{sagarkar-etal-2018-quality,
  title = {Quality Signals in Generated Stories},
  author = {Sagarkar, Manasvi and Wieting, John and Tu, Lifu and Gimpel, Kevin},
  booktitle = {Proceedings of the Seventh Joint Conference on Lexical and Computational Semantics},
  year = {2018},
  pages = {192--202}
}"""


def write_continuation_card(folder: Path, results: dict, evaluation: dict | None = None) -> None:
    """Model card for a continuation-quality checkpoint; ``evaluation`` is the benchmark's output."""
    folder = Path(folder)
    args, best = results["args"], results["best_validation"]
    lines = ["---", "license: apache-2.0", "language: en", "library_name: storyeval",
             "tags: [storyeval, story-evaluation, continuation-quality, reference-free-metric]",
             "datasets: [rocstories, writingprompts, deltascore]"]
    if evaluation:
        lines += ["model-index:", "- name: continuation-quality", "  results:",
                  "  - task: {type: text-classification, name: Continuation quality (Spearman with held-out ratings)}",
                  "    dataset: {name: DeltaScore crowd ratings (held-out contexts), type: deltascore}", "    metrics:"]
        lines += [f"    - {{type: spearmanr, name: {c}, value: {v['rho']:.4f}}}" for c, v in evaluation["spearman"].items()]
        lines += ["  - task: {type: text-classification, name: Story Cloze (right ending scores higher)}",
                  "    dataset: {name: Story Cloze Test Spring 2016, type: story_cloze}", "    metrics:"]
        lines += [f"    - {{type: accuracy, name: {c}, value: {v:.4f}}}" for c, v in evaluation["story_cloze_accuracy"].items()]
    lines.append("---")
    if evaluation:
        rows = ["| criterion | Spearman (held-out) | Story Cloze accuracy |", "|---|---|---|"]
        rows += [f"| {c} | {evaluation['spearman'][c]['rho']:.3f} | {evaluation['story_cloze_accuracy'][c]:.3f} |" for c in evaluation["spearman"]]
        evaluation_text = f"Measured by `{evaluation['command']}` on {evaluation['heldout_pairs']} held-out pairs ({evaluation['heldout_contexts']} contexts) and {evaluation['story_cloze_items']} Story Cloze items:\n\n" + "\n".join(rows)
    else:
        evaluation_text = "Not yet measured: run `python benchmarks/continuation_quality.py`."
    body = f"""
# continuation-quality

Scores a story continuation given its context on overall quality, relevance and
interestingness, after Sagarkar et al. (2018): charagram encodings of context
and continuation (`{args["input_mode"]}` input) plus the features {", ".join(results["features"])},
one 300-unit ReLU layer, three outputs. It backs `evaluate.load("metrics/continuation_quality")`.

## Intended use

Ranking candidate next sentences for a story, or comparing story generators on how
well their continuations fit the preceding context, as one signal among others.
The scores are on the 1-5 scale of the training ratings but are not calibrated
ratings; compare them within a study, not across studies.

## Training data and procedure

- The paper's 4,586 annotated pairs are not public. Rated pairs here: the DeltaScore crowd
  ratings of ROC and WP continuations (1-5), mapped to our criteria as
  overall = mean(fluency, coherence, logicality), relevance = relatedness,
  interestingness = interestingness. Scores aim at that 1-5 scale, but the regression is unbounded:
  text unlike the training pairs can score outside it.
- Split by context (no context on two sides): {results["train_pairs"]} training,
  {results["validation_pairs"]} validation and {results["test_pairs"]} held-out test pairs.
- Weak signal: {results["cloze_pairs"]} cloze pairs from ROC training stories (true fifth sentence vs
  another story's), with a margin ranking loss (weight {args["ranking_weight"]}) on overall and relevance.{_cloze_fitting_text(results)}
- Features: a {args["lm_order"]}-gram interpolated Kneser-Ney LM and (P)PMI statistics (windows of 10/25/50
  content words, stopwords and punctuation left out; pairs seen more than 10 times) fitted on ROC and WP training stories, minus every story whose opening
  matches an evaluation context; IDF from `wordfreq`; entity mentions from NLTK POS tags and name lists.
  Feature version {results.get("feature_version", 1)} (the versions are listed in `storyeval/continuation/features.py`).
- Adam, lr {args["learning_rate"]}, {args["epochs"]} epochs, batch {args["batch_size"]}; the epoch with the best
  validation mean Spearman was kept (epoch {best["epoch"]}, {best["validation_mean_spearman"]:.3f}).
  Training took {results["training_minutes"]} minutes on {_machine_text(results)}.

## Evaluation

{evaluation_text}

## Limitations

- About 200 rated pairs are far fewer than the paper's 4,586: the network mostly learns from the
  features, and the held-out Spearman figures rest on a few dozen pairs.
- The criteria are mapped from another annotation scheme; they are not the paper's O/R/I.
- Entity mentions approximate coreference with name lists and POS tags.
- As a reward for generation it can be gamed, e.g. by repeating context words to raise PMI.

## Citation

```bibtex
{SAGARKAR_CITATION}
```
"""
    (folder / "README.md").write_text("\n".join(lines) + "\n" + body.lstrip("\n"))


def write_negatives_card(folder: Path, dataset: str, seed: int, stats: dict) -> None:
    """A dataset card for a folder of UNION (human, negative) pairs, with its technique counts."""
    source = {"roc": "ROCStories", "wp": "WritingPrompts"}[dataset]
    rows = "\n".join(
        f"| {split} | {s['pairs']:,} | "
        + ", ".join(f"{name} {count:,}" for name, count in s["per_technique"].items())
        + " | "
        + ", ".join(f"{n}: {count:,}" for n, count in s["per_number_of_techniques"].items())
        + " |"
        for split, s in stats.items()
        if isinstance(s, dict) and "pairs" in s  # the splits, not the run's environment
    )
    total = sum(s["pairs"] for s in stats.values() if isinstance(s, dict) and "pairs" in s)
    size = "n<1K" if total < 1_000 else "1K<n<10K" if total < 10_000 else "10K<n<100K" if total < 100_000 else "100K<n<1M"
    card = f"""---
pretty_name: UNION negative samples ({source})
license: other
language: [en]
task_categories: [text-classification]
tags: [storyeval, union, story-evaluation, negative-sampling]
size_categories: [{size}]
---
# UNION negative samples for {source}

Pairs of a human-written story and a perturbed copy of it, made as in UNION (Guan &
Huang, EMNLP 2020) by `storyeval-build-negatives --dataset {dataset} --seed {seed}` from
the storyeval `{dataset}` builder. They train the `union-{dataset}` checkpoints.

## Fields

- `human`: the story, preprocessed by the builder (tokenised, names delexicalised).
- `negative`: the perturbed story. The first sentence (the leading context) is never
  perturbed, and a negative never equals its source.
- `original`: the story the negative was made from.
- `techniques`: the techniques applied, in order.

## How the negatives are made

The sampler draws 1, 2, 3 or 4 techniques (probabilities .5/.2/.2/.1), without
replacement, from repetition (.1), substitution (.3), reordering (.4) and negation
alteration (.2); seed {seed}. Substitution swaps keywords for ConceptNet antonyms
or same-POS keywords, or sentences for ones from other stories of the same split.

| split | pairs | applications per technique | negatives by number of techniques |
|---|---|---|---|
{rows}

## Licence

The stories keep the terms of their source ({source}); the perturbation code is
Apache-2.0.

## Citation

```bibtex
{UNION_CITATION}
```
"""
    (Path(folder) / "README.md").write_text(card, encoding="utf-8")


GHAZARIAN_CITATION = """@inproceedings{ghazarian-etal-2021-plot,
  title = {Plot-guided Adversarial Example Construction for Evaluating Open-domain Story Generation},
  author = {Ghazarian, Sarik and Liu, Zixi and S M, Akash and Weischedel, Ralph and Galstyan, Aram and Peng, Nanyun},
  booktitle = {Proceedings of NAACL-HLT 2021},
  year = {2021},
  pages = {4334--4344}
}"""


def write_plot_coherence_card(folder: Path, results: dict) -> None:
    """Model card for a plot-coherence checkpoint; figures come from ``evaluation.json`` (the benchmark's output)."""
    folder = Path(folder)
    args = results["args"]
    dataset = args.get("dataset") or "roc"
    evaluation_path = folder / "evaluation.json"
    evaluation = json.loads(evaluation_path.read_text()) if evaluation_path.is_file() else None
    base_model = args.get("base_model_name") or args["model_name_or_path"]
    if base_model == "all-MiniLM-L6-v2":
        base_model = "sentence-transformers/all-MiniLM-L6-v2"
    best = results.get("best_validation") or {}
    name = f"plot-coherence-{dataset}"
    # what the checkpoint does when it scores: its config, else the run's record
    if (folder / "config.json").is_file():
        from storyeval.models import UnionConfig  # here: the other cards need no torch

        delexicalize = UnionConfig.from_pretrained(folder).delexicalize
    else:
        delexicalize = args.get("delexicalize", False)
    # runs before it was recorded: the released stories keep names, our own data came from the builders' placeholders
    trained_delexicalized = args.get("delexicalize", args.get("negatives", "paper") != "paper")
    names = "person names are " + ("replaced by `[MALE]` / `[FEMALE]` / `[NEUTRAL]`" if delexicalize else "kept") + " when scoring"
    if trained_delexicalized == delexicalize:
        names += ", as in the stories it was trained on"
    else:
        names += (", but the stories it was trained on " + ("had placeholders" if trained_delexicalized else "kept names")
                  + ": its scores of stories with names are unreliable; retrain")
    lines = ["---", "license: apache-2.0", "language: en", "library_name: storyeval", f"base_model: {base_model}",
             "tags: [storyeval, plot-coherence, story-evaluation, reference-free-metric]",
             f"datasets: [{'rocstories' if dataset == 'roc' else 'writingprompts'}]"]
    if evaluation:
        lines += ["model-index:", f"- name: {name}", "  results:",
                  "  - task: {type: text-classification, name: Story plausibility (correlation with human judgments)}",
                  "    dataset: {name: Plot-guided AMT plausibility ratings (roc), type: plot-amt-roc}", "    metrics:"]
        lines += [f"    - {{type: {c}, value: {evaluation['correlations'][c]:.4f}}}" for c in ("pearson", "spearman", "kendall")]
        c = evaluation["correlations"]
        evaluation_text = (
            f"Correlation with the paper's AMT plausibility ratings of 300 ROC stories (mean of 5 ratings; "
            f"command: `{evaluation['command']}`):\n\n| Pearson | Spearman | Kendall |\n|---|---|---|\n"
            f"| {c['pearson']:.4f} | {c['spearman']:.4f} | {c['kendall']:.4f} |\n\n"
            "The paper's RoBERTa trained on AF_ManPlts reaches Spearman .558 / Kendall .410 on the same stories."
        )
    else:
        evaluation_text = "Not yet measured: run `python benchmarks/plot_coherence_correlation.py` (see BENCHMARKS.md)."
    lines.append("---")
    source = {
        "paper": "the paper's released AF_ManPlts stories: for each human ROC story, three implausible stories "
                 "that a fine-tuned BART wrote from manipulated storylines, chosen by adversarial filtering "
                 "(its `valid` and `test` files; the paper trained on a larger split that is not released)",
        "generated": "stories our plot-conditioned generator wrote from manipulated plots "
                     "(`storyeval-build-plots`, `storyeval-generate-negatives`), chosen by adversarial filtering",
    }[args.get("negatives", "paper")]
    corpus = {"roc": "ROC", "wp": "WritingPrompts"}[dataset]
    # our own stories come from the builders, whose leakage filter ran first and counted its drops
    leakage_note = ("" if args.get("negatives", "paper") == "paper" else
                    " The builders' leakage filter had already dropped such stories; `storyeval-build-plots`\n"
                    "  counts them in `plots_stats.json` (`leakage_dropped_stories`).")
    body = f"""
# {name}

A plot-coherence checkpoint after Ghazarian et al. (NAACL 2021): the probability
that a story is plausible rather than an implausible story generated from a
manipulated plot. It is the model behind
`evaluate.load("metrics/plot_coherence", "{dataset}")`.

## Intended use

Scoring generated stories for plot plausibility (logical order, no
contradictions, no repeated or off-topic events), as one signal among others.
Scores rank stories; they are not calibrated probabilities.

## Training data and procedure

- Positives: human-written {corpus} stories; negatives: {source}.
- Leakage rule: {args.get("leakage_dropped_groups", "?")} groups whose human story opens a human-judged
  evaluation item were dropped before training.{leakage_note}
- Split by group: 95% train, 5% validation.
- Backbone: `{base_model}` with a sigmoid head on the first token (UNION's architecture
  without its reconstruction head); binary cross-entropy.
- Hyperparameters: batch {args["per_device_train_batch_size"]}, learning rate {args["learning_rate"]},
  max length {args["max_length"]} tokens, {args["num_train_epochs"]:g} epoch(s) (the paper: 3),
  {results["completed_steps"]} steps on {results["train_pairs"]} pairs, seed {args["seed"]}.
- Training time: {results["training_minutes"]} minutes on {_machine_text(results)}.{_run_notes(results)}
- Checkpoint selection: best accuracy on the validation pairs (never the human
  judgments): {best.get("accuracy", float("nan")):.4f} at step {best.get("step")}.
- Text is lower-cased and Treebank-tokenised; {names}.

## Evaluation

{evaluation_text}

## Limitations

- It learns the failure modes of one generator's stories from manipulated plots;
  other failures, and other generators' styles, may go unnoticed.
- Used as a reward for reinforcement learning it can be gamed.
- {_encoder_text(folder, "RoBERTa-base")}
- Stories longer than the model window are scored over overlapping windows whose
  scores are averaged.

## Citation

```bibtex
{GHAZARIAN_CITATION}
```
"""
    (folder / "README.md").write_text("\n".join(lines) + "\n" + body.lstrip("\n"))
