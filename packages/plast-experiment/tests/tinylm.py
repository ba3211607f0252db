"""A tiny next-token model with GPT's interface (``model(idx, targets) -> (logits, loss)``, ``generate``,
``configure_optimizers``), so the trainer's tests run in seconds and don't depend on plast.nn.GPT.

Importing this module registers it as ``model.arch=tinylm`` (configs name registered architectures only).
"""

import numpy as np

import plast
import plast.nn as nn
from plast.experiment import register_arch


class TinyLM(nn.Module):
    """Token and position embeddings, dropout, a GELU layer and a linear head (a bigram-plus model)."""

    def __init__(self, vocab_size, block_size, n_embd, dropout):
        super().__init__()
        self.block_size = block_size
        self.dropout = dropout
        self.wte = nn.Parameter(plast.randn(vocab_size, n_embd) * 0.02)
        self.wpe = nn.Parameter(plast.randn(block_size, n_embd) * 0.02)
        self.fc = nn.Linear(n_embd, n_embd)
        self.head = nn.Linear(n_embd, vocab_size)

    def forward(self, idx, targets=None):
        _, t = idx.shape
        x = plast.embedding(idx, self.wte) + self.wpe[:t]  # (B, T, C)
        x = plast.dropout(x, self.dropout, self.training)
        x = x + plast.gelu(self.fc(x))
        logits = self.head(x)  # (B, T, V)
        if targets is None:
            return logits[:, -1:, :], None
        loss = plast.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        decay = [p for p in self.parameters() if p.ndim >= 2]
        no_decay = [p for p in self.parameters() if p.ndim < 2]
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return plast.optim.AdamW(groups, lr=learning_rate, betas=betas)

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        ids = idx.tolist()
        for _ in range(max_new_tokens):
            cond = plast.tensor(np.asarray([ids[0][-self.block_size :]], dtype=np.int64))
            logits, _ = self(cond)
            probs = plast.softmax(logits[:, -1, :] / temperature, dim=-1)
            ids[0].append(int(plast.multinomial(probs, 1).tolist()[0][0]))
        return plast.tensor(np.asarray(ids, dtype=np.int64))


def build(mcfg, vocab_size):
    return TinyLM(vocab_size, mcfg.block_size, mcfg.n_embd, mcfg.dropout)


register_arch("tinylm", build)
