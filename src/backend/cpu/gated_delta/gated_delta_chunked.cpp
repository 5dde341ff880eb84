// The gated delta rule in the chunked WY form (transformers' torch_chunk_gated_delta_rule,
// spec/models.md §2.4 g), for prompts. Within a chunk of n tokens starting from state S0,
// with G_i = g_1 + ... + g_i (cumulative log decay) and normalised q, k:
//   S_i = e^{G_i} S0 + sum_{j<=i} e^{G_i - G_j} k_j delta_j^T
//   delta_i = beta_i (v_i - S_{i-1}'^T k_i)  (S_{i-1}' = the decayed previous state)
// Substituting S gives a unit-lower-triangular system for all deltas of the chunk at once:
//   (I + A) Delta = V_beta - K_beta e^{G} S0,   A_ij = beta_i e^{G_i - G_j} (k_i . k_j), j < i
// so Delta = U - W S0 with (I + A) [U | W] = [V_beta | K_beta e^{G}], neither depending
// on S0: every chunk's solve runs before the chunks are walked in order, as one batched
// call of the linalg family's triangular_solve. Then per chunk
//   o_i = e^{G_i} S0^T q_i + sum_{j<=i} e^{G_i - G_j} (q_i . k_j) delta_j
//   S_n = e^{G_n} S0 + sum_j e^{G_n - G_j} k_j delta_j^T.
// The work is the recurrent form's dk*dv per token three times over (W S0, S0^T q, the
// state update) plus n^2 (dk + dv) / 2 per chunk, as matrix-shaped loops instead of one
// read-modify-write of the state per token.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/gated_delta/gated_delta_kernels.h"
#include "backend/linalg.h"
#include "kiln/int_math.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {
namespace {

constexpr float kL2NormEps = 1e-6f;  // as the recurrent kernel (transformers' l2norm)
// Chunks solved per batched call: bounds the workspace (per value head and chunk,
// chunk^2 + chunk * (dk + dv) floats) on long prompts.
constexpr int64_t kChunksPerSolve = 16;

// q and k of every token and key head, normalised and (q) scaled as the recurrent kernel
// does it, so both forms start from the same float32 values.
void normalise_qk(const GatedDeltaRuleProblem& p, std::vector<float>& qn, std::vector<float>& kn, ThreadPool& pool) {
  const int64_t dk = p.key_dim;
  pool.parallel_for(p.tokens * p.key_heads, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const float* q = p.q + row * dk;
      const float* k = p.k + row * dk;
      float q_scale = p.scale, k_scale = 1.0f;
      if (p.l2norm_qk) {
        float qq = 0.0f, kk = 0.0f;
        for (int64_t r = 0; r < dk; ++r) {
          qq += q[r] * q[r];
          kk += k[r] * k[r];
        }
        q_scale /= std::sqrt(qq + kL2NormEps);
        k_scale /= std::sqrt(kk + kL2NormEps);
      }
      for (int64_t r = 0; r < dk; ++r) {
        qn[static_cast<size_t>(row * dk + r)] = q[r] * q_scale;
        kn[static_cast<size_t>(row * dk + r)] = k[r] * k_scale;
      }
    }
  });
}

float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t r = 0; r < n; ++r) s += a[r] * b[r];
  return s;
}

struct Workspace {
  int64_t C, width;           // chunk size; right-hand-side width dv + dk
  std::vector<float> G;       // [head, chunk, C] cumulative log decay
  std::vector<float> system;  // [head, chunk, C, C] strictly lower A (diagonal unread)
  std::vector<float> rhs;     // [head, chunk, C, width] [V_beta | K_beta e^G], solved in place
};

}  // namespace

void gated_delta_rule_chunked_cpu(const ExecutionContext& ctx, const GatedDeltaRuleProblem& p, int64_t chunk_size) {
  constexpr const char* op = "gated_delta_rule_chunked";
  ThreadPool& pool = ctx.pool();
  const int64_t T = p.tokens, Hk = p.key_heads, Hv = p.value_heads, dk = p.key_dim, dv = p.value_dim;
  const int64_t group = Hv / Hk, C = chunk_size;
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };

  std::vector<float> qn(sz(checked_mul(checked_mul(T, Hk, op), dk, op))), kn(qn.size());
  normalise_qk(p, qn, kn, pool);
  const auto key_row = [&](const std::vector<float>& x, int64_t t, int64_t h) {
    return x.data() + (t * Hk + h / group) * dk;
  };

  const int64_t chunks = ceil_div(T, C);
  const int64_t block_chunks = std::min(chunks, kChunksPerSolve);
  Workspace ws{C, checked_add(dv, dk, op), {}, {}, {}};
  const int64_t items = checked_mul(Hv, block_chunks, op);
  ws.G.resize(sz(checked_mul(items, C, op)));
  ws.system.resize(sz(checked_mul(checked_mul(items, C, op), C, op)));
  ws.rhs.resize(sz(checked_mul(checked_mul(items, C, op), ws.width, op)));
  const backend::LinalgKernels& linalg = backend::linalg_kernels.on(Device{DeviceType::CPU}, op);

  for (int64_t first = 0; first < chunks; first += block_chunks) {
    const int64_t nc = std::min(block_chunks, chunks - first);
    // Build each (head, chunk) system; rows past a short last chunk stay zero, which
    // solves to zero and is never read.
    pool.parallel_for(Hv * nc, 1, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t h = item / nc, t0 = (first + item % nc) * C, n = std::min(C, T - t0);
        float* G = ws.G.data() + item * C;
        float* A = ws.system.data() + item * C * C;
        float* X = ws.rhs.data() + item * C * ws.width;
        std::fill(A, A + C * C, 0.0f);
        std::fill(X, X + C * ws.width, 0.0f);
        float acc = 0.0f;
        for (int64_t i = 0; i < n; ++i) {
          acc += p.g[(t0 + i) * Hv + h];
          G[i] = acc;
        }
        for (int64_t i = 0; i < n; ++i) {
          const float beta = p.beta[(t0 + i) * Hv + h];
          const float* ki = key_row(kn, t0 + i, h);
          for (int64_t j = 0; j < i; ++j) {
            A[i * C + j] = beta * std::exp(G[i] - G[j]) * dot(ki, key_row(kn, t0 + j, h), dk);
          }
          const float* v = p.v + ((t0 + i) * Hv + h) * dv;
          float* x = X + i * ws.width;
          const float kscale = beta * std::exp(G[i]);
          for (int64_t c = 0; c < dv; ++c) x[c] = beta * v[c];
          for (int64_t r = 0; r < dk; ++r) x[dv + r] = kscale * ki[r];
        }
      }
    });
    // Every system of the block in one batched unit-lower solve: [U | W] = (I + A)^-1 X.
    backend::TriangularSolveProblem solve{};
    solve.dtype = DType::Float32;
    solve.batch = Hv * nc;
    solve.n = C;
    solve.nrhs = ws.width;
    solve.a = ws.system.data();
    solve.a_batch_stride = C * C;
    solve.a_row_stride = C;
    solve.a_col_stride = 1;
    solve.x = ws.rhs.data();
    solve.x_batch_stride = C * ws.width;
    solve.x_row_stride = ws.width;
    solve.x_col_stride = 1;
    solve.upper = false;
    solve.left = true;
    solve.unitriangular = true;
    linalg.triangular_solve(ctx, solve);

    // Walk the chunks in order per head, carrying the state.
    pool.parallel_for(Hv, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> sq(sz(dv));
      for (int64_t h = begin; h < end; ++h) {
        float* S = p.state + h * dk * dv;
        for (int64_t c = 0; c < nc; ++c) {
          const int64_t item = h * nc + c, t0 = (first + c) * C, n = std::min(C, T - t0);
          const float* G = ws.G.data() + item * C;
          float* X = ws.rhs.data() + item * C * ws.width;
          for (int64_t i = 0; i < n; ++i) {
            // delta_i = U_i - S0^T W_i (in place of U_i) and S0^T q_i in one pass over S0.
            float* delta = X + i * ws.width;
            const float* w = delta + dv;
            const float* q = key_row(qn, t0 + i, h);
            std::fill(sq.begin(), sq.end(), 0.0f);
            for (int64_t r = 0; r < dk; ++r) {
              const float* row = S + r * dv;
              const float wr = w[r], qr = q[r];
              for (int64_t col = 0; col < dv; ++col) {
                delta[col] -= wr * row[col];
                sq[sz(col)] += qr * row[col];
              }
            }
            float* out = p.out + ((t0 + i) * Hv + h) * dv;
            const float inter = std::exp(G[i]);
            for (int64_t col = 0; col < dv; ++col) out[col] = inter * sq[sz(col)];
          }
          // The intra-chunk part reads deltas of earlier rows only, all final now.
          for (int64_t i = 0; i < n; ++i) {
            const float* q = key_row(qn, t0 + i, h);
            float* out = p.out + ((t0 + i) * Hv + h) * dv;
            for (int64_t j = 0; j <= i; ++j) {
              const float a = std::exp(G[i] - G[j]) * dot(q, key_row(kn, t0 + j, h), dk);
              const float* delta = X + j * ws.width;
              for (int64_t col = 0; col < dv; ++col) out[col] += a * delta[col];
            }
          }
          // S_n = e^{G_n} S0 + sum_j e^{G_n - G_j} k_j delta_j^T.
          const float last = G[n - 1];
          const float decay = std::exp(last);
          for (int64_t i = 0; i < dk * dv; ++i) S[i] *= decay;
          for (int64_t j = 0; j < n; ++j) {
            const float* k = key_row(kn, t0 + j, h);
            const float* delta = X + j * ws.width;
            const float wj = std::exp(last - G[j]);
            for (int64_t r = 0; r < dk; ++r) {
              float* row = S + r * dv;
              const float kr = wj * k[r];
              for (int64_t col = 0; col < dv; ++col) row[col] += kr * delta[col];
            }
          }
        }
      }
    });
  }
}

}  // namespace kiln::cpu
