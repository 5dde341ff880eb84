"""kiln.optim: SGD and AdamW against numpy implementations of PyTorch's formulas over
several steps, param groups, state dicts, zero_grad, the schedulers' lr sequences, and a
small MLP whose loss falls under AdamW."""

import math

import numpy as np
import pytest

import kiln
import kiln.nn as nn
from kiln.optim import SGD, AdamW, Optimizer
from kiln.optim.lr_scheduler import CosineAnnealingLR, LambdaLR, StepLR

STEPS = 6


def grads_for(step, shape, seed):
    return np.random.default_rng(seed * 1000 + step).standard_normal(shape)


def run_kiln(opt_cls, kwargs, dtype, shapes=((3, 4), (5,))):
    """Parameters stepped with fixed gradients; returns the trajectory of each."""
    rng = np.random.default_rng(42)
    start = [rng.standard_normal(s) for s in shapes]
    params = [nn.Parameter(kiln.from_numpy(a.astype(dtype)).clone()) for a in start]
    opt = opt_cls(params, **kwargs)
    traj = []
    for step in range(STEPS):
        opt.zero_grad()
        for i, p in enumerate(params):
            p.grad = kiln.from_numpy(grads_for(step, p.shape, i).astype(dtype)).clone()
        opt.step()
        traj.append([p.detach().numpy().copy() for p in params])
    return start, traj, opt, params


def sgd_reference(start, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    params = [a.copy() for a in start]
    bufs = [None] * len(params)
    traj = []
    for step in range(STEPS):
        for i, p in enumerate(params):
            g = grads_for(step, p.shape, i)
            g = -g if maximize else g
            if weight_decay:
                g = g + weight_decay * p
            if momentum:
                bufs[i] = g.copy() if bufs[i] is None else momentum * bufs[i] + (1 - dampening) * g
                g = g + momentum * bufs[i] if nesterov else bufs[i]
            params[i] = p - lr * g
        traj.append([p.copy() for p in params])
    return traj


def adamw_reference(start, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, maximize=False):
    b1, b2 = betas
    params = [a.copy() for a in start]
    m = [np.zeros_like(a) for a in start]
    v = [np.zeros_like(a) for a in start]
    vmax = [np.zeros_like(a) for a in start]
    traj = []
    for step in range(STEPS):
        t = step + 1
        for i, p in enumerate(params):
            g = grads_for(step, p.shape, i)
            g = -g if maximize else g
            p = p * (1 - lr * weight_decay)
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            if amsgrad:
                vmax[i] = np.maximum(vmax[i], v[i])
            denom = np.sqrt(vmax[i] if amsgrad else v[i]) / math.sqrt(1 - b2 ** t) + eps
            params[i] = p - lr / (1 - b1 ** t) * m[i] / denom
        traj.append([p.copy() for p in params])
    return traj


def check(traj, ref, rtol, atol):
    for step, (got, want) in enumerate(zip(traj, ref)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"step {step + 1}")


TOL = {np.float64: (1e-12, 1e-12), np.float32: (2e-5, 2e-6)}

SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01),
    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1),
    dict(lr=0.02, momentum=0.5, maximize=True),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kwargs", SGD_CASES)
def test_sgd_follows_pytorch_formulas(kwargs, dtype):
    start, traj, opt, _ = run_kiln(SGD, kwargs, dtype)
    check(traj, sgd_reference(start, **kwargs), *TOL[dtype])


ADAMW_CASES = [
    dict(),
    dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    dict(lr=0.01, amsgrad=True),
    dict(lr=0.003, weight_decay=0.0, maximize=True),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kwargs", ADAMW_CASES)
def test_adamw_follows_pytorch_formulas(kwargs, dtype):
    start, traj, opt, params = run_kiln(AdamW, kwargs, dtype)
    check(traj, adamw_reference(start, **kwargs), *TOL[dtype])
    state = opt.state[params[0]]
    assert float(state["step"]) == STEPS and state["step"].dtype == kiln.float32
    assert set(state) == {"step", "exp_avg", "exp_avg_sq"} | ({"max_exp_avg_sq"} if kwargs.get("amsgrad") else set())


def test_updates_are_in_place_and_keep_leaves():
    p = nn.Parameter(kiln.ones(3))
    opt = AdamW([p], lr=0.1)
    before = p.data_ptr()
    p.grad = kiln.ones(3)
    opt.step()
    assert p.data_ptr() == before and p.is_leaf and p.requires_grad and p.grad_fn is None
    assert p._version > 0


def test_params_without_grad_are_skipped():
    a, b = nn.Parameter(kiln.ones(2)), nn.Parameter(kiln.ones(2))
    opt = SGD([a, b], lr=0.5, momentum=0.9)
    a.grad = kiln.ones(2)
    opt.step()
    assert a.tolist() == [0.5, 0.5] and b.tolist() == [1.0, 1.0]
    assert b not in opt.state


def test_param_groups_with_their_own_options():
    a, b = nn.Parameter(kiln.ones(2)), nn.Parameter(kiln.ones(2))
    opt = SGD([{"params": [a]}, {"params": b, "lr": 0.5}], lr=0.1, momentum=0.0)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["params"] == [b] and opt.param_groups[1]["momentum"] == 0.0
    a.grad, b.grad = kiln.ones(2), kiln.ones(2)
    opt.step()
    np.testing.assert_allclose(a.numpy(), [0.9, 0.9])
    np.testing.assert_allclose(b.numpy(), [0.5, 0.5])
    c = nn.Parameter(kiln.ones(1))
    opt.add_param_group({"params": [c], "lr": 1.0})
    assert len(opt.param_groups) == 3 and opt.param_groups[2]["momentum"] == 0.0
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        opt.add_param_group({"params": [a]})
    assert "Parameter Group 1" in repr(opt) and "    lr: 0.5\n" in repr(opt)


def test_optimizer_argument_errors():
    p = nn.Parameter(kiln.ones(1))
    with pytest.raises(TypeError, match="should be an iterable of Tensors or dicts"):
        SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        AdamW([])
    with pytest.raises(ValueError, match="required optimization parameter lr"):
        SGD([p])
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        SGD([p], lr=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero dampening"):
        SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        AdamW([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid epsilon value"):
        AdamW([p], eps=-1)
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors"):
        SGD([1.0], lr=0.1)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        SGD([p * 2], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        SGD([{"params": {p}}], lr=0.1)


def test_zero_grad_none_or_zero():
    p = nn.Parameter(kiln.ones(2))
    opt = SGD([p], lr=0.1)
    p.grad = kiln.ones(2)
    opt.zero_grad(set_to_none=False)
    assert p.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


def test_state_dict_layout_and_resume_gives_the_same_trajectory():
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((3, 2)).astype(np.float32)
    b0 = rng.standard_normal(2).astype(np.float32)

    def make():
        w, b = nn.Parameter(kiln.from_numpy(w0.copy())), nn.Parameter(kiln.from_numpy(b0.copy()))
        return [w, b], AdamW([{"params": [w]}, {"params": [b], "lr": 0.01}], lr=0.05, amsgrad=True)

    def feed(params, step):
        for i, p in enumerate(params):
            p.grad = kiln.from_numpy(grads_for(step, p.shape, i).astype(np.float32))

    params, opt = make()
    for step in range(3):
        feed(params, step)
        opt.step()
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert sorted(sd["state"]) == [0, 1]
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert sd["param_groups"][1]["lr"] == 0.01 and sd["param_groups"][0]["betas"] == (0.9, 0.999)
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}

    params2, opt2 = make()
    for p, q in zip(params2, params):
        with kiln.no_grad():
            p.copy_(q)
    opt2.load_state_dict(sd)
    assert opt2.state[params2[0]]["exp_avg"] is not sd["state"][0]["exp_avg"]  # copied
    for step in range(3, 6):
        feed(params, step)
        feed(params2, step)
        opt.step()
        opt2.step()
    for p, q in zip(params, params2):
        np.testing.assert_array_equal(p.numpy(), q.numpy())

    with pytest.raises(ValueError, match="different number of parameter groups"):
        SGD([params[0]], lr=0.1).load_state_dict(sd)
    bad = SGD([{"params": [params[0], params[1]]}, {"params": [nn.Parameter(kiln.ones(1))]}], lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        bad.load_state_dict(sd)


def test_sgd_state_dict_holds_momentum_buffers():
    p = nn.Parameter(kiln.ones(2))
    opt = SGD([p], lr=0.1, momentum=0.9)
    p.grad = kiln.ones(2)
    opt.step()
    sd = opt.state_dict()
    assert list(sd["state"][0]) == ["momentum_buffer"]
    assert sd["state"][0]["momentum_buffer"].tolist() == [1.0, 1.0]
    assert set(sd["param_groups"][0]) == {"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize",
                                          "foreach", "differentiable", "params"}


def test_closure_is_called_with_grad_enabled():
    p = nn.Parameter(kiln.ones(2))
    opt = SGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with kiln.no_grad():
        loss = opt.step(closure)
    assert float(loss) == 2.0
    np.testing.assert_allclose(p.numpy(), [0.8, 0.8])


def test_optimizer_base_step_is_abstract():
    opt = Optimizer([nn.Parameter(kiln.ones(1))], {"lr": 0.1})
    with pytest.raises(NotImplementedError):
        opt.step()


# ---- schedulers ---------------------------------------------------------------------------
def one_param_sgd(lr=0.1):
    return SGD([nn.Parameter(kiln.ones(1))], lr=lr)


def lrs(sched, opt, n):
    out = [sched.get_last_lr()[0]]
    for _ in range(n):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr()[0])
        assert opt.param_groups[0]["lr"] == out[-1]
    return out


def test_step_lr_sequence():
    opt = one_param_sgd(0.1)
    got = lrs(StepLR(opt, step_size=3, gamma=0.5), opt, 9)
    want = [0.1 * 0.5 ** (e // 3) for e in range(10)]
    np.testing.assert_allclose(got, want, rtol=1e-15)
    assert opt.param_groups[0]["initial_lr"] == 0.1


def test_cosine_lr_sequence_matches_closed_form_and_restarts_upwards():
    opt = one_param_sgd(0.2)
    t_max, eta_min = 5, 0.01
    got = lrs(CosineAnnealingLR(opt, T_max=t_max, eta_min=eta_min), opt, 12)
    want = [eta_min + (0.2 - eta_min) * (1 + math.cos(math.pi * e / t_max)) / 2 for e in range(13)]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    assert got[5] == pytest.approx(eta_min) and got[10] == pytest.approx(0.2)


def test_lambda_lr_and_scheduler_state_dict():
    opt = SGD([{"params": [nn.Parameter(kiln.ones(1))]}, {"params": [nn.Parameter(kiln.ones(1))], "lr": 1.0}],
              lr=0.1)
    sched = LambdaLR(opt, [lambda e: 0.9 ** e, lambda e: 1 / (e + 1)])
    for _ in range(4):
        opt.step()
        sched.step()
    np.testing.assert_allclose(sched.get_last_lr(), [0.1 * 0.9 ** 4, 1.0 / 5])
    sd = sched.state_dict()
    assert sd["last_epoch"] == 4 and sd["lr_lambdas"] == [None, None] and "optimizer" not in sd
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        LambdaLR(opt, [lambda e: 1.0])

    opt1 = one_param_sgd(0.1)
    s1 = StepLR(opt1, 2, gamma=0.1)
    for _ in range(3):
        opt1.step()
        s1.step()
    opt2 = one_param_sgd(0.1)
    s2 = StepLR(opt2, 5)
    s2.load_state_dict(s1.state_dict())
    assert s2.step_size == 2 and s2.last_epoch == 3 and s2.base_lrs == [0.1]
    with pytest.raises(TypeError, match="is not an Optimizer"):
        StepLR(object(), 2)


# ---- training ----------------------------------------------------------------------------
def test_small_mlp_trains_with_adamw_and_loss_falls():
    kiln.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 4)).astype(np.float32)
    y = (np.sin(x[:, :1] * 2) + x[:, 1:2] * x[:, 2:3]).astype(np.float32)
    X, Y = kiln.from_numpy(x), kiln.from_numpy(y)
    model = nn.Sequential(nn.Linear(4, 32), nn.GELU(), nn.Linear(32, 32), nn.SiLU(), nn.Linear(32, 1))
    opt = AdamW(model.parameters(), lr=0.01)
    sched = CosineAnnealingLR(opt, T_max=200)
    losses = []
    for _ in range(200):
        opt.zero_grad()
        loss = kiln.nn.functional.mse_loss(model(X), Y)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss))
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < 0.1 * losses[0]
    assert losses[-1] < 0.05
