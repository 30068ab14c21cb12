"""A 12-layer GPT, one training step, each layer checkpointed

A small nanoGPT-style model in plain PyTorch (token and position embeddings, 12 pre-LayerNorm
blocks of causal self-attention and an MLP, with dropout, and a tied head), trained for one step
with every block under checkpoint(..., use_reentrant=False). Traced on real PyTorch, then opened
in the viewer of a running web app (make run):

    autograd-lens trace docs/examples/gpt.py --backend torch -o gpt.json
    autograd-lens open gpt.json

What checkpointing the blocks buys, module by module, against the same script without it
(`--no-checkpoint` turns it off; --what-if puts the blocks back under checkpoint from outside):

    autograd-lens memory docs/examples/gpt.py --backend torch -- --no-checkpoint
    autograd-lens memory docs/examples/gpt.py --backend torch --what-if 'transformer.h.*' -- --no-checkpoint

Plain PyTorch: nothing here knows about Autograd Lens.
"""

import argparse
import math

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

parser = argparse.ArgumentParser()
parser.add_argument("--layers", type=int, default=12)
parser.add_argument("--no-checkpoint", action="store_true", help="keep every activation instead")
args = parser.parse_args()

torch.manual_seed(0)
VOCAB, BLOCK, EMBD, HEADS, BATCH = 64, 16, 32, 4, 2


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(EMBD, 3 * EMBD)
        self.c_proj = nn.Linear(EMBD, EMBD)
        self.attn_dropout = nn.Dropout(0.1)
        self.resid_dropout = nn.Dropout(0.1)
        self.register_buffer("mask", torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(EMBD, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(EMBD, 4 * EMBD)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * EMBD, EMBD)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(EMBD)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(EMBD)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, layers, checkpointed):
        super().__init__()
        self.checkpointed = checkpointed
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(VOCAB, EMBD),
                wpe=nn.Embedding(BLOCK, EMBD),
                drop=nn.Dropout(0.1),
                h=nn.ModuleList([Block() for _ in range(layers)]),
                ln_f=nn.LayerNorm(EMBD),
            )
        )
        self.lm_head = nn.Linear(EMBD, VOCAB, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying, as GPT-2

    def forward(self, idx, targets):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            # Each block's activations are dropped after the forward and recomputed in backward.
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointed else block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


model = GPT(args.layers, checkpointed=not args.no_checkpoint)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
idx = torch.randint(0, VOCAB, (BATCH, BLOCK))
targets = torch.randint(0, VOCAB, (BATCH, BLOCK))

loss = model(idx, targets)
loss.backward()
optimizer.step()
print("loss:", loss.item())
