"""torch's fused recurrent layers (cuDNN on a GPU) by name."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

RECURRENT_LAYERS: dict[str, Callable[..., nn.RNNBase]] = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}


def recurrent_layer(
    cell: str, input_size: int, hidden_size: int, layers: int, dropout: float, bidirectional: bool
) -> nn.RNNBase:
    """``rnn`` is the tanh Elman network; dropout applies between stacked layers only."""
    layer = RECURRENT_LAYERS[cell](
        input_size=input_size,
        hidden_size=hidden_size,
        num_layers=layers,
        dropout=dropout if layers > 1 else 0.0,
        bidirectional=bidirectional,
        batch_first=True,
    )
    if cell == "lstm":
        open_forget_gates(layer)
    return layer


def open_forget_gates(lstm: nn.RNNBase, bias: float = 1.0) -> None:
    """Start with forget gates mostly open (Jozefowicz et al. 2015; Keras' unit_forget_bias), so
    the cell state carries gradient back through long windows from the first step of training."""
    hidden = lstm.hidden_size
    with torch.no_grad():
        for name, parameter in lstm.named_parameters():
            if name.startswith("bias_ih"):  # gate order: input, forget, cell, output
                parameter[hidden : 2 * hidden].fill_(bias)
            elif name.startswith("bias_hh"):
                parameter[hidden : 2 * hidden].zero_()


def hidden_of(state: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """h_n from an RNN/GRU state or an LSTM's (h_n, c_n)."""
    return state[0] if isinstance(state, tuple) else state


def last_layer(h_n: torch.Tensor, layers: int, directions: int) -> torch.Tensor:
    """(layers*D, B, hidden) -> (B, D*hidden): the top layer, both directions side by side."""
    batch, hidden = h_n.shape[1], h_n.shape[2]
    top = h_n.view(layers, directions, batch, hidden)[-1]  # (D, B, hidden)
    return top.transpose(0, 1).reshape(batch, directions * hidden)  # (B, D*hidden)
