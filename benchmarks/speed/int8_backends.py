"""Int8 backends measured against the shipped one (OpenVINO, ``storyeval.scoring.int8.runtime``) but not shipped.

ONNX Runtime: the model exported with torch.onnx, its BERT layers fused by
ONNX Runtime's transformer optimiser, then dynamically quantised to int8
(weights per output channel, activations per tensor and batch). It is fast
but drifts from float32 far past the 0.999 bound (Spearman 0.987; speed.md),
so it lives here, plugged into the runtime's
:class:`~storyeval.scoring.int8.runtime.Int8Backend` interface for the benchmark only.
(CTranslate2's int8, which shipped first, stays selectable in the runtime as
``backend="ctranslate2"``.)

CTranslate2 in int16 and float32: the same runtime without int8, to show how
much of its speed and of its drift from torch float32 comes from int8.

OpenVINO in float32 (``openvino-float32``): the shipped runtime without int8, as a float32 path of its own.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from storyeval.scoring.int8.runtime import (
    DEFAULT_SCHEME,
    CTranslate2Backend,
    Int8Backend,
    OpenVinoBackend,
    export_logits_graph,
    quiet_logging,
    register_backend,
)


class OnnxRuntimeBackend(Int8Backend):
    """torch.onnx export, ONNX Runtime's transformer fusions, then its dynamic int8 quantisation (per-channel weights)."""

    name = "onnxruntime"
    modules = ("onnxruntime", "onnx")
    distributions = ("onnx", "onnxruntime")
    install = "python -m pip install onnxruntime onnx"

    def export(self, model, tokenizer, folder: Path, scheme: str = DEFAULT_SCHEME) -> None:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.transformers import optimizer

        if scheme != DEFAULT_SCHEME:
            raise ValueError(f"the {self.name} backend quantises every weight, not scheme {scheme!r}")
        float_path, fused_path = folder / "float32.onnx", folder / "fused.onnx"
        export_logits_graph(model, float_path)
        encoder = model.config.encoder
        # ONNX Runtime's fusions know BERT-like graphs; a graph they do not match stays unfused, and correct
        fused = optimizer.optimize_model(str(float_path), model_type="bert", num_heads=encoder.num_attention_heads, hidden_size=encoder.hidden_size)
        fused.save_model_to_file(str(fused_path))
        with quiet_logging():  # it logs advice about static quantisation, which this is not
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


class OpenVinoFloat32Backend(OpenVinoBackend):
    """The shipped backend's ONNX graph in OpenVINO with no int8 at all, weights stored in float32: whether the runtime
    alone is faster than torch's float32 for the base tier (issue 84), at float32's scores."""

    name = "openvino-float32"

    def cpu_problem(self) -> str | None:
        return None  # no int8 products: any CPU

    def export(self, model, tokenizer, folder: Path, scheme: str = DEFAULT_SCHEME) -> None:
        import openvino

        if scheme != DEFAULT_SCHEME:
            raise ValueError(f"the {self.name} backend quantises nothing, so it takes no scheme {scheme!r}")
        float_path = folder / "float32.onnx"
        export_logits_graph(model, float_path)
        openvino.save_model(openvino.Core().read_model(str(float_path)), str(folder / "model.xml"), compress_to_fp16=False)
        float_path.unlink()


# CTranslate2 in wider types, for the drift and speed tables: how much of its speed comes from int8
WIDER_CTRANSLATE2 = ("int16", "float32")


def register() -> None:
    """Make the backends above available to ``int8_model`` / ``load_int8_scorer`` by name."""
    register_backend(OnnxRuntimeBackend())
    register_backend(OpenVinoFloat32Backend())
    for compute_type in WIDER_CTRANSLATE2:
        register_backend(CTranslate2Backend(compute_type))
