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

from storyeval_training.data.plots.generator.decoding import decode_story
from storyeval_training.data.plots.generator.model import (
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
from storyeval_training.export.provenance import environment

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
    min_new_tokens: int = 0,
    max_source_length: int = MAX_SOURCE_LENGTH["roc"],
    batch_size: int = 8,
    seed: int | None = None,
    progress_bar: bool = False,
) -> list[list[str]]:
    """``num_candidates`` sampled stories per plot, in input order.

    ``max_new_tokens`` defaults to the checkpoint's generation config (set at
    training: 200 for ROC, 1024 for WP), capped by the decoder's positions.
    ``batch_size`` counts plots: each call samples ``batch_size * num_candidates``.
    ``min_new_tokens`` keeps the end token away until a story has that many, for a generator
    that learned to stop sooner than the stories it should imitate.
    """
    if not plots:
        return []
    if seed is not None:
        torch.manual_seed(seed)
    if max_new_tokens is None:
        max_new_tokens = model.generation_config.max_new_tokens or MAX_NEW_TOKENS["roc"]
    max_new_tokens = clamp(max_new_tokens, decoder_length_limit(model), "max_new_tokens")
    if not 0 <= min_new_tokens <= max_new_tokens:
        raise ValueError(f"min_new_tokens must be in 0..max_new_tokens ({max_new_tokens}), got {min_new_tokens}")
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
            min_new_tokens=min_new_tokens,
            num_return_sequences=num_candidates,
            num_beams=1,  # plain sampling, even where a checkpoint's defaults ask for beams (BART's do)
        )
        texts = [decode_story(tokenizer, ids.tolist()) for ids in output]
        for position, i in enumerate(chunk):
            stories[i] = texts[position * num_candidates : (position + 1) * num_candidates]
        progress.update(len(chunk))
    progress.close()
    return stories


# plots per saved part: a stopped or killed run loses at most one part's work
DEFAULT_CHUNK_SIZE = 64
PARTS = "parts"
# what must match for --resume to continue a run's parts (the rest only changes speed or where it stops)
RUN_SETTINGS = ("plots_dir", "model_name_or_path", "num_candidates", "top_k", "temperature", "max_new_tokens", "min_new_tokens", "max_source_length",
                "splits", "max_examples", "keep_generator_train_stories", "seed", "chunk_size")


def parse_generate_args(argv=None):
    p = argparse.ArgumentParser(description="Sample candidate implausible stories from manipulated plots.")
    p.add_argument("--plots-dir", required=True, help="save_to_disk dataset (or DatasetDict) with id, story, manipulated_plot")
    p.add_argument("--model-name-or-path", required=True, help="a generator from storyeval-train-plot-generator (its best/ folder)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--num-candidates", type=int, default=6, help="stories sampled per manipulated plot")
    p.add_argument("--top-k", type=int, default=TOP_K)
    p.add_argument("--temperature", type=float, default=TEMPERATURE)
    p.add_argument("--max-new-tokens", type=int, default=None, help="default: the generator's own (200 ROC, 1024 WP)")
    p.add_argument("--min-new-tokens", type=int, default=0, help="no end token before this many (stories as long as the human ones)")
    p.add_argument("--max-source-length", type=int, default=None, help="default: the generator's training setting")
    p.add_argument("--batch-size", type=int, default=8, help="plots per generate call")
    p.add_argument("--splits", nargs="*", default=None, help="splits of a DatasetDict to process (default: all)")
    p.add_argument("--max-examples", type=int, default=None, help="per split")
    p.add_argument("--keep-generator-train-stories", action="store_true", help="also generate for stories the generator was trained on")
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE,
                   help="plots per part saved under OUTPUT_DIR/parts; each part has its own seed, so a resumed run writes what one "
                        "uninterrupted run would")
    p.add_argument("--time-budget-minutes", type=float, default=None,
                   help="stop after the part that passes this budget; the dataset then holds the parts done so far")
    p.add_argument("--resume", action="store_true", help="continue the parts of a stopped run in --output-dir (same settings)")
    args = p.parse_args(argv)
    if args.num_candidates < 1 or args.batch_size < 1 or args.chunk_size < 1 or (args.max_examples is not None and args.max_examples < 1):
        p.error("--num-candidates, --batch-size, --chunk-size and --max-examples must be positive")
    if args.min_new_tokens < 0 or (args.max_new_tokens is not None and args.min_new_tokens > args.max_new_tokens):
        p.error("--min-new-tokens must be in 0..--max-new-tokens")
    if args.time_budget_minutes is not None and args.time_budget_minutes <= 0:
        p.error("--time-budget-minutes must be positive")
    parts = Path(args.output_dir) / PARTS
    if parts.exists() and not args.resume:
        p.error(f"{args.output_dir} holds the parts of an earlier run: pass --resume to continue it, or choose another --output-dir")
    if Path(args.output_dir).exists() and not parts.exists() and any(Path(args.output_dir).iterdir()):
        p.error(f"--output-dir {args.output_dir} exists and is not a run of this command; choose another")
    return args


def generate_main(argv=None) -> None:
    generate_negatives(parse_generate_args(argv))


def _check_run_settings(parts: Path, settings: dict) -> None:
    """Write the run's settings, or check that a resumed run's match them."""
    settings_file = parts / "settings.json"
    if settings_file.is_file():
        saved = json.loads(settings_file.read_text())
        changed = sorted(name for name in settings if saved.get(name) != settings[name])
        if changed:
            raise ValueError(f"--resume: {', '.join(changed)} differ from the run in {parts.parent}; resume with the same settings")
    else:
        parts.mkdir(parents=True, exist_ok=True)
        settings_file.write_text(json.dumps(settings, indent=2) + "\n")


def _write_part(path: Path, part: dict) -> None:
    """Atomically: a run killed mid-write leaves no half part to resume from."""
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(part) + "\n")
    temporary.replace(path)


def generate_negatives(args) -> dict:
    """Write (id, story, candidates) rows part by part; returns the run summary also saved as JSON.

    The dataset in ``--output-dir`` holds every part done so far, so a run stopped by its
    time budget can already be filtered; ``complete`` in the summary says whether a split is whole.
    """
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    started_run = time.perf_counter()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer = build_generator(args.model_name_or_path)
    model.to(device)
    info_file = Path(args.model_name_or_path) / GENERATOR_INFO
    info = json.loads(info_file.read_text()) if info_file.is_file() else {}
    max_source_length = args.max_source_length or info.get("max_source_length") or MAX_SOURCE_LENGTH["roc"]
    max_source_length = clamp(max_source_length, encoder_length_limit(model), "max_source_length")
    skip_ids = set() if args.keep_generator_train_stories else set(info.get("train_ids", []))
    output_dir = Path(args.output_dir)
    parts = output_dir / PARTS
    _check_run_settings(parts, {name: getattr(args, name) for name in RUN_SETTINGS})

    loaded = datasets.load_from_disk(args.plots_dir)
    single = isinstance(loaded, datasets.Dataset)
    splits = {"train": loaded} if single else {name: loaded[name] for name in (args.splits or loaded)}
    outputs, summary = {}, {"args": vars(args), "splits": {}, "environment": environment()}
    out_of_time = False
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
        chunks = range(0, len(rows), args.chunk_size)
        done_rows, seconds, generated_this_sitting = [], 0.0, 0
        for index, begin in enumerate(chunks):
            part_file = parts / f"{name}-{index:05d}.json"
            if not part_file.is_file():
                if out_of_time:
                    break
                chunk = rows.select(range(begin, min(begin + args.chunk_size, len(rows))))
                started = time.perf_counter()
                candidates = generate_stories(
                    model, tokenizer, list(chunk["manipulated_plot"]), num_candidates=args.num_candidates, top_k=args.top_k,
                    temperature=args.temperature, max_new_tokens=args.max_new_tokens, min_new_tokens=args.min_new_tokens,
                    max_source_length=max_source_length,
                    batch_size=args.batch_size, seed=args.seed + 100_000 * offset + index,
                )
                _write_part(part_file, {"id": list(chunk["id"]), "story": list(chunk["story"]), "candidates": candidates,
                                        "seconds": time.perf_counter() - started, "device": device})
                generated_this_sitting += len(candidates) * args.num_candidates
                logger.info("%s: part %d of %d written", name, index + 1, len(chunks))
                out_of_time = args.time_budget_minutes is not None and time.perf_counter() - started_run > 60 * args.time_budget_minutes
            part = json.loads(part_file.read_text())
            done_rows.extend(zip(part["id"], part["story"], part["candidates"]))
            seconds += part["seconds"]
        columns = {"id": [r[0] for r in done_rows], "story": [r[1] for r in done_rows], "candidates": [r[2] for r in done_rows]}
        outputs[name] = datasets.Dataset.from_dict(columns, features=CANDIDATE_FEATURES)
        generated = len(done_rows) * args.num_candidates
        summary["splits"][name] = {
            "stories": len(done_rows),
            "stories_to_do": len(rows),
            "complete": len(done_rows) == len(rows),
            "skipped_without_manipulated_plot": len(ids) - len(with_plot),
            "skipped_generator_train_stories": sum(ids[i] in skip_ids for i in with_plot),
            "skipped_plots_longer_than_source_window": too_long,
            "generated": generated,
            "generated_this_sitting": generated_this_sitting,
            "seconds": round(seconds, 1),  # generation time of every part, over all sittings
            "stories_per_second": round(generated / seconds, 2) if seconds else None,
        }
        logger.info(
            "%s: %d of %d manipulated plots done (%d stories, %.2f stories/s on %s); skipped %d without a manipulated plot, "
            "%d the generator trained on, %d longer than %d source tokens",
            name, len(done_rows), len(rows), generated, generated / max(seconds, 1e-9), device,
            summary["splits"][name]["skipped_without_manipulated_plot"], summary["splits"][name]["skipped_generator_train_stories"],
            too_long, max_source_length,
        )
    result = outputs["train"] if single else datasets.DatasetDict(outputs)
    result.save_to_disk(str(output_dir))
    (output_dir / "generation_results.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
