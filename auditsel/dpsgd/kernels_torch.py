"""The kernels as torch operations: the implementation for tensors on a GPU (or any device
other than the CPU, where ``kernels_cpu`` runs).

The same fixed sequence of IEEE single-precision operations as ``kernels_cpu`` (no fused
multiply-add), so a GPU gives the CPU's numbers bit for bit. The contract is in
``auditsel.dpsgd.kernels``.
"""

from __future__ import annotations

import torch

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
INV24 = 2.0**-24
LANES = 16  # as in kernels_cpu: numbers come in chunks of 4 LANES


def _f(value, like):
    return torch.tensor(value, dtype=torch.float32, device=like.device)


def _mulhilo_split(a: int, b: torch.Tensor):
    """(hi, lo) 32-bit words of a * b for a < 2^32, b int64 in [0, 2^32), without overflow."""
    p = a * (b >> 16)  # < 2^48
    q = a * (b & 0xFFFF)  # < 2^48
    hi = (p + (q >> 16)) >> 16
    lo = (((p & 0xFFFF) << 16) + q) & 0xFFFFFFFF
    return hi, lo


def _mulhilo_wrap(a: int, b: torch.Tensor):
    """The same from one int64 product that wraps modulo 2^64 (its low 64 bits are exact)."""
    p = b * a
    return (p >> 32) & 0xFFFFFFFF, p & 0xFFFFFFFF


_WRAPS: dict = {}


def _mulhilo(a: int, b: torch.Tensor):
    """`_mulhilo_wrap` where this device's int64 product is seen to wrap (checked once against
    Python's integers), else `_mulhilo_split`; the words are the same either way."""
    key = b.device.type
    if key not in _WRAPS:
        probe = torch.tensor([0xFFFFFFFF, 0x9E3779B9, 1], dtype=torch.int64, device=b.device)
        want = [(v * 0xD2511F53) >> 32 for v in (0xFFFFFFFF, 0x9E3779B9, 1)]
        _WRAPS[key] = _mulhilo_wrap(0xD2511F53, probe)[0].tolist() == want
    return (_mulhilo_wrap if _WRAPS[key] else _mulhilo_split)(a, b)


def philox(
    c0: torch.Tensor,
    c1: torch.Tensor,
    c2: torch.Tensor,
    c3: torch.Tensor,
    k0: torch.Tensor | int,
    k1: torch.Tensor | int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Philox4x32-10 on int64 tensors holding uint32 words (broadcasting)."""
    for _ in range(10):
        hi0, lo0 = _mulhilo(M0, c0)
        hi1, lo1 = _mulhilo(M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = (k0 + W0) & 0xFFFFFFFF
        k1 = (k1 + W1) & 0xFFFFFFFF
    return c0, c1, c2, c3


def log(x: torch.Tensor) -> torch.Tensor:
    b = x.view(torch.int32).to(torch.int64)
    e = ((b >> 23) & 0xFF) - 126
    m = ((b & 0x007FFFFF) | 0x3F000000).to(torch.int32).view(torch.float32)
    small = m < _f(0.707106781186547524, m)
    fe = torch.where(small, e - 1, e).to(torch.float32)
    t = torch.where(small, (m + m) - _f(1.0, m), m - _f(1.0, m))
    z = t * t
    y = torch.full_like(t, 7.0376836292e-2)
    for c in (
        -1.1514610310e-1,
        1.1676998740e-1,
        -1.2420140846e-1,
        1.4249322787e-1,
        -1.6668057665e-1,
        2.0000714765e-1,
        -2.4999993993e-1,
        3.3333331174e-1,
    ):
        y = y * t + _f(c, t) if c > 0 else y * t - _f(-c, t)
    y = (y * t) * z
    y = y + _f(-2.12194440e-4, t) * fe
    y = y - _f(0.5, t) * z
    t = t + y
    return t + _f(0.693359375, t) * fe


def sincos_2pi(u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    t = u * _f(4.0, u)
    q = torch.floor(t)
    f = t - q
    hi = f > _f(0.5, f)
    g = torch.where(hi, _f(1.0, f) - f, f)
    x = g * _f(1.57079632679489662, g)
    z = x * x
    s = torch.full_like(z, -1.9515295891e-4)
    s = s * z + _f(8.3321608736e-3, z)
    s = s * z - _f(1.6666654611e-1, z)
    s = ((s * z) * x) + x
    c = torch.full_like(z, 2.443315711809948e-5)
    c = c * z - _f(1.388731625493765e-3, z)
    c = c * z + _f(4.166664568298827e-2, z)
    c = (((c * z) * z) - _f(0.5, z) * z) + _f(1.0, z)
    sa, ca = torch.where(hi, c, s), torch.where(hi, s, c)
    qi = q.to(torch.int64)
    sn = torch.where(qi == 0, sa, torch.where(qi == 1, ca, torch.where(qi == 2, -sa, -ca)))
    cs = torch.where(qi == 0, ca, torch.where(qi == 1, -sa, torch.where(qi == 2, -ca, sa)))
    return sn, cs


def exp(x: torch.Tensor) -> torch.Tensor:
    fx = torch.floor(x * _f(1.44269504088896341, x) + _f(0.5, x))
    r = x - fx * _f(0.693359375, x)
    r = r - fx * _f(-2.12194440e-4, x)
    z = r * r
    y = torch.full_like(r, 1.9875691500e-4)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        y = y * r + _f(c, r)
    y = ((y * z) + r) + _f(1.0, r)
    n = torch.nan_to_num(fx, nan=0.0).clamp(-127, 128).to(torch.int32)
    scale = ((n + 127) << 23).view(torch.float32)
    return torch.where(x < _f(-87.33654475, x), _f(0.0, x), y * scale)


def draw(
    keys: torch.Tensor, stream: int, step0: int, steps: int, width: int, normal: bool
) -> torch.Tensor:
    device = keys.device
    chunks = -(-width // (4 * LANES))
    k0 = keys[:, 0].to(torch.int64)[:, None, None]
    k1 = keys[:, 1].to(torch.int64)[:, None, None]
    c0 = torch.arange(chunks * LANES, device=device, dtype=torch.int64)[None, None, :]
    c1 = torch.arange(step0, step0 + steps, device=device, dtype=torch.int64)[None, :, None]
    shape = (keys.shape[0], steps, chunks * LANES)
    c0, c1 = c0.expand(shape), c1.expand(shape)
    c2 = torch.full(shape, int(stream), dtype=torch.int64, device=device)
    c3 = torch.zeros(shape, dtype=torch.int64, device=device)
    words = philox(c0, c1, c2, c3, k0, k1)
    if normal:
        out = []
        for a, b in ((words[0], words[1]), (words[2], words[3])):
            u1 = ((a >> 8) + 1).to(torch.float32) * INV24
            u2 = (b >> 8).to(torch.float32) * INV24
            # torch's float32 sqrt is not always correctly rounded; float64 sqrt rounded to
            # float32 is (as C's sqrtf)
            rad = torch.sqrt((_f(-2.0, u1) * log(u1)).double()).float()
            s, c = sincos_2pi(u2)
            out += [rad * c, rad * s]
    else:
        out = [(w >> 8).to(torch.float32) * INV24 for w in words]
    # number 4 LANES c + LANES w + l = word w of block LANES c + l
    numbers = torch.stack([o.reshape(keys.shape[0], steps, chunks, LANES) for o in out], 3)
    return numbers.reshape(keys.shape[0], steps, chunks * 4 * LANES)[:, :, :width]


def softmax_grad(
    z: torch.Tensor,
    label: torch.Tensor,
    sq: torch.Tensor,
    clip: torch.Tensor | None = None,
    a_sq: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
) -> None:
    """Elementwise over the whole (R, K, n) tensor, sums over K in class order (as kernels_cpu)."""
    K = z.shape[1]
    m = z[:, 0].clone()
    for k in range(1, K):
        v = z[:, k]
        m = torch.where(v > m, v, m)
    z.copy_(exp(z - m[:, None, :]))
    s = z[:, 0].clone()
    for k in range(1, K):
        s = s + z[:, k]
    inv = _f(1.0, s) / s
    z *= inv[:, None, :]
    at_label = (
        label.expand(z.shape[0], -1)[:, None, :] == torch.arange(K, device=z.device)[None, :, None]
    )
    torch.where(at_label, z - _f(1.0, z), z, out=z)
    q = z[:, 0] * z[:, 0]
    for k in range(1, K):
        q = q + z[:, k] * z[:, k]
    sq.copy_(q)
    if clip is not None:
        assert a_sq is not None  # given with clip (kernels.softmax_grad_ checks)
        cr = clip[:, None]
        norm = torch.sqrt((q * a_sq).double()).float()  # correctly rounded, as C's sqrtf
        c = cr / torch.where(norm > cr, norm, cr)
        if weight is not None:
            c = c * weight
        z *= c[:, None, :]
