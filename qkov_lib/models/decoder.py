"""A small GPT-style decoder for SQuAD's generated answers (Section 7: "a 6-layer GPT-style model"), many seeds at
once (a leading seed dimension).

Token and learned position embeddings; ``n_layers`` pre-norm blocks of causal multi-head attention (W_Q, W_K, W_V
[H, d, d_head], W_O [H, d_head, d]; padding masked) and an MLP (ReLU or GELU), each added to the residual
stream, optionally with biases (b_Q, b_K, b_V [H, d_head], b_O [d], the MLP's b_in, b_out); a final norm and an
output layer tied to the token embedding. The norms have no parameters, so that every trained weight is in
the QK group (W_Q, W_K), the OV group (W_V, W_O) or 'other' (``optim.circuit_groups``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.nn.functional import layer_norm

from ..core.validation import require_positive_ints
from .transformer import ACTIVATIONS, activate, is_bias, scaled_attention


@dataclass(frozen=True)
class DecoderConfig:
    vocab: int
    max_len: int
    d_model: int = 64
    n_heads: int = 4
    d_head: int = 16
    n_layers: int = 6
    d_mlp: int = 256
    init_scale: float = 0.02
    activation: str = "relu"  # the MLP's (``transformer.ACTIVATIONS``)
    biases: bool = False  # biases on Q, K, V, O and the MLP (zero at the start, or nn.Linear's draw with xavier)
    init: str = "normal"  # how the weights start (``INITS``)

    def __post_init__(self) -> None:
        require_positive_ints(self, ("vocab", "max_len", "d_model", "n_heads", "d_head", "n_layers", "d_mlp"))
        if not self.init_scale > 0:
            raise ValueError(f"init_scale must be > 0 (got {self.init_scale!r})")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)} (got {self.activation!r})")
        if self.init not in INITS:
            raise ValueError(f"init must be one of {', '.join(INITS)} (got {self.init!r})")


INITS = ("normal", "xavier")  # normal(0, init_scale) weights and zero biases; or the authors' SQuAD start
XAVIER_GAIN = 2**-0.5  # the authors' SQuAD notebooks: ``xavier_uniform_(p, gain=1/np.sqrt(2))``


def fans(name: str, cfg: DecoderConfig) -> tuple[int, int]:
    """(fan in, fan out) of a weight or bias as the authors' model holds it: each of W_Q, W_K, W_V a d_model x
    (n_heads d_head) ``nn.Linear``, W_O its transpose, the MLP's two layers, the position table [max_len, d_model]
    (torch reads an embedding's fan in from its second axis); a bias takes its layer's."""
    heads = cfg.n_heads * cfg.d_head
    last = name.rsplit(".", 1)[-1]
    table = {
        "pos": (cfg.d_model, cfg.max_len),
        "mlp_in": (cfg.d_model, cfg.d_mlp),
        "b_in": (cfg.d_model, cfg.d_mlp),
        "mlp_out": (cfg.d_mlp, cfg.d_model),
        "b_out": (cfg.d_mlp, cfg.d_model),
        "W_O": (heads, cfg.d_model),
        "b_O": (heads, cfg.d_model),
    }
    return table.get(last, (cfg.d_model, heads))  # W_Q, W_K, W_V and their biases


def draw(name: str, shape: tuple[int, ...], cfg: DecoderConfig, gen: torch.Generator) -> torch.Tensor:
    """One seed's starting value of parameter ``name``. ``normal``: normal(0, init_scale) weights, zero biases
    (drawing nothing). ``xavier``, the authors' SQuAD model (GPT2-Squad-QA_*.ipynb cell 5, ``_init_weights``):
    every weight but the token embedding uniform on +-gain sqrt(6 / (fan in + fan out)) with gain 1/sqrt(2), the
    position table included; each bias as ``nn.Linear`` draws it, uniform on +-1/sqrt(fan in); the token embedding
    (GloVe vectors there, none offline) normal(0, init_scale)."""
    if cfg.init == "normal" or name == "embed":
        return torch.zeros(shape) if is_bias(name) else cfg.init_scale * torch.randn(shape, generator=gen)
    fan_in, fan_out = fans(name, cfg)
    bound = fan_in**-0.5 if is_bias(name) else XAVIER_GAIN * (6 / (fan_in + fan_out)) ** 0.5
    return (2 * torch.rand(shape, generator=gen) - 1) * bound


def init_decoder(
    cfg: DecoderConfig, seeds: Sequence[int], device: torch.device | str = "cpu"
) -> dict[str, torch.Tensor]:
    """Each parameter's start (``draw``: ``cfg.init``), one independent draw per seed, stacked on dimension 0."""
    shapes: dict[str, tuple[int, ...]] = {"embed": (cfg.vocab, cfg.d_model), "pos": (cfg.max_len, cfg.d_model)}
    for layer in range(cfg.n_layers):
        p = f"blocks.{layer}."
        shapes |= {
            p + "W_Q": (cfg.n_heads, cfg.d_model, cfg.d_head),
            p + "W_K": (cfg.n_heads, cfg.d_model, cfg.d_head),
            p + "W_V": (cfg.n_heads, cfg.d_model, cfg.d_head),
            p + "W_O": (cfg.n_heads, cfg.d_head, cfg.d_model),
            p + "mlp_in": (cfg.d_model, cfg.d_mlp),
            p + "mlp_out": (cfg.d_mlp, cfg.d_model),
        }
        if cfg.biases:
            shapes |= {
                p + "b_Q": (cfg.n_heads, cfg.d_head),
                p + "b_K": (cfg.n_heads, cfg.d_head),
                p + "b_V": (cfg.n_heads, cfg.d_head),
                p + "b_O": (cfg.d_model,),
                p + "b_in": (cfg.d_mlp,),
                p + "b_out": (cfg.d_model,),
            }
    per_seed = []
    for seed in seeds:
        gen = torch.Generator().manual_seed(int(seed))
        per_seed.append({k: draw(k, s, cfg, gen) for k, s in shapes.items()})
    return {k: torch.stack([p[k] for p in per_seed]).to(device).requires_grad_() for k in shapes}


def decode(
    params: dict[str, torch.Tensor], cfg: DecoderConfig, ids: torch.Tensor
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The final hidden states [S, B, T, d] and each layer's attention [S, B, H, T, T] (rows: queries; a query
    sees itself and the positions before it, never padding; in a row of padding only, the first position). ``ids``
    [S, B, T] or [B, T]; 0 is padding, which may only follow the real tokens of a row."""
    S = params["embed"].shape[0]
    if ids.dim() == 2:
        ids = ids.expand(S, *ids.shape)
    T, d = ids.shape[-1], cfg.d_model
    blocked = torch.ones(T, T, dtype=torch.bool, device=ids.device).triu(1) | (ids == 0)[:, :, None, None, :]
    blocked[..., 0] = False  # the first position is real in every row that has a real token: no row is empty
    x = params["embed"][torch.arange(S, device=ids.device)[:, None, None], ids] + params["pos"][:, None, :T]
    attns = []
    for layer in range(cfg.n_layers):
        p = f"blocks.{layer}."
        h = layer_norm(x, (d,))
        q, k, v = (torch.einsum("sbtd,shde->sbhte", h, params[p + n]) for n in ("W_Q", "W_K", "W_V"))
        if cfg.biases:
            q, k, v = (t + params[p + n][:, None, :, None, :] for t, n in zip((q, k, v), ("b_Q", "b_K", "b_V")))
        attn = scaled_attention(q @ k.transpose(-1, -2), blocked, cfg.d_head)
        attns.append(attn)
        x = x + torch.einsum("sbhqe,shed->sbqd", attn @ v, params[p + "W_O"])
        if cfg.biases:
            x = x + params[p + "b_O"][:, None, None, :]
        pre = torch.einsum("sbtd,sdm->sbtm", layer_norm(x, (d,)), params[p + "mlp_in"])
        if cfg.biases:
            pre = pre + params[p + "b_in"][:, None, None, :]
        x = x + torch.einsum("sbtm,smd->sbtd", activate(pre, cfg.activation), params[p + "mlp_out"])
        if cfg.biases:
            x = x + params[p + "b_out"][:, None, None, :]
    return layer_norm(x, (d,)), attns


def next_token_logits(
    params: dict[str, torch.Tensor], hidden: torch.Tensor, rows: torch.Tensor, allowed: torch.Tensor | None = None
) -> torch.Tensor:
    """Logits of the next token after positions ``rows`` ([B, R] shared by the seeds, or [S, B, R]); the output
    layer is the token embedding, transposed. Over the whole vocabulary [S, B, R, V], or, given ``allowed``
    [B, K] or [S, B, K] (token ids; 0 = no token), over those K tokens only [S, B, R, K], -inf where the id is 0."""
    rows = rows.expand(hidden.shape[0], *rows.shape[-2:])
    at = hidden.gather(2, rows[..., None].expand(-1, -1, -1, hidden.shape[-1]))
    if allowed is None:
        return torch.einsum("sbrd,svd->sbrv", at, params["embed"])
    S = params["embed"].shape[0]
    allowed = allowed.expand(S, *allowed.shape[-2:])
    out = params["embed"][torch.arange(S, device=at.device)[:, None, None], allowed]
    return torch.einsum("sbrd,sbkd->sbrk", at, out).masked_fill(allowed[:, :, None, :] == 0, float("-inf"))


@torch.no_grad()
def greedy(
    params: dict[str, torch.Tensor],
    cfg: DecoderConfig,
    prompts: torch.Tensor,
    steps: int,
    eos: int,
    allowed: torch.Tensor | None = None,
) -> torch.Tensor:
    """Greedy continuations [S, B, steps] of left-aligned ``prompts`` [B, T] (0-padded on the right): each seed
    appends its most likely next token other than padding (among ``allowed`` [B, K] when given), and a row that
    produced ``eos`` keeps producing it."""
    S, (B, T) = params["embed"].shape[0], prompts.shape
    lengths = (prompts != 0).sum(1)
    ids = torch.zeros(S, B, T + steps, dtype=torch.long, device=prompts.device)
    ids[:, :, :T] = prompts
    rows = torch.arange(B, device=prompts.device)
    done = torch.zeros(S, B, dtype=torch.bool, device=prompts.device)
    out = []
    for step in range(steps):
        width = int(lengths.max()) + step
        hidden, _ = decode(params, cfg, ids[:, :, :width])
        logits = next_token_logits(params, hidden, (lengths + step - 1)[:, None], allowed)[:, :, 0]
        if allowed is None:
            token = logits.index_fill(-1, torch.zeros(1, dtype=torch.long, device=logits.device), float("-inf")).argmax(
                -1
            )
        else:
            token = allowed.expand(S, -1, -1).gather(-1, logits.argmax(-1, keepdim=True)).squeeze(-1)
        token = torch.where(done, torch.full_like(token, eos), token)
        done |= token == eos
        ids[:, rows, lengths + step] = token
        out.append(token)
    return torch.stack(out, dim=-1)
