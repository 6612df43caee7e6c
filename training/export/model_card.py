"""Model and dataset cards for what we train and build, rendered from ``card_templates/``.

The card's metadata is data (``huggingface_hub.ModelCardData`` with ``EvalResult`` rows, or
``DatasetCardData``); its prose is a Jinja template filled from the training results. The
evaluation section is filled from ``evaluation.json`` in the same folder, which the correlation
benchmarks write (``update_evaluation``), or, for continuation quality, from the benchmark's
output: a card is never given figures that no command measured. Export (``train_union``) and
the benchmarks' ``--update-card`` both go through this module.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from huggingface_hub import DatasetCard, DatasetCardData, EvalResult, ModelCard, ModelCardData

from storyeval.models import citations
from storyeval_training.export.provenance import portable

TEMPLATES = Path(__file__).resolve().parent / "card_templates"
CORPORA = {"roc": "rocstories", "wp": "writingprompts"}
METRIC_DECIMALS = 4  # figures in the card's metadata, as in its tables


def _render(card_class, card_data, template: str, folder: Path, **facts) -> None:
    facts = {name: portable(value) for name, value in facts.items()}  # a card names no path of the machine that made it
    card = card_class.from_template(card_data, template_path=str(TEMPLATES / f"{template}.md"), **facts)
    card.text = card.text.rstrip("\n") + "\n"  # Jinja drops the template's final newline
    card.save(Path(folder) / "README.md")


def _recorded_backbone(folder: Path) -> str | None:
    """The backbone a top-layer checkpoint loads onto (its config's ``base_model``), else None."""
    config = Path(folder) / "config.json"
    return json.loads(config.read_text()).get("base_model") if config.is_file() else None


def _hub_id(name: str) -> str:
    """The offline backbones by their Hub ids; anything else as given."""
    from storyeval.checkpoints.backbones import BASE_BACKBONE, FAST_BACKBONE, HUB_ORGANISATION

    return f"{HUB_ORGANISATION}/{name}" if name in (FAST_BACKBONE, BASE_BACKBONE) else name


def _base_model(args: dict, folder: Path) -> str:
    """What the checkpoint was fine-tuned from: the run's --base-model-name, else the backbone a
    top-layer checkpoint records (a run may start from a local copy of it), else the start folder."""
    return _hub_id(args.get("base_model_name") or _recorded_backbone(folder) or args["model_name_or_path"])


def _tier(folder: Path) -> str:
    """The name suffix of the checkpoint's tier: ``-base`` on the base-size backbone, none on MiniLM."""
    from storyeval.checkpoints.backbones import BASE_BACKBONE

    backbone = _recorded_backbone(folder) or ""
    return "-base" if backbone.rstrip("/").rsplit("/", 1)[-1] == BASE_BACKBONE else ""


def _export_text(folder: Path) -> str:
    """What the exported weights hold, from the checkpoint's own config."""
    config = json.loads((Path(folder) / "config.json").read_text()) if (Path(folder) / "config.json").is_file() else {}
    if config.get("trained_top_layers"):
        return (f"Exported in fp16: only the top {config['trained_top_layers']} encoder layers and the head, the layers training "
                f"changed. It loads onto `{_hub_id(config['base_model'])}` in one call and refuses any other weights, by the "
                "SHA-256 of the untrained layers recorded in `config.json`.")
    if config.get("lora_rank"):
        return (f"Exported in fp16: only LoRA adapters of rank {config['lora_rank']} on the encoder's linear layers "
                f"({', '.join(config['lora_target_modules'])}) and the head. It loads onto `{_hub_id(config['base_model'])}` in one "
                "call, adapters merged into the weights, and refuses any other weights, by the SHA-256 of the backbone's weights "
                "recorded in `config.json`.")
    if config.get("has_reconstruction_head"):
        return "Exported in fp16 with its reconstruction head (scorers drop it when they load; training can resume from it)."
    return "Exported in fp16."


def _read_evaluation(folder: Path) -> dict | None:
    path = folder / "evaluation.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _encoder_text(folder: Path, paper_model: str) -> str:
    """The exported encoder's size, from its own config, against the paper's (12 layers of width 768)."""
    if not (folder / "config.json").is_file():  # a card written before (or without) its weights
        return f"See `config.json` for the encoder's size; the paper used {paper_model} (12 layers of width 768)."
    encoder = json.loads((folder / "config.json").read_text()).get("encoder", {})
    layers, width = encoder.get("num_hidden_layers"), encoder.get("hidden_size")
    relation = "the size of" if (layers, width) == (12, 768) else "smaller than" if (layers or 0) * (width or 0) < 12 * 768 else "larger than"
    return f"An encoder of {layers} layer{'' if layers == 1 else 's'} of width {width}, {relation} the paper's {paper_model} (12 of width 768)."


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


def _best(results: dict) -> dict:
    """The selected step's figures; a figure the run did not record reads as nan, as it always has."""
    return {"accuracy": math.nan, "pair_accuracy": math.nan, "step": None, **(results.get("best_validation") or {})}


def _correlation_results(task_name: str, dataset_name: str, dataset_type: str, coefficients: dict) -> list[EvalResult]:
    return [EvalResult(task_type="text-classification", task_name=task_name, dataset_name=dataset_name, dataset_type=dataset_type,
                       metric_type=name, metric_value=round(coefficients[name], METRIC_DECIMALS))
            for name in ("pearson", "spearman", "kendall")]


def _union_eval_results(correlations: dict) -> list[EvalResult]:
    """The card metadata's rows for correlations with the UNION paper's human sets, by set name."""
    return [result for set_name, coefficients in correlations.items()
            for result in _correlation_results("Story quality (correlation with human judgments)",
                                               f"UNION human judgments ({set_name})", f"union-human-{set_name}", coefficients)]


def _card_data(name: str, base_model: str | None, tags: list[str], datasets: list[str] | None, eval_results: list[EvalResult]) -> ModelCardData:
    return ModelCardData(
        license="apache-2.0", language="en",
        library_name="storyeval",  # a custom architecture: transformers' pipeline() cannot load it
        base_model=base_model, tags=tags, datasets=datasets,
        model_name=name if eval_results else None, eval_results=eval_results or None,
    )


# the reward-gaming results (benchmarks/reward/reward_gaming.py), which each card's Limitations line quotes (and BENCHMARKS.md's
# table, benchmarks/report.py): one file per run, the first measured every config shipped then, the later ones the configs
# that came after or changed (reward_gaming_wp_k2: union and story_quality wp-base once K2 shipped; reward_gaming_wp_distilled:
# union and story_quality wp once K2's student shipped as union-wp; reward_gaming_roc_distilled: union and story_quality roc
# once union-roc-base's student shipped as union-roc)
GAMING_RESULTS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
GAMING_RESULT_FILES = ("reward_gaming", "reward_gaming_base_suites", "reward_gaming_wp_base_suite", "reward_gaming_wp_k2",
                       "reward_gaming_wp_distilled", "reward_gaming_roc_distilled")
GAMING_LINK = "[reward_gaming.md](../../benchmarks/experiments/reward_gaming.md)"
GAMING_NAMES = {"prompt_repeated": "the prompt repeated", "sentence_repeated": "a sentence repeated",
                "copied_training_story": "a copied training story", "universal_story": "one story for every prompt",
                "one_sentence": "one sentence", "very_long": "a very long story", "generic_ending": "a generic ending",
                "keyword_list": "a keyword list", "shuffled_human": "a shuffled human story", "contradiction": "a contradiction",
                "sentences_doubled": "every sentence twice"}


def _gaming_key(name: str) -> str:
    """A checkpoint's name as the gaming results key it: union-roc-base -> union:roc-base, continuation-quality -> ..."""
    if name.startswith("continuation-quality"):
        return "continuation_quality:deltascore" + name.removeprefix("continuation-quality")
    metric = "plot_coherence" if name.startswith("plot-coherence-") else "union"
    return f"{metric}:{name.removeprefix('plot-coherence-').removeprefix('union-')}"


def gaming_results(folder: Path = GAMING_RESULTS_DIR) -> dict:
    """Every measured reward's gaming rows, merged from the runs' files that exist (a later run's row replaces an earlier one's)."""
    results = {}
    for name in GAMING_RESULT_FILES:
        path = Path(folder) / f"{name}.json"
        if path.is_file():
            results.update(json.loads(path.read_text(encoding="utf-8"))["results"])
    return results


def _gaming_winners(row: dict) -> str:
    found = [f"{GAMING_NAMES[s]} ({row[s]['mean_percentile']:.0f})" for s in GAMING_NAMES if row[s]["beats_median_human"]]
    return ", ".join(found) or "none"


def _gaming_text(name: str) -> str:
    """The card's line on the reward measured as gamed: which degenerate outputs beat the median human story, plain and guarded."""
    results = gaming_results()
    key = _gaming_key(name)
    if key not in results:
        return f"Used as a reward for reinforcement learning it can be gamed; see {GAMING_LINK}."
    corpora = [corpus for corpus in results[key] if corpus != "seconds"]
    parts = []
    for corpus in corpora:
        title = {"roc": "ROC", "wp": "WP"}[corpus]
        guarded = results.get(f"{key}:guarded", {}).get(corpus)
        parts.append(f"{title} ({results[key][corpus]['human']['n']} test prompts): {_gaming_winners(results[key][corpus])}"
                     + (f", with `guard=True` {_gaming_winners(guarded)}" if guarded else ""))
    return ("Used as a reward (`storyeval.reward`) it can be gamed. Degenerate outputs whose mean percentile among human "
            f"test stories is above 50, on {'; '.join(parts)} ({GAMING_LINK}).")


# the WP kinds' test results (benchmarks/agreement/wp_kinds.py), which the WP cards quote: the later file's row replaces
# the earlier one's (wp_kinds_shipped_k2: union-wp-base and story_quality wp-base since K2 shipped; wp_kinds_shipped_union_wp:
# union-wp since K2's student shipped)
KINDS_RESULT_FILES = ("wp_kinds_shipped", "wp_kinds_shipped_k2", "wp_kinds_shipped_union_wp")
# the WP score the README recommends for stories of several kinds (wp_kinds.md: the highest worst test kind)
SEVERAL_KINDS_CONFIG = "`union` `wp-base`"
KINDS_LINK = "[wp_kinds.md](../../benchmarks/experiments/wp_kinds.md)"
KIND_NAMES = {"origin": "a human story above a GPT-2-era model's continuation of its opening",
              "damage": "a story above a damaged copy of it", "strength": "a stronger model's story above a weaker one's"}
KIND_HOLDS = 0.7  # the cards recommend a checkpoint for a kind only at this pair accuracy or above


def _kinds_text(name: str, folder: Path = GAMING_RESULTS_DIR) -> str | None:
    """The card's line on the WP kinds: each kind's held-out pair accuracy, and the kinds to use it for (None: not measured)."""
    rows = {}
    for results_name in KINDS_RESULT_FILES:
        path = Path(folder) / f"{results_name}.json"
        if path.is_file():
            rows.update(json.loads(path.read_text(encoding="utf-8"))["checkpoints"])
    if name not in rows:
        return None
    per_kind = {kind: value["accuracy"] for kind, value in rows[name]["per_kind"].items()}
    measured = "; ".join(f"{KIND_NAMES[kind]} {accuracy:.3f}{' (inverted)' if accuracy < 0.5 else ''}" for kind, accuracy in per_kind.items())
    holds = [KIND_NAMES[kind] for kind, accuracy in per_kind.items() if accuracy >= KIND_HOLDS]
    if len(holds) == len(per_kind):
        use = "it holds on every kind"
    else:
        use = (f"use it only for {' and for '.join(holds)}" if holds else "it holds on none of them") + (
            f"; for stories of several kinds, {SEVERAL_KINDS_CONFIG}")
    return f"On held-out WritingPrompts test pairs of three kinds ({KINDS_LINK}), the better story scores higher in: {measured}. So {use}."


# what each named pair set of a transfer file holds (`transfer build --pairs NAME=FOLDER` names its stories' source pairs-NAME)
PAIR_SET_TEXT = {
    "plot": "the plot paper's AF_ManPlts pairs, training side of `train_plot_coherence --pairs-only`'s split: human "
            "ROCStories stories and the paper's BART stories from manipulated plots",
    "generated": "pairs of this project's own CPU generator, `storyeval-generate-negatives` over manipulated ROCStories plots: "
                 "human ROCStories stories and the generator's stories",
}


def _pair_sets(sources: dict) -> list[dict]:
    """The pair sets a student learned from, with their stories and what they hold, when every source is a pair set."""
    if not sources or not all(name.startswith("pairs-") for name in sources):
        return []
    return [{"stories": count, "text": PAIR_SET_TEXT.get(name.removeprefix("pairs-"), f"the pair set `{name.removeprefix('pairs-')}`")}
            for name, count in sources.items()]


def write_distilled_card(folder: Path, results: dict, metric: str) -> None:
    """Model card for a student distilled from a base-size teacher (``storyeval_training.recipes.distill``)."""
    folder = Path(folder)
    teacher = results["teacher"]
    prefix = metric.replace("_", "-")
    name = teacher["teacher"].removesuffix("-base")  # the student is its teacher's fast twin: union-wp-base teaches union-wp
    config = name.removeprefix(f"{prefix}-")
    if config not in CORPORA:
        raise ValueError(f"cannot tell the student's config from its teacher's name {teacher['teacher']!r}: "
                         f"the card names a student after a shipped -base teacher ({prefix}-roc-base, ...-wp-base)")
    evaluation = _read_evaluation(folder)
    correlations = (evaluation or {}).get("correlations", {})
    eval_results = (_correlation_results("Story plausibility (correlation with human judgments)", "Plot-guided AMT plausibility ratings (roc)",
                                         "plot-amt-roc", correlations) if "pearson" in correlations else
                    _union_eval_results(correlations))
    card_data = _card_data(name, _hub_id("all-MiniLM-L6-v2"), ["storyeval", prefix, "story-evaluation",
                                                                 "reference-free-metric", "distillation"], [CORPORA[config]], eval_results)
    _render(ModelCard, card_data, "distilled", folder, name=name, metric=metric, config=config, teacher=teacher, args=results["args"],
            results=results, best=results["best_validation"], machine=_machine_text(results), notes=results.get("notes", []),
            pair_sets=_pair_sets(results.get("transfer_sources") or {}),
            evaluation=evaluation, exported=_export_text(folder), encoder=_encoder_text(folder, "BERT-base" if metric == "union" else "RoBERTa-base"),
            gaming=_gaming_text(name), kinds_text=_kinds_text(name), citation=citations.BY_METRIC[metric])


def write_ranker_card(folder: Path, results: dict, metric: str) -> None:
    """Model card for a checkpoint trained on ordered pairs of several kinds (``storyeval_training.recipes.train_ranker``)."""
    folder = Path(folder)
    args = results["args"]
    name = f"{metric.replace('_', '-')}-wp{_tier(folder)}"  # the kinds are WritingPrompts pairs (storyeval_training.data.wp_kinds)
    evaluation = _read_evaluation(folder)
    base_model = _base_model(args, folder)
    eval_results = _union_eval_results((evaluation or {}).get("correlations", {}))
    kinds = [{"name": kind, "description": KIND_NAMES.get(kind, kind), **counts} for kind, counts in results["pairs_per_kind"].items()]
    card_data = _card_data(name, base_model, ["storyeval", metric.replace("_", "-"), "story-evaluation", "reference-free-metric"],
                           [CORPORA["wp"]], eval_results)
    _render(ModelCard, card_data, "ranker", folder, name=name, metric=metric, config=name.removeprefix(f"{metric.replace('_', '-')}-"),
            corpus="WritingPrompts", kinds=kinds, args=args, results=results, best=results["best_validation"], base_model=base_model,
            machine=_machine_text(results), notes=results.get("notes", []), evaluation=evaluation, exported=_export_text(folder),
            encoder=_encoder_text(folder, "BERT-base"), gaming=_gaming_text(name), kinds_text=_kinds_text(name), citation=citations.BY_METRIC[metric])


def write_union_card(folder: Path, results: dict) -> None:
    if results.get("teacher"):  # a distilled student
        return write_distilled_card(folder, results, "union")
    if results.get("pairs_per_kind"):  # trained on ordered pairs of several kinds
        return write_ranker_card(folder, results, "union")
    folder = Path(folder)
    args = results["args"]
    dataset = args.get("dataset")  # None: pairs from a folder that does not record its corpus
    name = f"union-{dataset}{_tier(folder)}" if dataset else "union"
    evaluation = _read_evaluation(folder)
    base_model = _base_model(args, folder)
    eval_results = _union_eval_results((evaluation or {}).get("correlations", {}))
    card_data = _card_data(name, base_model, ["storyeval", "union", "story-evaluation", "reference-free-metric"],
                           [CORPORA[dataset]] if dataset else None, eval_results)
    _render(ModelCard, card_data, "union", folder, name=name, dataset=dataset, args=args, results=results, best=_best(results),
            selection_dropped=results.get("train_pairs_dropped_for_selection"), base_model=base_model,
            machine=_machine_text(results), notes=results.get("notes", []), evaluation=evaluation, exported=_export_text(folder),
            encoder=_encoder_text(folder, "BERT-base"), gaming=_gaming_text(name), kinds=_kinds_text(name), citation=citations.UNION)


def write_continuation_card(folder: Path, results: dict, evaluation: dict | None = None) -> None:
    """Model card for a continuation-quality checkpoint; ``evaluation`` is the benchmark's output."""
    folder = Path(folder)
    eval_results = []
    if evaluation:
        eval_results += [EvalResult(task_type="text-classification", task_name="Continuation quality (Spearman with held-out ratings)",
                                    dataset_name="DeltaScore crowd ratings (held-out contexts)", dataset_type="deltascore",
                                    metric_type="spearmanr", metric_name=criterion, metric_value=round(v["rho"], METRIC_DECIMALS))
                         for criterion, v in evaluation["spearman"].items()]
        eval_results += [EvalResult(task_type="text-classification", task_name="Story Cloze (right ending scores higher)",
                                    dataset_name="Story Cloze Test Spring 2016", dataset_type="story_cloze",
                                    metric_type="accuracy", metric_name=criterion, metric_value=round(v, METRIC_DECIMALS))
                         for criterion, v in evaluation["story_cloze_accuracy"].items()]
    encoder = _continuation_encoder(folder)
    name = "continuation-quality" + (_tier(folder / "encoder") if encoder else "")
    card_data = _card_data(name, encoder["backbone"] if encoder else None,
                           ["storyeval", "story-evaluation", "continuation-quality", "reference-free-metric"],
                           ["rocstories", "writingprompts", "deltascore"], eval_results)
    _render(ModelCard, card_data, "continuation_quality", folder, name=name, args=results["args"], results=results, best=results["best_validation"],
            cloze_folds=results.get("cloze_cross_fitted_folds"), feature_version=results.get("feature_version", 1),
            machine=_machine_text(results), evaluation=evaluation, encoder=encoder, gaming=_gaming_text(name), citation=citations.CONTINUATION_QUALITY)


def _continuation_encoder(folder: Path) -> dict | None:
    """What the card says of a continuation checkpoint's learned encoder (its ``encoder/``), or None for a count-only one."""
    encoder = Path(folder) / "encoder"
    if not (encoder / "training_results.json").is_file():
        return None
    results = json.loads((encoder / "training_results.json").read_text())
    args = results["args"]
    kinds = {kind: count for kind, count in results.get("train_pairs_by_kind", {}).items() if count}
    return {"backbone": _base_model(args, encoder), "exported": _export_text(encoder), "selected_by": results.get("selected_by", "pair_accuracy"),
            "best": results["best_validation"], "kinds": kinds, "steps": results.get("completed_steps"),
            "minutes": results.get("training_minutes"), "machine": _machine_text(results)}


def write_plot_coherence_card(folder: Path, results: dict) -> None:
    """Model card for a plot-coherence checkpoint; figures come from ``evaluation.json`` (the benchmark's output)."""
    if results.get("teacher"):  # a distilled student
        return write_distilled_card(folder, results, "plot_coherence")
    folder = Path(folder)
    args = results["args"]
    dataset = args.get("dataset") or "roc"
    name = f"plot-coherence-{dataset}{_tier(folder)}"
    evaluation = _read_evaluation(folder)
    base_model = _base_model(args, folder)
    # what the checkpoint does when it scores: its config, else the run's record
    if (folder / "config.json").is_file():
        from storyeval.models import UnionConfig  # here: the other cards need no torch

        config = UnionConfig.from_pretrained(folder)
        delexicalize, window_aggregation = config.delexicalize, config.window_aggregation
    else:
        delexicalize, window_aggregation = args.get("delexicalize", False), "mean"
    negatives = args.get("negatives", "paper")
    # runs before it was recorded: the released stories keep names, our own data came from the builders' placeholders
    trained_delexicalized = args.get("delexicalize", negatives != "paper")
    eval_results = (_correlation_results("Story plausibility (correlation with human judgments)", "Plot-guided AMT plausibility ratings (roc)",
                                         "plot-amt-roc", evaluation["correlations"]) if evaluation else [])
    card_data = _card_data(name, base_model, ["storyeval", "plot-coherence", "story-evaluation", "reference-free-metric"],
                           [CORPORA[dataset]], eval_results)
    _render(ModelCard, card_data, "plot_coherence", folder, name=name, dataset=dataset, corpus={"roc": "ROC", "wp": "WritingPrompts"}[dataset],
            negatives=negatives, args=args, results=results, best=_best(results), base_model=base_model, machine=_machine_text(results),
            notes=results.get("notes", []), delexicalize=delexicalize, trained_delexicalized=trained_delexicalized, window_aggregation=window_aggregation,
            evaluation=evaluation, exported=_export_text(folder), encoder=_encoder_text(folder, "RoBERTa-base"), gaming=_gaming_text(name),
            kinds=_kinds_text(name), citation=citations.PLOT_COHERENCE)


# the story classifiers' cards, which read evaluation.json and the checkpoint's config when rendered
CHECKPOINT_CARD_WRITERS = {"union": write_union_card, "plot_coherence": write_plot_coherence_card}


def update_evaluation(folder: Path, metric: str, command: str, correlations: dict) -> None:
    """``--update-card``: write a benchmark's figures to ``evaluation.json`` and re-render the card,
    if the folder has its training record."""
    if metric not in CHECKPOINT_CARD_WRITERS:  # before anything is written
        raise KeyError(f"no card with evaluation.json for metric {metric!r}; choose from {', '.join(CHECKPOINT_CARD_WRITERS)}")
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no checkpoint folder at {folder}")
    (folder / "evaluation.json").write_text(json.dumps({"command": portable(command), "correlations": correlations}, indent=2) + "\n")
    rerender_card(folder, metric)


def rerender_card(folder: Path, metric: str) -> None:
    """Render ``metric``'s card in the checkpoint folder again from its files, if it has its training record."""
    results_path = Path(folder) / "training_results.json"
    if results_path.is_file():
        CHECKPOINT_CARD_WRITERS[metric](Path(folder), json.loads(results_path.read_text()))


def _size_category(total: int) -> str:
    return "n<1K" if total < 1_000 else "1K<n<10K" if total < 10_000 else "10K<n<100K" if total < 100_000 else "100K<n<1M"


def write_negatives_card(folder: Path, dataset: str, seed: int, stats: dict) -> None:
    """A dataset card for a folder of UNION (human, negative) pairs, with its technique counts."""
    source = {"roc": "ROCStories", "wp": "WritingPrompts"}[dataset]
    splits = {split: s for split, s in stats.items() if isinstance(s, dict) and "pairs" in s}  # the splits, not the run's environment
    card_data = DatasetCardData(
        pretty_name=f"UNION negative samples ({source})", license="other", language=["en"], task_categories=["text-classification"],
        tags=["storyeval", "union", "story-evaluation", "negative-sampling"],
        size_categories=[_size_category(sum(s["pairs"] for s in splits.values()))],
    )
    _render(DatasetCard, card_data, "negatives", folder, source=source, dataset=dataset, seed=seed, splits=splits, citation=citations.UNION)
