"""Embedding: a lookup table of ``num_embeddings`` rows of size ``embedding_dim`` (torch.nn.Embedding)."""

import plast
from plast.errors import DTypeError, ShapeError

from . import functional as F
from . import init
from .linear import _factory_dtype
from .module import Module
from .parameter import Parameter


class Embedding(Module):
    """Rows of ``weight`` (num_embeddings, embedding_dim) picked by integer ids of any shape; output is
    ``ids.shape + (embedding_dim,)``. Init N(0, 1), as torch, with the ``padding_idx`` row zeroed; that row
    gets no gradient.

    >>> emb = plast.nn.Embedding(10, 3, padding_idx=0)
    >>> emb(plast.tensor([[0, 4]])).shape, emb.weight[0].tolist()
    (plast.Size([1, 2, 3]), [0.0, 0.0, 0.0])
    """

    def __init__(
        self,
        num_embeddings,
        embedding_dim,
        padding_idx=None,
        max_norm=None,
        norm_type=2.0,
        scale_grad_by_freq=False,
        sparse=False,
        _weight=None,
        _freeze=False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        dt = _factory_dtype(device, dtype)
        if padding_idx is not None:
            if padding_idx > 0:
                if padding_idx >= num_embeddings:
                    raise ValueError("Padding_idx must be within num_embeddings")
            elif padding_idx < 0:
                if padding_idx < -num_embeddings:
                    raise ValueError("Padding_idx must be within num_embeddings")
                padding_idx = num_embeddings + padding_idx
        if sparse:
            raise NotImplementedError(
                "Embedding(sparse=True): plast has no sparse tensors, so gradients are always dense; pass "
                "sparse=False"
            )
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(
                plast.empty(num_embeddings, embedding_dim, dtype=dt), requires_grad=not _freeze
            )
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ShapeError(
                    f"Embedding: _weight must have shape ({num_embeddings}, {embedding_dim}), got "
                    f"{tuple(_weight.shape)}"
                )
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self):
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is not None:
            with plast.no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input):
        if input.dtype not in (plast.int64, plast.int32):
            raise DTypeError(
                f"{self!r}: expected integer ids (int64 or int32) of any shape, got {input.dtype} "
                f"{tuple(input.shape)}"
            )
        return F.embedding(
            input, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq
        )

    @classmethod
    def from_pretrained(
        cls,
        embeddings,
        freeze=True,
        padding_idx=None,
        max_norm=None,
        norm_type=2.0,
        scale_grad_by_freq=False,
        sparse=False,
    ):
        """An Embedding holding `embeddings` (2-D); ``freeze`` (default) makes it not require grad.

        >>> plast.nn.Embedding.from_pretrained(plast.eye(3))(plast.tensor([1])).tolist()
        [[0.0, 1.0, 0.0]]
        """
        if embeddings.ndim != 2:
            raise ShapeError(
                f"Embeddings parameter is expected to be 2-dimensional, got {tuple(embeddings.shape)}"
            )
        rows, cols = embeddings.shape
        return cls(
            rows,
            cols,
            padding_idx=padding_idx,
            max_norm=max_norm,
            norm_type=norm_type,
            scale_grad_by_freq=scale_grad_by_freq,
            sparse=sparse,
            _weight=embeddings,
            _freeze=freeze,
        )

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
