"""The COMET-style API (download_model, load_from_checkpoint), the metric registry and the settings string."""
import pytest
import torch

import storyeval
from storyeval.checkpoints import registry
from storyeval.checkpoints import resolution as checkpoints
from storyeval.scoring import signature
from storyeval.scoring.sequence import SequenceScorer


def test_settings_string_names_checkpoint_precision_and_versions(monkeypatch):
    versions = {"transformers": "5.24.0", "torch": "2.13.0+cpu"}
    monkeypatch.setattr(signature, "installed_version", versions.__getitem__)
    monkeypatch.setattr(signature, "__version__", "0.1.0.dev0")  # the string pins it, not the release
    assert signature.settings_string("union-roc") == "union-roc_fp32_storyeval-0.1.0.dev0_transformers-5.24_torch-2.13"
    assert signature.settings_string("union-roc", "bfloat16") == "union-roc_bf16_storyeval-0.1.0.dev0_transformers-5.24_torch-2.13"
    assert signature.settings_string("continuation-quality", torch.float16).startswith("continuation-quality_fp16_")
    assert signature.settings_string("union-roc", "int8").startswith("union-roc_int8_storyeval-")
    assert signature.settings_string("union-roc", weights="86976b6f").endswith("_torch-2.13_weights-86976b6f")
    with pytest.raises(ValueError, match="unsupported dtype"):
        signature.settings_string("union-roc", "int4")


def test_registry_lists_every_metric_once_with_its_default():
    assert set(registry.METRICS) == {"union", "plot_coherence", "continuation_quality"}
    for name, spec in registry.METRICS.items():
        assert spec.default in spec.configs and checkpoints.REGISTRY[name] == spec.configs
        assert hasattr(spec.scorer_type(), "score")
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        registry.metric_spec("bleu")


def test_download_model_and_load_from_checkpoint_bundled():
    for name in ["union-roc", "storyeval/union-roc", "union/roc"]:
        path = storyeval.download_model(name, local_files_only=True)
        assert (path / "model.safetensors").is_file() and checkpoints.checkpoint_name(path) == "union-roc"
    scorer = storyeval.load_from_checkpoint(path, device="cpu")
    assert isinstance(scorer, SequenceScorer)
    assert scorer.settings().startswith("union-roc_fp32_storyeval-")
    assert scorer.settings().endswith(f"_weights-{checkpoints.scoring_digest(path)}")
    cq = storyeval.load_from_checkpoint(storyeval.download_model("continuation-quality", local_files_only=True), device="cpu")
    assert set(cq.score(["Ken went home."], ["He slept."])) == {"overall", "relevance", "interestingness"}


def test_download_model_and_load_from_checkpoint_bad_names(tmp_path):
    with pytest.raises(ValueError, match="unknown checkpoint 'nonsense'"):
        storyeval.download_model("nonsense")
    with pytest.raises(FileNotFoundError, match="not available offline"):
        storyeval.download_model("someone/not-cached", local_files_only=True)
    with pytest.raises(FileNotFoundError, match="no checkpoint folder"):
        storyeval.load_from_checkpoint(tmp_path / "missing")
    with pytest.raises(ValueError, match="is not a storyeval checkpoint"):
        storyeval.load_from_checkpoint(tmp_path)


def test_runtime_modules_import_without_cycles():
    """Every storyeval module's imports of other storyeval modules, function-level ones included, form no cycle."""
    import ast
    from pathlib import Path

    root = Path(storyeval.__file__).resolve().parent
    modules = {".".join(("storyeval", *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__"): p
               for p in root.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("storyeval") and not node.level:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    targets.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names if alias.name in modules}
        # the package itself re-exports the API; its submodules do not import it back
        graph[name] = {t for t in targets if t != name and t != "storyeval"}
    state = {}

    def visit(node, trail):
        if state.get(node) == "done":
            return
        assert state.get(node) != "open", f"import cycle: {' -> '.join(trail + [node])}"
        state[node] = "open"
        for target in graph.get(node, ()):
            visit(target, trail + [node])
        state[node] = "done"

    for module in graph:
        visit(module, [])


def test_a_default_note_is_one_line_naming_the_fast_config_and_explicit_names_load_what_they_did():
    note = registry.default_note("union", "wp-base", "wp")
    assert "\n" not in note and "'wp-base' (MPNet-base)" in note and "evaluate.load('union', 'wp')" in note and "--config wp" in note
    assert registry.default_note("union", "roc", "roc") is None and registry.default_note("union", "roc", None) is None
    # a default change never changes what an explicit config name loads
    assert checkpoints.REGISTRY["union"] == {"roc": "union-roc", "wp": "union-wp", "roc-base": "union-roc-base", "wp-base": "union-wp-base",
                                             "wp-base-ending": "union-wp-base-ending",
                                             "wp-base-ending-neighbours": "union-wp-base-ending-neighbours",
                                             "roc-neighbours": "union-roc-neighbours", "wp-neighbours": "union-wp-neighbours",
                                             "wp-base-complete": "union-wp-base-complete", "wp-base-ordered": "union-wp-base-ordered",
                                             "wp-ordered": "union-wp-ordered", "wp-complete": "union-wp-complete",
                                             "roc-complete": "union-roc-complete"}
    assert checkpoints.REGISTRY["plot_coherence"] == {"roc": "plot-coherence-roc", "wp": "plot-coherence-wp",
                                                      "roc-base": "plot-coherence-roc-base", "wp-base": "plot-coherence-wp-base"}
    for spec in registry.METRICS.values():
        assert spec.fast in spec.configs and not spec.fast.endswith("-base")
