"""Issue 12's linear-algebra rows. The issue's absolute targets were set against PyTorch
1.13 on the build machines (e.g. 385 us -> 100 us), so the target here is that ratio."""
import numpy as np


def run(table, torch, kiln):
    rng = np.random.default_rng(12)

    def pair(array):
        return kiln.from_numpy(array.copy()), torch.from_numpy(array.copy())

    a = (rng.standard_normal((100000, 4, 4)) + 8 * np.eye(4)).astype(np.float32)
    ka, ta = pair(a)
    table.compare("linalg.inv f32 100000 x 4x4", lambda: kiln.linalg.inv(ka), lambda: torch.linalg.inv(ta), 27.6 / 2)

    lower = (rng.standard_normal((256, 64, 64)) / 64).astype(np.float32)
    rhs = rng.standard_normal((256, 64, 8)).astype(np.float32)
    kl, tl = pair(lower)
    kb, tb = pair(rhs)
    table.compare("linalg.solve_triangular f32 256 x 64x64 unit-lower, 8 rhs",
                  lambda: kiln.linalg.solve_triangular(kl, kb, upper=False, unitriangular=True),
                  lambda: torch.linalg.solve_triangular(tl, tb, upper=False, unitriangular=True), 385 / 100)

    c = (rng.standard_normal((256, 256)) + 1j * rng.standard_normal((256, 256)) + 512 * np.eye(256))
    kc, tc = pair(c.astype(np.complex64))
    table.compare("linalg.lu_factor c64 256x256", lambda: kiln.linalg.lu_factor(kc),
                  lambda: torch.linalg.lu_factor(tc), 0.88 / 0.9)

    s = rng.standard_normal((512, 512)).astype(np.float32)
    ks, ts = pair(s)
    table.compare("linalg.svd f32 512x512", lambda: kiln.linalg.svd(ks), lambda: torch.linalg.svd(ts),
                  35.7 / 36, pairs=5)

    values = np.full(4 << 20, 3, dtype=np.int64)
    values[::1000] = np.arange(0, 4 << 20, 1000) % 97
    kv, tv = pair(values)
    table.compare("bincount int64 4M near-identical", lambda: kiln.bincount(kv), lambda: torch.bincount(tv), 3.1 / 0.7)
