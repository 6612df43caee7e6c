"""Every rank of an accelerate or torchrun eval loop scores its own stories, on its own device.

``evaluate``'s distributed pattern gathers every rank's inputs on rank 0, which then scores them all while the
other ranks wait. :func:`score_by_rank` scores each rank's stories where they are and gathers only the scores,
with accelerate's ``gather_for_metrics``, so every rank gets all of them in input order:

    from accelerate import Accelerator
    from storyeval import download_model, load_from_checkpoint, score_by_rank

    accelerator = Accelerator(cpu=not torch.cuda.is_available())   # cpu=True: see check_launched_processes
    scorer = load_from_checkpoint(download_model("union/roc"), device=accelerator.device)
    loader = accelerator.prepare(torch.utils.data.DataLoader(prompts, batch_size=8))
    scores = []
    for batch in loader:
        stories = generate(batch)                                 # this rank's stories
        scores += score_by_rank(scorer, stories, accelerator)     # this step's scores of every rank, in input order

A prepared DataLoader hands the ranks consecutive batches and repeats a few samples so that the last step is even;
``gather_for_metrics`` puts the ranks' batches back in order and drops the repeats, so ``scores`` ends with one
score per prompt, in the prompts' order. A list that every rank holds whole is split with accelerate as well:

    with accelerator.split_between_processes(stories) as mine:    # rank 0 the first part, rank 1 the next, ...
        scores = score_by_rank(scorer, mine, accelerator)         # all the scores, in the list's order

(``apply_padding`` left False: its repeated stories would come back with the others). The scorer is any that
:func:`storyeval.load_from_checkpoint` returns, or the ``story_quality`` suite; the result has the shape of its
``score``: a list of floats, continuation quality's criteria, the suite's keys.
"""
from __future__ import annotations

import logging
import math

from storyeval.analysis.rows import STORY, SUITE, column_keys, score_rows, scorer_kind
from storyeval.inputs import check_on_invalid

logger = logging.getLogger(__name__)

# where launchers (torchrun, accelerate launch, MPI) put the number of processes they started: accelerate's own list
LAUNCHED_PROCESSES_ENV = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


def check_launched_processes(accelerator) -> None:
    """Refuse an accelerator that runs one process where the launcher started several: each process would then
    be rank 0 of 1 and score every story. ``Accelerator()`` does that on a machine without CUDA unless it is
    told ``cpu=True`` (accelerate 1.x makes a CPU job distributed only then)."""
    from accelerate.utils import get_int_from_env

    launched = get_int_from_env(LAUNCHED_PROCESSES_ENV, 1)
    if launched > 1 and accelerator.num_processes == 1:
        raise ValueError(f"the launcher started {launched} processes but the accelerator runs 1, so each process would "
                         "score every story: create it with Accelerator(cpu=True) on a machine without CUDA")


def score_by_rank(scorer, stories, accelerator, *, contexts=None, batch_size: int | None = None, dtype=None,
                  on_invalid: str = "raise", combination: str | None = None):
    """Score this rank's ``stories`` (and ``contexts``, for continuation quality and the suite) on
    ``accelerator.device`` and return the scores of every rank's stories, in input order, on every rank.

    ``on_invalid``: what a story that cannot be scored (no letters, not English, or past the window limit) does: ``"raise"`` raises on
    every rank, naming its row among the gathered stories; ``"nan"`` gives it NaN and logs a warning (on the main process) naming its rows.
    Every rank raises together when any rank cannot score its stories: a rank that raised alone would leave the
    others waiting in the gather. An accelerator that runs one process under a launcher that started several
    (``Accelerator()`` on CPUs, without ``cpu=True``) is refused: each process would score every story."""
    from accelerate.utils import gather_object

    check_launched_processes(accelerator)  # the same on every process, and before any gather: none is left waiting
    check_on_invalid(on_invalid)  # the same on every rank: it cannot leave one rank in the gather alone
    keys, rows, failure, error = [], [], None, None
    try:
        keys = column_keys(scorer, contexts is not None)
        columns, problems = score_rows(scorer, stories, contexts, batch_size=batch_size, device=accelerator.device,
                                       dtype=dtype, combination=combination)
        rows = [tuple(columns[key][i] for key in keys) + (problem,) for i, problem in enumerate(problems)]
    except Exception as raised:  # broad on purpose: any error here must reach the other ranks, or they hang
        failure, error = f"rank {accelerator.process_index}: {type(raised).__name__}: {raised}", raised
    failures = [message for message in gather_object([failure]) if message]
    if failures:
        if error is not None:
            raise error
        raise RuntimeError("another rank could not score its stories: " + "; ".join(failures))
    rows = accelerator.gather_for_metrics(rows, use_gather_object=True)
    problems = [row[-1] for row in rows]
    if bad := [i for i, problem in enumerate(problems) if problem]:
        if on_invalid == "raise":
            raise ValueError(f"{problems[bad[0]]} (row {bad[0]} of the {len(rows)} gathered; on_invalid='nan' scores the rest)")
        if accelerator.is_main_process:
            logger.warning("%d input(s) cannot be scored (empty, no letters, not English, or past the window limit) and score NaN: "
                           "rows %s of the %d gathered", len(bad), bad, len(rows))
    columns = {key: [row[k] for row in rows] for k, key in enumerate(keys)}
    kind = scorer_kind(scorer)
    if kind == STORY:
        return columns[""]
    if kind != SUITE:
        return columns
    kept = [value for value in columns["combined"] if not math.isnan(value)]
    with_contexts = contexts is not None
    return {**columns, "mean_combined": sum(kept) / len(kept) if kept else math.nan,
            **scorer.provenance(with_contexts, scorer.combination(combination))}
