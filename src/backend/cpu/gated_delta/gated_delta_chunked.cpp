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
// The products are OpenBLAS GEMMs on the chunk's rows in place (keys, queries and
// outputs are strided views of the [T, heads, dim] buffers); the pool splits the work
// over heads (and chunks while building the systems), OpenBLAS runs single-threaded.
#include <algorithm>
#include <cmath>
#include <memory>

#include "backend/cpu/gated_delta/gated_delta_kernels.h"
#include "backend/cpu/matmul/blas.h"
#include "backend/linalg.h"
#include "kiln/int_math.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {
namespace {

// Chunks solved per batched call: bounds the workspace (per value head and chunk,
// chunk^2 + chunk * (dk + dv) floats) on long prompts.
constexpr int64_t kChunksPerSolve = 16;

// Workspace left uninitialised: every entry read is written first (zeroing megabytes of
// it per call showed up as a tenth of the time).
class FloatBuffer {
 public:
  explicit FloatBuffer(size_t n) : data_(new float[n]) {}
  float* data() const { return data_.get(); }

 private:
  std::unique_ptr<float[]> data_;
};

// q and k of tokens [t0, t1) and every key head, normalised and (q) scaled as the
// recurrent kernel does it, so both forms start from the same float32 values; row
// (t - t0) * key_heads + head of qn and kn.
void normalise_qk(const GatedDeltaRuleProblem& p, int64_t t0, int64_t t1, float* qn, float* kn, ThreadPool& pool) {
  const int64_t dk = p.key_dim, first_row = t0 * p.key_heads;
  pool.parallel_for((t1 - t0) * p.key_heads, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const float* q = p.q + (first_row + row) * dk;
      const float* k = p.k + (first_row + row) * dk;
      float q_scale = 0.0f, k_scale = 0.0f;
      qk_scales(q, k, dk, p.scale, p.l2norm_qk, &q_scale, &k_scale);
      for (int64_t r = 0; r < dk; ++r) {
        qn[row * dk + r] = q[r] * q_scale;
        kn[row * dk + r] = k[r] * k_scale;
      }
    }
  });
}

struct Workspace {
  int64_t C, width;           // chunk size; right-hand-side width dv + dk
  FloatBuffer G;       // [head, chunk, C] cumulative log decay
  FloatBuffer system;  // [head, chunk, C, C] strictly lower A (diagonal unread)
  FloatBuffer scores;  // [head, chunk, C, C] e^{G_i - G_j} (q_i . k_j), j <= i
  FloatBuffer rhs;     // [head, chunk, C, width] [V_beta | -K_beta e^G], solved in place
};

}  // namespace

void gated_delta_rule_chunked_cpu(const ExecutionContext& ctx, const GatedDeltaRuleProblem& p, int64_t chunk_size) {
  constexpr const char* op = "gated_delta_rule_chunked";
  ThreadPool& pool = ctx.pool();
  ensure_blas_single_threaded();
  const int64_t T = p.tokens, Hk = p.key_heads, Hv = p.value_heads, dk = p.key_dim, dv = p.value_dim;
  const int64_t group = Hv / Hk, C = chunk_size;
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };
  const auto i32 = [](int64_t n) { return static_cast<int>(n); };  // the front end checked the extents fit

  const int64_t chunks = ceil_div(T, C);
  const int64_t block_chunks = std::min(chunks, kChunksPerSolve);
  // Normalised q and k of one block of chunks. Token t's row of key head h / group
  // (t counted from the block's first token); rows of one head are Hk * dk apart.
  const size_t qk_size = sz(checked_mul(checked_mul(checked_mul(block_chunks, C, op), Hk, op), dk, op));
  const FloatBuffer qn(qk_size), kn(qk_size);
  const auto key_row = [&](const FloatBuffer& x, int64_t t, int64_t h) {
    return x.data() + (t * Hk + h / group) * dk;
  };
  const int key_ld = i32(Hk * dk), out_ld = i32(Hv * dv);

  const int64_t items = checked_mul(Hv, block_chunks, op), width64 = checked_add(dv, dk, op);
  const size_t square = sz(checked_mul(checked_mul(items, C, op), C, op));
  Workspace ws{C, width64, FloatBuffer(sz(checked_mul(items, C, op))), FloatBuffer(square), FloatBuffer(square),
               FloatBuffer(sz(checked_mul(checked_mul(items, C, op), width64, op)))};
  const int width = i32(ws.width);
  const backend::LinalgKernels& linalg = backend::linalg_kernels.on(Device{DeviceType::CPU}, op);

  for (int64_t first = 0; first < chunks; first += block_chunks) {
    const int64_t nc = std::min(block_chunks, chunks - first);
    const int64_t block_t0 = first * C;
    normalise_qk(p, block_t0, std::min(T, (first + nc) * C), qn.data(), kn.data(), pool);
    // Build each (head, chunk) system.
    pool.parallel_for(Hv * nc, 1, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t h = item / nc, t0 = (first + item % nc) * C, n = std::min(C, T - t0);
        float* G = ws.G.data() + item * C;
        float* A = ws.system.data() + item * C * C;
        float* P = ws.scores.data() + item * C * C;
        float* X = ws.rhs.data() + item * C * ws.width;
        if (n < C) {  // a short last chunk: zero rows past its end solve to zero, never read
          std::fill(A, A + C * C, 0.0f);
          std::fill(X + n * ws.width, X + C * ws.width, 0.0f);
        }
        float acc = 0.0f;
        for (int64_t i = 0; i < n; ++i) {
          acc += p.g[(t0 + i) * Hv + h];
          G[i] = acc;
        }
        const float* K = key_row(kn, t0 - block_t0, h);
        const float* Q = key_row(qn, t0 - block_t0, h);
        blas::gemm(false, true, i32(n), i32(n), i32(dk), K, key_ld, K, key_ld, 0.0f, A, i32(C));
        blas::gemm(false, true, i32(n), i32(n), i32(dk), Q, key_ld, K, key_ld, 0.0f, P, i32(C));
        for (int64_t i = 0; i < n; ++i) {
          const float beta = p.beta[(t0 + i) * Hv + h];
          float* a = A + i * C;
          float* s = P + i * C;
          for (int64_t j = 0; j < i; ++j) {
            const float decay = std::exp(G[i] - G[j]);
            a[j] *= beta * decay;
            s[j] *= decay;
          }
          std::fill(a + i, a + n, 0.0f);
          std::fill(s + i + 1, s + n, 0.0f);
          const float* v = p.v + ((t0 + i) * Hv + h) * dv;
          const float* k = K + i * key_ld;
          float* x = X + i * ws.width;
          const float kscale = -beta * std::exp(G[i]);  // negated: the solve gives -W
          for (int64_t c = 0; c < dv; ++c) x[c] = beta * v[c];
          for (int64_t r = 0; r < dk; ++r) x[dv + r] = kscale * k[r];
        }
      }
    });
    // Every system of the block in one batched unit-lower solve: [U | -W] = (I + A)^-1 X.
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

    // Walk the chunks in order per head, carrying the state S [dk, dv].
    pool.parallel_for(Hv, 1, [&](int64_t begin, int64_t end) {
      for (int64_t h = begin; h < end; ++h) {
        float* S = p.state + h * dk * dv;
        for (int64_t c = 0; c < nc; ++c) {
          const int64_t item = h * nc + c, t0 = (first + c) * C, n = std::min(C, T - t0);
          const float* G = ws.G.data() + item * C;
          const float* P = ws.scores.data() + item * C * C;
          float* delta = ws.rhs.data() + item * C * ws.width;  // U, then Delta in place
          const float* minus_w = delta + dv;
          const float* Q = key_row(qn, t0 - block_t0, h);
          const float* K = key_row(kn, t0 - block_t0, h);
          float* out = p.out + (t0 * Hv + h) * dv;
          // Delta = U - W S0;  O = diag(e^G) Q S0 + P Delta.
          blas::gemm(false, false, i32(n), i32(dv), i32(dk), minus_w, width, S, i32(dv), 1.0f, delta, width);
          blas::gemm(false, false, i32(n), i32(dv), i32(dk), Q, key_ld, S, i32(dv), 0.0f, out, out_ld);
          for (int64_t i = 0; i < n; ++i) {
            const float inter = std::exp(G[i]);
            float* o = out + i * out_ld;
            for (int64_t col = 0; col < dv; ++col) o[col] *= inter;
          }
          blas::gemm(false, false, i32(n), i32(dv), i32(n), P, i32(C), delta, width, 1.0f, out, out_ld);
          // S_n = e^{G_n} S0 + K^T diag(e^{G_n - G_j}) Delta (Delta's rows scaled in place,
          // no longer needed as they were).
          const float last = G[n - 1];
          const float decay = std::exp(last);
          for (int64_t i = 0; i < dk * dv; ++i) S[i] *= decay;
          for (int64_t j = 0; j < n; ++j) {
            const float wj = std::exp(last - G[j]);
            float* d = delta + j * ws.width;
            for (int64_t col = 0; col < dv; ++col) d[col] *= wj;
          }
          blas::gemm(true, false, i32(dk), i32(dv), i32(n), K, key_ld, delta, width, 1.0f, S, i32(dv));
        }
      }
    });
  }
}

}  // namespace kiln::cpu
