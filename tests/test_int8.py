"""dtype="int8": the OpenVINO runtime (and CTranslate2, opt-in) on tiny random checkpoints, its export cache, fallback and errors."""
import json
import sys
from pathlib import Path

import evaluate
import pytest
import torch

from storyeval.checkpoints.resolution import scoring_digest
from storyeval.cli import main as cli
from storyeval.models import UnionModel
from storyeval.scoring.int8 import runtime as int8_runtime
from storyeval.scoring.int8.runtime import Int8Model, Int8RuntimeMissingError, int8_model
from storyeval.scoring.int8.scorer import Int8Scorer, load_int8_scorer
from storyeval.scoring.sequence import SequenceScorer, load_union_scorer

for module in ("openvino", "nncf", "onnx"):
    pytest.importorskip(module, reason="the int8 runtime is optional: pip install openvino nncf onnx")
needs_int8_cpu = pytest.mark.skipif(not int8_runtime.cpu_has_int8_dot_product(), reason="this CPU has no int8 dot-product instructions")

METRIC_DIR = str(Path(__file__).resolve().parent.parent / "metrics" / "union")
STORY = "[MALE] was at the bar . he noticed a phone on the floor . he gave it to the bartender ."
LONG = " ".join(["he walked to the old house by the river and knocked on the door ."] * 4)  # several 16-token windows
STORIES = [STORY, "he left .", LONG, "she smiled at him ."]
# int8 weights and per-token int8 activations on a random one-layer model: its scores stay this close to float32
TOLERANCE = 0.01


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Exports go to this test's folder, never to ~/.cache."""
    monkeypatch.setenv("STORYEVAL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "int8"


def fresh_scorer(checkpoint) -> SequenceScorer:
    """A scorer of its own, not the loaders' shared one, so a test's int8 copy or fallback stays in it."""
    model = UnionModel.from_pretrained(checkpoint, dtype=torch.float32)
    shared = load_union_scorer(checkpoint, device="cpu")
    return SequenceScorer(model, shared.tokenizer, shared.max_length, shared.window_stride, "cpu")


def count_exports(monkeypatch) -> list[Path]:
    backend = int8_runtime.get_backend()
    calls = []
    original = type(backend).export

    def export(self, model, tokenizer, folder, **options):
        calls.append(folder)
        return original(self, model, tokenizer, folder, **options)

    monkeypatch.setattr(type(backend), "export", export)
    return calls


@needs_int8_cpu
def test_int8_scores_track_float32_in_order_with_windows(tiny_checkpoint):
    scorer = fresh_scorer(tiny_checkpoint)
    assert len(scorer.windows(LONG)) > 2
    full = scorer.score(STORIES)
    low = scorer.score(STORIES, dtype="int8", batch_size=3)
    assert isinstance(scorer.model_in(torch.int8), Int8Model)
    assert low == pytest.approx(full, abs=TOLERANCE) and low != full
    # input order restored: a reversed input gives the reversed scores, whatever the batches
    assert scorer.score(STORIES[::-1], dtype="int8", batch_size=2) == pytest.approx(low[::-1], abs=1e-6)
    # a long story's score is the mean of its windows' scores
    windows = scorer.windows(LONG)
    ids = torch.zeros((len(windows), max(map(len, windows))), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, window in enumerate(windows):
        ids[row, : len(window)], mask[row, : len(window)] = torch.tensor(window), 1
    per_window = torch.sigmoid(scorer.model_in(torch.int8)(input_ids=ids, attention_mask=mask).logits)
    assert low[2] == pytest.approx(per_window.mean().item(), abs=1e-5)
    # the float32 model is untouched, so switching back is exact
    assert scorer.score(STORIES) == full


@needs_int8_cpu
def test_padding_does_not_move_int8_logits(tiny_checkpoint):
    scorer = fresh_scorer(tiny_checkpoint)
    model = scorer.model_in(torch.int8)
    windows = [scorer.windows(s)[0] for s in ("he left .", STORY)]
    alone = [model(input_ids=torch.tensor([w]), attention_mask=torch.ones(1, len(w), dtype=torch.long)).logits.item() for w in windows]
    width = max(map(len, windows))
    ids = torch.zeros((2, width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, window in enumerate(windows):
        ids[row, : len(window)], mask[row, : len(window)] = torch.tensor(window), 1
    assert model(input_ids=ids, attention_mask=mask).logits.tolist() == pytest.approx(alone, abs=1e-4)


@needs_int8_cpu
def test_export_is_cached_and_redone_when_the_weights_change(tiny_checkpoint, private_cache, monkeypatch):
    exports = count_exports(monkeypatch)
    scorer = fresh_scorer(tiny_checkpoint)
    first = scorer.score(STORIES, dtype="int8")
    folders = list(private_cache.iterdir())
    assert len(exports) == 1 and len(folders) == 1 and (folders[0] / int8_runtime.MANIFEST).is_file()
    # another process (a new scorer) with the same weights reuses the export
    again = fresh_scorer(tiny_checkpoint)
    assert again.score(STORIES, dtype="int8") == first and len(exports) == 1
    # a changed checkpoint: a new export, and the stale one of that checkpoint is removed
    changed = fresh_scorer(tiny_checkpoint)
    with torch.no_grad():
        changed.model.classifier.bias += 1.0
    assert changed.score(STORIES, dtype="int8") != first and len(exports) == 2
    assert list(private_cache.iterdir()) == [changed.model_in(torch.int8).folder]


@needs_int8_cpu
def test_an_interrupted_export_leaves_nothing_that_is_read(tiny_checkpoint, private_cache, monkeypatch):
    def broken(self, model, tokenizer, folder, **options):
        (folder / "partial").write_text("x")
        raise RuntimeError("disk full")

    monkeypatch.setattr(type(int8_runtime.get_backend()), "export", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        fresh_scorer(tiny_checkpoint).score(STORIES, dtype="int8")
    assert list(private_cache.iterdir()) == []


def test_missing_runtime_is_one_line_with_the_install_command(tiny_checkpoint, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(int8_runtime, "cpu_has_int8_dot_product", lambda: True)
    monkeypatch.setitem(sys.modules, "nncf", None)  # found nowhere, as if not installed
    with pytest.raises(Int8RuntimeMissingError) as error:
        fresh_scorer(tiny_checkpoint).score(STORIES, dtype="int8")
    message = str(error.value)
    assert "\n" not in message and "(nncf is missing): python -m pip install openvino nncf onnx" in message
    txt = tmp_path / "s.txt"
    txt.write_text(f"{STORY}\n")
    code = cli.main(["score", str(txt), "--config", str(_copy_of(tiny_checkpoint, tmp_path)), "--dtype", "int8", "--quiet"])
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # (transformers' loading bar may come before it)
    assert code == 1 and "Traceback" not in err and last == f"storyeval: error: {message}"


def _copy_of(checkpoint: Path, tmp_path: Path) -> Path:
    """The checkpoint under another path, so the loaders' shared scorer (which may hold an int8 copy) is not reused."""
    import shutil

    return Path(shutil.copytree(checkpoint, tmp_path / "copy"))


def test_cpu_without_int8_instructions_falls_back_to_float32_with_a_warning(tiny_checkpoint, monkeypatch):
    monkeypatch.setattr(int8_runtime, "cpu_has_int8_dot_product", lambda: False)
    scorer = fresh_scorer(tiny_checkpoint)
    with pytest.warns(RuntimeWarning, match="falls back to float32"):
        low = scorer.score(STORIES, dtype="int8")
    assert low == scorer.score(STORIES)  # exactly the float32 scores, never int8 ones computed wrongly
    assert scorer.model_in(torch.int8) is scorer.model


def test_bad_int8_options(tiny_checkpoint):
    scorer = fresh_scorer(tiny_checkpoint)
    with pytest.raises(ValueError, match="runs on the CPU only"):
        int8_model(scorer.model, scorer.tokenizer, torch.device("meta"))
    for threads in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="num_threads must be a positive integer"):
            int8_model(scorer.model, scorer.tokenizer, torch.device("cpu"), num_threads=threads)
    with pytest.raises(ValueError, match="unknown int8 backend 'tensorrt'"):
        Int8Scorer(scorer.model, scorer.tokenizer, 16, 8, "cpu", backend="tensorrt")


@needs_int8_cpu
def test_int8_scorer_takes_its_thread_count_and_scores_int8_by_default(tiny_checkpoint):
    scorer = load_int8_scorer(tiny_checkpoint, num_threads=1)
    model = scorer.model_in(torch.int8)
    assert isinstance(model, Int8Model) and model.num_threads == 1 and model.backend == "openvino"
    assert scorer.score(STORIES) == scorer.score(STORIES, dtype="int8")
    assert scorer.score(STORIES, dtype="float32") == pytest.approx(scorer.score(STORIES), abs=TOLERANCE)


@needs_int8_cpu
def test_compute_and_cli_reach_int8(tiny_checkpoint, tmp_path, capsys):
    checkpoint = _copy_of(tiny_checkpoint, tmp_path)
    union = evaluate.load(METRIC_DIR, str(checkpoint))
    full = union.compute(predictions=STORIES)["scores"]
    low = union.compute(predictions=STORIES, dtype="int8")["scores"]
    assert low == pytest.approx(full, abs=TOLERANCE) and isinstance(union.scorer.model_in(torch.int8), Int8Model)
    txt = tmp_path / "s.txt"
    txt.write_text("\n".join(STORIES) + "\n")
    code = cli.main(["score", str(txt), "--config", str(checkpoint), "--dtype", "int8", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0 and [float(x) for x in out.split()] == pytest.approx(low, abs=1e-6)


@needs_int8_cpu
def test_persistent_scorer_scores_int8_across_calls(tiny_checkpoint, tmp_path):
    import storyeval

    scorer = storyeval.load_from_checkpoint(_copy_of(tiny_checkpoint, tmp_path))
    first = scorer.score(STORIES, dtype="int8")
    model = scorer.model_in(torch.int8)
    # the export and session are made once; later calls reuse them
    assert scorer.score(STORIES[:2], dtype="int8") == pytest.approx(first[:2], abs=1e-6) and scorer.model_in(torch.int8) is model
    assert first == pytest.approx(scorer.score(STORIES), abs=TOLERANCE)
    assert scorer.settings("int8").startswith("copy_int8_storyeval-")


def benchmark():
    from benchmarks import common
    from benchmarks.speed import int8_speed

    return common, int8_speed


@pytest.mark.parametrize(
    "args, message",
    [
        (["--repeats", "0"], "--repeats and --stories must be at least 1"),
        (["--num-threads", "-1"], "--num-threads at least 0"),
        (["--human-checkpoint", "hub_cards/union-roc"], "--human-checkpoint and --sets go with --human"),
        (["--sets", "union_wp"], "--human-checkpoint and --sets go with --human"),
        (["--drift-only", "--scheme", "weights_int8-float:nothing"], "unknown int8 scheme"),
        (["--human", "--human-checkpoint", "no/such/folder"], "no checkpoint there"),
        (["--human", "--drift-only"], "not allowed with argument"),
    ],
)
def test_int8_benchmark_refuses_bad_arguments_before_writing(args, message, tmp_path, monkeypatch, capsys):
    common, int8_speed = benchmark()
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    with pytest.raises(SystemExit):
        int8_speed.main(args + ["--output", "never_written"])
    assert message in capsys.readouterr().err and not (tmp_path / "results").exists()


@needs_int8_cpu
def test_int8_benchmark_drift_runs_every_backend(tiny_checkpoint, shared_data, tmp_path, monkeypatch):
    pytest.importorskip("ctranslate2", reason="the runtime that shipped first, measured against OpenVINO")
    pytest.importorskip("onnxruntime", reason="the benchmark's third backend")
    common, int8_speed = benchmark()
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    backends = ["ctranslate2", "ctranslate2-int16", "ctranslate2-float32", "onnxruntime"]
    int8_speed.main(["--checkpoint", str(tiny_checkpoint), "--stories", "5", "--drift-only", "--output", "drift", "--backends", *backends])
    drift = json.loads((tmp_path / "results" / "drift.json").read_text())["agreement_with_float32"]
    assert set(drift) == {"bfloat16", "int8_ctranslate2", "ctranslate2-int16", "ctranslate2-float32", "int8_onnxruntime"}
    assert drift["ctranslate2-float32"]["max_abs_difference"] < 1e-4  # the same runtime without int8: float32's scores
    assert all(row["max_abs_difference"] < 0.05 for row in drift.values())


@needs_int8_cpu
def test_int8_benchmark_drift_runs_the_shipped_backend(tiny_checkpoint, shared_data, tmp_path, monkeypatch):
    common, int8_speed = benchmark()
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    int8_speed.main(["--checkpoint", str(tiny_checkpoint), "--stories", "5", "--drift-only", "--output", "drift", "--backends", "openvino",
                     "openvino-float32"])
    drift = json.loads((tmp_path / "results" / "drift.json").read_text())["agreement_with_float32"]
    assert set(drift) == {"bfloat16", "int8_openvino", "openvino-float32"} and drift["int8_openvino"]["max_abs_difference"] < 0.05
    assert drift["openvino-float32"]["max_abs_difference"] < 1e-5  # the runtime without int8: float32's scores


@needs_int8_cpu
def test_an_unmeasured_mpnet_checkpoint_is_refused_int8_unless_asked_for_by_name(tmp_path):
    """The base tier's encoder: OpenVINO exports any encoder the exporter traces, but an MPNet checkpoint is offered
    int8 only as measured, one by one, so dtype="int8" refuses one that was not; CTranslate2 refuses all but BERT."""
    from transformers import AutoTokenizer, MPNetConfig

    from storyeval.checkpoints import resolution as checkpoints
    from storyeval.models import UnionConfig

    torch.manual_seed(0)
    encoder = MPNetConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, max_position_embeddings=66)
    folder = tmp_path / "mpnet"
    UnionModel(UnionConfig(encoder=encoder.to_dict(), has_reconstruction_head=False, max_length=16, window_stride=8)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(checkpoints.backbone_path()).save_pretrained(folder)
    # no int8 copy of it was measured: dtype="int8" refuses it, naming it, before any export
    scorer = fresh_scorer(folder)
    scorer.model.storyeval_checkpoint = (str(folder), None)  # as the loader records where a model came from
    with pytest.raises(ValueError, match="offered for mpnet checkpoints .* only where their own int8 copy was measured .* "
                                         "mpnet was not measured: score it in float32"):
        scorer.score(STORIES, dtype="int8")
    assert torch.int8 not in {dtype for _, dtype in scorer._models}
    # the int8 scorer, asked for by name as the benchmarks do, exports it with a warning
    with pytest.warns(RuntimeWarning, match="mpnet was not measured"):
        named = load_int8_scorer(folder, num_threads=1)
    assert isinstance(named.model_in(torch.int8), Int8Model)
    assert named.score(STORIES) == pytest.approx(scorer.score(STORIES), abs=TOLERANCE)
    pytest.importorskip("ctranslate2")
    with pytest.warns(RuntimeWarning), pytest.raises(ValueError, match="converts BERT encoders, not mpnet"):
        int8_model(scorer.model, scorer.tokenizer, torch.device("cpu"), backend="ctranslate2", require_drift_bound=False)


@needs_int8_cpu
def test_ctranslate2_stays_selectable(tiny_checkpoint):
    pytest.importorskip("ctranslate2")
    scorer = load_int8_scorer(tiny_checkpoint, backend="ctranslate2", num_threads=1)
    assert scorer.model_in(torch.int8).backend == "ctranslate2"
    assert scorer.score(STORIES) == pytest.approx(scorer.score(STORIES, dtype="float32"), abs=TOLERANCE)


def test_a_scheme_names_the_layers_it_keeps_in_float32_and_an_unknown_one_is_refused(tiny_checkpoint):
    assert int8_runtime.scheme_float_patterns("weights_int8") == []
    kept = int8_runtime.scheme_float_patterns("weights_int8-float:ffn_out+ffn_in3")
    assert kept == int8_runtime.LAYER_GROUPS["ffn_out"] + int8_runtime.LAYER_GROUPS["ffn_in3"]
    for bad in ("static", "weights_int8-float:", "weights_int8-float:ffn_out+nothing"):
        with pytest.raises(ValueError, match="unknown int8 scheme"):
            int8_runtime.scheme_float_patterns(bad)
    scorer = fresh_scorer(tiny_checkpoint)
    with pytest.raises(ValueError, match="unknown int8 scheme"):
        Int8Scorer(scorer.model, scorer.tokenizer, 16, 8, "cpu", scheme="int4")


@needs_int8_cpu
def test_a_mixed_precision_scheme_is_its_own_export_and_keeps_its_layers_in_float32(tiny_checkpoint, private_cache):
    int8 = load_int8_scorer(tiny_checkpoint, num_threads=1)
    mixed = load_int8_scorer(tiny_checkpoint, num_threads=1, scheme="weights_int8-float:ffn_out+ffn_in+qkv+o+embeddings+head")
    assert int8.model_in(torch.int8).folder != mixed.model_in(torch.int8).folder  # two exports, one per scheme
    manifest = json.loads((mixed.model_in(torch.int8).folder / int8_runtime.MANIFEST).read_text())
    assert manifest["scheme"] == "weights_int8-float:ffn_out+ffn_in+qkv+o+embeddings+head"
    # every weight kept in float32: float32's scores but for the activations' own int8 products, which it has none of
    assert mixed.score(STORIES) == pytest.approx(mixed.score(STORIES, dtype="float32"), abs=1e-4)
    # a group the graph does not have (the tiny model has one layer) would keep nothing: refused, not exported as another scheme
    with pytest.raises(ValueError, match="graph has no ffn_out4 layers"):
        load_int8_scorer(tiny_checkpoint, num_threads=1, scheme="weights_int8-float:ffn_out4")


def test_a_cpu_without_int8_instructions_gets_float32_in_one_line_that_says_so_and_settings_that_say_float32(tiny_checkpoint, tmp_path,
                                                                                                            monkeypatch, capsys):
    monkeypatch.setattr(int8_runtime, "cpu_has_int8_dot_product", lambda: False)
    monkeypatch.setattr(int8_runtime, "cpu_has_int8_dot_product_by_flags", lambda: False)
    checkpoint = _copy_of(tiny_checkpoint, tmp_path)
    scorer = fresh_scorer(checkpoint)
    assert scorer.settings("int8") == scorer.settings("float32")  # before scoring: what the scores will be
    with pytest.warns(RuntimeWarning, match="falls back to float32"):
        scorer.score(STORIES, dtype="int8")
    assert scorer.settings("int8") == scorer.settings("float32")
    txt = tmp_path / "s.jsonl"
    txt.write_text("\n".join(json.dumps({"story": story}) for story in STORIES) + "\n")
    code = cli.main(["score", str(txt), "--config", str(checkpoint), "--dtype", "int8", "--quiet", "--output", str(tmp_path / "out.jsonl")])
    err = capsys.readouterr().err
    assert code == 0, err
    said = [line for line in err.splitlines() if "float32" in line]
    assert said == ["storyeval: warning: dtype='int8' falls back to float32 torch scoring: this CPU has no int8 dot-product "
                    "instructions (x86 VNNI or ARM dot product)"]
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [row["score"] for row in rows] == pytest.approx(scorer.score(STORIES), abs=1e-6)
    expected = scorer.settings("float32").replace("unnamed", "copy") + f"_weights-{scoring_digest(checkpoint)}"
    assert {row["score_settings"] for row in rows} == {expected}


def test_an_int8_request_for_a_checkpoint_the_rule_refuses_is_one_line_with_its_figures_and_never_falls_back(tmp_path, monkeypatch, capsys):
    """The bundled base tier's refusal, before any model loads, on a CPU with or without int8 instructions."""
    for has_int8 in (True, False):
        monkeypatch.setattr(int8_runtime, "cpu_has_int8_dot_product", lambda: has_int8)
        txt = tmp_path / "s.txt"
        txt.write_text(f"{STORY}\n")
        for name in ("union-roc-base", "union-wp-base"):
            problem = int8_runtime.checkpoint_int8_problem(Path(__file__).resolve().parent.parent / "hub_cards" / name)
            if problem is None:
                continue  # it holds the rule now
            code = cli.main(["score", str(txt), "--config", name.removeprefix("union-"), "--dtype", "int8", "--quiet"])
            captured = capsys.readouterr()
            assert code == 1 and captured.out == "" and captured.err == f"storyeval: error: {problem}\n"
            assert name in problem and "\n" not in problem


def test_dtype_auto_picks_int8_only_where_it_is_offered_and_says_which_in_one_line(tiny_checkpoint, tmp_path, monkeypatch, capsys):
    checkpoint = _copy_of(tiny_checkpoint, tmp_path)
    txt = tmp_path / "s.txt"
    txt.write_text(f"{STORY}\n")

    def auto(*extra):
        code = cli.main(["score", str(txt), "--config", str(checkpoint), "--dtype", "auto", "--device", "cpu", *extra])
        captured = capsys.readouterr()
        return code, [line for line in captured.err.splitlines() if "--dtype auto" in line], captured.out

    monkeypatch.setattr(int8_runtime, "cpu_has_int8_dot_product", lambda: False)
    code, said, _ = auto()
    assert code == 0 and said == ["storyeval: --dtype auto scores in float32: this CPU has no int8 dot-product instructions "
                                  "(x86 VNNI or ARM dot product)"]
    monkeypatch.setattr(int8_runtime, "cpu_has_int8_dot_product", lambda: True)
    monkeypatch.setattr(int8_runtime, "checkpoint_int8_problem", lambda folder, encoder_type=None:
                        "dtype='int8' is not offered for x: why; score it in float32 or bfloat16")
    code, said, _ = auto()
    assert code == 0 and said == ["storyeval: --dtype auto scores in float32: int8 is not offered for x: why"]
    monkeypatch.undo()
    monkeypatch.setenv("STORYEVAL_CACHE", str(tmp_path / "cache"))
    if int8_runtime.cpu_has_int8_dot_product():
        code, said, out = auto()
        assert code == 0 and said == ["storyeval: --dtype auto scores in int8: this CPU has int8 instructions and the int8 copy holds "
                                      "the fidelity rule"]
        assert auto("--quiet")[1] == []  # --quiet: no line


@pytest.mark.parametrize("refusal, reason", [
    ("dtype='int8' is not offered for union-wp-base: its int8 copy moves 4 of 108 figures; score it in float32 or bfloat16",
     "int8 is not offered for union-wp-base: its int8 copy moves 4 of 108 figures"),
    ("dtype='int8' needs the openvino runtime (nncf is missing): pip install 'storyeval[int8]'",
     "int8 needs the openvino runtime (nncf is missing): pip install 'storyeval[int8]'"),
    ("story_quality roc-base scores in int8 through its story metrics, and is not offered for x: why; score it in float32",
     "story_quality roc-base scores in int8 through its story metrics, and is not offered for x: why"),
])
def test_auto_gives_an_int8_refusal_as_its_reason_without_the_advice_it_has_taken(refusal, reason):
    assert int8_runtime.auto_dtype(refusal) == ("float32", reason)
