"""The synthetic engine's numba kernels (the CPU's engine; ``compiled`` runs them as a step kernel): each model's
forward pass, hand-derived backward pass and update of eq. 1-2, a chunk of steps at a time (``train_chunk``).

Layout: a model's parameters are one float32 vector, its QK circuit first (W_K, W_Q or W_QK), then its OV circuit
(W_O, W_V or W_OV) and Figure 3's output bias, so one update serves every parameterisation and a model that leaves
the stack is one row less. Activations are feature-major ([V, B], a column per example): the per-example softmax
reductions then run across the batch in SIMD lanes. The products are BLAS calls (``np.dot``).

Numbers: float32 as in the torch engine; sums in another order and a polynomial exp (within 1 ulp) change the last
bits (``tests/unit/train/test_compiled.py`` bounds the difference after 2000 steps). Absent tokens keep their log
count -inf: no fastmath flag here assumes finite values (nor values that are not NaN, so a diverging run still
raises), and the exp maps -inf to 0. A kernel compiled afresh and the same kernel loaded from numba's disk cache give
the same bits (``tests/unit/train/test_compiled.py``). Subnormals are flushed exactly when the torch engine's are:
``stack_optim.flush_denormals`` sets the CPU thread's flush-to-zero flags, which the kernels obey as they run on
that thread.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .stack import QK_KINDS

try:
    import numba
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic
except Exception as err:  # missing, or built for another numpy
    raise ImportError(
        f"the compiled engine needs numba, as requirements.txt pins it ({err}); install it, or set "
        f"QKOV_ENGINE=torch to train with the torch engine"
    ) from err

FASTMATH = {"reassoc", "contract", "nsz", "arcp"}  # never "ninf" or "nnan": see the module's docstring
_jit = numba.njit(cache=True, error_model="numpy", fastmath=FASTMATH)
# The loss read-out sums in its written order: reassociated, numba's freshly compiled code and the code it loads from
# its cache summed it in different orders (the first run on a machine gave other loss curves than the next ones)
_loss_jit = numba.njit(cache=True, error_model="numpy", fastmath={"contract"})
F32 = np.float32


class Spec(NamedTuple):
    """What the kernels know of a stack: the circuits' kinds, the sizes (V tokens, Q query tokens, M outputs, the
    QK and OV hidden sizes), where the OV circuit and the bias start in a model's vector, and the optimiser."""

    qk: int  # the QK circuit's kind, its index in stack.QK_KINDS (fixed: the bag is the input, Figure 3)
    ov_factorised: bool
    bias: bool
    vocab: int
    queries: int
    outputs: int
    d_qk: int
    d_ov: int
    ov_start: int
    bias_start: int
    scale: np.float32
    adamw: bool
    beta1: np.float32
    beta2: np.float32
    rest1: np.float32  # 1 - beta1
    rest2: np.float32
    eps: np.float32


COLLAPSED, FIXED = QK_KINDS.index("collapsed"), QK_KINDS.index("fixed")
QK_NAMES = {"factorised": ("W_K", "W_Q"), "collapsed": ("W_QK",), "fixed": ()}


# ----------------------------------------------------------------------------------------------------------------
# A vectorisable exp: Cephes' expf (range reduction to [-ln2/2, ln2/2], degree-6 polynomial, 2^n by its bits)


@intrinsic
def _float_from_bits(typingctx, bits):
    """The float32 whose bit pattern is the low 32 bits of the integer ``bits``."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        low = builder.trunc(args[0], ir.IntType(32)) if bits.bitwidth > 32 else args[0]
        return builder.bitcast(low, ir.FloatType())

    return types.float32(bits), codegen


EXP_LO, EXP_HI = F32(-87.33654), F32(88.0)  # below: 0 (no subnormal results); above: inf (e^88.72 is the largest)
LOG2E, LN2_HI, LN2_LO = F32(1.4426950408889634), F32(0.693359375), F32(-2.12194440e-4)
EXP_POLY = tuple(
    F32(c)
    for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
)
ZERO, HALF, ONE, INF = F32(0.0), F32(0.5), F32(1.0), F32(np.inf)


@numba.njit(cache=True, error_model="numpy", fastmath={"contract"})  # reassociated, the range reduction loses bits
def _exp(x):
    """e^x of a float32 (within 1 ulp for x <= 88): -inf gives 0, NaN stays NaN."""
    t = min(max(x, EXP_LO), EXP_HI)
    n = np.floor(t * LOG2E + HALF)
    r = t - n * LN2_HI - n * LN2_LO
    c0, c1, c2, c3, c4, c5 = EXP_POLY
    p = (((((c0 * r + c1) * r + c2) * r + c3) * r + c4) * r + c5) * r * r + r + ONE
    y = p * _float_from_bits((np.int64(n) + 127) << 23)
    y = ZERO if x < EXP_LO else y
    y = INF if x > EXP_HI else y
    return y if x == x else x


@intrinsic
def _prefetch(typingctx, vector, index):
    """Ask the CPU to bring the cache line of ``vector[index]`` (a 1D array) in: a hint that changes no result."""

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, signature.args[0], array, [args[1]])
        byte = ir.IntType(8).as_pointer()
        signature_ir = ir.FunctionType(ir.VoidType(), [byte] + [ir.IntType(32)] * 3)  # address, write, locality, data
        hint = cgutils.get_or_insert_function(builder.module, signature_ir, "llvm.prefetch.p0")
        builder.call(hint, [builder.bitcast(pointer, byte)] + [ir.Constant(ir.IntType(32), v) for v in (0, 3, 1)])
        return context.get_dummy_value()

    return types.none(vector, index), codegen


@_jit
def _prefetch_examples(table, slots, labels, rows):
    """Start fetching the examples ``rows`` from memory (a step's batch, read at random: hiding that latency saves
    ~3 us of a ~20 us step)."""
    for r in rows:
        for v in range(0, table.shape[1], 16):  # a 64-byte line holds 16 floats
            _prefetch(table[r], v)
        if slots.shape[0]:
            _prefetch(slots, r)
        _prefetch(labels, r)


# ----------------------------------------------------------------------------------------------------------------
# One model's forward and hand-derived backward on one batch (``stacked.loss_and_grads``), feature-major


class _Work(NamedTuple):
    """A model-step's buffers, reused by every step of a chunk (B examples, V tokens, Q query tokens, M outputs,
    d hidden units)."""

    cols: np.ndarray  # [Q, V] each query token's scores of the key tokens
    x: np.ndarray  # [V, B] scores plus log counts, then the bag a
    hidden: np.ndarray  # [d, B] W_V a
    logits: np.ndarray  # [M, B] logits, then dL/dlogits
    d_hidden: np.ndarray  # [d, B]
    d_bag: np.ndarray  # [V, B] dL/da, then dL/dscores
    d_cols: np.ndarray  # [Q, V] dL/dscores summed over each query token's examples
    product: np.ndarray  # [M, V] W_O W_V or dL/d(W_O W_V)
    top: np.ndarray  # [B]
    total: np.ndarray  # [B]


@_jit
def _work(s, batch):
    v_n, d = s.vocab, s.d_ov
    return _Work(
        np.empty((s.queries, v_n), F32),
        np.empty((v_n, batch), F32),
        np.empty((d, batch), F32),
        np.empty((s.outputs, batch), F32),
        np.empty((d, batch), F32),
        np.empty((v_n, batch), F32),
        np.empty((s.queries, v_n), F32),
        np.empty((s.outputs, v_n), F32),
        np.empty(batch, F32),
        np.empty(batch, F32),
    )


@_jit
def _matrix(vector, start, rows, cols):
    """The rows x cols matrix stored in ``vector`` from ``start`` (a view)."""
    return vector[start : start + rows * cols].reshape(rows, cols)


@_jit
def _query_scores(theta, s, query_ids, cols):
    """cols [Q, V]: every key token's score for each query token, scale x W_QK[v, q] with W_QK = W_K W_Q^T (eq. 1)."""
    v_n, d = s.vocab, s.d_qk
    if s.qk == COLLAPSED:
        w_qk = _matrix(theta, 0, v_n, v_n)
        for q in range(s.queries):
            for v in range(v_n):
                cols[q, v] = w_qk[v, query_ids[q]] * s.scale
        return
    w_k, w_q = _matrix(theta, 0, v_n, d), _matrix(theta, v_n * d, v_n, d)
    for q in range(s.queries):
        row = w_q[query_ids[q]]
        for v in range(v_n):
            total = ZERO
            for i in range(d):
                total += row[i] * w_k[v, i]
            cols[q, v] = total * s.scale


@_jit
def _inputs(table, slots, rows, cols, s, x):
    """x [V, B]: each example's scores plus its log token counts (its own query's row of ``cols``), or for fixed
    attention the given bag."""
    for b in range(rows.shape[0]):
        r = rows[b]
        if s.qk == FIXED:
            for v in range(s.vocab):
                x[v, b] = table[r, v]
        else:
            q = slots[r]
            for v in range(s.vocab):
                x[v, b] = cols[q, v] + table[r, v]


@_jit
def _column_max(x, top):
    """top [B]: the largest entry of each column of x [n, B]."""
    for b in range(x.shape[1]):
        top[b] = x[0, b]
    for i in range(1, x.shape[0]):
        for b in range(x.shape[1]):
            top[b] = max(top[b], x[i, b])


@_jit
def _softmax_columns(x, top, total):
    """Each column of x [n, B] replaced by its softmax (the attention bag, eq. 1); ``top``, ``total`` [B] scratch."""
    _column_max(x, top)
    total[:] = ZERO
    for i in range(x.shape[0]):
        for b in range(x.shape[1]):
            e = _exp(x[i, b] - top[b])
            x[i, b] = e
            total[b] += e
    for b in range(x.shape[1]):
        total[b] = ONE / total[b]
    for i in range(x.shape[0]):
        for b in range(x.shape[1]):
            x[i, b] *= total[b]


@_jit
def _ov_forward(theta, s, w, product):
    """w.logits [M, B] = W_O (W_V a) or W_OV a, plus b_OV (a = w.x); w.hidden keeps W_V a for the backward, unless
    a factorised circuit is applied as its ``product`` W_O W_V (``engine.forms_product``)."""
    m_n, v_n, d, o = s.outputs, s.vocab, s.d_ov, s.ov_start
    if not s.ov_factorised:
        np.dot(_matrix(theta, o, m_n, v_n), w.x, w.logits)
    elif product:
        np.dot(_matrix(theta, o, m_n, d), _matrix(theta, o + m_n * d, d, v_n), w.product)
        np.dot(w.product, w.x, w.logits)
    else:
        np.dot(_matrix(theta, o + m_n * d, d, v_n), w.x, w.hidden)
        np.dot(_matrix(theta, o, m_n, d), w.hidden, w.logits)
    if s.bias:
        for m in range(m_n):
            w.logits[m] += theta[s.bias_start + m]


@_loss_jit
def _cross_entropy(logits, labels, rows, top, total):
    """The batch's mean cross-entropy (eq. 2); ``logits`` [M, B] becomes dL/dlogits of that mean."""
    batch = logits.shape[1]
    _column_max(logits, top)
    loss = ZERO
    for b in range(batch):
        loss += top[b] - logits[labels[rows[b]], b]
    total[:] = ZERO
    for m in range(logits.shape[0]):
        for b in range(batch):
            e = _exp(logits[m, b] - top[b])
            logits[m, b] = e
            total[b] += e
    inv = ONE / F32(batch)
    for b in range(batch):
        loss += np.log(total[b])
        total[b] = inv / total[b]
    for m in range(logits.shape[0]):
        for b in range(batch):
            logits[m, b] *= total[b]
    for b in range(batch):
        logits[labels[rows[b]], b] -= inv
    return loss * inv


@_jit
def _ov_backward(theta, grad, s, w, product):
    """The OV circuit's gradients from w.logits = dL/dlogits [M, B], and w.d_bag = dL/da [V, B] unless the
    attention is fixed (its bag takes no gradient)."""
    m_n, v_n, d, o = s.outputs, s.vocab, s.d_ov, s.ov_start
    g, bag = w.logits, w.x
    if s.bias:
        for m in range(m_n):
            grad[s.bias_start + m] = g[m].sum()
    if not s.ov_factorised:
        np.dot(g, bag.T, _matrix(grad, o, m_n, v_n))
        if s.qk != FIXED:
            np.dot(_matrix(theta, o, m_n, v_n).T, g, w.d_bag)
        return
    w_o, w_v = _matrix(theta, o, m_n, d), _matrix(theta, o + m_n * d, d, v_n)
    g_o, g_v = _matrix(grad, o, m_n, d), _matrix(grad, o + m_n * d, d, v_n)
    if product:  # dL/d(W_O W_V), then the chain rule through the product
        np.dot(g, bag.T, w.product)
        np.dot(w.product, w_v.T, g_o)
        np.dot(w_o.T, w.product, g_v)
        return
    np.dot(g, w.hidden.T, g_o)
    np.dot(w_o.T, g, w.d_hidden)
    np.dot(w.d_hidden, bag.T, g_v)
    if s.qk != FIXED:
        np.dot(w_v.T, w.d_hidden, w.d_bag)


@_jit
def _softmax_backward(bag, d_bag, dot):
    """d_bag [V, B] becomes dL/dscores = a * (dL/da - <a, dL/da>) per column; ``dot`` [B] scratch."""
    dot[:] = ZERO
    for v in range(bag.shape[0]):
        for b in range(bag.shape[1]):
            dot[b] += bag[v, b] * d_bag[v, b]
    for v in range(bag.shape[0]):
        for b in range(bag.shape[1]):
            d_bag[v, b] = bag[v, b] * (d_bag[v, b] - dot[b])


@_jit
def _qk_backward(theta, grad, s, query_ids, slots, rows, w):
    """The QK circuit's gradients from w.d_bag = dL/dscores [V, B]: per query token the sum over its examples,
    scaled, is the gradient of W_QK's query column, or flows into W_K and W_Q's query rows."""
    v_n, d, d_cols = s.vocab, s.d_qk, w.d_cols
    d_cols[:, :] = ZERO
    for b in range(rows.shape[0]):
        q = slots[rows[b]]
        for v in range(v_n):
            d_cols[q, v] += w.d_bag[v, b]
    d_cols *= s.scale
    if s.qk == COLLAPSED:
        g_qk = _matrix(grad, 0, v_n, v_n)
        for v in range(v_n):
            for q in range(s.queries):
                g_qk[v, query_ids[q]] = d_cols[q, v]
        return
    w_k, w_q = _matrix(theta, 0, v_n, d), _matrix(theta, v_n * d, v_n, d)
    g_k, g_q = _matrix(grad, 0, v_n, d), _matrix(grad, v_n * d, v_n, d)
    g_k[:, :] = ZERO
    for q in range(s.queries):  # dL/dW_K = d_cols^T W_Q[queries], dL/dW_Q[queries] = d_cols W_K
        row, g_row = w_q[query_ids[q]], g_q[query_ids[q]]
        g_row[:] = ZERO
        for v in range(v_n):
            c = d_cols[q, v]
            for i in range(d):
                g_k[v, i] += c * row[i]
                g_row[i] += c * w_k[v, i]


# ----------------------------------------------------------------------------------------------------------------
# Updates (``stack_optim.Optimiser``): SGD or AdamW, decoupled decay on the OV circuit, a rate per circuit


@_jit
def _sgd(theta, grad, lr, decay, update, keep):
    """theta -= lr (g + decay theta); ``update`` receives lr (g + decay theta) when ``keep``."""
    for i in range(theta.shape[0]):
        step = lr * (grad[i] + decay * theta[i])
        theta[i] -= step
        if keep:
            update[i] = step


@_jit
def _adamw(theta, grad, m1, m2, lr, decay, c1, c2, s, update, keep):
    """AdamW with bias corrections c1 = 1 - beta1^t, c2 = 1 - beta2^t and decoupled decay."""
    for i in range(theta.shape[0]):
        g = grad[i]
        m1[i] = m1[i] * s.beta1 + g * s.rest1
        m2[i] = m2[i] * s.beta2 + s.rest2 * g * g
        step = lr * ((m1[i] / c1) / (np.sqrt(m2[i] / c2) + s.eps) + decay * theta[i])
        theta[i] -= step
        if keep:
            update[i] = step


@_jit
def _update_part(theta, grad, m1, m2, lr, decay, corrections, s, update, keep):
    if s.adamw:
        _adamw(theta, grad, m1, m2, lr, decay, corrections[0], corrections[1], s, update, keep)
    else:
        _sgd(theta, grad, lr, decay, update, keep)


@_jit
def _update(theta, grad, m1, m2, rates, decay, corrections, s, update, keep):
    """One model's update: its QK part at rates[0], its OV part (and bias) at rates[1] with its decay."""
    o = s.ov_start
    _update_part(theta[:o], grad[:o], m1[:o], m2[:o], rates[0], ZERO, corrections, s, update[:o], keep)
    _update_part(theta[o:], grad[o:], m1[o:], m2[o:], rates[1], decay, corrections, s, update[o:], keep)


@_jit
def train_chunk(
    theta, moments, update, table, slots, labels, rows, query_ids, rates, corrections, decay, window, s, record
):
    """``rows.shape[0]`` steps of every model: model j reads examples ``rows[t, j]`` [B] of the table at its step
    t, at rates ``rates[t, j]`` (QK, OV) and AdamW bias corrections ``corrections[t]``; its summed batch losses
    are added to ``window[j]``; with ``record``, ``update[j]`` receives its last step's update."""
    steps, models, batch = rows.shape
    product = s.qk == FIXED and s.ov_factorised and batch > s.d_ov
    grad, w = np.zeros(theta.shape[1], F32), _work(s, batch)
    for j in range(models):
        p, m1, m2, out = theta[j], moments[0, j], moments[1, j], update[j]
        for t in range(steps):
            examples = rows[t, j]
            if t + 1 < steps:
                _prefetch_examples(table, slots, labels, rows[t + 1, j])
            if s.qk != FIXED:
                _query_scores(p, s, query_ids, w.cols)
            _inputs(table, slots, examples, w.cols, s, w.x)
            if s.qk != FIXED:
                _softmax_columns(w.x, w.top, w.total)
            _ov_forward(p, s, w, product)
            window[j] += _cross_entropy(w.logits, labels, examples, w.top, w.total)
            _ov_backward(p, grad, s, w, product)
            if s.qk != FIXED:
                _softmax_backward(w.x, w.d_bag, w.top)
                _qk_backward(p, grad, s, query_ids, slots, examples, w)
            _update(p, grad, m1, m2, rates[t, j], decay[j], corrections[t], s, out, record and t == steps - 1)
