"""Int8 scoring of the story classifiers on the CPU, through an int8 runtime.

``dtype="int8"`` (``compute(...)``, ``storyeval score --dtype int8``) scores
with an int8 copy of the scoring model run by OpenVINO: the model is exported
to ONNX, its linear weights compressed to int8 per output channel by NNCF, and
OpenVINO's CPU plugin quantises activations dynamically in groups of 32 along
each row for its int8 products. Any encoder the exporter traces can be exported,
but ``dtype="int8"`` offers an MPNet checkpoint (the base tier) only where its own
int8 copy was measured to hold the fidelity rule (:data:`FIDELITY_SPEARMAN` and what follows it;
:data:`MEASURED_FIDELITY`), and refuses the others in one line, each with its own figures; the MiniLM tier is offered it as an
architecture. The scorer's text side,
windows, batches and order are :class:`storyeval.scoring.sequence.SequenceScorer`'s:
only the model call differs. ``backend="ctranslate2"`` keeps the runtime that
shipped first (BERT encoders only; it moves scores more, see speed.md).

The export is cached under ``$STORYEVAL_CACHE/int8`` (default
``~/.cache/storyeval/int8``) in a folder named by a hash of the model's
weights and encoder config, the exporter's format and the versions of the
libraries that wrote it, so a changed checkpoint or library is exported anew
and the old export of that checkpoint is removed. Its manifest also records a
hash of the checkpoint folder's files the model was loaded from, by which
:mod:`storyeval.scoring.int8.cached` finds the export without loading the model.

Int8 products are fast and exact only with the CPU's int8 dot-product
instructions (VNNI on x86, dot product on ARM). Without them the scorer falls
back to the float32 model with a warning: slower, never wrong.

Each runtime sits behind :class:`Int8Backend`, so another one (the benchmarks
measure ONNX Runtime through it) can be plugged in with :func:`register_backend`.
This module never imports the scorers, so :mod:`storyeval.scoring.sequence` can call
:func:`int8_model` for its ``dtype="int8"``; :mod:`storyeval.scoring.int8.scorer` holds the
scorer with a backend and thread count of its own.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import hashlib
import importlib.util
import io
import json
import logging
import os
import platform
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from storyeval.checkpoints import bundled

if TYPE_CHECKING:
    import torch

MANIFEST = "storyeval-int8.json"  # written last into an export folder: its presence means the export is complete


class Int8RuntimeMissingError(ImportError):
    """The int8 runtime is not installed; the message is one line with the install command."""


class Int8Backend:
    """An int8 runtime: how it exports a model into a folder and runs that folder.

    ``run(input_ids, attention_mask)`` takes int64 arrays (batch, width), padded on the right,
    and returns one float32 logit per row.
    """

    name = ""
    modules: tuple[str, ...] = ()  # import names it needs
    distributions: tuple[str, ...] = ()  # the PyPI names whose versions key the cached export
    install = ""  # the command that installs it

    def check_installed(self) -> None:
        for module in self.modules:
            # found, not imported: the exporter's libraries are slow to import and a cached export never needs them
            if importlib.util.find_spec(module) is None:
                raise Int8RuntimeMissingError(f"dtype='int8' needs the {self.name} runtime ({module} is missing): {self.install}")

    def versions(self) -> dict[str, str]:
        """Versions of everything that shapes the export: a new version means a new export."""
        from importlib import metadata

        return {package: metadata.version(package) for package in ("torch", *self.distributions)}

    def cpu_problem(self) -> str | None:
        """Why this CPU cannot run the int8 kernels exactly and fast, or None."""
        return None if cpu_has_int8_dot_product() else "this CPU has no int8 dot-product instructions (x86 VNNI or ARM dot product)"

    def export(self, model, tokenizer, folder: Path, scheme: str = "weights_int8") -> None:
        """Export ``model`` into ``folder`` quantised by ``scheme`` (:func:`scheme_float_patterns`)."""
        raise NotImplementedError

    def load(self, folder: Path, num_threads: int | None):
        """``run`` for an exported folder, on ``num_threads`` threads (None: the runtime's default)."""
        raise NotImplementedError


class CTranslate2Backend(Int8Backend):
    """CTranslate2's BERT encoder (converted by its transformers converter); the classifier head in numpy.

    The int8 runtime that shipped first. It lost to OpenVINO on speed and on agreement with
    float32 (Spearman 0.9975, under the 0.999 bound; speed.md), so it is opt-in.

    In int8 CTranslate2 quantises weights per output row and activations per token; it takes
    unpadded rows, so padding costs nothing. ``compute_type`` other than int8 (int16, float32)
    exists for the benchmarks' comparison: CTranslate2 converts every weight to one type at load,
    so a model cannot keep some layers in float while the rest runs in int8.
    """

    modules = ("ctranslate2",)
    distributions = ("ctranslate2", "transformers")
    install = "python -m pip install ctranslate2"

    def __init__(self, compute_type: str = "int8"):
        self.compute_type = compute_type
        self.name = "ctranslate2" if compute_type == "int8" else f"ctranslate2-{compute_type}"

    def cpu_problem(self) -> str | None:
        if self.compute_type == "int8":
            problem = super().cpu_problem()
            if problem is not None:
                return problem  # before the import: the fallback needs no runtime
        self.check_installed()
        import ctranslate2

        if self.compute_type not in ctranslate2.get_supported_compute_types("cpu"):
            return f"CTranslate2 reports no {self.compute_type} support on this CPU"
        return None

    def export(self, model, tokenizer, folder: Path, scheme: str = "weights_int8") -> None:
        import torch
        from ctranslate2.converters import TransformersConverter
        from safetensors.torch import save_file
        from transformers import BertModel

        if scheme != DEFAULT_SCHEME:  # it quantises every weight again when it loads a model
            raise ValueError(f"the {self.name} int8 backend exports every weight in one type, not scheme {scheme!r}")

        if model.config.encoder.model_type != "bert":
            raise ValueError(f"the {self.name} int8 backend converts BERT encoders, not {model.config.encoder.model_type}")
        encoder = BertModel(model.config.encoder)  # with the pooler the converter expects; never used for scoring
        weights = {name: tensor.detach().float().contiguous() for name, tensor in model.encoder.state_dict().items()}
        # the pooler is never used; an identity, not zeros, so that int16's per-tensor scale (1 / max) stays finite
        weights["pooler.dense.weight"] = torch.eye(encoder.config.hidden_size)
        weights["pooler.dense.bias"] = torch.zeros(encoder.config.hidden_size)
        source = folder / "transformers"
        source.mkdir()
        encoder.config.position_embedding_type = "absolute"  # transformers 5's BERT has no other; the converter asks for it
        encoder.config.save_pretrained(source)
        save_file(weights, str(source / "model.safetensors"), metadata={"format": "pt"})
        tokenizer.save_pretrained(source)  # the converter reads the vocabulary from it
        with contextlib.redirect_stderr(io.StringIO()):  # transformers' progress bar while the converter reloads it
            TransformersConverter(str(source)).convert(str(folder / "encoder"), quantization=self.compute_type)
        shutil.rmtree(source)
        head = model.classifier
        np.savez(folder / "head.npz", weight=head.weight.detach().float().numpy().ravel(), bias=head.bias.detach().float().numpy())

    def load(self, folder: Path, num_threads: int | None):
        import ctranslate2

        # intra_threads 0: CTranslate2's default
        encoder = ctranslate2.Encoder(str(folder / "encoder"), device="cpu", compute_type=self.compute_type, intra_threads=num_threads or 0, inter_threads=1)
        with np.load(folder / "head.npz") as head:
            weight, bias = head["weight"], head["bias"]

        def run(input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
            rows = [ids[: int(length)].tolist() for ids, length in zip(input_ids, attention_mask.sum(axis=1))]
            first_token = np.asarray(encoder.forward_batch(rows).last_hidden_state)[:, 0]
            return first_token @ weight + bias

        return run


class OpenVinoBackend(Int8Backend):
    """The scoring model's ONNX graph read by OpenVINO, its linear weights compressed to int8 per output
    channel by NNCF; OpenVINO's CPU plugin quantises activations dynamically, in groups of 32 along each
    row, for its int8 products. Padded rows are computed like the others; the mask keeps them out of the result."""

    name = "openvino"
    modules = ("openvino", "nncf", "onnx")  # onnx: torch's ONNX exporter writes the graph OpenVINO reads
    distributions = ("openvino", "nncf", "onnx")
    install = "python -m pip install openvino nncf onnx"  # the [int8] extra of setup.py

    def export(self, model, tokenizer, folder: Path, scheme: str = "weights_int8") -> None:
        import nncf
        import openvino

        groups = scheme_float_groups(scheme)
        float_path = folder / "float32.onnx"
        export_logits_graph(model, float_path)
        graph = openvino.Core().read_model(str(float_path))
        names = [op.get_friendly_name() for op in graph.get_ops()]
        missing = [group for group, patterns in groups.items() if not any(re.fullmatch(p, name) for p in patterns for name in names)]
        if missing:  # NNCF would keep nothing of them in float32, silently: the export would not be the scheme measured
            raise ValueError(f"int8 scheme {scheme!r}: this model's graph has no {', '.join(missing)} layers")
        kept = nncf.IgnoredScope(patterns=[p for patterns in groups.values() for p in patterns], validate=False) if groups else None
        # NNCF's statistics tables and progress bar, which it prints to stdout, where the CLI writes scores
        with quiet_logging(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            compressed = nncf.compress_weights(graph, mode=nncf.CompressWeightsMode.INT8_SYM, ignored_scope=kept)
        openvino.save_model(compressed, str(folder / "model.xml"))
        float_path.unlink()

    def load(self, folder: Path, num_threads: int | None):
        import openvino

        compiled = openvino.Core().compile_model(str(folder / "model.xml"), "CPU", {
            **({"INFERENCE_NUM_THREADS": num_threads} if num_threads else {}),  # default: one per physical core, as torch's
            "INFERENCE_PRECISION_HINT": "f32",  # not bf16 on a CPU that has it: only the int8 products are low precision
            "DYNAMIC_QUANTIZATION_GROUP_SIZE": 32,  # the setting measured to hold the drift bound (speed.md)
        })
        request = compiled.create_infer_request()

        def run(input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
            return request.infer({"input_ids": input_ids, "attention_mask": attention_mask})[0].copy()

        return run


# Layer groups of the exported graph, as NNCF ignored-scope patterns over its node names (torch.onnx names them by module
# path; MPNet's attention is attn.q/k/v/o, BERT's attention.self.query/...): what a scheme may keep in float32
LAYER_GROUPS: dict[str, list[str]] = {
    "qkv": [r".*/attn/(q|k|v)/MatMul", r".*/attention/self/(query|key|value)/MatMul"],
    "o": [r".*/attn/o/MatMul", r".*/attention/output/dense/MatMul"],
    "ffn_in": [r".*/intermediate/dense/MatMul"],
    "ffn_out": [r".*/layer\.\d+/output/dense/MatMul"],
    "embeddings": [r".*Gather.*"],
    "head": [r".*/classifier/.*"],
    **{f"layer{i}": [rf".*/layer\.{i}/.*"] for i in range(24)},
    **{f"ffn_out{i}": [rf".*/layer\.{i}/output/dense/MatMul"] for i in range(24)},
    **{f"ffn_in{i}": [rf".*/layer\.{i}/intermediate/dense/MatMul"] for i in range(24)},
}
# every linear and embedding weight in int8 per output channel, activations quantised on the fly: the MiniLM configs'
DEFAULT_SCHEME = "weights_int8"
FLOAT_PREFIX = "weights_int8-float:"  # then groups joined by "+": their weights stay float32 (mixed precision)


def scheme_float_groups(scheme: str) -> dict[str, list[str]]:
    """The :data:`LAYER_GROUPS` ``scheme`` keeps in float32, with their patterns: none for :data:`DEFAULT_SCHEME`, the
    named ones for ``weights_int8-float:<group>+<group>...``; a ValueError names an unknown scheme or group."""
    if scheme == DEFAULT_SCHEME:
        return {}
    groups = scheme.removeprefix(FLOAT_PREFIX).split("+") if scheme.startswith(FLOAT_PREFIX) else []
    unknown = [group for group in groups if group not in LAYER_GROUPS]
    if not groups or unknown:
        raise ValueError(f"unknown int8 scheme {scheme!r}: {DEFAULT_SCHEME!r}, or {FLOAT_PREFIX}<group>+<group>... "
                         f"with groups among {', '.join(list(LAYER_GROUPS)[:6])}, layer<i>, ffn_out<i>, ffn_in<i>")
    return {group: LAYER_GROUPS[group] for group in groups}


def scheme_float_patterns(scheme: str) -> list[str]:
    """The ignored-scope patterns of the layers ``scheme`` keeps in float32 (:func:`scheme_float_groups`)."""
    return [pattern for patterns in scheme_float_groups(scheme).values() for pattern in patterns]


def export_logits_graph(model, path: Path) -> None:
    """An ONNX graph of ``model`` (ids, mask -> logits) with free batch and width."""
    import torch

    from storyeval.models.mpnet_attention import use_fused_attention

    class LogitsOnly(torch.nn.Module):  # the scoring model as a function of ids and mask to logits: the traced graph
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids, attention_mask=attention_mask).logits

    model = copy.deepcopy(model).float().eval()
    # the explicit attention graph, which runtimes fuse; torch's fused attention exports as parts they do not
    use_fused_attention(model.encoder, fused=False)
    with contextlib.suppress(ValueError, AttributeError):
        model.encoder.set_attn_implementation("eager")
    width = min(16, model.config.max_length)
    ids = torch.full((2, width), 1000 % model.config.encoder.vocab_size, dtype=torch.long)
    mask = torch.ones_like(ids)
    mask[1, width // 2 :] = 0  # a padded row, so the mask is traced as an input that matters
    axes = {"input_ids": {0: "batch", 1: "width"}, "attention_mask": {0: "batch", 1: "width"}, "logits": {0: "batch"}}
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer and deprecation notices about the exporter itself
        torch.onnx.export(
            LogitsOnly(model), (ids, mask), str(path), dynamo=False, opset_version=17,
            input_names=["input_ids", "attention_mask"], output_names=["logits"], dynamic_axes=axes,
        )


@contextlib.contextmanager
def quiet_logging():
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


BACKENDS: dict[str, Int8Backend] = {}
DEFAULT_BACKEND = "openvino"


def register_backend(backend: Int8Backend) -> None:
    BACKENDS[backend.name] = backend


register_backend(OpenVinoBackend())
register_backend(CTranslate2Backend())


def get_backend(name: str | None = None) -> Int8Backend:
    name = DEFAULT_BACKEND if name is None else name
    if name not in BACKENDS:
        raise ValueError(f"unknown int8 backend {name!r}; choose from {sorted(BACKENDS)}")
    return BACKENDS[name]


def cpu_has_int8_dot_product() -> bool:
    """Whether this CPU has the instructions int8 runtimes use for their products."""
    known = cpu_has_int8_dot_product_by_flags()
    if known is not None:
        return known
    import torch

    check = getattr(torch.cpu, "_is_vnni_supported", None)  # AVX512-VNNI or AVX-VNNI, through torch's cpuinfo
    return bool(check()) if check is not None else False


def cpu_has_int8_dot_product_by_flags() -> bool | None:
    """:func:`cpu_has_int8_dot_product` where the answer needs no torch (Linux's CPU flags, Apple arm64); None elsewhere."""
    machine, flags = platform.machine().lower(), _linux_cpu_flags()
    if machine in ("x86_64", "amd64"):
        return bool({"avx512_vnni", "avx_vnni"} & flags) if flags else None
    if machine in ("arm64", "aarch64"):
        if platform.system() == "Darwin":
            return True  # every Apple arm64 CPU has it
        return "asimddp" in flags if flags else None
    return False


def _linux_cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return {flag for line in text.splitlines() if line.split(":")[0].strip() in ("flags", "Features") for flag in line.split(":", 1)[1].split()}


def cache_root() -> Path:
    from storyeval.checkpoints.backbones import cache_root as storyeval_cache

    return storyeval_cache() / "int8"


def weights_sha256(model) -> str:
    """SHA-256 over the model's encoder config and every parameter and buffer (name, dtype, shape, bytes)."""
    import torch

    digest = hashlib.sha256()
    encoder = {k: v for k, v in model.config.encoder.to_dict().items() if k not in ("_name_or_path", "transformers_version")}
    digest.update(json.dumps(encoder, sort_keys=True, default=str).encode())
    for name, tensor in sorted(model.state_dict().items()):
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())  # the raw bytes, whatever the dtype (numpy has no bfloat16)
    return digest.hexdigest()


def record_checkpoint(model, folder: Path, stamp: tuple) -> None:
    """Note on ``model`` the checkpoint folder it was loaded from, with its :func:`storyeval.checkpoints.bundled.folder_stamp`
    taken before the load, so that its export can be found by the folder's files later (:func:`find_export`).
    The scorers never change their model's weights."""
    model.storyeval_checkpoint = (str(folder), stamp)


def _loaded_checkpoint_hash(model) -> str | None:
    """The :func:`storyeval.checkpoints.bundled.content_hash` of the folder ``model`` was loaded from, if its files are
    unchanged since; else None."""
    folder, stamp = getattr(model, "storyeval_checkpoint", (None, None))
    if folder is None or not Path(folder).is_dir() or bundled.folder_stamp(Path(folder)) != stamp:
        return None
    return bundled.content_hash(Path(folder))


EXPORT_FORMAT = 1  # raise when the export steps change, so old exports are not reused


def find_export(folder: Path, backend: Int8Backend) -> Path | None:
    """``backend``'s cached export of the checkpoint in ``folder`` (by the hash of its files,
    :func:`storyeval.checkpoints.bundled.content_hash`), made in this format with the installed libraries' versions;
    None if there is none yet. Needs neither torch nor the model."""
    root = cache_root()
    if not root.is_dir():
        return None
    wanted = {"backend": backend.name, "format": EXPORT_FORMAT, "versions": backend.versions(), "scheme": checkpoint_scheme(folder)}
    files = bundled.content_hash(folder)
    for manifest in root.glob(f"{backend.name}-*/{MANIFEST}"):
        with contextlib.suppress(OSError, ValueError):
            recorded = json.loads(manifest.read_text())
            if all(recorded.get(k) == v for k, v in wanted.items()) and files in recorded.get("checkpoint_content_hashes", []):
                return manifest.parent
    return None


def _export_key(model, backend: Int8Backend, scheme: str = DEFAULT_SCHEME) -> tuple[dict, Path]:
    """What an export of ``model`` by ``scheme`` is keyed by, and the folder it is (or will be) cached in."""
    key = {"backend": backend.name, "format": EXPORT_FORMAT, "versions": backend.versions(), "scheme": scheme,
           "weights_sha256": weights_sha256(model)}
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return key, cache_root() / f"{backend.name}-{name}"


def needs_export(model, backend: Int8Backend | None = None) -> bool:
    """Whether an int8 copy of ``model`` would be exported now (none is cached), so a caller can say so first:
    the export takes seconds (about 11 for a MiniLM checkpoint), and happens once per checkpoint and library versions."""
    backend = backend or get_backend()
    scheme = checkpoint_scheme(getattr(model, "storyeval_checkpoint", (None, None))[0])
    return backend.cpu_problem() is None and not (_export_key(model, backend, scheme)[1] / MANIFEST).is_file()


def exported_folder(model, tokenizer, backend: Int8Backend, scheme: str = DEFAULT_SCHEME) -> Path:
    """The folder holding ``backend``'s int8 export of ``model`` by ``scheme``: the cached one, or a new export."""
    key, folder = _export_key(model, backend, scheme)
    root = folder.parent
    checkpoint = _loaded_checkpoint_hash(model)
    if (folder / MANIFEST).is_file():
        _add_checkpoint(folder / MANIFEST, checkpoint)
        return folder
    root.mkdir(parents=True, exist_ok=True)
    # exported beside its final place and renamed when complete, so an interrupted export is never read
    staging = Path(tempfile.mkdtemp(prefix=f".{backend.name}-", dir=root))
    try:
        backend.export(model, tokenizer, staging, scheme=scheme)
        source = str(getattr(model.config, "_name_or_path", "") or "")
        manifest = {**key, "source": source, "checkpoint_content_hashes": [checkpoint] if checkpoint else []}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        try:
            staging.rename(folder)
        except OSError:  # another process finished the same export first
            if not (folder / MANIFEST).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _remove_stale_exports(root, folder, backend.name, source)
    return folder


def _add_checkpoint(manifest: Path, checkpoint: str | None) -> None:
    """Record in an export the files of another checkpoint folder it serves (the same weights saved
    elsewhere), or of its first one if it was made before :func:`find_export` existed; written whole, by a
    rename, so a reader never sees half of it."""
    recorded = json.loads(manifest.read_text())
    known = recorded.get("checkpoint_content_hashes", [])
    if checkpoint is None or checkpoint in known:
        return
    partial = manifest.with_name(f".{manifest.name}.{os.getpid()}")
    partial.write_text(json.dumps({**recorded, "checkpoint_content_hashes": [*known, checkpoint]}, indent=2) + "\n")
    os.replace(partial, manifest)


def _remove_stale_exports(root: Path, kept: Path, backend: str, source: str) -> None:
    """Earlier exports of the same checkpoint folder by the same backend: its weights or the libraries changed."""
    if not source:
        return
    for other in root.glob(f"{backend}-*"):
        manifest = other / MANIFEST
        if other == kept or not manifest.is_file():
            continue
        with contextlib.suppress(OSError, ValueError):
            if json.loads(manifest.read_text()).get("source") == source:
                shutil.rmtree(other, ignore_errors=True)


@dataclasses.dataclass
class Int8Output:
    logits: torch.Tensor  # (batch,) float32


class Int8Model:
    """An int8 runtime's session called like the torch model: ``model(input_ids=..., attention_mask=...).logits``."""

    def __init__(self, run, backend: str, folder: Path, num_threads: int, scheme: str = DEFAULT_SCHEME):
        self._run, self.backend, self.folder, self.num_threads, self.scheme = run, backend, folder, num_threads, scheme

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Int8Output:
        import torch

        logits = self._run(input_ids.cpu().numpy().astype(np.int64), attention_mask.cpu().numpy().astype(np.int64))
        return Int8Output(logits=torch.from_numpy(np.asarray(logits, dtype=np.float32).reshape(-1)))


# The fidelity rule a checkpoint of a MEASURED_ONLY encoder must hold to be scored in int8 (issue 84, which relaxed issue
# 71's Spearman bound of 0.999: what a user needs is that int8 changes no conclusion, and 0.995 is far inside the noise
# of any human-rated set). All three, measured on the checkpoint's own int8 copy:
# 1. its scores keep Spearman >= FIDELITY_SPEARMAN with float32's on FIDELITY_STORIES held-out test stories of its corpus;
# 2. every Pearson, Spearman and Kendall coefficient BENCHMARKS.md reports for it on a human-judged set stays within
#    FIDELITY_HUMAN_MOVE of float32's (those sets are only checked, never used to choose anything);
# 3. every figure of the modern-text check stays within its paired interval: the 95% paired bootstrap interval of int8
#    less float32 (benchmarks.agreement.modern_breaks, the stories resampled) reaches 0.
FIDELITY_SPEARMAN = 0.995
FIDELITY_STORIES = 1000
FIDELITY_HUMAN_MOVE = 0.005
# encoder types whose checkpoints are offered int8 one by one, each as measured (MEASURED_FIDELITY): the base tier.
# The MiniLM (BERT) checkpoints are offered it as an architecture (speed.md)
MEASURED_ONLY = {"mpnet": "the base tier"}


@dataclasses.dataclass(frozen=True)
class Int8Fidelity:
    """What one checkpoint's int8 copy was measured to keep (``python -m benchmarks.speed.int8_speed`` for the first two
    parts of the rule, ``python -m benchmarks.agreement.modern_breaks`` for the third)."""

    safetensors_sha256: str  # the weights measured: another model.safetensors under the same name is not this record
    scheme: str  # the export measured (scheme_float_patterns): what dtype="int8" exports for this checkpoint
    corpus: str  # whose test stories: "ROC" or "WP"
    stories: int  # how many
    spearman: float  # with float32 on them, to four places
    results: str  # the results file they are read from, under benchmarks/results
    human_move: float | None = None  # the largest move of a coefficient on the human sets, float32 to int8 (None: not measured)
    human_results: str | None = None  # the results file it is read from
    modern_outside: int | None = None  # modern-text figures whose paired interval of int8 less float32 misses 0 (None: not measured)
    modern_figures: int | None = None  # of how many
    modern_results: str | None = None  # the results file they are read from

    def problem(self) -> str | None:
        """Why the rule refuses this copy, with its own figures, or None."""
        missed = []
        if self.spearman < FIDELITY_SPEARMAN or self.stories < FIDELITY_STORIES:
            missed.append(f"keeps Spearman {self.spearman:.4f} with float32 on {self.stories:,} {self.corpus} test stories "
                          f"(the bound: {FIDELITY_SPEARMAN} on {FIDELITY_STORIES:,})")
        return rule_problem("its int8 copy", missed + rule_misses(self.human_move, self.modern_outside, self.modern_figures))


def rule_misses(human_move: float | None, modern_outside: int | None, modern_figures: int | None) -> list[str]:
    """The parts of the rule on the human sets and the modern-text check that a measured int8 copy misses, with its figures."""
    missed = []
    if human_move is None:
        missed.append("was not measured on the human-judged sets")
    elif human_move > FIDELITY_HUMAN_MOVE:
        missed.append(f"moves a human-set coefficient by {human_move:.4f} (the bound: {FIDELITY_HUMAN_MOVE})")
    if modern_outside is None:
        missed.append("was not measured on the modern-text check")
    elif modern_outside:
        missed.append(f"moves {modern_outside} of {modern_figures} modern-text figures outside their paired intervals (the rule allows none)")
    return missed


def rule_problem(subject: str, missed: list[str]) -> str | None:
    """One line: ``subject`` and every part of the rule it misses, or None."""
    return f"{subject} {', '.join(missed[:-1]) + ' and ' if len(missed) > 1 else ''}{missed[-1]}" if missed else None


# per checkpoint name, as the OpenVINO export above makes it by the record's scheme (tests/test_int8_fidelity.py checks each
# against its results files; benchmarks/experiments/speed.md, issue 84, how each scheme was chosen)
MEASURED_FIDELITY: dict[str, Int8Fidelity] = {
    "union-roc-base": Int8Fidelity("17b9573261f44cd828f20257585334063ab0397edbbbb308b86611c8e6e0821f", "weights_int8-float:ffn_out", "ROC",
                                   1000, 0.9988, "union_roc_base_int8_drift_ffn_out.json", 0.0018, "union_roc_base_int8_human_ffn_out.json",
                                   0, 108, "modern_breaks_r2_int8_roc_base_all_kinds.json"),
    "plot-coherence-roc-base": Int8Fidelity("7f2d6775b420b6710a8d2c08cf7656c55e16b44c2c9f06d7b5dd7fba52b749d6",
                                            "weights_int8-float:ffn_out4+ffn_out5", "ROC", 1000, 0.9990,
                                            "plot_coherence_roc_base_int8_drift_ffn_out4_5.json", 0.0024,
                                            "plot_coherence_roc_base_int8_human_ffn_out4_5.json",
                                            # a rise: human ROC repeats' AUC [+0.0021, +0.0177]
                                            1, 108, "modern_breaks_r2_int8_roc_base_all_kinds.json"),
    "union-wp-base": Int8Fidelity("0a7a3a4fa069cdfbb1e7d983dcd9ea5132dd6b97641de4ab7b0c72d53fe05ee6", "weights_int8-float:ffn_out4+ffn_out5",
                                  "WP", 1000, 0.9990, "union_wp_base_int8_drift_ffn_out4_5.json", 0.0041,
                                  "union_wp_base_int8_human_ffn_out4_5.json",
                                  # all four rises: int8 holds the intact story above its broken copy more often
                                  4, 108, "modern_breaks_r2_int8_wp_base.json"),
    "plot-coherence-wp-base": Int8Fidelity("9bb059f01490cf2ef859206b59d5232853d0bddcaebb7c28c2576f6afc5fda98",
                                           "weights_int8-float:ffn_out4+ffn_out5", "WP", 1000, 0.9998,
                                           "plot_coherence_wp_base_int8_drift_ffn_out4_5.json", 0.0042,
                                           "plot_coherence_wp_base_int8_human_ffn_out4_5.json"),
}


def measured_record(folder: str | Path | None) -> Int8Fidelity | None:
    """The :data:`MEASURED_FIDELITY` record of the checkpoint in ``folder``: by its name, and only for the weights measured."""
    if folder is None:
        return None
    from storyeval.checkpoints.resolution import checkpoint_name

    record = MEASURED_FIDELITY.get(checkpoint_name(folder))
    return record if record is not None and _safetensors_sha256(Path(folder)) == record.safetensors_sha256 else None


def checkpoint_scheme(folder: str | Path | None) -> str:
    """The scheme ``dtype="int8"`` exports the checkpoint in ``folder`` by: its measured record's, else the default."""
    record = measured_record(folder)
    return DEFAULT_SCHEME if record is None else record.scheme


def checkpoint_int8_problem(folder: str | Path | None, encoder_type: str | None = None) -> str | None:
    """Why ``dtype="int8"`` refuses the checkpoint in ``folder``, read from its files before any model loads
    (loading a base-tier model takes seconds), or None. ``encoder_type``: the loaded model's, where known."""
    if encoder_type is None and folder is not None:
        try:
            config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if isinstance(config, dict) and config.get("ending_of"):
            # an ending mix (storyeval.scoring.ending): its int8 copy would be two models', measured as one by no run
            from storyeval.checkpoints.resolution import checkpoint_name

            part = {"neighbours": "a neighbour", "runs": "an order"}.get(config.get("ending_reads"), "an ending")
            return (f"dtype='int8' is not offered for {checkpoint_name(folder)}: it mixes {config['ending_of']} with {part} "
                    f"scorer, and no int8 copy of the mix was measured against the fidelity rule; score it in float32 or bfloat16")
        encoder = config.get("encoder") if isinstance(config, dict) else None
        encoder_type = encoder.get("model_type") if isinstance(encoder, dict) else None
    if encoder_type not in MEASURED_ONLY:
        return None
    from storyeval.checkpoints.resolution import checkpoint_name

    name = checkpoint_name(folder) if folder is not None else "this model"
    record = measured_record(folder)
    if record is None:
        return (f"dtype='int8' is offered for {encoder_type} checkpoints ({MEASURED_ONLY[encoder_type]}) only where their own "
                f"int8 copy was measured to hold the fidelity rule, and {name} was not measured: score it in float32 or bfloat16")
    problem = record.problem()
    return None if problem is None else f"dtype='int8' is not offered for {name}: {problem}; score it in float32 or bfloat16"


def auto_dtype(problem: str | None, backend: str | None = None) -> tuple[str, str]:
    """``dtype="auto"`` for a checkpoint (or suite) whose int8 refusal is ``problem`` (None: the rule holds): ``("int8",
    why)`` where this CPU has int8 instructions, the int8 runtime is installed and the rule holds, else ``("float32", why)``."""
    runtime = get_backend(backend)
    if problem is not None:
        return "float32", _as_reason(problem)
    if (cpu := runtime.cpu_problem()) is not None:
        return "float32", cpu
    try:
        runtime.check_installed()
    except Int8RuntimeMissingError as error:
        return "float32", _as_reason(str(error))
    return "int8", "this CPU has int8 instructions and the int8 copy holds the fidelity rule"


def _as_reason(refusal: str) -> str:
    """An int8 refusal as the reason ``auto`` gives for float32: about int8, not the ``dtype='int8'`` argument, and
    without the advice to score in float32, which ``auto`` has already taken."""
    reason = re.sub(r"[;:] score it in float32( or bfloat16)?$", "", refusal)
    return "int8 " + reason.removeprefix("dtype='int8' ") if reason.startswith("dtype='int8' ") else reason


@functools.lru_cache(maxsize=16)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _safetensors_sha256(folder: Path) -> str | None:
    path = folder / "model.safetensors"
    try:
        stat = path.stat()
    except OSError:
        return None
    return _file_sha256(str(path), stat.st_size, stat.st_mtime_ns)


def int8_model(model, tokenizer, device: torch.device, backend: str | None = None, num_threads: int | None = None,
               require_drift_bound: bool = True, scheme: str | None = None):
    """An int8 copy of ``model`` in ``backend``'s runtime with ``num_threads`` threads (default: torch's),
    or ``model`` itself, with a warning, on a CPU without the int8 instructions.

    A checkpoint that :func:`checkpoint_int8_problem` refuses is refused, or with ``require_drift_bound=False``
    (the benchmarks measure it so) exported with a warning. ``scheme``: how to quantise (:func:`scheme_float_patterns`;
    default: the checkpoint's measured one, :func:`checkpoint_scheme`), for the benchmarks that measure a scheme."""
    import torch

    if torch.device(device).type != "cpu":
        raise ValueError(f"dtype='int8' runs on the CPU only, not on {device}; pass device='cpu'")
    folder = getattr(model, "storyeval_checkpoint", (None, None))[0]
    message = checkpoint_int8_problem(folder, model.config.encoder.model_type)
    if message is not None:
        if require_drift_bound:
            raise ValueError(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)
    if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1):
        raise ValueError(f"num_threads must be a positive integer, got {num_threads!r}")
    scheme = checkpoint_scheme(folder) if scheme is None else scheme
    scheme_float_patterns(scheme)  # an unknown scheme fails before anything else
    runtime = get_backend(backend)
    problem = runtime.cpu_problem()
    if problem is not None:
        warnings.warn(f"dtype='int8' falls back to float32 torch scoring: {problem}", RuntimeWarning, stacklevel=3)
        return model
    runtime.check_installed()
    folder = exported_folder(model, tokenizer, runtime, scheme)
    threads = num_threads or torch.get_num_threads()
    return Int8Model(runtime.load(folder, threads), runtime.name, folder, threads, scheme)
