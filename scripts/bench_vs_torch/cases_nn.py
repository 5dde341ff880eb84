"""Issue 13's NN rows, same-run against PyTorch 1.13.

- Constant pad of a video-VAE activation [1,128,9,90,160] f32 with the causal 3-D conv
  padding (1,1,1,1,2,0): the issue's target is <= 3.3 ms and gives no PyTorch figure,
  so the same-run target is "at least as fast" (1.0x); the row also checks that kiln's
  reserved memory does not grow over 100 calls.
- Upsample nearest 2x backward of [8,64,64,64] (the gradient of [8,64,128,128]): >= 1.0x.
  Both sides time the backward alone (the graph is kept and re-walked).
"""
import numpy as np


def _pad_rows(table, torch, kiln):
    rng = np.random.default_rng(13)
    x = rng.standard_normal((1, 128, 9, 90, 160), dtype=np.float32)
    kx, tx = kiln.from_numpy(x), torch.from_numpy(x)
    pad = (1, 1, 1, 1, 2, 0)
    kp = kiln.nn.functional.pad
    tp = torch.nn.functional.pad
    table.compare("pad constant f32 [1,128,9,90,160] (1,1,1,1,2,0)", lambda: kp(kx, pad), lambda: tp(tx, pad), 1.0)
    for _ in range(2):
        kp(kx, pad)
    after_two = kiln.memory_reserved()
    for _ in range(98):
        kp(kx, pad)
    after_hundred = kiln.memory_reserved()
    grew = after_hundred - after_two
    print(f"{'  reserved memory, call 2 -> call 100':58s} {after_two / 2**20:9.1f} MiB -> "
          f"{after_hundred / 2**20:.1f} MiB  {'(no growth: met)' if grew <= 0 else '(GREW: MISSED)'}")
    table.missed += grew > 0


def _upsample_rows(table, torch, kiln):
    rng = np.random.default_rng(14)
    x = rng.standard_normal((8, 64, 64, 64), dtype=np.float32)
    g = rng.standard_normal((8, 64, 128, 128), dtype=np.float32)
    kx = kiln.from_numpy(x.copy()).requires_grad_()
    tx = torch.from_numpy(x.copy()).requires_grad_()
    kg, tg = kiln.from_numpy(g), torch.from_numpy(g)
    ky = kiln.nn.functional.interpolate(kx, scale_factor=2.0, mode="nearest")
    ty = torch.nn.functional.interpolate(tx, scale_factor=2.0, mode="nearest")
    table.compare("upsample nearest 2x backward f32 [8,64,64,64]",
                  lambda: kiln.autograd.grad([ky], [kx], [kg], retain_graph=True),
                  lambda: torch.autograd.grad([ty], [tx], [tg], retain_graph=True), 1.0)
    table.compare("upsample nearest 2x forward f32 [8,64,64,64]",
                  lambda: kiln.nn.functional.interpolate(kx.detach(), scale_factor=2.0, mode="nearest"),
                  lambda: torch.nn.functional.interpolate(tx.detach(), scale_factor=2.0, mode="nearest"))
    kb = kx.detach().requires_grad_()
    tb = tx.detach().requires_grad_()
    kyb = kiln.nn.functional.interpolate(kb, scale_factor=2.0, mode="bilinear", align_corners=False)
    tyb = torch.nn.functional.interpolate(tb, scale_factor=2.0, mode="bilinear", align_corners=False)
    table.compare("upsample bilinear 2x backward f32 [8,64,64,64]",
                  lambda: kiln.autograd.grad([kyb], [kb], [kg], retain_graph=True),
                  lambda: torch.autograd.grad([tyb], [tb], [tg], retain_graph=True))


def run(table, torch, kiln):
    _pad_rows(table, torch, kiln)
    _upsample_rows(table, torch, kiln)
