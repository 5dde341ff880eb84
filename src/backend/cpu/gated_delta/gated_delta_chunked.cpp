// The gated delta rule in the chunked WY form (transformers' torch_chunk_gated_delta_rule,
// spec/models.md §2.4 g), for prompts. Within a chunk of n tokens starting from state S0,
// with G_i = g_1 + ... + g_i (cumulative log decay) and normalised q, k:
//   S_i = e^{G_i} S0 + sum_{j<=i} e^{G_i - G_j} k_j delta_j^T
//   delta_i = beta_i (v_i - S_{i-1}'^T k_i)  (S_{i-1}' = the decayed previous state)
// Substituting S gives a unit-lower-triangular system for all deltas of the chunk at once:
//   (I + A) Delta = V_beta - K_beta e^{G} S0,   A_ij = beta_i e^{G_i - G_j} (k_i . k_j), j < i
// so Delta = U - W S0 with (I + A) [U | W] = [V_beta | K_beta e^{G}], neither depending
// on S0. Then per chunk
//   o_i = e^{G_i} S0^T q_i + sum_{j<=i} e^{G_i - G_j} (q_i . k_j) delta_j
//   S_n = e^{G_n} S0 + sum_j e^{G_n - G_j} k_j delta_j^T.
// The products run in chunk_gemm, a register-blocked kernel that reads its operands
// where they lie (OpenBLAS packed both operands of these 64- to 128-sized products on
// every call, a quarter of its time).
//
// Workers claim key heads one at a time; a worker takes one key head's chunks in order and, per
// chunk, does everything for the group of value heads that share it (or a part of the
// group, when there are fewer key heads than threads): K K^T and Q K^T
// once (the system and the scores, lower parts only), then per value head the decay
// weighting, the right-hand sides [V_beta | -K_beta e^G] (C rows of dv + dk, padded to
// whole solve panels), the unit-lower solve into [U | -W] with the linalg family's panel
// kernel (in place, A's rows 64 floats apart), and the walk:
//   Delta = U - W S0; O = diag(e^G) Q S0 + P Delta; S_n = e^{G_n} S0 + K^T Delta'.
// The worker's workspace (about 230 KiB at dk = dv = 128) stays in L2 from build to walk;
// building every chunk of a block first and walking afterwards sent an 18 MiB workspace
// through L3 three times. It is the worker's scratch, kept across calls (a fresh
// allocation per call cost a third of the time in page faults). The next chunk's q, k,
// v, g and beta rows are prefetched a few at a time between the tiles of this chunk's
// products: token rows lie 8-16 KiB apart, where no hardware prefetcher follows, and
// their first reads (the q/k norms and the right-hand sides) stalled on DRAM for a sixth
// of the kernel's time.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "backend/cpu/gated_delta/chunk_decay.h"
#include "backend/cpu/gated_delta/chunk_gemm.h"
#include "backend/cpu/gated_delta/chunk_rows.h"
#include "backend/cpu/gated_delta/gated_delta_kernels.h"
#include "backend/cpu/linalg/triangular_panel.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {
namespace {

// The worker's scratch slot holding the workspace.
constexpr int kWorkspaceSlot = 1;
// The largest chunk the front end accepts (kiln::kMaxDeltaChunkSize); also the row
// stride of the system, one of the strides the panel solve reads in place.
constexpr int64_t kMaxDeltaChunk = 64;

// q and k of key head h for the n tokens from t0, normalised and (q) scaled as the
// recurrent kernel does it, so both forms start from the same float32 values: the keys
// and queries (C x dk, rows from n on unused) and the keys transposed (dk x C, columns
// from n on unused), the right-hand operand of the products with K^T.
void normalise_qk(const GatedDeltaRuleProblem& p, int64_t h, int64_t t0, int64_t n, int64_t C, float* keys,
                  float* queries, float* keys_t) {
  const int64_t dk = p.key_dim, Hk = p.key_heads;
  for (int64_t i = 0; i < n; ++i) {
    const float* q = p.q + ((t0 + i) * Hk + h) * dk;
    const float* k = p.k + ((t0 + i) * Hk + h) * dk;
    float q_scale = 0.0f, k_scale = 0.0f;
    qk_scales(q, k, dk, p.scale, p.l2norm_qk, &q_scale, &k_scale);
    scale_row(q, q_scale, dk, queries + i * dk);
    scale_row(k, k_scale, dk, keys + i * dk);
  }
  for (int64_t r = 0; r < dk; ++r) {
    for (int64_t i = 0; i < n; ++i) keys_t[r * C + i] = keys[i * dk + r];
  }
}

// The solve's panel: narrow when it holds every right-hand side, double when there are
// enough to fill one (as the linalg family picks it).
linalg::PanelWidth solve_panel_width(int64_t nrhs) {
  if (nrhs <= linalg::panel_lanes(linalg::PanelWidth::kNarrow, float{})) return linalg::PanelWidth::kNarrow;
  if (nrhs >= 2 * linalg::panel_lanes(linalg::PanelWidth::kWide, float{})) return linalg::PanelWidth::kDouble;
  return linalg::PanelWidth::kWide;
}

}  // namespace

void gated_delta_rule_chunked_cpu(const ExecutionContext& ctx, const GatedDeltaRuleProblem& p, int64_t chunk_size) {
  constexpr const char* op = "gated_delta_rule_chunked";
  const int64_t T = p.tokens, Hk = p.key_heads, Hv = p.value_heads, dk = p.key_dim, dv = p.value_dim;
  const int64_t group = Hv / Hk, C = chunk_size;
  KILN_CHECK(C >= 1 && C <= kMaxDeltaChunk, op, "chunk_size must be in [1, {}], got {}", kMaxDeltaChunk, C);
  if (T == 0) return;

  const int64_t chunks = ceil_div(T, C);
  const int64_t width = checked_add(dv, dk, op);
  // The solve's panel of right-hand sides (a double AVX-512 panel at dv + dk = 256);
  // rhs rows are padded to whole panels, so every panel is solved in place.
  const linalg::PanelWidth panel = solve_panel_width(width);
  const int64_t lanes = linalg::panel_lanes(panel, float{});
  const int64_t ldx = checked_mul(ceil_div(width, lanes), lanes, op);
  // Per worker: qk (3 C x dk), the shared products and one value head's weighted system
  // and scores (4 blocks of kMaxDeltaChunk rows of kMaxDeltaChunk: the solve reads rows
  // of that stride in place), the rhs (C x ldx).
  constexpr int64_t L = kMaxDeltaChunk;
  const int64_t qk_size = checked_mul(checked_mul(3, C, op), dk, op);
  const int64_t rhs_size = checked_mul(C, ldx, op);
  const int64_t workspace = checked_add(checked_add(qk_size, 4 * L * L, op), rhs_size, op);
  const int64_t ld_out = Hv * dv;

  // Work units: a key head's group of value heads, split in parts when there are fewer
  // key heads than threads (each part then computes the shared products itself; they
  // are the same numbers whoever computes them, so the result does not depend on it).
  const int64_t parts = std::min(group, ceil_div(int64_t{ctx.pool().num_threads()}, Hk));
  const int64_t units = checked_mul(Hk, parts, op);
  // Each thread claims units one at a time from a shared counter rather than taking a
  // fixed half: a thread that loses its CPU for a while (a busy machine) no longer leaves
  // the other waiting at the end with its share done. Which thread computes a unit does
  // not change its numbers.
  std::atomic<int64_t> next_unit{0};
  ctx.pool().parallel_for(std::min<int64_t>(units, ctx.pool().num_threads()), 1, [&](int64_t, int64_t) {
    float* K = ctx.scratch_of<float>(kWorkspaceSlot, workspace);
    float* Q = K + C * dk;
    float* Kt = Q + C * dk;
    float* shared = K + qk_size;  // K K^T, then Q K^T
    float* A = shared + 2 * L * L;
    float* P = A + L * L;
    float* X = P + L * L;  // [V_beta | -K_beta e^G | pad], solved into [U | -W], then Delta
    float G[kMaxDeltaChunk], betas[kMaxDeltaChunk], decays[kMaxDeltaChunk];
    for (int64_t unit; (unit = next_unit.fetch_add(1, std::memory_order_relaxed)) < units;) {
      const int64_t kh = unit / parts, part = unit % parts;
      const int64_t first_head = kh * group + part * group / parts, end_head = kh * group + (part + 1) * group / parts;
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t t0 = c * C, n = std::min(C, T - t0);
        normalise_qk(p, kh, t0, n, C, K, Q, Kt);
        // The next chunk's rows, prefetched during this chunk's products (below).
        const int64_t t1 = t0 + n, n1 = std::min(C, T - t1);
        const auto next_rows = [&](const float* base, int64_t stride, int64_t row_floats) {
          return n1 > 0 ? ChunkGemmPrefetch{base + t1 * stride, stride, n1, row_floats} : ChunkGemmPrefetch{};
        };
        ChunkGemmProblem product;
        product.rows = n;
        product.cols = n;
        product.first = {K, dk, 1, Kt, C, dk, false};
        product.c = shared;
        product.ldc = L;
        product.lower_cols = true;
        product.prefetch = next_rows(p.g + first_head, Hv, end_head - first_head);
        chunk_gemm(product);
        product.first.a = Q;
        product.c = shared + L * L;
        product.prefetch = next_rows(p.beta + first_head, Hv, end_head - first_head);
        chunk_gemm(product);
        for (int64_t h = first_head; h < end_head; ++h) {
          float acc = 0.0f;
          for (int64_t i = 0; i < n; ++i) {
            acc += p.g[(t0 + i) * Hv + h];
            G[i] = acc;
            betas[i] = p.beta[(t0 + i) * Hv + h];
          }
          weight_chunk_rows(G, betas, n, L, shared, shared + L * L, A, P);
          for (int64_t i = 0; i < n; ++i) {
            float* x = X + i * ldx;
            scale_row(p.v + ((t0 + i) * Hv + h) * dv, betas[i], dv, x);
            // Negated: the solve gives -W.
            scale_row(K + i * dk, -betas[i] * std::exp(G[i]), dk, x + dv);
            std::fill(x + width, x + ldx, 0.0f);
          }
          // [U | -W] = (I + A)^-1 X, panel by panel while the chunk is in L1/L2.
          for (int64_t c0 = 0; c0 < ldx; c0 += lanes) linalg::solve_lower_panel(panel, A, L, 1, X + c0, ldx, n, true);

          float* S = p.state + h * dk * dv;
          // Delta = U - W S0, in place over U.
          ChunkGemmProblem delta;
          delta.rows = n;
          delta.cols = dv;
          delta.first = {X + dv, ldx, 1, S, dv, dk, false};
          delta.c = X;
          delta.ldc = ldx;
          delta.accumulate = true;
          delta.prefetch = next_rows(p.v + h * dv, Hv * dv, dv);
          chunk_gemm(delta);
          // O = diag(e^G) Q S0 + P Delta, straight into the output rows.
          for (int64_t i = 0; i < n; ++i) decays[i] = std::exp(G[i]);
          ChunkGemmProblem output;
          output.rows = n;
          output.cols = dv;
          output.first = {Q, dk, 1, S, dv, dk, false};
          output.first_row_scale = decays;
          output.second = {P, L, 1, X, ldx, n, true};
          output.c = p.out + (t0 * Hv + h) * dv;
          output.ldc = ld_out;
          if (h == first_head) output.prefetch = next_rows(p.q + kh * dk, Hk * dk, dk);
          chunk_gemm(output);
          // S_n = e^{G_n} S0 + K^T diag(e^{G_n - G_j}) Delta (Delta's rows scaled in place,
          // no longer needed as they were).
          const float last = G[n - 1];
          for (int64_t j = 0; j < n; ++j) scale_row(X + j * ldx, std::exp(last - G[j]), dv, X + j * ldx);
          ChunkGemmProblem update;
          update.rows = dk;
          update.cols = dv;
          update.first = {K, 1, dk, X, ldx, n, false};
          update.c = S;
          update.ldc = dv;
          update.accumulate = true;
          update.c_scale = std::exp(last);
          if (h == first_head) update.prefetch = next_rows(p.k + kh * dk, Hk * dk, dk);
          chunk_gemm(update);
        }
      }
    }
  });
}

}  // namespace kiln::cpu
