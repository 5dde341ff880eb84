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
// The products run in chunk_gemm, a register-blocked kernel that reads its operands
// where they lie (OpenBLAS packed both operands of these 64- to 128-sized products on
// every call, a quarter of its time). Per (value head, chunk) item:
//   build: K K^T and Q K^T (the system and the scores, lower parts only) once per key
//          head, shared by its group of value heads, each weighting them with its decays;
//   walk:  Delta = U - W S0; O = diag(e^G) Q S0 + P Delta; S_n = e^{G_n} S0 + K^T Delta'.
// Each item's right-hand-side block has C rows of width dv + dk: [V_beta | -K_beta e^G],
// solved in place into [U | -W]. The pool splits the work over items (building) and
// value heads (walking). The workspace is the calling thread's scratch, kept across
// calls (a fresh allocation per call cost a third of the time in page faults).
#include <algorithm>
#include <cmath>

#include "backend/cpu/gated_delta/chunk_decay.h"
#include "backend/cpu/gated_delta/chunk_gemm.h"
#include "backend/cpu/gated_delta/gated_delta_kernels.h"
#include "backend/linalg.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {
namespace {

// Chunks per block of work: bounds the workspace on long prompts (per value head and
// chunk about C (2C + dv + dk + 1) floats, per key head and chunk 3C dk: 18 MiB at 32
// value and 16 key heads of 128, chunks of 64). It stays in the caller's scratch between
// calls.
constexpr int64_t kChunksPerBlock = 4;
// The caller's scratch slot holding the workspace: slot 0 is the solve's (which also runs
// on the calling thread).
constexpr int kWorkspaceSlot = 1;
// The largest chunk the front end accepts (kiln::kMaxDeltaChunkSize).
constexpr int64_t kMaxDeltaChunk = 64;

// q and k of the chunks [first, first + nc) and every key head, normalised and (q)
// scaled as the recurrent kernel does it, so both forms start from the same float32
// values. Per (key head, chunk) a block of three C x dk matrices: the keys, the queries
// (rows past the prompt's end zero) and the keys transposed (dk x C), the right-hand
// operand of the products with K^T.
void normalise_qk(const GatedDeltaRuleProblem& p, int64_t C, int64_t first, int64_t nc, float* qk, ThreadPool& pool) {
  const int64_t dk = p.key_dim, Hk = p.key_heads;
  pool.parallel_for(Hk * nc, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t h = item / nc, t0 = (first + item % nc) * C, n = std::min(C, p.tokens - t0);
      float* keys = qk + item * 3 * C * dk;
      float* queries = keys + C * dk;
      float* keys_t = queries + C * dk;
      for (int64_t i = 0; i < n; ++i) {
        const float* q = p.q + ((t0 + i) * Hk + h) * dk;
        const float* k = p.k + ((t0 + i) * Hk + h) * dk;
        float q_scale = 0.0f, k_scale = 0.0f;
        qk_scales(q, k, dk, p.scale, p.l2norm_qk, &q_scale, &k_scale);
        for (int64_t r = 0; r < dk; ++r) {
          queries[i * dk + r] = q[r] * q_scale;
          keys[i * dk + r] = k[r] * k_scale;
        }
      }
      std::fill(keys + n * dk, keys + C * dk, 0.0f);
      std::fill(queries + n * dk, queries + C * dk, 0.0f);
      for (int64_t r = 0; r < dk; ++r) {
        for (int64_t i = 0; i < C; ++i) keys_t[r * C + i] = keys[i * dk + r];
      }
    }
  });
}

}  // namespace

void gated_delta_rule_chunked_cpu(const ExecutionContext& ctx, const GatedDeltaRuleProblem& p, int64_t chunk_size) {
  constexpr const char* op = "gated_delta_rule_chunked";
  ThreadPool& pool = ctx.pool();
  const int64_t T = p.tokens, Hk = p.key_heads, Hv = p.value_heads, dk = p.key_dim, dv = p.value_dim;
  const int64_t group = Hv / Hk, C = chunk_size;
  KILN_CHECK(C >= 1 && C <= kMaxDeltaChunk, op, "chunk_size must be in [1, {}], got {}", kMaxDeltaChunk, C);

  const int64_t chunks = ceil_div(T, C);
  const int64_t block_chunks = std::min(chunks, kChunksPerBlock);
  const int64_t width = checked_add(dv, dk, op);
  // Workspace, per (key head, chunk) of the block: qk (3 C x dk); per (value head, chunk)
  // item: G (C), pair (2 C x C: the system A, then the scores P), rhs (C x width).
  const int64_t qk_block = checked_mul(checked_mul(3, C, op), dk, op);
  const int64_t pair_block = checked_mul(2 * C, C, op);
  const int64_t rhs_block = checked_mul(C, width, op);
  const int64_t items = checked_mul(Hv, block_chunks, op);
  const int64_t qk_size = checked_mul(checked_mul(Hk, block_chunks, op), qk_block, op);
  const int64_t item_size = checked_add(checked_add(C, pair_block, op), rhs_block, op);
  float* qk = ctx.scratch_of<float>(kWorkspaceSlot, checked_add(qk_size, checked_mul(items, item_size, op), op));
  float* G_all = qk + qk_size;
  float* pair_all = G_all + items * C;
  float* rhs_all = pair_all + items * pair_block;
  const int64_t ld_out = Hv * dv;
  const backend::LinalgKernels& linalg = backend::linalg_kernels.on(Device{DeviceType::CPU}, op);

  for (int64_t first = 0; first < chunks; first += block_chunks) {
    const int64_t nc = std::min(block_chunks, chunks - first);
    normalise_qk(p, C, first, nc, qk, pool);
    const auto keys_of = [&](int64_t h, int64_t c) { return qk + ((h / group) * nc + c) * qk_block; };
    // Build each (head, chunk) system, scores and right-hand sides. The value heads of
    // one key head share K K^T and Q K^T: one product per (key head, chunk), into the
    // group's last head's buffers, which the others weight from before it weights them
    // in place.
    pool.parallel_for(Hk * nc, 1, [&](int64_t begin, int64_t end) {
      for (int64_t key_item = begin; key_item < end; ++key_item) {
        const int64_t kh = key_item / nc, c = key_item % nc, t0 = (first + c) * C, n = std::min(C, T - t0);
        const float* K = keys_of(kh * group, c);
        const float* Q = K + C * dk;
        const float* Kt = Q + C * dk;
        float* shared = pair_all + (((kh + 1) * group - 1) * nc + c) * pair_block;
        ChunkGemmProblem product;
        product.rows = n;
        product.cols = n;
        product.first = {K, dk, 1, Kt, C, dk, false};
        product.c = shared;
        product.ldc = C;
        product.lower_cols = true;
        chunk_gemm(product);
        product.first.a = Q;
        product.c = shared + C * C;
        chunk_gemm(product);
        for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
          const int64_t item = h * nc + c;
          float* G = G_all + item * C;
          float* A = pair_all + item * pair_block;
          float* P = A + C * C;
          float* X = rhs_all + item * rhs_block;
          float acc = 0.0f;
          float betas[kMaxDeltaChunk];
          for (int64_t i = 0; i < n; ++i) {
            acc += p.g[(t0 + i) * Hv + h];
            G[i] = acc;
            betas[i] = p.beta[(t0 + i) * Hv + h];
          }
          weight_chunk_rows(G, betas, n, C, shared, shared + C * C, A, P);
          for (int64_t i = 0; i < n; ++i) {
            const float beta = betas[i];
            const float* v = p.v + ((t0 + i) * Hv + h) * dv;
            const float* k = K + i * dk;
            float* x = X + i * width;
            const float kscale = -beta * std::exp(G[i]);  // negated: the solve gives -W
            for (int64_t col = 0; col < dv; ++col) x[col] = beta * v[col];
            for (int64_t r = 0; r < dk; ++r) x[dv + r] = kscale * k[r];
          }
          // A short last chunk: rows past its end solve to zero.
          for (int64_t i = n; i < C; ++i) {
            std::fill(A + i * C, A + (i + 1) * C, 0.0f);
            std::fill(X + i * width, X + (i + 1) * width, 0.0f);
          }
        }
      }
    });
    // Every system of the block in one batched unit-lower solve: [U | -W] = (I + A)^-1 X.
    backend::TriangularSolveProblem solve{};
    solve.dtype = DType::Float32;
    solve.batch = Hv * nc;
    solve.n = C;
    solve.nrhs = width;
    solve.a = pair_all;
    solve.a_batch_stride = pair_block;
    solve.a_row_stride = C;
    solve.a_col_stride = 1;
    solve.x = rhs_all;
    solve.x_batch_stride = rhs_block;
    solve.x_row_stride = width;
    solve.x_col_stride = 1;
    solve.upper = false;
    solve.left = true;
    solve.unitriangular = true;
    linalg.triangular_solve(ctx, solve);

    // Walk the chunks in order per head, carrying the state S [dk, dv].
    pool.parallel_for(Hv, 1, [&](int64_t begin, int64_t end) {
      float decays[kMaxDeltaChunk];
      for (int64_t h = begin; h < end; ++h) {
        float* S = p.state + h * dk * dv;
        for (int64_t c = 0; c < nc; ++c) {
          const int64_t item = h * nc + c, t0 = (first + c) * C, n = std::min(C, T - t0);
          const float* G = G_all + item * C;
          const float* P = pair_all + item * pair_block + C * C;
          float* X = rhs_all + item * rhs_block;  // U | -W, then Delta
          const float* K = keys_of(h, c);
          const float* Q = K + C * dk;
          // Delta = U - W S0, in place over U.
          ChunkGemmProblem delta;
          delta.rows = n;
          delta.cols = dv;
          delta.first = {X + dv, width, 1, S, dv, dk, false};
          delta.c = X;
          delta.ldc = width;
          delta.accumulate = true;
          chunk_gemm(delta);
          // O = diag(e^G) Q S0 + P Delta, straight into the output rows.
          for (int64_t i = 0; i < n; ++i) decays[i] = std::exp(G[i]);
          ChunkGemmProblem output;
          output.rows = n;
          output.cols = dv;
          output.first = {Q, dk, 1, S, dv, dk, false};
          output.first_row_scale = decays;
          output.second = {P, C, 1, X, width, n, true};
          output.c = p.out + (t0 * Hv + h) * dv;
          output.ldc = ld_out;
          chunk_gemm(output);
          // S_n = e^{G_n} S0 + K^T diag(e^{G_n - G_j}) Delta (Delta's rows scaled in place,
          // no longer needed as they were).
          const float last = G[n - 1];
          for (int64_t j = 0; j < n; ++j) {
            const float wj = std::exp(last - G[j]);
            float* d = X + j * width;
            for (int64_t col = 0; col < dv; ++col) d[col] *= wj;
          }
          ChunkGemmProblem update;
          update.rows = dk;
          update.cols = dv;
          update.first = {K, 1, dk, X, width, n, false};
          update.c = S;
          update.ldc = dv;
          update.accumulate = true;
          update.c_scale = std::exp(last);
          chunk_gemm(update);
        }
      }
    });
  }
}

}  // namespace kiln::cpu
