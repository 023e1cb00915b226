#pragma once
// The one interface every model family implements. The engine, samplers and the
// speculative loop only see this; they never know the family.
//
// Weights live in Model (shared, read-only); everything that grows with a conversation
// (KV cache, recurrent/conv state, indexer caches, token history) lives in ModelState, so
// the engine can keep one state per session and swap them in O(1).
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/state_sections.h"
#include "models/sample_candidates.h"

namespace ds4 {

struct ModelInfo {
  std::string family;        // "qwen_next", "deepseek_v4", "glm5"
  std::string name;          // from metadata, for receipts
  int64_t vocab_size = 0;    // rows of the logits
  int64_t hidden_size = 0;
  int64_t max_context = 0;   // positions the state can hold
  std::vector<int32_t> eos_token_ids;
  int64_t default_prefill_chunk = 2048;  // SPEC §4: 2048 Qwen/GLM, 4096 DeepSeek
  bool has_draft_head = false;           // MTP / DSpark available
  // decode_batch() reads each weight once for all sequences of the batch (the family
  // overrides it); false: it is the default loop of forward() calls, so the engine keeps
  // stepping sequences one by one (and CUDA models keep their per-step candidate path).
  bool batched_decode = false;
  // verify_batch() runs all sequences' verify windows as one forward (weights read once for
  // all rows); false: it is the default loop of DraftHead::verify_capture calls, so the
  // engine keeps each speculative cycle's verify on its own. A model declares it only when it
  // captures every window the engine can send (captures_every_window): the engine fails a
  // batch that verify_batch declines, where a cycle alone verifies an uncaptured window on a clone.
  bool batched_verify = false;
  // prefill_batch() runs several sequences' prompt slices as one forward (weights read once for
  // all rows); false: it is the default loop of forward() calls, so the engine feeds each
  // prefilling session on its own.
  bool batched_prefill = false;
};

// The most drafted tokens one speculative cycle verifies (speculative.depth's upper bound; a
// DSpark block drafts at most 5 too): a verify window holds at most kMaxSpeculativeDepth + 1 tokens.
inline constexpr int kMaxSpeculativeDepth = 5;
// Whether verify_capture windows of up to `capture_rows` tokens hold every window the engine sends.
inline bool captures_every_window(int64_t capture_rows) { return capture_rows >= kMaxSpeculativeDepth + 1; }

class ModelState {
 public:
  virtual ~ModelState() = default;
  // Exact deep copy: continuing from a clone gives bit-identical results.
  virtual std::unique_ptr<ModelState> clone() const = 0;
  // Number of tokens already consumed.
  virtual int64_t position() const = 0;
  // Bytes held (for cache budgets).
  virtual size_t bytes() const = 0;
  // bytes() with each paged block (core/paged_rows.h) that k states share counted as 1/k: the
  // admission control's count, so that states continuing one cached prefix pay for it once.
  // Default: bytes() (a state that shares nothing).
  virtual size_t proportional_bytes() const { return bytes(); }
  // Named byte sections of everything the state holds (for checkpoints on disk), and back.
  // load() is called on a fresh state of the same model (new_state()); it checks every
  // section against the model's shapes and throws InputError naming the section on a
  // mismatch. The defaults throw: a family without them simply is not checkpointed.
  virtual void save(std::vector<StateSection>& out) const;
  virtual void load(const std::vector<StateSection>& in);
};

enum class Logits { kNone, kLast, kAll };

class DraftHead;

// What one session's state costs in bytes as it consumes tokens (the engine's admission
// control, engine/state_budget.h): bytes() stays at most fixed + per_token * positions.
// fixed: a fresh state (with the draft head's part when asked) plus every part that stops
// growing (sliding windows, open compressor windows, the last-row buffers); per_token: the
// caches that grow with every consumed token, blocks that complete every k tokens counted
// as 1/k of a block per token (an upper bound at every position). Transient buffers (a
// captured verify window, queued draft rows) are not part of it.
struct StateCost {
  double fixed = 0, per_token = 0;
  size_t at(int64_t positions) const;  // the bound for a state holding `positions` tokens
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelInfo& info() const = 0;
  virtual std::unique_ptr<ModelState> new_state() const = 0;

  // Appends `tokens` to `state` in one batched pass. With Logits::kLast `logits` gets
  // vocab floats for the last token, with kAll tokens.size() * vocab (row-major).
  virtual void forward(ModelState& state, std::span<const int32_t> tokens, Logits mode,
                       std::vector<float>& logits) = 0;

  // forward(kLast) for a caller that samples the last row and usually needs only its top
  // req.k candidates (models/sample_candidates.h): `out` gets at least min(k, finite) of them
  // (and the softmax normaliser when req asks for it).
  // need_full(out) is asked once; when it says true (a sampler setting that needs the whole
  // vocabulary after all) `logits` gets the full row of this same step, not recomputed.
  // When it says false `logits` is either that row or empty (the caller must not rely on
  // it). The default runs forward() and picks the candidates on the host; a CUDA model
  // picks them on the device and copies back only them (one small copy per step).
  using NeedFull = std::function<bool(const SampleCandidates&)>;
  virtual void forward_candidates(ModelState& state, std::span<const int32_t> tokens, const CandidateRequest& req,
                                  SampleCandidates& out, std::vector<float>& logits, const NeedFull& need_full);

  // One decode step for N sequences at once (continuous batching): states[i] is fed
  // tokens[i] and `logits` gets N rows of vocab floats, row i the next-token logits of
  // sequence i. Row i equals forward(*states[i], {tokens[i]}, kLast) bit for bit, whatever
  // else is in the batch: the matmuls compute every row alone (core/weight.h batch
  // invariance) and attention / recurrent state stays per sequence. The states must be
  // distinct. The default is a labelled fallback: a loop of forward() calls, each weight
  // read N times (ModelInfo::batched_decode false). Throws like forward(). On a throw: the
  // argument checks (check_decode_batch's InputError) come before any state advances and leave
  // every state as it was; any later throw (a forward of the batch, e.g. the second of several,
  // or a device error) leaves EVERY state passed in unspecified, not only those of the forward
  // that threw: earlier forwards' states have advanced, the throwing one's may be part way
  // (e.g. its host and device positions apart). A caller that cannot tell which throw it was
  // drops every state of the batch: the engine ends every turn of the batch with an error and
  // publishes none of their states (engine_batch.cpp).
  virtual void decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                            std::vector<float>& logits);

  // decode_batch for a caller that samples every row and usually needs only its candidates
  // (forward_candidates' contract, row by row): row i's candidates for reqs[i] go to out[i]
  // and need_full(i, out[i]) is asked once; `logits` {n, vocab} holds row i when that said
  // true, or when reqs[i].k == 0 (no candidates: the row is wanted, need_full not asked);
  // other rows are unspecified. The rows and candidates are those of decode_batch (bit for
  // bit). The default runs decode_batch and picks the candidates on the host (every row is
  // then there); a CUDA model picks them on the device and copies back only them and the
  // rows asked for. Throws like decode_batch.
  using NeedFullRow = std::function<bool(size_t, const SampleCandidates&)>;
  virtual void decode_batch_candidates(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                                       std::span<const CandidateRequest> reqs, std::vector<SampleCandidates>& out,
                                       std::vector<float>& logits, const NeedFullRow& need_full);

  // Prompt slices of several sessions in one pass (continuous batching: sessions that joined
  // together): states[i] is fed windows[i] (non-empty; any length within the context) and
  // `logits` gets one row per state, the logits of its window's last token. Row i and state i
  // equal forward(*states[i], windows[i], kLast) bit for bit where the family does it in one
  // pass (ModelInfo::batched_prefill); the default is a loop of those forward() calls. The
  // states must be distinct. Throws with decode_batch's contract: check_batch's InputError
  // leaves every state as it was; any later throw leaves every state passed in unspecified.
  virtual void prefill_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                             std::vector<float>& logits);

  // Bytes a state costs (StateCost). The default measures a fresh state (its draft head
  // enabled when `draft`) and counts nothing per token: right for the CUDA models, whose
  // state buffers cover the whole context from new_state() on; the CPU families override it
  // with their growing caches. Not const: enabling the draft head goes through draft_head().
  virtual StateCost state_cost(bool draft);
  // Bytes the states may still take where they live: the host's MemAvailable (default; 0 if
  // unknown), a CUDA model's free device memory less the allocation headroom.
  virtual size_t state_memory_available();
  // Batched speculative verify (continuous batching): states[i] is fed windows[i] (its own
  // length: next token + that sequence's drafts, ragged) exactly as
  // draft_head()->verify_capture(*states[i], windows[i], rows) feeds it alone: `logits` gets
  // the rows of every window stacked (window i's rows after those of windows 0..i-1, vocab
  // floats each), each row bit for bit the row of that state's own verify, and every state
  // keeps its captured window for DraftHead::commit_prefix. Returns false, having run
  // nothing, when the model has no draft head or its head cannot capture. The states must
  // be distinct, the windows non-empty. The default is a labelled fallback: a loop of
  // verify_capture calls, each weight read once per window (ModelInfo::batched_verify
  // false). Throws like forward(), with decode_batch's contract: check_batch's InputError
  // leaves every state as it was; any later throw leaves EVERY state passed in unspecified
  // (advanced, part way, or holding a captured window), and a caller that cannot tell which
  // throw it was drops them all (the engine ends every turn of the batch with an error and
  // publishes none of their states: engine_spec_batch.cpp).
  virtual bool verify_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                            std::vector<float>& logits);

  // Convenience wrappers shared by every family (model.cpp).
  // prefill: chunked forward (chunk <= 0 -> info().default_prefill_chunk); last logits.
  std::vector<float> prefill(ModelState& state, std::span<const int32_t> tokens, int64_t chunk = 0);
  std::vector<float> decode(ModelState& state, int32_t token);
  // All positions' logits in one batched pass: tokens.size() * vocab.
  std::vector<float> verify(ModelState& state, std::span<const int32_t> tokens);

  // Model identity for checkpoints: family, name, shapes, and a digest of the greedy
  // ranking of a probe forward pass (so different weights give a different value; top-k
  // ids rather than raw floats so run-to-run float noise cannot change it). Computed once.
  const std::string& fingerprint();
  // The model's draft head (models/draft_head.h), or nullptr when it has none.
  virtual DraftHead* draft_head() { return nullptr; }

 private:
  // decode_batch's and prefill_batch's default: forward(kLast) per sequence, rows concatenated.
  void forward_each(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                    std::vector<float>& logits);
  std::string fingerprint_;
};

struct LoadOptions {
  int threads = 0;              // 0 = hardware concurrency
  int64_t max_context = 0;      // 0 = model default (bounded by memory admission)
  size_t ple_cache_bytes = size_t(1) << 30;  // Qwen PLE hot-row LRU budget
  int ple_readers = 16;                      // Qwen PLE sidecar: parallel row readers
};

// The input checks every family and backend makes before a forward (one message format):
// every token id in [0, vocab_size), room for the tokens in the context after `position`.
// who: names the caller in the error ("glm5", "qwen_next: verify_batch: window 2"). Throws
// InputError.
void check_window(const std::string& who, const ModelInfo& info, int64_t position, std::span<const int32_t> tokens);

// The checks of a batch over several states (verify_batch: a window each; decode_batch: one
// token each, check_decode_batch), made before any state advances and shared by every family
// and backend: as many windows as states, no state null or twice, no window empty, and each
// window's check_window at its state's position. who: "glm5: verify_batch". Throws InputError.
void check_batch(const std::string& who, const ModelInfo& info, std::span<ModelState* const> states,
                 std::span<const std::span<const int32_t>> windows);
// decode_batch's: as many tokens as states, then check_batch over one-token windows.
void check_decode_batch(const std::string& who, const ModelInfo& info, std::span<ModelState* const> states,
                        std::span<const int32_t> tokens);

// Opens a model file or directory (HF/MLX safetensors dir, GGUF file) and picks the family
// from its metadata (registry.cpp). Throws ds4::InputError naming the file and field.
std::unique_ptr<Model> load_model(const std::string& path, const LoadOptions& options = {});

}  // namespace ds4
