"""Engine overhead against raw NumPy and torch, as ratios measured in one run.

    .venv/bin/python bench/bench_engine.py

Reports, per workload, the median time of the engine, of the same computation in raw NumPy
(no graph at all), and of torch 2.8.0 on the CPU, and the ratios engine/NumPy and engine/torch.
Ratios, not absolute times, are what to compare between runs and machines.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import numpy as np
from _timing import rounds

import engine

try:
    import torch
except ImportError:  # the bench still reports engine vs NumPy
    torch = None


def timeit(fn: Callable[[], object], repeat: int = 7, number: int = 200) -> float:
    return statistics.median(rounds(fn, repeat, number))


def unary_chain(lib: object, x: object) -> Callable[[], object]:
    return lambda: x.sin().exp().tanh()  # type: ignore[attr-defined]


def main() -> None:
    rows = []
    a = np.random.default_rng(0).standard_normal((32, 32))
    b = np.random.default_rng(1).standard_normal((32, 32))

    def np_fwd() -> object:
        return np.tanh(np.exp(np.sin(a)))

    ex = engine.tensor(a, requires_grad=True)
    rows.append(
        (
            "3 unary ops, 32x32, forward with graph",
            timeit(lambda: ex.sin().exp().tanh()),
            timeit(np_fwd),
            None,
        )
    )
    if torch is not None:
        tx = torch.tensor(a, requires_grad=True)
        rows[-1] = (*rows[-1][:3], timeit(lambda: tx.sin().exp().tanh()))

    with engine.no_grad():
        t_nograd = timeit(lambda: ex.sin().exp().tanh())
    t_torch_nograd = None
    if torch is not None:
        with torch.no_grad():
            t_torch_nograd = timeit(lambda: tx.sin().exp().tanh())
    rows.append(("3 unary ops, 32x32, no_grad", t_nograd, timeit(np_fwd), t_torch_nograd))

    eb = engine.tensor(b, requires_grad=True)

    def engine_step() -> None:
        ex.grad = None
        eb.grad = None
        ((ex @ eb).tanh() * ex).sum().backward()

    def np_step() -> object:
        h = a @ b
        t = np.tanh(h)
        g = a * (1 - t * t)
        return g @ b.T + t, a.T @ g

    t_torch = None
    if torch is not None:
        tb = torch.tensor(b, requires_grad=True)

        def torch_step() -> None:
            tx.grad = None
            tb.grad = None
            ((tx @ tb).tanh() * tx).sum().backward()

        t_torch = timeit(torch_step, number=50)
    rows.append(
        (
            "matmul-tanh-mul-sum forward+backward",
            timeit(engine_step, number=50),
            timeit(np_step, number=50),
            t_torch,
        )
    )

    print(f"{'workload':44s} {'engine':>10s} {'numpy':>10s} {'torch':>10s} {'eng/np':>8s} {'eng/torch':>9s}")
    for name, te, tn, tt in rows:
        tt_s = f"{tt * 1e6:8.1f}us" if tt else "       n/a"
        ratio_t = f"{te / tt:9.1f}" if tt else "      n/a"
        print(f"{name:44s} {te * 1e6:8.1f}us {tn * 1e6:8.1f}us {tt_s} {te / tn:8.1f} {ratio_t}")


if __name__ == "__main__":
    main()
