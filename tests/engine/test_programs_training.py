"""An end-to-end training program, run on the engine and on torch 2.8.0: an MLP trained for 20
steps with AdamW, CosineAnnealingLR, a DataLoader over a TensorDataset (shuffle=False, so the
batches are the same) and gradient clipping, from the same initial parameters (copied from
torch). The losses, learning rates and final parameters must agree (float32, 1e-5 relative)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest

import engine

pytestmark = pytest.mark.oracle


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, (40, 6)).astype(np.float32)
    y = (np.sin(x[:, :2].sum(1, keepdims=True)) + 0.1 * x[:, 2:3]).astype(np.float32)
    return x, y


def _train(lib: ModuleType, init: dict[str, np.ndarray]) -> tuple[list[float], list[float], list[float], Any]:
    nn = lib.nn
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
    model.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in init.items()})
    x, y = _data()
    loader = lib.utils.data.DataLoader(
        lib.utils.data.TensorDataset(lib.from_numpy(x), lib.from_numpy(y)), batch_size=8, shuffle=False
    )
    opt = lib.optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.05)
    sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=20, eta_min=1e-4)
    loss_fn = nn.MSELoss()
    losses, lrs, norms = [], [], []
    step = 0
    while step < 20:
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            norms.append(float(nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)))
            opt.step()
            sched.step()
            losses.append(float(loss.item()))
            lrs.append(sched.get_last_lr()[0])
            step += 1
            if step == 20:
                break
    final = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    return losses, lrs, norms, final


def test_mlp_adamw_cosine_dataloader_clipping_matches_torch(torch_oracle: ModuleType) -> None:
    torch_oracle.manual_seed(0)
    nn = torch_oracle.nn
    ref = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
    init = {k: v.detach().numpy().copy() for k, v in ref.state_dict().items()}

    losses, lrs, norms, final = _train(engine, init)
    t_losses, t_lrs, t_norms, t_final = _train(torch_oracle, init)

    assert len(losses) == len(t_losses) == 20
    np.testing.assert_allclose(losses, t_losses, rtol=1e-5)
    assert losses[-1] < losses[0]  # it trains
    assert lrs == pytest.approx(t_lrs, rel=1e-12)
    np.testing.assert_allclose(norms, t_norms, rtol=1e-5)
    assert max(norms) > 0.5  # clipping was active
    for k, v in t_final.items():
        np.testing.assert_allclose(final[k], v, rtol=1e-5, atol=1e-6, err_msg=k)
