"""Int8 backends measured against the shipped one (CTranslate2) but not shipped.

OpenVINO: the same ONNX graph, its linear weights compressed to int8 per output
channel by NNCF, activations quantised by OpenVINO's CPU plugin in groups of 32
along each row. It holds the 0.999 drift bound that CTranslate2 misses, at a
higher speed (``int8_speed.py``'s results), so it is the candidate to replace it.

ONNX Runtime: the model exported with torch.onnx, its BERT layers fused by
ONNX Runtime's transformer optimiser, then dynamically quantised to int8
(weights per output channel, activations per tensor and batch). It lost to
CTranslate2 on agreement with float32 and on speed (see ``int8_speed.py``),
so it lives here, plugged into the runtime's
:class:`~storyeval.int8_runtime.Int8Backend` interface for the benchmark only.

CTranslate2 in int16 and float32: the same runtime without int8, to show how
much of its speed and of its drift from torch float32 comes from int8.
"""
from __future__ import annotations

import contextlib
import copy
import logging
import warnings
from pathlib import Path

import numpy as np
import torch

from storyeval.int8_runtime import CTranslate2Backend, Int8Backend, register_backend


class OnnxRuntimeBackend(Int8Backend):
    """torch.onnx export, ONNX Runtime's transformer fusions, then its dynamic int8 quantisation (per-channel weights)."""

    name = "onnxruntime"
    modules = ("onnxruntime", "onnx")
    distributions = ("onnx", "onnxruntime")
    install = "python -m pip install onnxruntime onnx"

    def export(self, model, tokenizer, folder: Path) -> None:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.transformers import optimizer

        float_path, fused_path = folder / "float32.onnx", folder / "fused.onnx"
        export_logits_graph(model, float_path)
        encoder = model.config.encoder
        # ONNX Runtime's fusions know BERT-like graphs; a graph they do not match stays unfused, and correct
        fused = optimizer.optimize_model(str(float_path), model_type="bert", num_heads=encoder.num_attention_heads, hidden_size=encoder.hidden_size)
        fused.save_model_to_file(str(fused_path))
        with _quiet_logging():  # it logs advice about static quantisation, which this is not
            quantize_dynamic(
                fused_path, folder / "model.onnx", weight_type=QuantType.QInt8, per_channel=True,
                # the fused operators are outside ONNX's shape inference; their outputs are float32
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
        float_path.unlink()
        fused_path.unlink()

    def load(self, folder: Path, num_threads: int):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = num_threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only
        session = onnxruntime.InferenceSession(str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"])

        def run(input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
            return session.run(None, {"input_ids": input_ids, "attention_mask": attention_mask})[0]

        return run


class OpenVinoBackend(Int8Backend):
    """The ONNX graph read by OpenVINO, its linear weights compressed to int8 per output channel by NNCF; OpenVINO's
    CPU plugin then quantises activations dynamically, in groups of 32 along each row, for its int8 products."""

    name = "openvino"
    modules = ("openvino", "nncf")
    distributions = ("openvino", "nncf")
    install = "python -m pip install openvino nncf"

    def export(self, model, tokenizer, folder: Path) -> None:
        import nncf
        import openvino

        float_path = folder / "float32.onnx"
        export_logits_graph(model, float_path)
        with _quiet_logging():
            compressed = nncf.compress_weights(openvino.Core().read_model(str(float_path)), mode=nncf.CompressWeightsMode.INT8_SYM)
        openvino.save_model(compressed, str(folder / "model.xml"))
        float_path.unlink()

    def load(self, folder: Path, num_threads: int):
        import openvino

        compiled = openvino.Core().compile_model(str(folder / "model.xml"), "CPU", {
            "INFERENCE_NUM_THREADS": num_threads, "INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": 32})
        request = compiled.create_infer_request()

        def run(input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
            return request.infer({"input_ids": input_ids, "attention_mask": attention_mask})[0].copy()

        return run


class _LogitsOnly(torch.nn.Module):
    """The scoring model as a function of ids and mask to logits, the graph an exporter traces."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


def export_logits_graph(model, path: Path) -> None:
    """An ONNX graph of ``model`` (ids, mask -> logits) with free batch and width."""
    model = copy.deepcopy(model).float().eval()
    with contextlib.suppress(ValueError, AttributeError):
        # the explicit attention graph is the one ONNX Runtime fuses; torch's fused attention exports as parts it does not
        model.encoder.set_attn_implementation("eager")
    width = min(16, model.config.max_length)
    ids = torch.full((2, width), 1000 % model.config.encoder.vocab_size, dtype=torch.long)
    mask = torch.ones_like(ids)
    mask[1, width // 2 :] = 0  # a padded row, so the mask is traced as an input that matters
    axes = {"input_ids": {0: "batch", 1: "width"}, "attention_mask": {0: "batch", 1: "width"}, "logits": {0: "batch"}}
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer and deprecation notices about the exporter itself
        torch.onnx.export(
            _LogitsOnly(model), (ids, mask), str(path), dynamo=False, opset_version=17,
            input_names=["input_ids", "attention_mask"], output_names=["logits"], dynamic_axes=axes,
        )


@contextlib.contextmanager
def _quiet_logging():
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


# CTranslate2 in wider types, for the drift and speed tables: how much of its speed comes from int8
WIDER_CTRANSLATE2 = ("int16", "float32")


def register() -> None:
    """Make the backends above available to ``int8_model`` / ``load_int8_scorer`` by name."""
    register_backend(OnnxRuntimeBackend())
    register_backend(OpenVinoBackend())
    for compute_type in WIDER_CTRANSLATE2:
        register_backend(CTranslate2Backend(compute_type))
