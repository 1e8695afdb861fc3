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


class _LlamaBlock(torch.nn.Module):
    """A Llama-style block in plain PyTorch: RMSNorm, causal SDPA attention, SwiGLU MLP (no rotary)."""

    def __init__(self, width: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.RMSNorm(width), torch.nn.RMSNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width, bias=False)
        self.out = torch.nn.Linear(width, width, bias=False)
        self.gate_up = torch.nn.Linear(width, 2 * ffn, bias=False)
        self.down = torch.nn.Linear(ffn, width, bias=False)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, s, h))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(torch.nn.functional.silu(gate) * up)


class SmallLlama(torch.nn.Module):
    def __init__(self, vocab=1000, width=256, heads=4, ffn=512, layers=4):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.blocks = torch.nn.ModuleList([_LlamaBlock(width, heads, ffn) for _ in range(layers)])
        self.norm = torch.nn.RMSNorm(width)
        self.head = torch.nn.Linear(width, vocab, bias=False)

    def forward(self, ids, labels):
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.norm(x))
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())


def small_llama():
    """4 Llama-style blocks (hidden 256, 4 heads, SwiGLU 512) with the LM loss; traced at 2 x 64 tokens."""
    ids = torch.zeros(2, 64, dtype=torch.long)
    return SmallLlama(), (ids, ids)
