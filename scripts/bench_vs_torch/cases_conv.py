"""Issue 13's conv row: conv2d 3x3 backward, channels-last, [8,64,56,56] -> 64 channels,
float32, at least as fast as PyTorch 1.13 in the same run (target 1.0). Both sides time
the backward function directly (grad_input, grad_weight and grad_bias from one
grad_output): torch.ops.aten.convolution_backward and kiln.convolution_backward. The
forward rows are context."""
import numpy as np


def run(table, torch, kiln):
    rng = np.random.default_rng(13)
    x = rng.standard_normal((8, 64, 56, 56)).astype(np.float32)
    w = (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32)
    g = rng.standard_normal((8, 64, 56, 56)).astype(np.float32)

    def kiln_cl(a):
        return kiln.from_numpy(a.copy()).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)

    def torch_cl(a):
        return torch.from_numpy(a.copy()).contiguous(memory_format=torch.channels_last)

    kx, kg, kw = kiln_cl(x), kiln_cl(g), kiln.from_numpy(w.copy())
    tx, tg, tw = torch_cl(x), torch_cl(g), torch.from_numpy(w.copy())
    args = ([1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True])
    table.compare("conv2d 3x3 backward f32 channels-last [8,64,56,56]->64",
                  lambda: kiln.convolution_backward(kg, kx, kw, [64], *args),
                  lambda: torch.ops.aten.convolution_backward(tg, tx, tw, [64], *args), 1.0, pairs=5)
    table.compare("conv2d 3x3 forward f32 channels-last [8,64,56,56]->64",
                  lambda: kiln.nn.functional.conv2d(kx, kw, padding=1),
                  lambda: torch.nn.functional.conv2d(tx, tw, padding=1), pairs=5)
    kxc, kgc = kiln.from_numpy(x.copy()), kiln.from_numpy(g.copy())
    txc, tgc = torch.from_numpy(x.copy()), torch.from_numpy(g.copy())
    table.compare("conv2d 3x3 backward f32 contiguous [8,64,56,56]->64",
                  lambda: kiln.convolution_backward(kgc, kxc, kw, [64], *args),
                  lambda: torch.ops.aten.convolution_backward(tgc, txc, tw, [64], *args), pairs=5)
