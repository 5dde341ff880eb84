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
// The products are OpenBLAS GEMMs over chunk matrices, shaped so that few, larger calls
// do the work: per (value head, chunk) item
//   build: [K; Q] K^T (2C x C) in one call gives the system and the scores (once per
//          key head, shared by its group of value heads);
//   walk:  [-W; Q] S0 (2C x dv) in one call, added onto [U; 0], gives Delta and Q S0;
//          P Delta into the output; K'^T Delta' into the state.
// For that, each item's right-hand-side block has 2C rows of width dv + dk: rows < C
// are [V_beta | -K_beta e^G] (solved in place into [U | -W]), rows >= C are [0 | Q].
// The pool splits the work over items (building) and value heads (walking); OpenBLAS
// runs single-threaded. The workspace is the calling thread's scratch, kept across calls
// (a fresh allocation per call cost a third of the time in page faults).
#include <algorithm>
#include <cmath>

#include "backend/cpu/gated_delta/chunk_decay.h"
#include "backend/cpu/gated_delta/gated_delta_kernels.h"
#include "backend/cpu/matmul/blas.h"
#include "backend/linalg.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {
namespace {

// Chunks per block of work: bounds the workspace on long prompts (per value head and
// chunk about 2C (C + dv + dk) floats, per key head and chunk 2C dk: 25 MiB at 32 value
// and 16 key heads of 128, chunks of 64). It stays in the caller's scratch between calls.
constexpr int64_t kChunksPerBlock = 4;
// The caller's scratch slot holding the workspace: slot 0 is the solve's (which also runs
// on the calling thread).
constexpr int kWorkspaceSlot = 1;
// The largest chunk the front end accepts (kiln::kMaxDeltaChunkSize).
constexpr int64_t kMaxDeltaChunk = 64;

// q and k of the chunks [first, first + nc) and every key head, normalised and (q)
// scaled as the recurrent kernel does it, so both forms start from the same float32
// values. Per (key head, chunk) a block of 2C rows of dk: rows < C the keys, rows >= C
// the queries (zero past the prompt's end).
void normalise_qk(const GatedDeltaRuleProblem& p, int64_t C, int64_t first, int64_t nc, float* qk, ThreadPool& pool) {
  const int64_t dk = p.key_dim, Hk = p.key_heads;
  pool.parallel_for(Hk * nc, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t h = item / nc, t0 = (first + item % nc) * C, n = std::min(C, p.tokens - t0);
      float* keys = qk + item * 2 * C * dk;
      float* queries = keys + C * dk;
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
    }
  });
}

}  // namespace

void gated_delta_rule_chunked_cpu(const ExecutionContext& ctx, const GatedDeltaRuleProblem& p, int64_t chunk_size) {
  constexpr const char* op = "gated_delta_rule_chunked";
  ThreadPool& pool = ctx.pool();
  ensure_blas_single_threaded();
  const int64_t T = p.tokens, Hk = p.key_heads, Hv = p.value_heads, dk = p.key_dim, dv = p.value_dim;
  const int64_t group = Hv / Hk, C = chunk_size;
  KILN_CHECK(C >= 1 && C <= kMaxDeltaChunk, op, "chunk_size must be in [1, {}], got {}", kMaxDeltaChunk, C);
  const auto i32 = [](int64_t n) { return static_cast<int>(n); };  // the front end checked the extents fit

  const int64_t chunks = ceil_div(T, C);
  const int64_t block_chunks = std::min(chunks, kChunksPerBlock);
  const int64_t width = checked_add(dv, dk, op);
  // Workspace, per (key head, chunk) of the block: qk (2C x dk); per (value head, chunk)
  // item: G (C), pair (2C x C: the system A, then the scores P), rhs (2C x width).
  const int64_t qk_block = checked_mul(checked_mul(2, C, op), dk, op);
  const int64_t pair_block = checked_mul(2 * C, C, op);
  const int64_t rhs_block = checked_mul(2 * C, width, op);
  const int64_t items = checked_mul(Hv, block_chunks, op);
  const int64_t qk_size = checked_mul(checked_mul(Hk, block_chunks, op), qk_block, op);
  const int64_t item_size = checked_add(checked_add(C, pair_block, op), rhs_block, op);
  float* qk = ctx.scratch_of<float>(kWorkspaceSlot, checked_add(qk_size, checked_mul(items, item_size, op), op));
  float* G_all = qk + qk_size;
  float* pair_all = G_all + items * C;
  float* rhs_all = pair_all + items * pair_block;
  const int ldw = i32(width), ld_out = i32(Hv * dv), ldk = i32(dk), ldc = i32(C);
  const backend::LinalgKernels& linalg = backend::linalg_kernels.on(Device{DeviceType::CPU}, op);

  for (int64_t first = 0; first < chunks; first += block_chunks) {
    const int64_t nc = std::min(block_chunks, chunks - first);
    normalise_qk(p, C, first, nc, qk, pool);
    const auto keys_of = [&](int64_t h, int64_t c) { return qk + ((h / group) * nc + c) * qk_block; };
    // Build each (head, chunk) system, scores and right-hand sides. The value heads of
    // one key head share [K; Q] K^T: one product per (key head, chunk), copied to the
    // group's other heads before each weights it with its own decays.
    pool.parallel_for(Hk * nc, 1, [&](int64_t begin, int64_t end) {
      for (int64_t key_item = begin; key_item < end; ++key_item) {
        const int64_t kh = key_item / nc, c = key_item % nc, t0 = (first + c) * C, n = std::min(C, T - t0);
        const float* K = keys_of(kh * group, c);
        const float* Q = K + C * dk;
        // [K; Q] K^T: rows < C the system, rows >= C the scores (padding rows are zero).
        float* shared = pair_all + (kh * group * nc + c) * pair_block;
        blas::gemm(false, true, i32(2 * C), i32(n), i32(dk), K, ldk, K, ldk, 0.0f, shared, ldc);
        // The head whose buffer holds the shared product goes last, after the others
        // copied it unweighted.
        for (int64_t h = (kh + 1) * group - 1; h >= kh * group; --h) {
          const int64_t item = h * nc + c;
          float* G = G_all + item * C;
          float* A = pair_all + item * pair_block;
          float* P = A + C * C;
          float* X = rhs_all + item * rhs_block;
          if (A != shared) {
            for (int64_t i = 0; i < 2 * C; ++i) std::copy_n(shared + i * C, n, A + i * C);
          }
          float acc = 0.0f;
          float betas[kMaxDeltaChunk];
          for (int64_t i = 0; i < n; ++i) {
            acc += p.g[(t0 + i) * Hv + h];
            G[i] = acc;
            betas[i] = p.beta[(t0 + i) * Hv + h];
          }
          weight_chunk_rows(G, betas, n, C, A, P);
          for (int64_t i = 0; i < n; ++i) {
            const float beta = betas[i];
            const float* v = p.v + ((t0 + i) * Hv + h) * dv;
            const float* k = K + i * dk;
            float* x = X + i * width;
            const float kscale = -beta * std::exp(G[i]);  // negated: the solve gives -W
            for (int64_t col = 0; col < dv; ++col) x[col] = beta * v[col];
            for (int64_t r = 0; r < dk; ++r) x[dv + r] = kscale * k[r];
          }
          // A short last chunk: rows past its end solve to zero and multiply as zero.
          for (int64_t i = n; i < C; ++i) {
            std::fill(A + i * C, A + (i + 1) * C, 0.0f);
            std::fill(X + i * width, X + (i + 1) * width, 0.0f);
          }
          for (int64_t i = 0; i < C; ++i) {
            float* x = X + (C + i) * width;
            std::fill(x, x + dv, 0.0f);
            std::copy_n(Q + i * dk, dk, x + dv);
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
      for (int64_t h = begin; h < end; ++h) {
        float* S = p.state + h * dk * dv;
        for (int64_t c = 0; c < nc; ++c) {
          const int64_t item = h * nc + c, t0 = (first + c) * C, n = std::min(C, T - t0);
          const float* G = G_all + item * C;
          const float* P = pair_all + item * pair_block + C * C;
          float* X = rhs_all + item * rhs_block;  // rows < C: U, then Delta; rows >= C: Q S0
          const float* K = keys_of(h, c);
          float* out = p.out + (t0 * Hv + h) * dv;
          // [U; 0] += [-W; Q] S0: Delta = U - W S0 and Q S0 in one product.
          blas::gemm(false, false, i32(2 * C), i32(dv), i32(dk), X + dv, ldw, S, i32(dv), 1.0f, X, ldw);
          // O = diag(e^G) Q S0 + P Delta.
          for (int64_t i = 0; i < n; ++i) {
            const float inter = std::exp(G[i]);
            const float* qs = X + (C + i) * width;
            float* o = out + i * ld_out;
            for (int64_t col = 0; col < dv; ++col) o[col] = inter * qs[col];
          }
          blas::gemm(false, false, i32(n), i32(dv), i32(n), P, ldc, X, ldw, 1.0f, out, ld_out);
          // S_n = e^{G_n} S0 + K^T diag(e^{G_n - G_j}) Delta (Delta's rows scaled in place,
          // no longer needed as they were).
          const float last = G[n - 1];
          const float decay = std::exp(last);
          for (int64_t i = 0; i < dk * dv; ++i) S[i] *= decay;
          for (int64_t j = 0; j < n; ++j) {
            const float wj = std::exp(last - G[j]);
            float* d = X + j * width;
            for (int64_t col = 0; col < dv; ++col) d[col] *= wj;
          }
          blas::gemm(true, false, i32(dk), i32(dv), i32(n), K, ldk, X, ldw, 1.0f, S, i32(dv));
        }
      }
    });
  }
}

}  // namespace kiln::cpu
