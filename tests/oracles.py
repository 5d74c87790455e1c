"""Independent high-precision oracles (mpmath) for the exact curves, used only by tests."""

import mpmath as mp

mp.mp.dps = 40


def tnb_density(x, shift, eta, nu):
    """Winner density G'(F(x - shift)) phi(x - shift) for TNB(eta, nu), from the closed form."""
    t = x - shift
    F = mp.ncdf(t)
    if eta == 0:
        mean = (1 / mp.mpf(nu) - 1) / mp.log(1 / mp.mpf(nu))
    else:
        mean = eta * (1 - mp.mpf(nu)) / (mp.mpf(nu) * (1 - mp.mpf(nu) ** eta))
    dG = (1 - (1 - mp.mpf(nu)) * F) ** (-eta - 1) * mp.mpf(nu) ** (eta + 1) * mean
    return dG * mp.npdf(t)


def pmf_density(x, shift, table):
    """Winner density sum_k p_k k F^(k-1) phi for a finite law {k: p_k}."""
    t = x - shift
    F = mp.ncdf(t)
    return sum(p * k * F ** (k - 1) for k, p in table.items() if k >= 1) * mp.npdf(t)


def poisson_density(x, shift, mean):
    """Winner density G'(F(x - shift)) phi(x - shift) = m e^(m (F - 1)) phi for Poisson(m) (the
    fixed output of K = 0 has the same mass on both sides and adds nothing for eps >= 0)."""
    t = x - shift
    m = mp.mpf(mean)
    return m * mp.e ** (m * (mp.ncdf(t) - 1)) * mp.npdf(t)


def hockey_stick(density, mu, eps, direction, lo=-30, hi=None, step=0.25):
    """int [p - e^eps q]_+ with p, q the winner densities (p = direction), split at the roots."""
    hi = mu + 30 if hi is None else hi
    p = lambda x: density(x, mu * direction)
    q = lambda x: density(x, mu * (1 - direction))
    e = mp.e ** mp.mpf(eps)
    g = lambda x: p(x) - e * q(x)
    # scan for sign changes (20 digits tell the sign of p - e^eps q except within 1e-18 of a
    # root, where either neighbouring bracket holds it) and refine them at full precision
    xs = [lo + i * step for i in range(int((hi - lo) / step) + 1)]
    cuts = [mp.mpf(lo)]
    with mp.workdps(20):
        values = [g(x) for x in xs]
    for a, b, ga, gb in zip(xs, xs[1:], values, values[1:]):
        if (ga > 0) != (gb > 0):
            cuts.append(mp.findroot(g, (a, b), solver="anderson"))
    cuts.append(mp.mpf(hi))
    total = mp.mpf(0)
    for a, b in zip(cuts, cuts[1:]):
        mid = (a + b) / 2
        if g(mid) > 0:
            total += mp.quad(g, mp.linspace(a, b, 8))
    # the tails beyond [lo, hi] are below 1e-150 for these settings
    return total
