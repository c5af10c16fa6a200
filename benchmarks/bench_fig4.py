"""Figure 4's computation (five ratios to loss 1e-4): qkov_lib's solver against the authors' fixed-step RK4 loop.

The baseline is a plain Python RK4 loop with step 10 in normalised time (t * min(eta_OV, eta_QK)), stopping at the
first step whose loss is <= 1e-4, as the official notebook does. Both run here, one after the other, in one process;
the script prints the times side by side, the speed-up, and how far apart the two are in alpha at the stop.
Usage: python benchmarks/bench_fig4.py [--repeat N]
"""

from __future__ import annotations

import argparse
import math
import time

from qkov_lib.theory import OrthogonalSetting, attention_mass, integrate_many, rhs

RATIOS = [0.01, 0.1, 1.0, 10.0, 100.0]
TARGET = 1e-4


def rhs_math(mu_ov: float, mu_qk: float, s: OrthogonalSetting) -> tuple[float, float]:
    """Theorem 1's right-hand sides in plain scalar math (the fastest form for a Python loop)."""
    a = s.m / (s.m + s.n * math.exp(-mu_qk)) if mu_qk > -700 else 0.0
    denom = math.exp(a * mu_ov) + s.M - 1
    return (s.eta_ov * a / (s.b * denom), s.eta_qk * (s.M - 1) * (a - a * a) * mu_ov / (s.M * s.b**2 * denom))


def rk4_fixed_step(
    s: OrthogonalSetting, rhs=rhs_math, target: float = TARGET, dt_normalised: float = 10.0
) -> tuple[float, float]:
    """(t, alpha) at the first RK4 step whose loss is <= target; step dt_normalised / min(eta_OV, eta_QK) in t."""
    h = dt_normalised / min(s.eta_ov, s.eta_qk)
    y, t = (0.0, 0.0), 0.0
    log_m1 = math.log(s.M - 1)
    while True:
        k1 = rhs(*y, s)
        k2 = rhs(y[0] + h / 2 * k1[0], y[1] + h / 2 * k1[1], s)
        k3 = rhs(y[0] + h / 2 * k2[0], y[1] + h / 2 * k2[1], s)
        k4 = rhs(y[0] + h * k3[0], y[1] + h * k3[1], s)
        y = (
            y[0] + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]),
            y[1] + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1]),
        )
        t += h
        alpha = float(attention_mass(y[1], s.m, s.n))
        if math.log1p(math.exp(log_m1 - alpha * y[0])) <= target:
            return t, alpha


def solver_run(base: OrthogonalSetting) -> list[tuple[float, float]]:
    trajs = integrate_many([base.with_ratio(r) for r in RATIOS], target_loss=TARGET)
    return [(float(tr.t[-1]), float(tr.alpha[-1])) for tr in trajs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="solver repetitions (best time is reported)")
    args = parser.parse_args()
    base = OrthogonalSetting()  # m=5, n=50, b=50, M=5, eta_OV=1
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        fast = solver_run(base)
        times.append(time.perf_counter() - start)
    t_solver = min(times)
    start = time.perf_counter()
    slow = [rk4_fixed_step(base.with_ratio(r)) for r in RATIOS]
    t_rk4 = time.perf_counter() - start
    start = time.perf_counter()
    slow_np = [rk4_fixed_step(base.with_ratio(r), rhs=rhs) for r in RATIOS]
    t_rk4_np = time.perf_counter() - start
    assert slow_np == slow or max(abs(a[1] - b[1]) for a, b in zip(slow, slow_np)) < 1e-9
    print(f"{'r':>6} {'t at 1e-4 (solver)':>20} {'t at 1e-4 (RK4)':>18} {'alpha (solver)':>15} {'alpha (RK4)':>12}")
    for r, (tf, af), (ts, as_) in zip(RATIOS, fast, slow):
        print(f"{r:>6g} {tf:>20.6g} {ts:>18.6g} {af:>15.6f} {as_:>12.6f}")
    diff = max(abs(a - b) for (_, a), (_, b) in zip(fast, slow))
    print(f"\nsolver (LSODA, log-time, dense): {t_solver * 1e3:9.1f} ms  (best of {args.repeat})")
    print(f"fixed-step RK4 loop (dt = 10), scalar math rhs:  {t_rk4 * 1e3:9.1f} ms   speed-up {t_rk4 / t_solver:.0f}x")
    print(
        f"fixed-step RK4 loop (dt = 10), library rhs:      {t_rk4_np * 1e3:9.1f} ms   speed-up "
        f"{t_rk4_np / t_solver:.0f}x"
    )
    print(f"largest |alpha difference| between solver and RK4 at the stop: {diff:.2e}")


if __name__ == "__main__":
    main()
