"""A storyeval metric as a reward function for reinforcement learning (TRL's ``GRPOTrainer`` and the like).

    import storyeval
    from trl import GRPOTrainer

    reward = storyeval.reward("union", "roc")                 # loads the checkpoint once
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=...)
    reward(prompts=["Ken went to the bar."], completions=[" He ordered a drink."])   # [0.97...]

``reward(prompts, completions, **kwargs) -> list[float]`` is TRL's reward-function signature:
the other keyword arguments TRL passes (``completion_ids``, ``trainer_state``, the dataset's
columns) are ignored, except ``log_metric``, through which the share of completions given the
floor (below) is logged as ``<name>/floored``. Prompts and completions come as strings (TRL's
standard format) or as lists of ``{"role", "content"}`` messages (its conversational format):
then the completion's text is its assistant content and the prompt's is its user content.

What is scored, per metric:

* ``union``, ``plot_coherence``: with ``text="prompt+completion"`` (the default) the prompt
  and the completion as one story, the prompt first, as these checkpoints were trained (a
  ROC story's first sentence, a WP prompt); with ``text="completion"`` the completion alone.
  The reward is the score, a probability in 0-1.
* ``continuation_quality``: the completion given the prompt as its context; ``criterion``
  picks the output: ``"overall"`` (the default), ``"relevance"`` or ``"interestingness"``,
  on the scale of its training ratings (about 1-5, not clipped).
* ``story_quality``: the suite's ``combined`` divided by 100, so 0-1: the mean share of
  human-written test stories that its metrics score lower. With ``text="prompt+completion"``
  the suite gets the prompts as ``contexts`` (its story metrics score prompt + completion
  and continuation quality joins); with ``text="completion"`` it scores completions alone.

A reward never stops a training run over one sample. A completion with no letters (empty,
whitespace, digits or punctuation alone; what a policy emits when it stops at once), one
that is clearly not English (the checkpoints are trained on English stories, and score
other languages as confidently as English; a policy that drifts into another language
must not be paid for it), or one the scorer refuses (say, longer than its window limit),
gets the floor reward instead of an error, and so does a pair whose prompt cannot be scored where the prompt is a context
(continuation quality; story_quality with ``text="prompt+completion"``): ``0.0`` for the probability-like rewards (union, plot coherence,
story_quality), the least any story can score, so nothing is ever rewarded for saying
nothing; for continuation quality ``1.0``, the bottom of its rating scale, or the lowest
score in the same call where a scored completion falls below it (its scores are not
clipped), so that an empty completion never outranks a written one in its group. Each
floored completion is counted in a warning (the first time) and in ``<name>/floored``.
Bad calls do raise: completions of a wrong type (TypeError naming it), prompts and
completions of different lengths (ValueError).

``guard=True`` multiplies the reward by penalties for what a policy drifts to when it
games these metrics (repetition, copying its prompt, length far from a human story's):
see :func:`guard_factors` and benchmarks/experiments/reward_gaming.md for the measured holes.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence

from storyeval.checkpoints import resolution
from storyeval.inputs import SENTENCE_SEPARATOR, text_problem

logger = logging.getLogger(__name__)

# the metrics a reward can be made of; the first three are checkpoints, story_quality is the suite
REWARD_METRICS = ("union", "plot_coherence", "continuation_quality", "story_quality")
TEXTS = ("prompt+completion", "completion")
CRITERIA = ("overall", "relevance", "interestingness")
# the floor of continuation quality: the bottom of the 1-5 scale of the ratings it was trained on
CONTINUATION_FLOOR = 1.0
PROBABILITY_FLOOR = 0.0


def suite_class():
    """The story_quality suite's class, imported here only (its module's place may change)."""
    from storyeval.analysis.suite import StoryQuality

    return StoryQuality


def scorable(text: str) -> bool:
    """Whether a scorer accepts ``text`` (the scorers' own rule, storyeval.inputs.text_problem), checked per sample."""
    return text_problem(text) is None


def join_story(prompt: str, completion: str) -> str:
    """The story a reader sees: the prompt, then the completion, one space between them unless
    one side already has whitespace at the joint (a standard-format completion often starts with one)."""
    if not prompt or not completion or prompt[-1].isspace() or completion[0].isspace():
        return prompt + completion
    return f"{prompt} {completion}"


def message_text(messages, role: str, what: str) -> str:
    """The content of the ``role`` messages of a conversational prompt or completion, joined by spaces."""
    parts = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or "content" not in message:
            raise TypeError(f"{what}[{index}] must be a {{'role', 'content'}} message dict, got {type(message).__name__}")
        if message.get("role") != role:
            continue
        content = message["content"]
        if isinstance(content, list):  # content parts, [{"type": "text", "text": ...}, ...]
            content = " ".join(part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text")
        if not isinstance(content, str):
            raise TypeError(f"{what}[{index}]['content'] must be a string or a list of text parts, got {type(content).__name__}")
        parts.append(content)
    return " ".join(part.strip() for part in parts if part.strip())


def texts_of(values, name: str, role: str) -> list[str]:
    """Strings from TRL's standard format (a list of strings) or conversational one (a list of message lists)."""
    if values is None:
        raise TypeError(f"{name} must be a list of strings or of message lists, got None")
    if isinstance(values, (str, bytes, dict)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a list (one item per sample) of strings or of message lists, got {type(values).__name__}")
    texts = []
    for index, value in enumerate(values):
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, (list, tuple)):
            texts.append(message_text(value, role, f"{name}[{index}]"))
        else:
            raise TypeError(f"{name}[{index}] must be a string (TRL's standard format) or a list of {{'role', 'content'}} "
                            f"messages (conversational), got {type(value).__name__}")
    return texts


class StoryReward:
    """A loaded metric called as a reward function; build it with :func:`reward`."""

    def __init__(self, metric: str, config: str | None = None, *, text: str | None = None, criterion: str | None = None,
                 batch_size: int = 16, device=None, dtype=None, guard: bool | str = False, name: str | None = None):
        if metric not in REWARD_METRICS:
            raise ValueError(f"unknown metric {metric!r}; choose one of {list(REWARD_METRICS)}")
        if text is not None and metric == "continuation_quality":
            raise ValueError("continuation_quality always scores the completion given the prompt as its context; leave text out")
        text = TEXTS[0] if text is None else text
        if text not in TEXTS:
            raise ValueError(f"text must be one of {list(TEXTS)}, got {text!r}")
        if metric == "continuation_quality":
            criterion = CRITERIA[0] if criterion is None else criterion
            if criterion not in CRITERIA:
                raise ValueError(f"criterion must be one of {list(CRITERIA)}, got {criterion!r}")
        elif criterion is not None:
            raise ValueError(f"criterion picks continuation_quality's output; {metric} has one score")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if not (isinstance(guard, bool) or guard in GUARD_BOUNDS):
            raise ValueError(f"guard must be True, False or a corpus, one of {sorted(GUARD_BOUNDS)}; got {guard!r}")
        if metric == "story_quality":
            from storyeval.analysis.suite import check_dtype

            check_dtype(dtype)
        self.metric, self.text, self.criterion = metric, text, criterion
        self.batch_size, self.device, self.dtype, self.guard = batch_size, device, dtype, guard is not False
        if metric == "story_quality":
            self.config = config or "default"
            self.scorer = suite_class()(self.config, device=device)  # an unknown config raises, listing the choices
            self.config = self.scorer.config
        else:
            # an unknown config raises here, listing the metric's configs
            from storyeval.scoring.sequence import load_scorer

            self.scorer = load_scorer(metric, resolution.resolve_named(f"{metric}/{config or 'default'}"), device=device)
            self.config = config or "default"
        self.guard_corpus = self._guard_corpus(guard)
        self.floor = CONTINUATION_FLOOR if metric == "continuation_quality" else PROBABILITY_FLOOR
        # whether each completion is scored given its prompt as a context (which then must have words)
        self.needs_context = metric == "continuation_quality" or (metric == "story_quality" and text == "prompt+completion")
        # TRL logs a reward under its function's name: the checkpoint's (union_roc, plot_coherence_roc_base), or the suite's
        checkpoint = f"story_quality_{self.config}" if metric == "story_quality" else self.scorer.name
        self.__name__ = name or "_".join([checkpoint.replace("-", "_"), *([criterion] if criterion and criterion != "overall" else []),
                                          *(["guarded"] if self.guard else [])])
        self._warned = False
        self.last_floored = 0  # completions given the floor in the last call

    def _guard_corpus(self, guard) -> str | None:
        """The corpus whose human continuations bound the guard: named, or the config's (union-roc: roc)."""
        if guard is False:
            return None
        if isinstance(guard, str):
            return guard
        name = f"story_quality-{self.config}" if self.metric == "story_quality" else self.scorer.name
        corpora = [corpus for corpus in GUARD_BOUNDS if f"-{corpus}" in name]
        if len(corpora) != 1:
            raise ValueError(f"{name} names no corpus the guard knows: pass guard='roc' or guard='wp' "
                             "(the corpus whose human-written stories the completions should resemble)")
        return corpora[0]

    def __repr__(self) -> str:
        return (f"StoryReward({self.metric!r}, {self.config!r}, text={self.text!r}, criterion={self.criterion!r}, "
                f"guard={self.guard}, name={self.__name__!r})")

    def __call__(self, prompts=None, completions=None, **kwargs) -> list[float]:
        completions = texts_of(completions, "completions", "assistant")
        needs_prompts = self.text == "prompt+completion" or self.metric == "continuation_quality"
        if prompts is None and needs_prompts:
            raise TypeError(f"{self.__name__} scores each completion with its prompt: pass prompts")
        prompts = texts_of(prompts, "prompts", "user") if prompts is not None else [""] * len(completions)
        if len(prompts) != len(completions):
            raise ValueError(f"prompts and completions must have the same length, got {len(prompts)} prompts and {len(completions)} completions")
        rewards = self.score(prompts, completions)
        log_metric = kwargs.get("log_metric")  # TRL's: averaged per logging step, beside the rewards
        if callable(log_metric) and completions:
            log_metric(f"{self.__name__}/floored", self.last_floored / len(completions))
        if self.guard:
            rewards = [value * factor for value, factor in zip(rewards, guard_factors(prompts, completions, self.guard_corpus))]
        return rewards

    def score(self, prompts: list[str], completions: list[str]) -> list[float]:
        """The plain metric's reward per pair, the floor where a completion cannot be scored."""
        # a letterless prompt alone does not sink a story (the story is then its completion), but continuation
        # quality needs a context, and so does story_quality when it passes the prompts as contexts: there the pair
        # gets the floor
        keep = [i for i, (p, c) in enumerate(zip(prompts, completions)) if scorable(c) and (not self.needs_context or scorable(p))]
        values: dict[int, float] = {}
        for start in range(0, len(keep), self.batch_size * 8):  # chunks, so that one refused sample costs one chunk's retry
            chunk = keep[start : start + self.batch_size * 8]
            try:
                values.update(zip(chunk, self._score([prompts[i] for i in chunk], [completions[i] for i in chunk])))
            except ValueError:  # a story the scorer refuses (too long for its window limit): score one by one
                for i in chunk:
                    try:
                        values[i] = self._score([prompts[i]], [completions[i]])[0]
                    except ValueError as error:
                        logger.debug("%s: sample %d refused: %s", self.__name__, i, error)
        floor = self.floor
        if self.metric == "continuation_quality" and values:
            floor = min(floor, min(values.values()))
        floored = self.last_floored = len(completions) - len(values)
        if floored and not self._warned:
            logger.warning("%s: %d of %d completions could not be scored (no letters, not English, or refused by the scorer) "
                           "and got the floor reward %s; this warning is shown once", self.__name__, floored, len(completions), floor)
            self._warned = True
        return [values.get(i, floor) for i in range(len(completions))]

    def _score(self, prompts: list[str], completions: list[str]) -> list[float]:
        options = {"batch_size": self.batch_size, "device": self.device}
        if self.metric == "story_quality":
            contexts = prompts if self.text == "prompt+completion" else None
            return [value / 100.0 for value in self.scorer.score(completions, contexts=contexts, **options)["combined"]]
        if self.metric == "continuation_quality":
            return self.scorer.score(prompts, completions, dtype=self.dtype, **options)[self.criterion]
        stories = [join_story(p, c) if self.text == "prompt+completion" else c for p, c in zip(prompts, completions)]
        return self.scorer.score(stories, dtype=self.dtype, **options)


def reward(metric: str, config: str | None = None, **options) -> StoryReward:
    """A reward function with TRL's signature, ``reward(prompts, completions, **kwargs) -> list[float]``.

    ``metric``: ``"union"``, ``"plot_coherence"``, ``"continuation_quality"`` or ``"story_quality"``;
    ``config``: one of the metric's configs (``None``: its default), a checkpoint folder or a Hub id.
    Options: ``text`` (``"prompt+completion"``, the default, or ``"completion"``; not for continuation
    quality), ``criterion`` (continuation quality's output: ``"overall"``, ``"relevance"``,
    ``"interestingness"``), ``batch_size`` (16), ``device`` (``None``: CUDA when present; pass the
    trainer's, ``trainer.accelerator.device``), ``dtype`` (``"float32"``, ``"bfloat16"``, ...;
    story_quality: float32 only), ``guard`` (False; see :func:`guard_factors`) and ``name`` (the name TRL logs the
    reward under; default ``<metric>_<config>``). The module's docstring says what is scored and the floor.
    """
    return StoryReward(metric, config, **options)


# function words, for the share of them in a text: a keyword list has almost none (a short fixed list; no tagger)
FUNCTION_WORDS = frozenset(
    "a an the and or but so then of to in on at for with from by as is was were be been being are am it its he she they his "
    "her their them him i you we my our your me us that this these those there what when which who whom would could should "
    "will can did do does had has have not n't 's 'd 'll 're 've 'm no if than too very just up out about into over after".split())
NGRAM = 4  # repetition and collapse are counted in word 4-grams
# per corpus, the guard's bounds, each a percentile of the human-written continuations of the builders' training split
# (python -m benchmarks.reward.reward_gaming --guard-thresholds prints them): words (1st and 99th percentile), the share of
# 4-grams repeated within the text (99th), the share of function words (1st) and the share of 4-grams also in another
# prompt's completion of the same call, in calls of 32 training continuations (99th)
GUARD_BOUNDS = {
    "roc": {"min_words": 19, "max_words": 53, "repeated": 0.049, "function_words": 0.304, "shared": 0.048},
    "wp": {"min_words": 29, "max_words": 200, "repeated": 0.076, "function_words": 0.356, "shared": 0.021},
}


def words_of(text: str) -> list[str]:
    """Lower-cased Treebank words with a letter or digit (punctuation does not count)."""
    from storyeval.text import tokenize

    return [token for token in tokenize(text.replace(SENTENCE_SEPARATOR, " ")) if any(c.isalnum() for c in token)]


def ngrams(words: list[str], n: int = NGRAM) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def guard_features(prompts: list[str], completions: list[str]) -> list[dict]:
    """Per completion: its words, the share of its 4-grams already said (in the prompt or earlier in it), its share
    of function words, and the share of its 4-grams that a completion of another prompt in the same call also has."""
    words = [words_of(c) for c in completions]
    grams = [ngrams(w) for w in words]
    by_prompt: dict[str, set] = {}
    for prompt, own in zip(prompts, grams):
        by_prompt.setdefault(prompt, set()).update(own)
    # per distinct prompt: the 4-grams of the other prompts' completions, and the prompt's own
    others_of = {prompt: set().union(*(g for other, g in by_prompt.items() if other != prompt)) for prompt in by_prompt}
    prompt_grams = {prompt: set(ngrams(words_of(prompt))) for prompt in by_prompt}
    features = []
    for prompt, own_words, own in zip(prompts, words, grams):
        seen, repeated = set(prompt_grams[prompt]), 0
        for gram in own:
            repeated += gram in seen
            seen.add(gram)
        others = others_of[prompt]
        features.append({
            "words": len(own_words),
            "repeated": repeated / len(own) if own else 0.0,
            "function_words": sum(w in FUNCTION_WORDS for w in own_words) / len(own_words) if own_words else 0.0,
            "shared": sum(gram in others for gram in own) / len(own) if own else 0.0,
        })
    return features


def _below(value: float, bound: float) -> float:
    """1 at or above ``bound``, falling linearly to 0 at 0."""
    return 1.0 if value >= bound else max(value, 0.0) / bound if bound > 0 else 0.0


def _above(value: float, bound: float) -> float:
    """1 at or below ``bound``, falling linearly to 0 at 1 (for shares)."""
    return 1.0 if value <= bound else max(0.0, (1.0 - value) / (1.0 - bound))


def guard_factors(prompts: list[str], completions: list[str], corpus: str) -> list[float]:
    """Per completion, the factor in [0, 1] the guarded reward multiplies the metric's reward by: the product of
    four terms, each 1 inside the range of nearly all human-written ``corpus`` continuations (:data:`GUARD_BOUNDS`):

    * length: ``words / min_words`` below the shortest 1%, ``max_words / words`` above the longest 1%;
    * repetition: falls from 1 to 0 as the share of 4-grams already said (in the prompt, or earlier) goes from
      the 99th human percentile to 1 (a repeated sentence, the prompt said again);
    * function words: ``share / bound`` below the 1st human percentile (a keyword list);
    * collapse: falls from 1 to 0 as the share of 4-grams that a completion of another prompt in the same call
      also has goes from the 99th human percentile to 1 (one output for every prompt: a template, a memorised
      story). It needs several prompts in a call, as a GRPO batch has; with one prompt it is 1.
    """
    bounds = GUARD_BOUNDS[corpus]
    factors = []
    for feature in guard_features(prompts, completions):
        length = _below(feature["words"], bounds["min_words"])
        if feature["words"] > bounds["max_words"]:
            length = bounds["max_words"] / feature["words"]
        factors.append(length * _above(feature["repeated"], bounds["repeated"])
                       * _below(feature["function_words"], bounds["function_words"]) * _above(feature["shared"], bounds["shared"]))
    return factors
