"""Seed 004's throughput predictor: a transformer encoder over the feature vector, and its file.

The model (seed 004 §3.4 and its artifact): the input is standardised
(per-feature mean and standard deviation of the training data, clipped at
±10: configs of an unseen layer can lie far outside them), zero-padded
to a multiple of the head count, and fed as a sequence of **one** token to
``nn.TransformerEncoder`` (3 layers, 4 heads, feed-forward width 1024,
dropout 0.25), followed by a linear head. It predicts the z-normalised
throughput.

Self-attention over a single token is the identity mixing (softmax over one
key is 1), so each encoder layer reduces to ``x + W_o W_v LN(x)`` and a
feed-forward residual block: the model is in effect a residual MLP with
LayerNorm. It is shipped as the paper specifies it, since that is the
predictor seed 004 evaluated.

A predictor file (``torch.save``) holds the weights, the standardisation,
the label statistics, the feature names and the **target fingerprint** of
the machine whose measurements trained it: throughput is a property of a
machine, and :func:`load_predictor` refuses a file from another CPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tensorgym.errors import InvalidArgumentError

from ..threads import torch_threads

PREDICTOR_FORMAT = 1
HEADS = 4
LAYERS = 3
FEED_FORWARD = 1024
DROPOUT = 0.25
INPUT_CLIP = 10.0  # standardised inputs beyond this many standard deviations are out of the training range


def ignore_features(features: np.ndarray, names: list[str], ignored: list[str]) -> np.ndarray:
    """``features`` with the columns named in ``ignored`` set to 0: constant in training, the standardisation
    maps them to 0 and the network cannot use them (a copy; ``features`` is left as it is)."""
    columns = [i for i, name in enumerate(names) if name in set(ignored)]
    out = np.array(features, dtype=np.float64, copy=True)
    out[:, columns] = 0.0
    return out


class TargetMismatch(InvalidArgumentError):
    """A predictor trained on another machine's measurements."""


def _nn():
    import torch
    from torch import nn

    return torch, nn


def build_network(input_size: int):
    """The transformer encoder + linear head over ``input_size`` standardised features (see the module docs)."""
    torch, nn = _nn()
    width = -(-input_size // HEADS) * HEADS  # padded to a multiple of the heads

    class Predictor(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_size, self.width = input_size, width
            self.register_buffer("mean", torch.zeros(input_size))
            self.register_buffer("std", torch.ones(input_size))
            layer = nn.TransformerEncoderLayer(d_model=width, nhead=HEADS, dim_feedforward=FEED_FORWARD,
                                               dropout=DROPOUT, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=LAYERS, enable_nested_tensor=False)
            self.head = nn.Linear(width, 1)

        def forward(self, x):
            x = ((x - self.mean) / self.std).clamp(-INPUT_CLIP, INPUT_CLIP)
            if self.width > self.input_size:
                x = nn.functional.pad(x, (0, self.width - self.input_size))
            return self.head(self.encoder(x.unsqueeze(1)).squeeze(1)).squeeze(-1)

    return Predictor()


@dataclass
class PredictorInfo:
    """What a predictor file says about itself."""

    target: str  # fingerprint of the machine whose measurements trained it
    target_label: str
    feature_names: list[str]
    label_mean: float  # label statistics of the z-normalisation (GFLOP/s, or shares of a layer's best)
    label_std: float
    tasks: int = 0
    samples: int = 0
    epochs: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)
    format: int = PREDICTOR_FORMAT
    labels: str = "gflops"  # "relative": shares of each layer's best, so predictions rank, they do not price
    ignored: list[str] = field(default_factory=list)  # features read as 0 (features.FEATURE_SETS)


class OneShotPredictor:
    """A trained network with its :class:`PredictorInfo`: predicts z-normalised throughput of feature rows."""

    def __init__(self, network, info: PredictorInfo):
        self.network = network
        self.info = info

    def predict(self, features: np.ndarray, batch: int = 8192, threads: int = 1) -> np.ndarray:
        """Predicted z-normalised throughput of each row of ``features`` (higher is faster)."""
        torch, _ = _nn()
        self.network.eval()
        if self.info.ignored:
            features = ignore_features(features, self.info.feature_names, self.info.ignored)
        out = []
        with torch.no_grad(), torch_threads(threads):
            for i in range(0, len(features), batch):
                out.append(self.network(torch.as_tensor(features[i:i + batch], dtype=torch.float32)).numpy())
        return np.concatenate(out) if out else np.zeros(0)

    def predicted_gflops(self, features: np.ndarray) -> np.ndarray:
        """The predictions in the label's unit, undoing the z-normalisation: GFLOP/s, or with relative labels
        the predicted share of the layer's best."""
        return self.predict(features) * self.info.label_std + self.info.label_mean

    def save(self, path: str | Path) -> None:
        torch, _ = _nn()
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        torch.save({"info": asdict(self.info), "input_size": self.network.input_size,
                    "state_dict": self.network.state_dict()}, str(path))

    def check_target(self, fingerprint: str, path: str = "the predictor") -> None:
        """Raise :class:`TargetMismatch` unless the predictor was trained on the machine ``fingerprint``."""
        if fingerprint != self.info.target:
            raise TargetMismatch(
                f"{path} was trained on measurements of target {self.info.target} ({self.info.target_label}); this "
                f"env's target is {fingerprint}. A predictor learns one machine's speed: train one here with "
                f"`tensorgym oneshot train --db DATA.db --out model.pt` on a dataset measured on this machine")


def load_predictor(path: str | Path) -> OneShotPredictor:
    """The predictor stored at ``path`` (raises a clear error for a missing or foreign file)."""
    torch, _ = _nn()
    path = Path(path)
    if not path.is_file():
        raise InvalidArgumentError(f"predictor file {path} does not exist (train one with `tensorgym oneshot train`)")
    try:
        data = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same user error
        raise InvalidArgumentError(f"{path} is not a tensorgym one-shot predictor: {exc}") from None
    if not isinstance(data, dict) or "info" not in data or data["info"].get("format") != PREDICTOR_FORMAT:
        raise InvalidArgumentError(f"{path} is not a tensorgym one-shot predictor of format {PREDICTOR_FORMAT}")
    network = build_network(int(data["input_size"]))
    network.load_state_dict(data["state_dict"])
    return OneShotPredictor(network, PredictorInfo(**data["info"]))
