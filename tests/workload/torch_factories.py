"""Factories for `phaze import-model --torch` in the tests (built on the meta device by the importer)."""
from __future__ import annotations

import json
from pathlib import Path

import torch

CONFIGS = Path(__file__).parent / "hf_configs"


def tiny_llama():
    """TinyLlama-1.1B's published config cut to 3 blocks (same block shape)."""
    import transformers

    cfg = json.loads((CONFIGS / "tinyllama-1.1b.json").read_text())
    cfg.update(num_hidden_layers=3)
    family = cfg.pop("model_type")
    config = transformers.AutoConfig.for_model(family, **cfg)
    return transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")


class _Block(torch.nn.Module):
    def __init__(self, width: int, mult: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, mult * width)
        self.down = torch.nn.Linear(mult * width, width)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


class MlpStack(torch.nn.Module):
    """Two MLP blocks of one shape, one of another, and a cumulative sum our op set does not have."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([_Block(64, 4), _Block(64, 4), _Block(64, 2)])
        self.out = torch.nn.Linear(64, 10, bias=False)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.out(torch.cumsum(x, dim=1))


def mlp_stack():
    return MlpStack(), (torch.zeros(2, 16, 64),)
