"""kiln.nn.Module and Parameter: registration by attribute, traversal (with shared
parameters), state dicts (round trips, strict errors, safetensors), train/eval, to(),
zero_grad, apply and PyTorch's repr."""

import math

import numpy as np
import pytest

import kiln
import kiln.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.norm = nn.LayerNorm(3)
        self.register_buffer("running", kiln.zeros(3))
        self.register_buffer("scratch", kiln.ones(2), persistent=False)

    def forward(self, x):
        return self.norm(self.fc(x)) + self.running


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(3, 10, bias=False)
        self.scale = nn.Parameter(kiln.ones(1))

    def forward(self, ids):
        h = self.embed(ids)
        out = None
        for b in self.blocks:
            out = b(h) if out is None else out + b(h)
        return self.head(out) * self.scale


def test_parameter_is_a_leaf_tensor_sharing_data():
    data = kiln.zeros(2, 3)
    p = nn.Parameter(data)
    assert isinstance(p, kiln.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    assert not data.requires_grad  # a new leaf, as torch.nn.Parameter(t)
    with kiln.no_grad():
        data.fill_(5.0)
    assert p.tolist() == [[5.0] * 3] * 2  # same memory
    assert not nn.Parameter(kiln.zeros(1), requires_grad=False).requires_grad
    assert repr(p).startswith("Parameter containing:\ntensor(")
    with pytest.raises(TypeError):
        nn.Parameter([1.0, 2.0])


def test_parameter_in_place_ops_return_the_parameter_itself():
    p = nn.Parameter(kiln.zeros(3))
    with kiln.no_grad():
        out = p.add_(1.0)
    assert out is p and isinstance(out, nn.Parameter)


def test_data_property_swaps_values_keeping_the_object():
    p = nn.Parameter(kiln.zeros(2, 3))
    d = p.data
    assert not d.requires_grad and d.data_ptr() == p.data_ptr()
    p.data = kiln.ones(4, dtype=kiln.float64)
    assert isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf
    assert tuple(p.shape) == (4,) and p.dtype == kiln.float64 and p.tolist() == [1.0] * 4
    with pytest.raises(TypeError, match="cannot hold int64 data"):
        p.data = kiln.zeros(2, dtype=kiln.int64)
    assert p.dtype == kiln.float64  # unchanged after the refusal


def test_registration_by_assignment_and_traversal():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == [
        "scale", "embed.weight",
        "blocks.0.fc.weight", "blocks.0.fc.bias", "blocks.0.norm.weight", "blocks.0.norm.bias",
        "blocks.1.fc.weight", "blocks.1.fc.bias", "blocks.1.norm.weight", "blocks.1.norm.bias",
        "head.weight",
    ]
    assert len(list(net.parameters())) == 11
    assert [n for n, _ in net.named_buffers()] == ["blocks.0.running", "blocks.0.scratch", "blocks.1.running",
                                                    "blocks.1.scratch"]
    assert [n for n, _ in net.named_children()] == ["embed", "blocks", "head"]
    assert [n for n, _ in net.named_modules()] == [
        "", "embed", "blocks", "blocks.0", "blocks.0.fc", "blocks.0.norm", "blocks.1", "blocks.1.fc",
        "blocks.1.norm", "head"]
    assert list(net.modules())[0] is net
    assert [n for n, _ in net.named_parameters(recurse=False)] == ["scale"]
    assert [n for n, _ in net.named_parameters(prefix="model")][0] == "model.scale"
    assert net.get_submodule("blocks.1.fc") is net.blocks[1].fc


def test_shared_parameters_are_listed_once_but_saved_under_each_name():
    a = nn.Linear(3, 3)
    b = nn.Linear(3, 3)
    b.weight = a.weight  # tied
    seq = nn.Sequential(a, b)
    names = [n for n, _ in seq.named_parameters()]
    assert names == ["0.weight", "0.bias", "1.bias"]
    assert len(list(seq.parameters())) == 3
    assert list(seq.state_dict().keys()) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    shared = nn.Sequential(a, a)
    assert [n for n, _ in shared.named_modules()] == ["", "0"]
    assert len(list(shared.children())) == 1


def test_setattr_reassignment_and_errors():
    m = nn.Module()
    m.w = nn.Parameter(kiln.zeros(2))
    assert "w" in m._parameters
    with pytest.raises(TypeError, match="cannot assign 'kiln.Tensor' as parameter 'w'"):
        m.w = kiln.zeros(2)
    m.w = None
    assert m._parameters["w"] is None and m.w is None
    m.child = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="as child module 'child'"):
        m.child = 3
    m.register_buffer("buf", kiln.zeros(1))
    with pytest.raises(TypeError, match="as buffer 'buf'"):
        m.buf = "x"
    m.buf = kiln.ones(1)
    assert m.buf.tolist() == [1.0]
    m.plain = 3  # ordinary attribute
    assert m.plain == 3 and "plain" not in m._parameters
    with pytest.raises(KeyError, match="attribute 'plain' already exists"):
        m.register_parameter("plain", nn.Parameter(kiln.zeros(1)))
    with pytest.raises(KeyError, match="contain"):
        m.register_buffer("a.b", kiln.zeros(1))
    with pytest.raises(KeyError, match="empty string"):
        m.add_module("", nn.Identity())
    with pytest.raises(TypeError, match="is not a Module subclass"):
        m.add_module("x", 5)
    with pytest.raises(TypeError, match="to parameter 'q'"):
        m.register_parameter("q", kiln.zeros(1))
    with pytest.raises(AttributeError, match="'Module' object has no attribute 'missing'"):
        m.missing
    del m.child
    assert "child" not in m._modules


def test_assign_before_init_is_an_attribute_error():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(kiln.zeros(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Bad()


def test_state_dict_order_prefixes_and_non_persistent_buffers():
    net = Net()
    keys = list(net.state_dict().keys())
    assert keys[:4] == ["scale", "embed.weight", "blocks.0.running", "blocks.0.fc.weight"]  # own tensors first
    assert "blocks.0.running" in keys and "blocks.0.scratch" not in keys
    assert keys[-1] == "head.weight"
    sd = net.state_dict()
    assert not sd["embed.weight"].requires_grad  # detached
    assert net.state_dict(keep_vars=True)["embed.weight"] is net.embed.weight


def test_state_dict_round_trip_copies_values():
    a, b = Net(), Net()
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    for (na, pa), (nb, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert na == nb
        np.testing.assert_array_equal(pa.numpy(), pb.numpy())
    # Loading copies: the loaded module's tensors are its own.
    ids = kiln.tensor([[1, 2]])
    np.testing.assert_allclose(a(ids).detach().numpy(), b(ids).detach().numpy(), rtol=1e-6)


def test_load_state_dict_strict_errors_use_pytorch_wording():
    net = Block()
    sd = net.state_dict()
    del sd["fc.bias"]
    sd["extra.weight"] = kiln.zeros(1)
    with pytest.raises(RuntimeError) as e:
        net.load_state_dict(sd)
    msg = str(e.value)
    assert msg.startswith("Error(s) in loading state_dict for Block:\n\t")
    assert 'Missing key(s) in state_dict: "fc.bias". ' in msg
    assert 'Unexpected key(s) in state_dict: "extra.weight". ' in msg
    assert msg.index("Missing") < msg.index("Unexpected")
    result = net.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["fc.bias"] and result.unexpected_keys == ["extra.weight"]
    assert result == (["fc.bias"], ["extra.weight"])


def test_load_state_dict_shape_mismatch_is_an_error_even_when_not_strict():
    net = nn.Linear(4, 3)
    before = net.weight.numpy().copy()
    sd = {"weight": kiln.zeros(3, 5), "bias": kiln.zeros(3)}
    for strict in (True, False):
        with pytest.raises(RuntimeError, match=r"size mismatch for weight: copying a param with shape \[3, 5\] from "
                                               r"checkpoint, the shape in current model is \[3, 4\]\."):
            net.load_state_dict(sd, strict=strict)
    np.testing.assert_array_equal(net.weight.numpy(), before)
    with pytest.raises(RuntimeError, match="expected kiln.Tensor"):
        net.load_state_dict({"weight": [1.0], "bias": kiln.zeros(3)})


def test_load_state_dict_casts_to_the_parameter_dtype():
    net = nn.Linear(2, 2)
    sd = {"weight": kiln.ones(2, 2, dtype=kiln.float64), "bias": kiln.zeros(2, dtype=kiln.float16)}
    net.load_state_dict(sd)
    assert net.weight.dtype == kiln.float32 and net.weight.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert net.weight.requires_grad and net.weight.is_leaf


def test_state_dict_round_trip_through_safetensors(tmp_path):
    a, b = Net(), Net()
    path = tmp_path / "net.safetensors"
    kiln.save_safetensors(a.state_dict(), str(path))
    loaded = kiln.load_safetensors(path)
    assert set(loaded) == set(a.state_dict())
    b.load_state_dict(loaded)
    for k, v in a.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), b.state_dict()[k].numpy())


def test_train_eval_and_requires_grad():
    net = Net()
    assert net.training and net.blocks[0].fc.training
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="boolean"):
        net.train("yes")
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    net.requires_grad_()
    assert all(p.requires_grad for p in net.parameters())


def test_zero_grad_sets_to_none_or_zeroes():
    net = nn.Linear(3, 2)
    net(kiln.ones(4, 3)).sum().backward()
    assert net.weight.grad is not None
    net.zero_grad(set_to_none=False)
    assert net.weight.grad.tolist() == [[0.0] * 3] * 2
    net.zero_grad()
    assert net.weight.grad is None and net.bias.grad is None


def test_to_dtype_converts_in_place_keeping_parameter_identity():
    net = Block()
    w = net.fc.weight
    values = w.numpy().astype(np.float64)
    net(kiln.ones(2, 4)).sum().backward()
    assert net.to(kiln.float64) is net
    assert net.fc.weight is w and isinstance(w, nn.Parameter)
    assert w.dtype == kiln.float64 and w.requires_grad and w.is_leaf
    assert w.grad.dtype == kiln.float64
    np.testing.assert_array_equal(w.numpy(), values)
    assert net.running.dtype == kiln.float64
    net.to(dtype=kiln.float32)
    assert w.dtype == kiln.float32
    out = net(kiln.ones(2, 4))
    out.sum().backward()  # still trainable after the moves
    assert w.grad is not None
    net.double()
    assert net.fc.bias.dtype == kiln.float64
    net.float()
    with pytest.raises(TypeError, match="only accepts floating point or complex dtypes"):
        net.to(kiln.int32)
    net.to("cpu")
    assert net.fc.weight is w


def test_to_leaves_integer_buffers_alone():
    m = nn.Module()
    m.register_buffer("counts", kiln.zeros(3, dtype=kiln.int64))
    m.w = nn.Parameter(kiln.zeros(2))
    m.to(kiln.float64)
    assert m.counts.dtype == kiln.int64 and m.w.dtype == kiln.float64


def test_deepcopy_clones_parameters_and_buffers_keeping_ties():
    import copy

    net = Net()
    net.head.weight = nn.Parameter(kiln.ones(10, 3))
    net.blocks[1].fc.weight = net.blocks[0].fc.weight  # tied
    twin = copy.deepcopy(net)
    assert twin.blocks[1].fc.weight is twin.blocks[0].fc.weight
    for (name, a), (_, b) in zip(net.state_dict(keep_vars=True).items(), twin.state_dict(keep_vars=True).items()):
        assert a is not b, name
        assert type(a) is type(b) and a.requires_grad == b.requires_grad, name
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(), err_msg=name)
    with kiln.no_grad():
        twin.scale.fill_(3.0)
        twin.blocks[0].running.fill_(2.0)
    assert net.scale.tolist() == [1.0] and net.blocks[0].running.tolist() == [0.0, 0.0, 0.0]


def test_apply_visits_children_first():
    net = Net()
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and seen[0] == "Embedding"

    def init_linear(m):
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.weight)

    net.apply(init_linear)
    assert float(net.head.weight.abs().sum()) == 0.0


def test_call_runs_forward_and_missing_forward_is_an_error():
    with pytest.raises(NotImplementedError, match='missing the required "forward" function'):
        nn.Module()(1)


def test_repr_matches_pytorch_layout():
    net = nn.Sequential(nn.Linear(4, 3, bias=False), nn.GELU(approximate="tanh"),
                        nn.ModuleList([nn.LayerNorm(3), nn.Dropout(0.1)]))
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Linear(in_features=4, out_features=3, bias=False)\n"
        "  (1): GELU(approximate='tanh')\n"
        "  (2): ModuleList(\n"
        "    (0): LayerNorm((3,), eps=1e-05, elementwise_affine=True)\n"
        "    (1): Dropout(p=0.1, inplace=False)\n"
        "  )\n"
        ")")
    assert repr(nn.SiLU()) == "SiLU()"
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    assert repr(nn.Embedding(5, 2, padding_idx=0)) == "Embedding(5, 2, padding_idx=0)"

    class WithExtra(nn.Module):
        def extra_repr(self):
            return "a=1\nb=2"

    assert repr(WithExtra()) == "WithExtra(\n  a=1\n  b=2\n)"


def test_module_trains_and_gradients_reach_every_parameter():
    net = Net()
    out = net(kiln.tensor([[1, 2, 3]]))
    out.sum().backward()
    for name, p in net.named_parameters():
        assert p.grad is not None, name
        assert tuple(p.grad.shape) == tuple(p.shape), name
    assert math.isfinite(float(net.scale.grad))
