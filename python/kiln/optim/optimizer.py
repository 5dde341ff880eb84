"""kiln.optim.Optimizer: PyTorch's optimizer base (param groups with per-group options,
state per parameter, and PyTorch's state-dict layout)."""

import warnings
from collections import defaultdict

from .._kiln import Tensor
from ..autograd import _zero_grad, enable_grad

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Marks an option that has no default (SGD's lr in PyTorch 1.x)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _typename(obj):
    return "kiln.Tensor" if isinstance(obj, Tensor) else type(obj).__name__


def _copy_state(value):
    """A copy of an optimizer state value whose tensors are cloned (kiln tensors do not
    support copy.deepcopy)."""
    if isinstance(value, Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _copy_state(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copy_state(v) for v in value)
    return value


class Optimizer:
    """Base of kiln's optimizers. ``params`` is an iterable of tensors or of dicts (param
    groups: ``{"params": [...], "lr": ...}``) whose options override ``defaults``."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, but "
                            "got " + _typename(params))
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"

    def add_param_group(self, param_group):
        """Adds a group of parameters with its own options (e.g. a new layer's lr)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param group must be a dict, got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(param))
            if not param.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required optimization parameter " + name)
            param_group.setdefault(name, default)
        ids = [id(p) for p in param_group["params"]]
        if len(ids) != len(set(ids)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        existing = {id(p) for group in self.param_groups for p in group["params"]}
        if not existing.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        """Drops (``set_to_none``) or zeroes the gradient of every parameter."""
        _zero_grad((p for group in self.param_groups for p in group["params"]), set_to_none)

    def _closure_loss(self, closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    def step(self, closure=None):
        raise NotImplementedError

    def state_dict(self):
        """{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}: parameters
        are numbered in the order of the groups, as PyTorch does."""
        mapping = {}
        start = 0

        def pack_group(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        return {"state": packed_state, "param_groups": param_groups}

    def load_state_dict(self, state_dict):
        """Restores options and per-parameter state saved by state_dict (the groups must
        have the same sizes). Floating state tensors take their parameter's dtype, except
        "step"."""
        state_dict = _copy_state(state_dict)
        groups = self.param_groups
        saved_groups = state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of optimizer's "
                             "group")
        id_map = {}
        for g, s in zip(groups, saved_groups):
            id_map.update(zip(s["params"], g["params"]))

        def cast(param, value, key=None):
            if isinstance(value, Tensor):
                if key != "step" and param.dtype.is_floating_point and value.dtype.is_floating_point:
                    value = value.to(param.dtype)
                return value
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = cast(id_map[k], v)
            else:
                state[k] = v
        new_groups = []
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            new_groups.append(s)
        self.__setstate__({"state": state, "param_groups": new_groups})

