"""Transfer stories for distillation, and a teacher's scores of them, cached once with their provenance.

    python -m storyeval_training.data.transfer build --output-dir runs/transfer
    python -m storyeval_training.data.transfer score --transfer-dir runs/transfer \\
        --teacher hub_cards/union-roc-base --output runs/transfer/union-roc-base.jsonl --time-budget-minutes 60

A student (:mod:`storyeval_training.recipes.distill`) learns a teacher's logit, so it needs no human label, only
story-like text the teacher has scored. ``build`` writes ``stories.jsonl`` (``id``, ``story``, ``source``, ``label``, ``split``; the label is the
story's own, 1 human and 0 perturbed or generated, null for a machine-written WP window, whose origin is no
label of quality):

* ``heldout`` first: ROCStories validation stories and their UNION negatives, on which a student's agreement
  with its teacher is measured (selection, never training);
* then ``train``, shuffled with ``--seed`` so that every prefix is a sample of the whole: ROCStories training
  stories, their UNION negatives (one per ``--negative-seeds``), the AF_ManPlts stories of the plot paper's
  generator (the training side of the split that ``storyeval-train-plot-coherence --pairs-only`` makes; its
  validation pairs are the model-written selection pairs), and ROC-length windows (five sentences) of
  wp_extra's human and machine stories (training split).

``build --pairs NAME=FOLDER`` (repeatable) takes its stories from saved pair folders instead, such as the WP kinds of
:mod:`storyeval_training.data.wp_kinds` for a WritingPrompts student: their validation stories are ``heldout``, their
training stories ``train`` (label null), and no training story may open like one of their test stories.

No story may share a leakage key (the normalised first sentence) with a human-judged item: the human/ sets,
Story Cloze and DeltaScore's contexts. ``build`` drops them and counts them; ``score`` refuses a file holding
one, with the count. Training stories that share a key with a held-out story or a selection pair are dropped too.

``score`` appends ``{"id", "logit"}`` lines (``null`` for a story longer than the teacher's one scoring window,
which distillation leaves out and counts) after a header naming the teacher (its settings string, the hash of
its weights and the commit it was trained at) and the transfer file's hash. A mix teacher (``union``
``wp-base-ending-neighbours``) gives the logit of its mixed score, and its hash covers every part's weights and config.
Teacher inference is the expensive part, so it runs in chunks: a rerun skips the ids already scored, and a cache written by another teacher,
checkpoint, commit or transfer file is refused with the line saying which. ``--max-stories N`` stops at the file's first
N stories, all a student needs when it learns on the first N minus the held-out ones. The cache is this command's
output, not a file of the repository: a shipped student's is rebuilt by it (docs/TRAINING.md), and
``benchmarks.checkpoints.teacher_scores_rebuild`` measures how close a rebuild comes to the scores the student learned.
"""
from __future__ import annotations

import argparse
import csv
import functools
import hashlib
import json
import logging
import math
import random
import time
from pathlib import Path

import torch

from storyeval import text as textlib
from storyeval.scoring import windows as windowing
from storyeval.scoring.ending import EndingMixScorer
from storyeval_training import paths
from storyeval_training.data.named_sets import checked_pair_folders, pair_folder
from storyeval_training.data.output_folder import refuse_existing, written_whole

logger = logging.getLogger("storyeval_training.data.transfer")

STORIES_FILE, RECORD_FILE = "stories.jsonl", "transfer.json"
SOURCES = ("roc", "roc-negatives", "af-manplts", "wp-windows")
WINDOW_SENTENCES = 5  # a ROCStories story's length


@functools.lru_cache(maxsize=2)
def human_judged_and_test_keys(data_root: Path) -> frozenset[str]:
    """Leakage keys of every human-judged item (the builders' rule) and of the continuation test sets."""
    from storyeval_training.data.builders.common import human_judged_keys

    keys = set(human_judged_keys(str(data_root / "human")))
    continuation = data_root / "continuation"
    cloze = continuation / "story_cloze_test_spring2016.tsv"
    if cloze.is_file():
        with cloze.open(encoding="utf-8") as handle:
            keys |= {textlib.leakage_key(row["InputSentence1"]) for row in csv.DictReader(handle, delimiter="\t")}
    for path in sorted(continuation.glob("deltascore_*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                keys |= {textlib.leakage_key(row[field]) for field in ("title", "story", "reference") if row.get(field)}
    keys.discard("")
    return frozenset(keys)


def _story_id(source: str, text: str) -> str:
    return f"{source}-{hashlib.blake2b(text.encode(), digest_size=8).hexdigest()}"


def roc_rows(negative_seeds, cache_dir) -> tuple[list[dict], list[dict]]:
    """(held-out rows, training rows) of ROCStories stories and their UNION negatives."""
    from storyeval_training.data import build_negatives

    heldout, train = [], []
    for index, seed in enumerate(negative_seeds):
        pairs = build_negatives.build("roc", ("train", "validation"), seed=seed, cache_dir=cache_dir)
        for split, out in (("validation", heldout), ("train", train)):
            if index == 0:  # the human stories once
                out += [{"story": story, "source": "roc", "label": 1} for story in pairs[split]["human"]]
            if split == "train" or index == 0:  # held-out negatives of the first seed only
                out += [{"story": story, "source": "roc-negatives", "label": 0} for story in pairs[split]["negative"]]
    return heldout, train


def af_manplts_rows(data_root: Path, seed: int) -> tuple[list[dict], list[str]]:
    """The training side's stories (human and generated), and the selection pairs' human stories."""
    from storyeval_training.data.builders.roc import read_af_tsv
    from storyeval_training.data.plot_pairs import PAPER_AF_FILES, build_pairs

    groups = [group for name in PAPER_AF_FILES for group in read_af_tsv(data_root / "roc" / name)]
    pairs, _ = build_pairs(groups, data_root / "human", seed=seed)
    train = pairs["train"]
    rows = [{"story": story, "source": "af-manplts", "label": 1} for story in dict.fromkeys(train["human"])]
    rows += [{"story": story, "source": "af-manplts", "label": 0} for story in dict.fromkeys(train["negative"])]
    return rows, list(pairs["validation"]["human"])


def wp_window_rows(max_windows_per_story: int, cache_dir) -> list[dict]:
    """Five-sentence windows of wp_extra's human and machine training stories."""
    from storyeval_training.data.builders import WritingPrompts, WritingPromptsMachine, load_split

    rows = []
    # a machine window's label is unknown: human against machine is origin, not quality
    for split, label in ((load_split(WritingPrompts, "train", cache_dir=cache_dir, config_name="extra"), 1),
                         (load_split(WritingPromptsMachine, "train", cache_dir=cache_dir), None)):
        for sentences in split["sentences"]:
            for start in range(0, min(len(sentences), WINDOW_SENTENCES * max_windows_per_story), WINDOW_SENTENCES):
                window = sentences[start:start + WINDOW_SENTENCES]
                if len(window) == WINDOW_SENTENCES:
                    rows.append({"story": " ".join(window), "source": "wp-windows", "label": label})
    return rows


def pair_rows(pair_sets: list[tuple[str, Path]]) -> tuple[list[dict], list[dict], list[str]]:
    """(held-out rows, training rows, reserved stories) from saved pair folders, such as the WP kinds of
    :mod:`storyeval_training.data.wp_kinds`: their validation stories are held out, their training stories
    transfer, and their test stories are reserved (no training story may open like one). A story's label is
    null: which side of a pair a story is on says which story is better, not whether people wrote it."""
    import datasets

    heldout, train, reserved = {}, {}, []
    for name, folder in pair_sets:
        pairs = datasets.load_from_disk(str(folder))
        for split, data in pairs.items():
            if missing := {"human", "negative"} - set(data.column_names):
                raise ValueError(f"--pairs {name}={folder}: its {split} split has no {sorted(missing)} column "
                                 f"(it has {data.column_names}); pair folders hold a better `human` and a worse `negative` story")
        for split, out in (("validation", heldout), ("train", train)):
            if split in pairs:
                for story in (*pairs[split]["human"], *pairs[split]["negative"]):
                    out.setdefault(story, {"story": story, "source": f"pairs-{name}", "label": None})
        if "test" in pairs:
            reserved += [*pairs["test"]["human"], *pairs["test"]["negative"]]
    return list(heldout.values()), list(train.values()), reserved


def build(output_dir: Path, seed: int, negative_seeds, heldout_stories: int, wp_windows_per_story: int, cache_dir=None,
          pair_sets: list[tuple[str, Path]] | None = None) -> dict:
    """Write ``stories.jsonl`` and ``transfer.json`` (counts, leakage) into ``output_dir``; returns the record.
    With ``pair_sets`` the stories are those pair folders' (:func:`pair_rows`) instead of the ROC sources."""
    data_root = paths.data_dir()
    judged = human_judged_and_test_keys(data_root)
    if pair_sets:
        heldout, train, selection_humans = pair_rows(pair_sets)
    else:
        heldout, train = roc_rows(negative_seeds, cache_dir)
        af_rows, selection_humans = af_manplts_rows(data_root, seed)
        train += af_rows + wp_window_rows(wp_windows_per_story, cache_dir)

    rng = random.Random(seed)
    rng.shuffle(heldout)
    heldout = heldout[:heldout_stories]
    counts = {"leakage_dropped": {}, "selection_dropped": {}, "duplicates_dropped": 0}
    kept_heldout = [row for row in heldout if textlib.leakage_key(row["story"]) not in judged]
    counts["leakage_dropped"]["heldout"] = len(heldout) - len(kept_heldout)
    # a training story must not open like a story a student is selected on
    reserved = {textlib.leakage_key(row["story"]) for row in kept_heldout} | {textlib.leakage_key(s) for s in selection_humans}
    seen, kept_train = {row["story"] for row in kept_heldout}, []
    for row in train:
        key = textlib.leakage_key(row["story"])
        if key in judged:
            counts["leakage_dropped"][row["source"]] = counts["leakage_dropped"].get(row["source"], 0) + 1
        elif key in reserved:
            counts["selection_dropped"][row["source"]] = counts["selection_dropped"].get(row["source"], 0) + 1
        elif row["story"] in seen:
            counts["duplicates_dropped"] += 1
        else:
            seen.add(row["story"])
            kept_train.append(row)
    rng.shuffle(kept_train)
    output_dir.mkdir(parents=True, exist_ok=True)  # the builder's hidden folder (output_folder.written_whole)
    with (output_dir / STORIES_FILE).open("w", encoding="utf-8") as handle:
        for split, rows in (("heldout", kept_heldout), ("train", kept_train)):
            for row in rows:
                handle.write(json.dumps({"id": _story_id(row["source"], row["story"]), "story": row["story"],
                                         "source": row["source"], "label": row["label"], "split": split}) + "\n")
    per_source = {}
    for split, rows in (("heldout", kept_heldout), ("train", kept_train)):
        for row in rows:
            per_source.setdefault(split, {}).setdefault(row["source"], 0)
            per_source[split][row["source"]] += 1
    reserved_key = "reserved_test_stories" if pair_sets else "selection_pairs_human_stories"
    return {"stories": {"heldout": len(kept_heldout), "train": len(kept_train)}, "per_source": per_source, **counts,
            reserved_key: len(set(selection_humans))}


def read_stories(transfer_dir: Path) -> list[dict]:
    path = transfer_dir / STORIES_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no {STORIES_FILE} in {transfer_dir}: build it with `transfer build`")
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{lineno}: not JSON ({error.msg})") from None
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) and row[k] for k in ("id", "story", "split")):
            raise ValueError(f"{path}:{lineno}: expected an object with non-empty 'id', 'story' and 'split' strings")
        rows.append(row)
    return rows


def check_leakage(rows: list[dict], data_root: Path, path: Path) -> None:
    """The leakage rule on a transfer file: refused, with the count, if any story opens like a human-judged item."""
    judged = human_judged_and_test_keys(data_root)
    leaked = sum(textlib.leakage_key(row["story"]) in judged for row in rows)
    if leaked:
        raise ValueError(f"{path}: {leaked} of {len(rows)} stories share a first sentence with a human-judged item "
                         "(the leakage rule); rebuild it with `transfer build`, which drops them")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def training_commit(checkpoint: Path) -> str | None:
    """The commit a checkpoint folder was trained at, as its ``training_results.json`` records it (None if it does not)."""
    results = checkpoint / "training_results.json"
    return json.loads(results.read_text()).get("environment", {}).get("commit") if results.is_file() else None


TEACHER_FIELDS = ("teacher", "settings", "weights_sha256", "teacher_commit")  # a cache's header less its stories' hash


def checkpoint_chain(checkpoint: Path) -> list[Path]:
    """The checkpoint folder and, for a mix (``union`` ``wp-base-ending``), the folders of the story checkpoints it
    completes (each config's ``ending_of``), outermost first."""
    from storyeval.checkpoints.resolution import resolve_named

    chain = [checkpoint]
    while of := json.loads((chain[-1] / "config.json").read_text()).get("ending_of"):
        chain.append(Path(resolve_named(of)))
    return chain


def teacher_weights_sha256(teacher: Path) -> str:
    """The hash of the teacher's ``model.safetensors``; for a mix, the hash of every part's weights and ``config.json``
    (where the mix's weight and share are: a new share with the same weights scores differently), in order."""
    chain = checkpoint_chain(teacher)
    if len(chain) == 1:
        return file_sha256(teacher / "model.safetensors")
    digests = [file_sha256(folder / name) for folder in chain for name in ("model.safetensors", "config.json")]
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


def teacher_fields(teacher: Path, scorer) -> dict:
    """The teacher's part of a cache's identity (``TEACHER_FIELDS``): its name, settings, weights and training commit."""
    return dict(zip(TEACHER_FIELDS, (scorer.name, scorer.settings(), teacher_weights_sha256(teacher), training_commit(teacher))))


def teacher_identity(teacher: Path, scorer, transfer_dir: Path) -> dict:
    """What a cache's scores depend on: the teacher's weights, settings and training commit, and the stories."""
    return {**teacher_fields(teacher, scorer), "transfer_sha256": file_sha256(transfer_dir / STORIES_FILE)}


def read_cache(path: Path, identity: dict, repair: bool = False) -> dict[str, float | None]:
    """Scores already in ``path`` (empty if it does not exist); refuses one of another teacher or transfer file.

    A last line without its newline (cut short by a kill, or still being written) is left out; with ``repair``
    (the scorer, before it appends) it is cut from the file too.
    """
    if not path.exists():
        return {}
    raw = path.read_bytes()
    complete = raw[: raw.rfind(b"\n") + 1]
    if repair and len(complete) != len(raw):
        logger.warning("%s: dropping a last line cut short (%d bytes)", path, len(raw) - len(complete))
        path.write_bytes(complete)
    lines = complete.decode("utf-8").splitlines()
    if not lines:
        return {}
    try:
        header = json.loads(lines[0])
        scores = {row["id"]: None if row["logit"] is None else float(row["logit"]) for row in map(json.loads, lines[1:])}
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{path}: not a teacher-score cache ({error})") from None
    for field, value in identity.items():
        if header.get(field) != value:
            raise ValueError(f"{path}: written with {field} {header.get(field)!r}, this run has {value!r}; "
                             "give another --output, or delete the file to score again")
    return scores


MIX_PROBABILITY_BOUND = 1e-7


def single_window_logits(scorer, stories: list[str], batch_size: int) -> list[float | None]:
    """The teacher's logit of each story that fits one scoring window, None for one that does not (a mix teacher's:
    the logit of its mixed score).

    A student of the same window learns one logit per window; a story the teacher scores over several windows has no
    such logit (its score is the windows' aggregate), so it is left out of distillation, and counted, not cut to fit.
    """
    story_windows = [scorer.windows(story) for story in stories]
    single = [k for k, windows in enumerate(story_windows) if len(windows) == 1]
    logits: list[float | None] = [None] * len(stories)
    if isinstance(scorer, EndingMixScorer):  # a mix's score is a mixed probability, not one model's logit
        # the windows cut above, passed on: the mix cuts a story once (as the plain path below, no input checks)
        cut = [(i, story_windows[k][0]) for i, k in enumerate(single)]
        for k, probability in zip(single, scorer.score_checked([stories[k] for k in single], batch_size, story_windows=cut)):
            # a float32 probability rounds to 1 from a logit of about 17 on: held there, not made infinite
            probability = min(max(probability, MIX_PROBABILITY_BOUND), 1 - MIX_PROBABILITY_BOUND)
            logits[k] = math.log(probability) - math.log1p(-probability)
        return logits
    with torch.inference_mode():
        for chunk, ids, mask in windowing.padded_batches([(k, story_windows[k][0]) for k in single], batch_size,
                                                         scorer.tokenizer.pad_token_id or 0, False):
            out = scorer.model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).logits
            for k, value in zip(chunk, out.double().tolist()):
                logits[single[k]] = value
    return logits


def score(transfer_dir: Path, teacher: Path, output: Path, batch_size: int, chunk: int, time_budget_minutes: float | None,
          max_stories: int | None = None) -> dict:
    """Score the transfer stories not yet in ``output``, in file order, until done (the first ``max_stories`` of the
    file, where given) or out of time."""
    from storyeval.scoring.sequence import load_story_classifier

    started = time.perf_counter()
    rows = read_stories(transfer_dir)
    check_leakage(rows, paths.data_dir(), transfer_dir / STORIES_FILE)
    scorer = load_story_classifier(teacher)
    identity = teacher_identity(teacher, scorer, transfer_dir)
    done = read_cache(output, identity, repair=True)
    todo = [row for row in rows[:max_stories] if row["id"] not in done]
    logger.info("%d of %d stories scored already; %d to go", len(done), len(rows), len(todo))
    seconds, scored = 0.0, 0
    longer = sum(logit is None for logit in done.values())
    with output.open("a", encoding="utf-8") as handle:
        if not done and handle.tell() == 0:
            handle.write(json.dumps(identity) + "\n")
        for start in range(0, len(todo), chunk):
            if time_budget_minutes and time.perf_counter() - started > 60 * time_budget_minutes:
                break
            part = todo[start:start + chunk]
            tick = time.perf_counter()
            logits = single_window_logits(scorer, [row["story"] for row in part], batch_size)
            seconds += time.perf_counter() - tick
            handle.write("".join(json.dumps({"id": row["id"], "logit": logit}) + "\n" for row, logit in zip(part, logits)))
            handle.flush()
            scored += len(part)
            longer += sum(logit is None for logit in logits)
            logger.info("scored %d / %d (%.1f stories/s)", len(done) + scored, len(rows), scored / seconds)
    return {"scored_now": scored, "scored_total": len(done) + scored, "longer_than_one_window": longer, "stories": len(rows),
            "scoring_seconds": round(seconds, 1), "stories_per_second": round(scored / seconds, 2) if seconds else None, "threads": torch.get_num_threads(),
            "max_stories": max_stories, "complete": len(done) + scored == len(rows), **identity}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    b = commands.add_parser("build", help="write the transfer stories")
    b.add_argument("--output-dir", required=True, help="a new folder")
    b.add_argument("--seed", type=int, default=42, help="the shuffle, and the AF_ManPlts split (that of train_plot_coherence)")
    b.add_argument("--negative-seeds", type=int, nargs="+", default=[42, 43])
    b.add_argument("--heldout-stories", type=int, default=1000)
    b.add_argument("--wp-windows-per-story", type=int, default=2)
    b.add_argument("--cache-dir", default=None, help="`datasets` cache")
    b.add_argument("--pairs", action="append", default=[], type=pair_folder, metavar="NAME=FOLDER",
                   help="take the stories of these pair folders instead of the ROC sources (repeatable): validation held "
                        "out, train transferred, test reserved; e.g. the WP kinds, for a WP student")
    s = commands.add_parser("score", help="add a teacher's logits to a cache, resuming where it stopped")
    s.add_argument("--transfer-dir", required=True)
    s.add_argument("--teacher", required=True, help="a UNION-architecture checkpoint folder (a shipped -base one, or a mix such as wp-base-ending-neighbours)")
    s.add_argument("--output", required=True, help="the cache (JSON Lines); an existing one is continued")
    s.add_argument("--batch-size", type=int, default=32)
    s.add_argument("--chunk", type=int, default=512, help="stories scored between two writes")
    s.add_argument("--time-budget-minutes", type=float, default=None, help="stop after the chunk that passes it; rerun to go on")
    s.add_argument("--max-stories", type=int, default=None,
                   help="score the file's first N stories only (held-out ones first): what a student of N minus the held-out "
                        "training stories needs; a later run with a larger N, or none, goes on")
    args = parser.parse_args(argv)
    if args.command == "build":
        refuse_existing(parser, args.output_dir)
        if args.heldout_stories < 1 or args.wp_windows_per_story < 0:
            parser.error("--heldout-stories must be at least 1 and --wp-windows-per-story not negative")
        try:
            checked_pair_folders(args.pairs)
        except ValueError as error:
            parser.error(str(error))
    else:
        if not (Path(args.teacher) / "config.json").is_file():
            parser.error(f"--teacher {args.teacher}: no checkpoint there (config.json)")
        if not (Path(args.transfer_dir) / STORIES_FILE).is_file():
            parser.error(f"--transfer-dir {args.transfer_dir}: no {STORIES_FILE} (build it with `transfer build`)")
        if args.batch_size < 1 or args.chunk < 1 or any(value is not None and value <= 0 for value in (args.time_budget_minutes, args.max_stories)):
            parser.error("--batch-size, --chunk, --time-budget-minutes and --max-stories must be positive")
    return args


def main(argv=None) -> None:
    from storyeval_training.export.provenance import environment

    args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    run_environment = environment()
    if args.command == "build":
        started = time.perf_counter()
        with written_whole(args.output_dir) as output:
            record = build(output, args.seed, args.negative_seeds, args.heldout_stories, args.wp_windows_per_story,
                           args.cache_dir, pair_sets=args.pairs)
            record["args"] = {**vars(args), "pairs": [f"{name}={folder}" for name, folder in args.pairs]}
            record.update(seconds=round(time.perf_counter() - started, 1), environment=run_environment)
            (output / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n")
        print(json.dumps({k: record[k] for k in ("stories", "per_source", "leakage_dropped", "selection_dropped")}))
    else:
        output = Path(args.output)
        record = score(Path(args.transfer_dir), Path(args.teacher), output, args.batch_size, args.chunk, args.time_budget_minutes,
                       args.max_stories)
        runs_file = output.with_suffix(".runs.jsonl")  # one line per chunked invocation: its cost, for the record
        with runs_file.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({**record, "environment": run_environment}) + "\n")
        print(json.dumps(record))


if __name__ == "__main__":
    main()
