"""UNION (Guan & Huang, EMNLP 2020) as a transformers-native model.

An encoder (any ``AutoModel``), a linear + sigmoid head on the first token
that gives the probability that a human wrote the story, and a token
reconstruction head that predicts the original token at every position of a
perturbed story. Training loss: BCE + ``recon_weight`` x reconstruction NLL
(``recon_weight=0`` is the paper's "-Recon" ablation). The reconstruction head
is only needed for training: :meth:`UnionModel.drop_reconstruction_head`
removes it before a checkpoint is exported for scoring.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import torch
from huggingface_hub.dataclasses import strict
from torch import nn
from transformers import AutoConfig, AutoModel, PreTrainedConfig, PreTrainedModel
from transformers.configuration_utils import SubConfigSpec
from transformers.utils import ModelOutput

from storyeval.checkpoints.registry import UNION_MODEL_TYPE
from storyeval.models.mpnet_attention import use_fused_attention

# what an ending scorer reads of a story (storyeval.scoring.ending, which the models do not import)
ENDING_READS = ("last_sentences", "opening_ending", "neighbours", "runs")


@strict
class UnionConfig(PreTrainedConfig):
    """``encoder`` is the backbone's config; the rest are UNION's own settings.

    ``max_length`` is the scoring window in tokens and ``window_stride`` the
    step between windows for stories longer than that (see the scorer), and
    ``window_aggregation`` how their scores make the story's ("mean" or "min").
    ``delexicalize`` says whether the training stories had their person names
    replaced by placeholders, so that the scorer prepares text the same way.
    ``metric`` names the storyeval metric the checkpoint backs: the
    plot-coherence classifier is this architecture without the reconstruction
    head, trained on implausible stories generated from manipulated plots.
    """

    model_type = UNION_MODEL_TYPE
    sub_configs_defaults = {"encoder": SubConfigSpec(config_class=AutoConfig, model_type="bert")}

    encoder: PreTrainedConfig | dict | None = None
    recon_weight: float = 0.1
    has_reconstruction_head: bool = True
    max_length: int = 512
    window_stride: int = 256
    window_aggregation: str = "mean"
    classifier_dropout: float = 0.1
    delexicalize: bool = True
    metric: str = "union"
    # how many of the encoder's top layers were trained (None: all, with the embeddings); the rest
    # stayed the backbone's, so an export can ship only what differs from it
    trained_top_layers: int | None = None
    # LoRA adapters (peft) on the encoder's linear layers, everything else of the encoder frozen: their rank,
    # scale and the layer names they wrap (see UnionModel.add_lora_adapters); an export ships only them and the head
    lora_rank: int | None = None
    lora_alpha: float | None = None
    lora_target_modules: list[str] | None = None
    # set on a checkpoint that ships only its trained parameters: the backbone the rest comes from
    # (a name storyeval.checkpoints.backbones resolves, or a folder) and the SHA-256 of those untrained weights
    base_model: str | None = None
    base_model_sha256: str | None = None
    # set on an ending scorer (storyeval.scoring.ending): the story checkpoint whose score it completes (a name
    # storyeval.checkpoints.resolution resolves), the weight of its own score in the mix, how many of a story's
    # last sentences it reads (after the story's first sentence: ending_reads "opening_ending"), or (ending_reads
    # "neighbours") that it reads every two neighbouring sentences instead, or (ending_reads "runs") every run of that
    # many consecutive sentences,
    # and the share of those texts, lowest scores first, whose mean is mixed in (1: all of them)
    ending_of: str | None = None
    ending_weight: float | None = None
    ending_sentences: int | None = None
    ending_reads: str = "last_sentences"
    ending_lowest_share: float = 1.0

    def validate_recon_weight(self):
        if self.recon_weight < 0:
            raise ValueError(f"recon_weight must not be negative (0: no reconstruction loss), got {self.recon_weight}")

    def validate_ending(self):
        if self.ending_of is None:
            return
        if self.ending_weight is None or not 0 < self.ending_weight < 1:
            raise ValueError(f"ending_weight must be between 0 and 1 for an ending scorer, got {self.ending_weight}")
        if self.ending_sentences is None or self.ending_sentences < 1:
            raise ValueError(f"ending_sentences must be at least 1 for an ending scorer, got {self.ending_sentences}")
        if self.ending_reads not in ENDING_READS:
            raise ValueError(f"ending_reads must be one of {', '.join(map(repr, ENDING_READS))}, got {self.ending_reads!r}")
        if self.ending_reads == "runs" and self.ending_sentences < 2:
            raise ValueError(f"ending_sentences must be at least 2 for runs of sentences, got {self.ending_sentences}")
        if not 0 < self.ending_lowest_share <= 1:
            raise ValueError(f"ending_lowest_share must be in (0, 1], got {self.ending_lowest_share}")

    def validate_window_aggregation(self):
        if self.window_aggregation not in ("mean", "min"):  # storyeval.scoring.sequence.WINDOW_AGGREGATIONS; models do not import the scorer
            raise ValueError(f"window_aggregation must be 'mean' or 'min', got {self.window_aggregation!r}")

    def validate_max_length(self):
        """A window longer than the encoder's position table would fail deep in the forward pass."""
        positions = getattr(self.encoder, "max_position_embeddings", None)
        if positions is not None and self.max_length > positions:
            raise ValueError(
                f"max_length {self.max_length} exceeds the {positions} positions of the "
                f"{self.encoder.model_type} encoder; use at most {positions} (long stories are scored in windows)"
            )


@dataclasses.dataclass
class UnionOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None  # (batch,) human-vs-perturbed logit
    cls_loss: torch.Tensor | None = None
    recon_loss: torch.Tensor | None = None


class UnionModel(PreTrainedModel):
    config_class = UnionConfig
    base_model_prefix = "union"
    main_input_name = "input_ids"

    def __init__(self, config: UnionConfig):
        super().__init__(config)
        self.encoder = _encoder_from_config(config.encoder)
        hidden = config.encoder.hidden_size
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(hidden, 1)
        if config.has_reconstruction_head:
            self.recon_transform = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden))
            # the output projection reuses the input embeddings (as BERT's MLM head does), so only a bias is new
            self.recon_bias = nn.Parameter(torch.zeros(config.encoder.vocab_size))
        if config.lora_rank:  # a checkpoint saved while its adapters were unmerged (a run's best/): the same modules
            self._inject_lora()
        self.post_init()

    @classmethod
    def from_encoder(cls, encoder_name_or_path: str, **union_kwargs) -> "UnionModel":
        """A new UNION model around pretrained encoder weights (heads freshly initialised). Its config names the
        encoder by :func:`~storyeval.checkpoints.backbones.published_backbone_name` (a Hub id for the known
        backbones), never by the local folder it was read from."""
        from storyeval.checkpoints.backbones import published_backbone_name

        encoder = AutoModel.from_pretrained(encoder_name_or_path)
        encoder.config._name_or_path = published_backbone_name(str(encoder_name_or_path))
        model = cls(UnionConfig(encoder=encoder.config.to_dict(), **union_kwargs))
        weights = {k: v for k, v in encoder.state_dict().items() if not k.startswith("pooler.")}
        missing, unexpected = model.encoder.load_state_dict(weights, strict=False)
        if [k for k in missing if not k.startswith("pooler.")] or unexpected:
            raise ValueError(f"encoder weights do not fit: missing={missing}, unexpected={unexpected}")
        return model

    def _init_weights(self, module):
        if module is self.classifier or (self.config.has_reconstruction_head and module in self.recon_transform):
            if isinstance(module, nn.Linear):
                module.weight.data.normal_(0.0, self.config.encoder.initializer_range)
                module.bias.data.zero_()
            elif isinstance(module, nn.LayerNorm):
                module.weight.data.fill_(1.0)
                module.bias.data.zero_()

    def encoder_layer_prefix(self) -> str:
        """The parameter-name prefix of the encoder's transformer layers (``encoder.layer.`` in BERT-like models)."""
        names = [name for name, _ in self.encoder.named_parameters()]
        for prefix in ("encoder.layer.", "layer.", "transformer.layer."):
            if any(name.startswith(prefix) for name in names):
                return prefix
        raise ValueError(f"cannot find the transformer layers of a {self.config.encoder.model_type} encoder")

    def trained_parameter_names(self, top_layers: int | None = None) -> list[str]:
        """Names of the parameters trained when only the top ``top_layers`` encoder layers are (None: all):
        those layers, the heads, and nothing below them (embeddings, lower layers, shared position biases).
        With LoRA adapters: the adapters and the heads."""
        names = [name for name, _ in self.named_parameters()]
        if top_layers is None and self.config.lora_rank:
            return [name for name in names if not name.startswith("encoder.") or ".lora_" in name]
        top_layers = self.config.trained_top_layers if top_layers is None else top_layers
        if top_layers is None:
            return names
        layers = self.config.encoder.num_hidden_layers
        if not 0 < top_layers <= layers:
            raise ValueError(f"top_layers must be between 1 and the encoder's {layers} layers, got {top_layers}")
        prefix = "encoder." + self.encoder_layer_prefix()
        kept = tuple(f"{prefix}{i}." for i in range(layers - top_layers, layers))
        return [name for name in names if not name.startswith("encoder.") or name.startswith(kept)]

    def train_top_layers_only(self, top_layers: int) -> None:
        """Freeze the embeddings and all but the top ``top_layers`` encoder layers."""
        if self.config.lora_rank:
            raise ValueError("this model trains LoRA adapters: train them, or its top layers, not both")
        self.train_only(self.trained_parameter_names(top_layers))
        self.config.trained_top_layers = top_layers

    def untrained_weights_sha256(self) -> str:
        """SHA-256 over the float32 bytes of every parameter and buffer that training left as the backbone had them,
        in name order: what a checkpoint shipping only its trained parameters must be put back on top of.
        A layer wrapped by a LoRA adapter counts under the backbone's name for it."""
        trained = set(self.trained_parameter_names())
        untrained = {name.replace(".base_layer.", "."): tensor for name, tensor in self.state_dict().items()
                     if name.startswith("encoder.") and name not in trained}
        digest = hashlib.sha256()
        for name, tensor in sorted(untrained.items()):
            digest.update(name.encode())
            digest.update(tensor.detach().to(torch.float32).contiguous().cpu().numpy().tobytes())
        return digest.hexdigest()

    def linear_layer_names(self) -> list[str]:
        """The names, within a transformer layer, of the encoder's linear layers (query, key, ... in BERT; q, k, ... in MPNet)."""
        prefix = self.encoder_layer_prefix()
        return sorted({name.rpartition(".")[2] for name, module in self.encoder.named_modules()
                       if isinstance(module, nn.Linear) and name.startswith(prefix)})

    def add_lora_adapters(self, rank: int, alpha: float | None = None, target_modules: list[str] | None = None) -> None:
        """Wrap the encoder's linear layers (default: all of those in its transformer layers) in LoRA adapters of
        ``rank`` (scale ``alpha``, default twice the rank) and freeze the rest of the encoder; the heads still train."""
        if self.config.lora_rank or self.config.trained_top_layers is not None:
            raise ValueError("this model already trains a part of its encoder (adapters or top layers): add adapters to a whole model")
        if rank < 1:
            raise ValueError(f"the LoRA rank must be positive, got {rank}")
        self.config.lora_rank, self.config.lora_alpha = rank, float(alpha or 2 * rank)
        self.config.lora_target_modules = sorted(target_modules or self.linear_layer_names())
        self._inject_lora()
        self.train_only(self.trained_parameter_names())

    def train_only(self, names: list[str]) -> None:
        """Freeze every parameter not in ``names``."""
        trained = set(names)
        for name, parameter in self.named_parameters():
            parameter.requires_grad_(name in trained)

    def _inject_lora(self) -> None:
        from peft import LoraConfig, inject_adapter_in_model

        lora = LoraConfig(r=self.config.lora_rank, lora_alpha=self.config.lora_alpha, target_modules=self.config.lora_target_modules,
                          lora_dropout=0.0, bias="none")
        inject_adapter_in_model(lora, self.encoder)

    def _merge_adapters(self, adapters: dict[str, torch.Tensor], folder: Path) -> None:
        """Fold saved LoRA adapters into the weights they adapt, W + (alpha / rank) B A, as peft's merge does; done
        here so that scoring needs no peft and runs a plain model, as fast as the backbone."""
        weights = dict(self.named_parameters())
        scale = self.config.lora_alpha / self.config.lora_rank
        for name in [k for k in adapters if ".lora_A." in k]:
            layer = name.split(".lora_A.")[0]
            down, up = adapters.pop(name), adapters.pop(name.replace(".lora_A.", ".lora_B."), None)
            if up is None or f"{layer}.weight" not in weights:
                raise ValueError(f"{folder}/model.safetensors: the adapter {layer} has no matching pair or layer")
            with torch.no_grad():
                weights[f"{layer}.weight"].add_(scale * (up @ down))
        if adapters:
            raise ValueError(f"{folder}/model.safetensors: adapters without a pair: {sorted(adapters)[:3]}")
        self.config.lora_rank = self.config.lora_alpha = self.config.lora_target_modules = None

    def save_trained_parameters(self, folder: str | Path, base_model: str) -> None:
        """Save only what training changed (fp16), with the config naming ``base_model`` and the hash of its weights.

        A base-size backbone fine-tuned in its top layers ships as tens of MB instead of
        hundreds; :meth:`from_pretrained` puts it back on the backbone in one call.
        """
        from safetensors.torch import save_file

        if self.config.trained_top_layers is None and not self.config.lora_rank:
            raise ValueError("this model trained all its parameters: save it with save_pretrained")
        self.drop_reconstruction_head()  # training-only, and most of its size is the vocabulary bias
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        weights = dict(self.state_dict())
        tensors = {name: weights[name].detach().to(torch.float16).contiguous() for name in self.trained_parameter_names()}
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
        self.config.base_model, self.config.base_model_sha256 = base_model, self.untrained_weights_sha256()
        self.config.architectures = [type(self).__name__]
        self.config.save_pretrained(folder)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, base_model_path: str | None = None,
                        merge_adapters: bool = True, **kwargs):
        """A checkpoint folder that ships only its trained parameters is loaded onto its backbone
        (``base_model_path``, else its recorded ``base_model`` resolved by :mod:`storyeval.checkpoints.backbones`),
        whose untrained weights must hash to the recorded value; anything else loads as usual. Its LoRA adapters are
        merged into the weights they adapt (scoring), or with ``merge_adapters=False`` kept as trainable adapters
        (training continues them, and the export again ships only them)."""
        folder = Path(str(pretrained_model_name_or_path))
        if not folder.is_dir():  # a Hub id: fetched (or found in the cache) first, so a partial checkpoint is seen as one
            from huggingface_hub import snapshot_download

            hub_options = {k: kwargs[k] for k in ("revision", "cache_dir", "local_files_only", "token") if k in kwargs}
            folder = Path(snapshot_download(str(pretrained_model_name_or_path), **hub_options))
        config_file = folder / "config.json"
        if not config_file.is_file() or not json.loads(config_file.read_text()).get("base_model_sha256"):
            return super().from_pretrained(folder, *args, **kwargs)
        unsupported = sorted(set(kwargs) - {"dtype", "revision", "cache_dir", "local_files_only", "token"})
        if args or unsupported:
            raise TypeError(f"{folder} ships only its trained layers and loads with dtype= (and base_model_path=); not {unsupported or args}")
        return cls._from_trained_parameters(folder, base_model_path, kwargs.get("dtype"), merge_adapters)

    @classmethod
    def _from_trained_parameters(cls, folder: Path, base_model_path: str | None, dtype, merge_adapters: bool = True) -> "UnionModel":
        from safetensors.torch import load_file

        from storyeval.checkpoints.backbones import resolve_backbone

        config = UnionConfig.from_pretrained(folder)
        backbone = base_model_path or resolve_backbone(config.base_model)
        lora_rank, config.lora_rank = config.lora_rank, None
        # built on the meta device, without adapters: every tensor is replaced below (the backbone's encoder, then the
        # trained parameters), so a CPU build with random weights and the copies into it would be a cold start's
        # slowest steps
        with torch.device("meta"):
            model = cls(config)
        model.config.lora_rank = lora_rank
        # the recorded encoder config, as cls(config) builds it; the backbone gives only the weights
        encoder = AutoModel.from_pretrained(backbone, config=config.encoder, dtype=torch.float32)
        if getattr(encoder, "pooler", None) is not None:  # unused, and left out of the architecture (_encoder_from_config)
            encoder.pooler = None
        encoder.config._name_or_path = config.encoder._name_or_path  # the published name, not this machine's folder
        expected = {name: tensor.shape for name, tensor in model.encoder.state_dict().items()}
        if {name: tensor.shape for name, tensor in encoder.state_dict().items()} != expected:
            raise ValueError(f"{backbone} is not the {config.base_model} backbone of {folder}: its weights do not fit the architecture")
        use_fused_attention(encoder)
        model.encoder = encoder
        if model.untrained_weights_sha256() != config.base_model_sha256:
            raise ValueError(
                f"{backbone} is not the backbone {folder} was trained on: its weights hash differently from the recorded "
                f"{config.base_model} ({config.base_model_sha256[:12]}...); give the right one with base_model_path"
            )
        trained = {k: v.to(torch.float32) for k, v in load_file(str(folder / "model.safetensors")).items()}
        adapters = {k: trained.pop(k) for k in [k for k in trained if ".lora_" in k]}
        if set(trained) != set(model.trained_parameter_names()) or bool(adapters) != bool(lora_rank):
            raise ValueError(f"{folder}/model.safetensors does not hold the parameters its config says were trained")
        model.load_state_dict(trained, strict=False, assign=True)
        if left := [name for name, tensor in [*model.named_parameters(), *model.named_buffers()] if tensor.is_meta]:
            raise ValueError(f"{folder}: no weights for {', '.join(left[:3])}: neither its backbone nor model.safetensors holds them")
        if lora_rank and merge_adapters:
            model._merge_adapters(adapters, folder)
        elif lora_rank:
            model._inject_lora()
            missing = set(model.trained_parameter_names()) - set(trained) - set(adapters)
            if missing or set(adapters) - set(model.trained_parameter_names()):
                raise ValueError(f"{folder}/model.safetensors: its adapters do not fit the modules its config names")
            model.load_state_dict(adapters, strict=False)
            model.train_only(model.trained_parameter_names())
        # complete in memory now: save_pretrained writes all its weights, so the hash no longer applies
        model.config.base_model_sha256 = None
        model.eval()
        return model.to(dtype) if isinstance(dtype, torch.dtype) else model

    def drop_reconstruction_head(self) -> None:
        """Remove the training-only head, for a smaller scoring checkpoint."""
        if self.config.has_reconstruction_head:
            del self.recon_transform, self.recon_bias
            self.config.has_reconstruction_head = False

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        recon_labels: torch.Tensor | None = None,
    ) -> UnionOutput:
        """``labels``: 1 human, 0 perturbed. ``recon_labels``: original token ids, -100 where ignored."""
        encoder_kwargs = {"attention_mask": attention_mask}
        if token_type_ids is not None:
            encoder_kwargs["token_type_ids"] = token_type_ids
        hidden = self.encoder(input_ids=input_ids, **encoder_kwargs).last_hidden_state
        logits = self.classifier(self.dropout(hidden[:, 0])).squeeze(-1)

        loss = cls_loss = recon_loss = None
        if labels is not None:
            cls_loss = nn.functional.binary_cross_entropy_with_logits(logits, labels.float())
            loss = cls_loss
            if recon_labels is not None and self.config.recon_weight > 0:
                if not self.config.has_reconstruction_head:
                    raise ValueError("recon_labels given, but this checkpoint has no reconstruction head")
                recon_loss = self._reconstruction_loss(hidden, recon_labels)
                loss = cls_loss + self.config.recon_weight * recon_loss
        return UnionOutput(loss=loss, logits=logits, cls_loss=cls_loss, recon_loss=recon_loss)

    def _reconstruction_loss(self, hidden: torch.Tensor, recon_labels: torch.Tensor) -> torch.Tensor:
        # project only the positions that have a target: the vocabulary projection dominates the cost
        mask = recon_labels != -100
        if not mask.any():
            return hidden.new_zeros(())
        states = self.recon_transform(hidden[mask])
        vocab_logits = states @ self.encoder.get_input_embeddings().weight.T + self.recon_bias
        return nn.functional.cross_entropy(vocab_logits.float(), recon_labels[mask])


def _encoder_from_config(config: PreTrainedConfig) -> PreTrainedModel:
    try:  # the pooler is unused: leave it out where the architecture allows
        encoder = AutoModel.from_config(config, add_pooling_layer=False)
    except TypeError:
        encoder = AutoModel.from_config(config)
    use_fused_attention(encoder)  # MPNet's eager attention is slow on long windows; other encoders are left alone
    return encoder


AutoConfig.register(UnionConfig.model_type, UnionConfig)
AutoModel.register(UnionConfig, UnionModel)
