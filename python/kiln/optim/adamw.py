"""kiln.optim.AdamW: Adam with decoupled weight decay (Loshchilov & Hutter), with
PyTorch's single-tensor formulas and state layout."""

import math

from .. import _kiln
from ..autograd import no_grad
from .optimizer import Optimizer

__all__ = ["AdamW"]


class AdamW(Optimizer):
    """For each parameter p with gradient g (negated when ``maximize``), at step t:

        p = p * (1 - lr * weight_decay)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        v_hat = max(v_hat, v) (amsgrad) or v
        p = p - lr / (1 - beta1**t) * m / (sqrt(v_hat) / sqrt(1 - beta2**t) + eps)

    State per parameter: "step" (a float32 0-dim tensor, as PyTorch's), "exp_avg",
    "exp_avg_sq" and, with amsgrad, "max_exp_avg_sq"."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if capturable or differentiable or fused:
            raise NotImplementedError("AdamW: capturable, differentiable and fused are not implemented in kiln")
        # PyTorch 1.13's group keys (it has no "differentiable" for AdamW).
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, foreach=foreach,
                        maximize=maximize, capturable=capturable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("capturable", False)

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure()'s loss."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
                weight_decay, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = -p.grad if maximize else p.grad
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = _kiln.zeros((), dtype=_kiln.float32)
                        state["exp_avg"] = _kiln.zeros_like(p)
                        state["exp_avg_sq"] = _kiln.zeros_like(p)
                        if amsgrad:
                            state["max_exp_avg_sq"] = _kiln.zeros_like(p)
                    exp_avg, exp_avg_sq, step_t = state["exp_avg"], state["exp_avg_sq"], state["step"]
                    step_t += 1
                    p.mul_(1 - lr * weight_decay)
                    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                    exp_avg_sq.mul_(beta2).add_(grad * grad, alpha=1 - beta2)
                    step = step_t.item()
                    bias_correction1 = 1 - beta1 ** step
                    bias_correction2_sqrt = math.sqrt(1 - beta2 ** step)
                    step_size = lr / bias_correction1
                    if amsgrad:
                        max_sq = state["max_exp_avg_sq"]
                        max_sq.copy_(_kiln.maximum(max_sq, exp_avg_sq))
                        denom = (max_sq.sqrt() / bias_correction2_sqrt).add_(eps)
                    else:
                        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
                    p.add_(exp_avg / denom, alpha=-step_size)
        return loss
