#include "llm/tokenizer_bpe.h"

#include <algorithm>

#include "kiln/error.h"
#include "llm/tokenizer_byte_level.h"

namespace kiln::llm::tok {
namespace {

struct Symbol {
  int32_t id;  // -1 once merged into its left neighbour
  int32_t prev;
  int32_t next;  // -1: last symbol
};

struct Candidate {
  int32_t rank;
  int32_t pos;  // index of the left symbol; symbols keep their original index, so this orders left to right
  int32_t left;
  int32_t right;
  int32_t result;
};

// std::push_heap builds a max-heap; "greater" puts the lowest (rank, pos) on top.
bool later(const Candidate& a, const Candidate& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; }

}  // namespace

BpeModel::BpeModel(const std::unordered_map<std::string, int32_t>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, Options options,
                   const std::string& source)
    : source_(source), options_(options) {
  const ByteLevelMap& bytes_map = ByteLevelMap::get();
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab.find(bytes_map.spelling(static_cast<uint8_t>(b)));
    byte_id_[b] = it == vocab.end() ? -1 : it->second;
  }
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const auto l = vocab.find(left), r = vocab.find(right);
    joined = left + right;
    const auto result = vocab.find(joined);
    const std::string& missing = l == vocab.end() ? left : r == vocab.end() ? right : joined;
    if (l == vocab.end() || r == vocab.end() || result == vocab.end()) {
      fail(ErrorKind::Value, "Tokenizer", "{}: model.merges[{}] = ('{}', '{}') uses '{}', which is not in model.vocab",
           source, rank, left, right, missing);
    }
    // A repeated pair keeps its first (lowest) rank, as a rank map built in order does.
    merges_.try_emplace(pair_key(l->second, r->second), Merge{static_cast<int32_t>(rank), result->second});
  }
  if (options_.ignore_merges) {
    std::string bytes;
    id_of_bytes_.reserve(vocab.size());
    for (const auto& [token, id] : vocab) {
      if (bytes_map.decode(token, bytes)) id_of_bytes_.emplace(bytes, id);
    }
  }
}

void BpeModel::encode_piece(std::string_view bytes, std::vector<int32_t>& out) const {
  if (bytes.empty()) return;
  if (options_.ignore_merges) {
    const auto whole = id_of_bytes_.find(std::string(bytes));
    if (whole != id_of_bytes_.end()) {
      out.push_back(whole->second);
      return;
    }
  }
  if (bytes.size() > kCacheMaxPieceBytes) {
    merge_bytes(bytes, out);
    return;
  }
  std::string key(bytes);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto hit = cache_.find(key);
    if (hit != cache_.end()) {
      out.insert(out.end(), hit->second.begin(), hit->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge_bytes(bytes, out);
  std::vector<int32_t> ids(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kCacheEntries) cache_.clear();
  cache_.emplace(std::move(key), std::move(ids));
}

void BpeModel::merge_bytes(std::string_view bytes, std::vector<int32_t>& out) const {
  // Scratch reused across calls on the same thread: no allocation per pre-token.
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  const auto n = static_cast<int32_t>(bytes.size());
  symbols.resize(static_cast<size_t>(n));
  heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    const auto byte = static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
    int32_t id = byte_id_[byte];
    if (id < 0) {
      if (!options_.unk_id) {
        fail(ErrorKind::Value, "Tokenizer.encode",
             "{}: byte 0x{:02X} has no token in model.vocab (spelled '{}') and the model has no unk_token", source_,
             byte, ByteLevelMap::get().spelling(byte));
      }
      id = *options_.unk_id;
    }
    symbols[static_cast<size_t>(i)] = {id, i - 1, i + 1 < n ? i + 1 : -1};
  }
  const auto push_candidate = [&](int32_t pos) {
    const Symbol& left = symbols[static_cast<size_t>(pos)];
    if (left.next < 0) return;
    const int32_t right = symbols[static_cast<size_t>(left.next)].id;
    const auto it = merges_.find(pair_key(left.id, right));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, pos, left.id, right, it->second.result});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_candidate(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = symbols[static_cast<size_t>(c.pos)];
    // Stale candidates (a side already merged away or changed) are skipped; a candidate
    // whose two ids still match is the same pair with the same rank, so it stays valid.
    if (left.id != c.left || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    if (right.id != c.right) continue;
    left.id = c.result;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = c.pos;
    right.id = -1;
    if (left.prev >= 0) push_candidate(left.prev);
    push_candidate(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) out.push_back(symbols[static_cast<size_t>(i)].id);
}

}  // namespace kiln::llm::tok
