"""Sampling stories from plots, and the command that samples candidate implausible stories from manipulated plots."""
from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import datasets
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from storyeval_training.plots.generator.decoding import decode_story
from storyeval_training.plots.generator.model import (
    GENERATOR_INFO,
    MAX_NEW_TOKENS,
    MAX_SOURCE_LENGTH,
    TEMPERATURE,
    TOP_K,
    build_generator,
    clamp,
    decoder_length_limit,
    encoder_length_limit,
    has_phrases,
    plot_to_text,
    source_token_lengths,
)
from storyeval_training.provenance import environment

logger = logging.getLogger(__name__)

# what storyeval-generate-negatives writes: a human story and its sampled candidates
CANDIDATE_FEATURES = datasets.Features(
    {"id": datasets.Value("string"), "story": datasets.Value("string"), "candidates": datasets.List(datasets.Value("string"))}
)


@torch.inference_mode()
def generate_stories(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    plots: list[list[list[str]]],
    *,
    num_candidates: int = 1,
    top_k: int = TOP_K,
    temperature: float = TEMPERATURE,
    max_new_tokens: int | None = None,
    max_source_length: int = MAX_SOURCE_LENGTH["roc"],
    batch_size: int = 8,
    seed: int | None = None,
    progress_bar: bool = False,
) -> list[list[str]]:
    """``num_candidates`` sampled stories per plot, in input order.

    ``max_new_tokens`` defaults to the checkpoint's generation config (set at
    training: 200 for ROC, 1024 for WP), capped by the decoder's positions.
    ``batch_size`` counts plots: each call samples ``batch_size * num_candidates``.
    """
    if not plots:
        return []
    if seed is not None:
        torch.manual_seed(seed)
    if max_new_tokens is None:
        max_new_tokens = model.generation_config.max_new_tokens or MAX_NEW_TOKENS["roc"]
    max_new_tokens = clamp(max_new_tokens, decoder_length_limit(model), "max_new_tokens")
    max_source_length = clamp(max_source_length, encoder_length_limit(model), "max_source_length")
    sources = [plot_to_text(p) for p in plots]
    empty = [i for i, plot in enumerate(plots) if not has_phrases(plot)]
    if empty:
        raise ValueError(f"plots {empty[:5]} have no phrases: there is nothing to generate a story from")
    too_long = [(i, n) for i, n in enumerate(source_token_lengths(tokenizer, sources)) if n > max_source_length]
    if too_long:
        shown = ", ".join(f"plot {i} has {n}" for i, n in too_long[:5])
        raise ValueError(
            f"{len(too_long)} plot(s) exceed max_source_length={max_source_length} tokens ({shown}); "
            "plots are not truncated silently: raise max_source_length or shorten them"
        )
    model.eval()
    # similar lengths in a batch waste little on padding; the order is restored below
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]), reverse=True)
    stories: list[list[str]] = [[] for _ in sources]
    progress = tqdm(total=len(sources), disable=not progress_bar, desc="generating")
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        inputs = tokenizer(
            [sources[i] for i in chunk], max_length=max_source_length, truncation=True, padding=True, return_tensors="pt"
        ).to(model.device)
        inputs.pop("token_type_ids", None)
        output = model.generate(
            **inputs,
            do_sample=True,
            top_k=top_k,
            temperature=temperature,
            max_new_tokens=max_new_tokens,
            num_return_sequences=num_candidates,
            num_beams=1,  # plain sampling, even where a checkpoint's defaults ask for beams (BART's do)
        )
        texts = [decode_story(tokenizer, ids.tolist()) for ids in output]
        for position, i in enumerate(chunk):
            stories[i] = texts[position * num_candidates : (position + 1) * num_candidates]
        progress.update(len(chunk))
    progress.close()
    return stories


def parse_generate_args(argv=None):
    p = argparse.ArgumentParser(description="Sample candidate implausible stories from manipulated plots.")
    p.add_argument("--plots-dir", required=True, help="save_to_disk dataset (or DatasetDict) with id, story, manipulated_plot")
    p.add_argument("--model-name-or-path", required=True, help="a generator from storyeval-train-plot-generator (its best/ folder)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--num-candidates", type=int, default=6, help="stories sampled per manipulated plot")
    p.add_argument("--top-k", type=int, default=TOP_K)
    p.add_argument("--temperature", type=float, default=TEMPERATURE)
    p.add_argument("--max-new-tokens", type=int, default=None, help="default: the generator's own (200 ROC, 1024 WP)")
    p.add_argument("--max-source-length", type=int, default=None, help="default: the generator's training setting")
    p.add_argument("--batch-size", type=int, default=8, help="plots per generate call")
    p.add_argument("--splits", nargs="*", default=None, help="splits of a DatasetDict to process (default: all)")
    p.add_argument("--max-examples", type=int, default=None, help="per split")
    p.add_argument("--keep-generator-train-stories", action="store_true", help="also generate for stories the generator was trained on")
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args(argv)
    if args.num_candidates < 1 or args.batch_size < 1 or (args.max_examples is not None and args.max_examples < 1):
        p.error("--num-candidates, --batch-size and --max-examples must be positive")
    return args


def generate_main(argv=None) -> None:
    generate_negatives(parse_generate_args(argv))


def generate_negatives(args) -> dict:
    """Write (id, story, candidates) rows; returns the run summary also saved as JSON."""
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer = build_generator(args.model_name_or_path)
    model.to(device)
    info_file = Path(args.model_name_or_path) / GENERATOR_INFO
    info = json.loads(info_file.read_text()) if info_file.is_file() else {}
    max_source_length = args.max_source_length or info.get("max_source_length") or MAX_SOURCE_LENGTH["roc"]
    max_source_length = clamp(max_source_length, encoder_length_limit(model), "max_source_length")
    skip_ids = set() if args.keep_generator_train_stories else set(info.get("train_ids", []))

    loaded = datasets.load_from_disk(args.plots_dir)
    single = isinstance(loaded, datasets.Dataset)
    splits = {"train": loaded} if single else {name: loaded[name] for name in (args.splits or loaded)}
    outputs, summary = {}, {"args": vars(args), "splits": {}, "environment": environment()}
    for offset, (name, rows) in enumerate(splits.items()):
        manipulated_plots = list(rows["manipulated_plot"])
        with_plot = [i for i, plot in enumerate(manipulated_plots) if has_phrases(plot)]
        ids = list(rows["id"])
        usable = [i for i in with_plot if ids[i] not in skip_ids]
        # a plot longer than the source window is left out and counted, never cut short
        lengths = source_token_lengths(tokenizer, [plot_to_text(manipulated_plots[i]) for i in usable])
        too_long = sum(n > max_source_length for n in lengths)
        usable = [i for i, n in zip(usable, lengths) if n <= max_source_length]
        if args.max_examples:
            usable = usable[: args.max_examples]
        rows = rows.select(usable)
        started = time.perf_counter()
        candidates = generate_stories(
            model,
            tokenizer,
            list(rows["manipulated_plot"]),
            num_candidates=args.num_candidates,
            top_k=args.top_k,
            temperature=args.temperature,
            max_new_tokens=args.max_new_tokens,
            max_source_length=max_source_length,
            batch_size=args.batch_size,
            seed=args.seed + offset,
            progress_bar=True,
        )
        seconds = time.perf_counter() - started
        generated = len(candidates) * args.num_candidates
        outputs[name] = datasets.Dataset.from_dict({"id": list(rows["id"]), "story": list(rows["story"]), "candidates": candidates},
                                                   features=CANDIDATE_FEATURES)
        summary["splits"][name] = {
            "stories": len(rows),
            "skipped_without_manipulated_plot": len(ids) - len(with_plot),
            "skipped_generator_train_stories": sum(ids[i] in skip_ids for i in with_plot),
            "skipped_plots_longer_than_source_window": too_long,
            "generated": generated,
            "seconds": round(seconds, 1),
            "stories_per_second": round(generated / seconds, 2) if seconds else None,
        }
        logger.info(
            "%s: %d stories from %d manipulated plots in %.0f s (%.2f stories/s on %s); skipped %d without a manipulated plot, "
            "%d the generator trained on, %d longer than %d source tokens",
            name, generated, len(rows), seconds, generated / max(seconds, 1e-9), device,
            summary["splits"][name]["skipped_without_manipulated_plot"], summary["splits"][name]["skipped_generator_train_stories"],
            too_long, max_source_length,
        )
    output_dir = Path(args.output_dir)
    result = outputs["train"] if single else datasets.DatasetDict(outputs)
    result.save_to_disk(str(output_dir))
    (output_dir / "generation_results.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
