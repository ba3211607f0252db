"""MultiheadAttention with torch.nn.MultiheadAttention's signature, parameter names and mask semantics.

Masks follow torch's MultiheadAttention (not scaled_dot_product_attention): in a bool ``attn_mask`` or
``key_padding_mask`` True means "may NOT attend"; a float mask is added to the attention scores (use -inf to
mask). ``plast.nn.causal_mask(n)`` follows scaled_dot_product_attention instead (True = may attend), so pass
``~causal_mask(n)`` here, or its float form ``causal_mask(n, dtype=plast.float32)``, which means the same in both.
"""

import math

import plast
from plast.errors import ShapeError

from . import functional as F
from . import init
from .linear import NonDynamicallyQuantizableLinear, _factory_dtype
from .module import Module
from .parameter import Parameter


def _additive(mask, dtype, what, owner):
    """A float mask to add to the scores: bool True -> -inf, float as is."""
    if mask is None:
        return None
    if mask.dtype == plast.bool:
        return plast.where(mask, float("-inf"), 0.0).to(dtype)
    if not mask.dtype.is_floating_point:
        raise TypeError(f"{owner!r}: only bool and floating types of {what} are supported, got {mask.dtype}")
    return mask.to(dtype)


class MultiheadAttention(Module):
    """Multi-head attention (torch.nn.MultiheadAttention): ``out_proj(concat_h softmax(q_h k_h^T / sqrt(d) +
    mask) v_h)`` with q, k, v projected by ``in_proj_weight`` ([3 * embed_dim, embed_dim], or ``q_proj_weight``
    / ``k_proj_weight`` / ``v_proj_weight`` when kdim or vdim differ) and ``in_proj_bias``.

    Inputs are (L, N, E) (``batch_first=True``: (N, L, E)) or unbatched (L, E). ``forward`` returns
    ``(output, weights)``; weights are averaged over heads (N, L, S) unless ``average_attn_weights=False``
    (N, num_heads, L, S), and None with ``need_weights=False``. ``attn_mask``: (L, S) or (N * num_heads, L, S);
    ``key_padding_mask``: (N, S); bool True = masked out. ``is_causal`` is a hint that ``attn_mask`` is the
    causal mask (it must be given, as torch requires).

    >>> mha = plast.nn.MultiheadAttention(8, 2, batch_first=True)
    >>> x = plast.randn(3, 5, 8)
    >>> out, w = mha(x, x, x)
    >>> out.shape, w.shape
    (plast.Size([3, 5, 8]), plast.Size([3, 5, 5]))
    """

    def __init__(
        self,
        embed_dim,
        num_heads,
        dropout=0.0,
        bias=True,
        add_bias_kv=False,
        add_zero_attn=False,
        kdim=None,
        vdim=None,
        batch_first=False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                f"num_heads={num_heads} instead"
            )
        dt = _factory_dtype(device, dtype)
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(plast.empty(embed_dim, embed_dim, dtype=dt))
            self.k_proj_weight = Parameter(plast.empty(embed_dim, self.kdim, dtype=dt))
            self.v_proj_weight = Parameter(plast.empty(embed_dim, self.vdim, dtype=dt))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(plast.empty(3 * embed_dim, embed_dim, dtype=dt))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(plast.empty(3 * embed_dim, dtype=dt))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, dtype=dt)
        if add_bias_kv:
            self.bias_k = Parameter(plast.empty(1, 1, embed_dim, dtype=dt))
            self.bias_v = Parameter(plast.empty(1, 1, embed_dim, dtype=dt))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    # ---- checks ----
    def _fail(self, what, expected, got):
        raise ShapeError(f"{self._desc()}: expected {what} of shape {expected}, got {tuple(got.shape)}")

    def _desc(self):
        return f"MultiheadAttention(embed_dim={self.embed_dim}, num_heads={self.num_heads})"

    def _check(self, query, key, value, key_padding_mask, attn_mask):
        E, kd, vd = self.embed_dim, self.kdim, self.vdim
        lay = "(N, L, {})" if self.batch_first else "(L, N, {})"
        if query.ndim not in (2, 3):
            self._fail("query", f"{lay.format(E)} or unbatched (L, {E})", query)
        batched = query.ndim == 3
        if key.ndim != query.ndim or value.ndim != query.ndim:
            got = key if key.ndim != query.ndim else value
            which = "key" if got is key else "value"
            self._fail(which, f"with {query.ndim} dims like the query {tuple(query.shape)}", got)
        if query.shape[-1] != E:
            self._fail("query", f"{lay.format(E)} or (L, {E})", query)
        if key.shape[-1] != kd:
            self._fail("key", f"{lay.replace('L', 'S').format(kd)} or (S, {kd})", key)
        if value.shape[-1] != vd:
            self._fail("value", f"{lay.replace('L', 'S').format(vd)} or (S, {vd})", value)
        if tuple(key.shape[:-1]) != tuple(value.shape[:-1]):
            raise ShapeError(
                f"{self._desc()}: key {tuple(key.shape)} and value {tuple(value.shape)} must have the same sequence "
                "length and batch size"
            )
        bdim = 0 if self.batch_first else 1
        if batched and key.shape[bdim] != query.shape[bdim]:
            raise ShapeError(
                f"{self._desc()}: query {tuple(query.shape)} and key {tuple(key.shape)} must have the same batch size"
            )
        L = query.shape[1 - bdim] if batched else query.shape[0]
        S = key.shape[1 - bdim] if batched else key.shape[0]
        N = query.shape[bdim] if batched else 1
        if key_padding_mask is not None:
            want = (N, S) if batched else (S,)
            if tuple(key_padding_mask.shape) != want:
                self._fail("key_padding_mask", want, key_padding_mask)
        if attn_mask is not None:
            ok3 = (N * self.num_heads, L, S) if batched else (self.num_heads, L, S)
            if tuple(attn_mask.shape) not in ((L, S), ok3):
                self._fail("attn_mask", f"({L}, {S}) or {ok3}", attn_mask)
        return batched, N, L, S

    # ---- forward ----
    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights=True,
        attn_mask=None,
        average_attn_weights=True,
        is_causal=False,
    ):
        batched, N, L, S = self._check(query, key, value, key_padding_mask, attn_mask)
        if is_causal and attn_mask is None:
            raise RuntimeError(
                "Need attn_mask if specifying the is_causal hint (as torch): pass plast.nn.causal_mask(L) "
                "inverted (~mask) or in float form"
            )
        H, hd, E = self.num_heads, self.head_dim, self.embed_dim
        # to (N, L, E)
        if batched:
            if not self.batch_first:
                query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        else:
            query, key, value = (t.unsqueeze(0) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        # projections
        if self._qkv_same_embed_dim and query is key and key is value:
            q, k, v = F.linear(query, self.in_proj_weight, self.in_proj_bias).split(E, dim=-1)
        else:
            if self._qkv_same_embed_dim:
                wq, wk, wv = self.in_proj_weight.split(E, dim=0)
            else:
                wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
            bq = bk = bv = None
            if self.in_proj_bias is not None:
                bq, bk, bv = self.in_proj_bias.split(E, dim=0)
            q, k, v = F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

        # masks -> one additive float mask broadcastable to (N, H, L, S)
        dt = q.dtype
        use_causal_hint = is_causal and key_padding_mask is None and not need_weights
        mask = None
        if attn_mask is not None and not use_causal_hint:
            m = _additive(attn_mask, dt, "attn_mask", self)
            mask = m.reshape(1, 1, L, S) if m.ndim == 2 else m.reshape(N, H, L, S)
        if key_padding_mask is not None:
            kpm = _additive(key_padding_mask, dt, "key_padding_mask", self).reshape(N, 1, 1, S)
            mask = kpm if mask is None else mask + kpm
        if self.bias_k is not None:
            k = plast.cat([k, self.bias_k.expand(N, 1, E)], dim=1)
            v = plast.cat([v, self.bias_v.expand(N, 1, E)], dim=1)
            S += 1
            if mask is not None:
                mask = F.pad(mask, (0, 1))
        # heads: (N, H, L, hd)
        q = q.reshape(N, L, H, hd).transpose(1, 2)
        k = k.reshape(N, S, H, hd).transpose(1, 2)
        v = v.reshape(N, S, H, hd).transpose(1, 2)
        if self.add_zero_attn:
            z = plast.zeros(N, H, 1, hd, dtype=k.dtype, device=k.device)
            k = plast.cat([k, z], dim=2)
            v = plast.cat([v, z], dim=2)
            S += 1
            if mask is not None:
                mask = F.pad(mask, (0, 1))
        p = self.dropout if self.training else 0.0

        weights = None
        if need_weights:
            scores = plast.matmul(q * (1.0 / math.sqrt(hd)), k.transpose(-2, -1))
            if mask is not None:
                scores = scores + mask
            attn = plast.softmax(scores, dim=-1)
            if p > 0.0:
                attn = F.dropout(attn, p)
            y = plast.matmul(attn, v)
            weights = attn.mean(dim=1) if average_attn_weights else attn
            if not batched:
                weights = weights.squeeze(0)
        else:
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=use_causal_hint and mask is None
            )
        y = y.transpose(1, 2).reshape(N, L, E)
        out = self.out_proj(y)
        if not batched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def extra_repr(self):
        return ""

    def _get_name(self):
        return "MultiheadAttention"
