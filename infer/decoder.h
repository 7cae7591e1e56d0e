#pragma once
// The generation hot loop: one token at a time through a GPT, with keys and values
// cached in buffers sized for the whole context. No Tensors, no graph, no allocation
// per token: at config S a token costs about as much as reading the weights once.
// It computes what GPT::forward computes, up to the order of float sums in the
// products; tests/test_decoder.cpp holds it to forward's logits.
//
// A decoder holds one or more streams, each with its own cache and length, sharing
// the packed weights. Every call runs rows through one layer loop (run_rows): a row
// is a token of a stream at a position, and each product is done once for all the
// rows. step() is one row; step_batch() one token of each of several streams
// (continuous batching, for folio serve), so the weights are read once per step for
// all of them; restart() a prompt's rows, in order (the prefill).
// tests/test_decoder.cpp holds step_batch to step.
//
// The matrices are stored as `weights` says (nn/weights.h; infer/decoder_matrices.h):
// the Linear's fp32, bf16 or Q8_0 blocks, which the products read as stored. The
// embedding tables stay fp32 (a token reads one row of each), and the output layer is
// stored as the blocks' are.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "infer/decoder_matrices.h"
#include "nn/transformer.h"
#include "nn/weights.h"

namespace folio::infer {

class Decoder {
 public:
  // Copies the model's weights once, in the layout its products read (and as bf16 if
  // the model's precision says so); reads the embeddings and norms in place. The model
  // must outlive the decoder and not change while it decodes.
  // `streams` caches (each 2 * n_layer * block_size * n_embd floats) share them.
  // `weights` other than f32 need the model's fp32 products (precision fp32).
  explicit Decoder(const nn::GPT& model, int64_t streams = 1, nn::Weights weights = nn::Weights::f32);
  // The same on matrices stored once (store()) and shared, read only, by any number of
  // decoders of that model: folio serve --no-batching's decoder per slot keeps one
  // copy of the weights, not one per slot.
  Decoder(const nn::GPT& model, int64_t streams, std::shared_ptr<const DecoderMatrices> matrices);
  static std::shared_ptr<const DecoderMatrices> store(const nn::GPT& model, nn::Weights weights = nn::Weights::f32);
  // The bytes of one stream's cache (every layer's keys and values), all allocated, and
  // written, when the decoder is made: what a server's slots multiply.
  static int64_t cache_bytes_per_stream(const nn::GPTConfig& config);

  // Forgets the stream's cache and runs ids (1 <= size <= block_size) at positions 0..
  // as one batched step over the prompt (the prefill), whose keys and values fill the
  // cache. Returns the last position's logits (V), or with `every_position` those of
  // each position (T, V), computed by a decode step's products (see restart's body),
  // valid until the next call.
  std::span<const float> restart(std::span<const int32_t> ids, int64_t stream = 0, bool every_position = false);
  // Runs one token at position length() and caches it. Returns its logits (V), valid
  // until the next call. With learned positions, length() < block_size. With rotary
  // positions the cache rolls: the token attends to the last block_size positions
  // (itself included), each key rotated by its own position, so every score sees the
  // true distance between query and key, however long the text.
  std::span<const float> step(int32_t id, int64_t stream = 0);
  // One token for each of B distinct streams (ids[b] into streams[b]) as step() runs
  // each, with each product done once for all B rows. Returns the logits (B, V),
  // row b for streams[b], valid until the next call.
  std::span<const float> step_batch(std::span<const int64_t> streams, std::span<const int32_t> ids);
  int64_t length(int64_t stream = 0) const { return length_[size_t(stream)]; }  // positions run since restart
  int64_t streams() const { return int64_t(length_.size()); }
  bool rolls() const { return config_.pos == nn::Positions::rope; }
  nn::Weights weights() const { return weights_; }
  // The bytes of the matrices a token's step reads (every block's and the output
  // layer's, as stored): what a step costs in memory traffic, the caches aside.
  int64_t matrix_bytes() const;
  // The threads a step's products (step, step_batch; not a prompt's, which use the
  // calling thread's OpenMP setting) split their output rows across: 1 by default (a
  // server's other threads need the other cores, and a team that waits for a
  // descheduled member costs more than the product on a busy machine). With more, a
  // matrix large enough to pay for the fork (StoredMatrix::step_threads) is split into
  // as many ranges of rows, one OpenMP thread each; the results do not change.
  void set_threads(int threads);
  int threads() const { return scratch_.threads; }
  // A step's attention splits its heads across those threads too when its rows read
  // at least this many floats of cached keys and values (attend_rows): the products'
  // threshold, since a float of cache costs at least what a weight does, one
  // multiply-add (a score's or a weighted value's) on a value read once, the scores'
  // exponentials besides; callgrind counted 2.0 instructions a float of cache against
  // 0.9 a weight of the products (an x86-64 build, GPT-2 small's layer at context 512).
  // From 86 positions of GPT-2 small's shape (2 x 768 floats each), 128 of the 25M
  // model's (2 x 512): a short context does not pay for the fork.
  static constexpr int64_t kSplitCacheFloats = StoredMatrix::kSplitWeights;

 private:
  // Cached keys per tile: one 8-float vector of scores (AVX2's width).
  static constexpr int64_t kKeyTile = 8;
  struct Layer {
    const float* ln1_w;
    const float* ln1_b;  // null with RMSNorm
    const float* ln2_w;
    const float* ln2_b;  // null with RMSNorm
    const StoredMatrix *qkv, *proj, *fc, *fc2;  // in matrices_
    const float* x0_gate;      // (C) with the x0 shortcut, else null
    const float* value_embed;  // (V, C) with value embeddings, else null
    const float* skip_gate;    // (C) for a block the U-net skips feed, else null
    int64_t skip_from;         // the encoder block whose kept output skip_gate scales
    bool keeps_output;         // an encoder block: its output goes to kept_
    // Per stream: keys in tiles of kKeyTile slots, each tile (head_size, kKeyTile), so
    // that a tile's scores are kKeyTile sums side by side over one contiguous read, and
    // values (n_head, block_size, head_size); position p in slot p % block_size.
    std::vector<float> k, v;  // (streams, n_head, key_tiles, head_size, kKeyTile), (streams, n_head, block_size, head_size)
  };
  // One head's attention scratch: scores (block_size) and rotated [k; q]
  // (2 * head_size), the thread's; and the rotary tables of its row's position (C each).
  struct RowScratch {
    float *att, *rot, *cos, *sin;
  };
  // One row of a step: token `id` of `stream` at position `pos`; `previous` is the
  // token before it (the bigram table's; unused at position 0).
  struct Row {
    int64_t stream, pos;
    int32_t id, previous;
  };
  // The layer loop, which every call runs: the rows through every layer, each product
  // once for all of them. Rows go through attention in order, and a row sees its
  // stream's cache up to its position, so a prompt's rows, in order, see the rows
  // before them. Returns the logits of the last `with_logits` rows (with_logits, V);
  // `prompt` as StoredMatrix::apply_rows, and a long prompt's attention is
  // attend_prompt's.
  std::span<const float> run_rows(std::span<const Row> rows, int64_t with_logits, bool prompt);

  // Attention (infer/decoder_attention.cpp).
  // The cache's slots for keys: block_size rounded up to whole tiles.
  static int64_t key_slots(const nn::GPTConfig& config);
  int64_t key_slots() const;
  // Head h's cached keys (key_slots / kKeyTile, head_size, kKeyTile) and values
  // (block_size, head_size) in `stream`'s cache of layer L.
  float* head_keys(Layer& L, int64_t stream, int64_t h) const;
  float* head_values(Layer& L, int64_t stream, int64_t h) const;
  // One row's head h, kqv its [k; q; v] (3 * head_size): k and q as
  // position_query_key() makes them (RMS-normalised in place, then rotated into s.rot
  // with s.cos, s.sin), its key and value cached at `slot`. Returns k and q as
  // attention reads them (in kqv, or in s.rot).
  struct HeadQK {
    const float *k, *q;
  };
  HeadQK cache_head(Layer& L, int64_t stream, int64_t h, int64_t slot, float* kqv, const RowScratch& s);
  // A call's rows (step, step_batch, a short prompt): qkv (B, 3C) -> y (B, C), each
  // row's heads by attend_head. A call whose rows read at least kSplitCacheFloats of
  // cached keys and values splits its heads across the decoder's threads (set_threads)
  // in contiguous ranges, each head computed as on one thread: the products split,
  // and at context 512 of GPT-2 small's shape a step's attention reads 38 MB of
  // cache, which one core read while the other waited.
  void attend_rows(Layer& L, std::span<const Row> rows, float* qkv, float* y);
  // Head h of one row of `stream` at `pos`: its part of qkv (3C; [k; q; v] at
  // h * 3 * head_size) -> its part of y (C; head_size at h * head_size), caching this
  // position's key and value, with the scratch of the thread it runs on.
  void attend_head(Layer& L, int64_t stream, int64_t pos, int64_t h, float* qkv, float* y, const RowScratch& s);
  // A prompt's rows from an empty cache (restart's: positions 0..T-1 of one stream),
  // qkv (T, 3C) -> y (T, C), each head's scores and weighted values as two matrix
  // products, caching every position's key and value as attend_head does. From
  // kPromptProductRows rows on.
  void attend_prompt(Layer& L, int64_t stream, int64_t T, float* qkv, float* y);
  // qkv (3C): each head's value gains its slice of the token's value embedding, as
  // MultiHead::project (nothing without value embeddings).
  void add_value_embedding(const Layer& L, int32_t id, float* qkv) const;

  // token (+ bigram of the previous token and this one) + position -> x (C), and the
  // rotary tables of the row's position (C each) with rotary positions
  void embed(const Row& row, float* x, float* cos, float* sin) const;
  void check_id(int32_t id) const;
  void check_step(int32_t id, int64_t stream) const;
  // The feed-forward's activation on `rows` rows of fc's outputs (H each, or 2H with
  // swiglu) -> rows of H, packed: in place, or (a long prompt's SwiGLU, whose rows
  // split across threads) into act_. Returns where they are.
  const float* activate(float* f, int64_t rows);
  void softcap(float* logits, int64_t n) const;
  // the scratch holds B rows, with_logits of logits, and attention's of threads() threads
  void ensure_rows(int64_t B, int64_t with_logits);
  const nn::GPT& model_;
  const nn::GPTConfig& config_;
  nn::Weights weights_;
  std::shared_ptr<const DecoderMatrices> matrices_;
  std::vector<Layer> layers_;
  const StoredMatrix* lm_head_;  // in matrices_
  std::vector<int64_t> length_;  // (streams)
  std::vector<int32_t> last_id_;  // (streams) the last token run, the bigram table's previous one
  // Scratch for a call's B rows: x_, x0_ (the embeddings), y_, h_ (B, C), qkv_ (B, 3C),
  // ff_ (B, H or 2H), logits_ (rows with logits, V), cos_, sin_ (B, C); att_
  // (threads, block_size), a row for each thread a step's attention splits across;
  // rot_ (max(B, threads), 2 * head_size), a row for each such thread, or for each of
  // a long prompt's rows (attend_prompt's, on the prompt's threads).
  std::vector<float> x_, x0_, y_, h_, qkv_, ff_, logits_, att_, rot_, cos_, sin_;
  std::vector<float> kept_;  // (skip_pairs, B, C) the encoder blocks' outputs, for the U-net skips
  // attend_prompt's: one head's pq_, pk_, pv_, py_ (T, head_size) and scores_ (T, T)
  std::vector<float> pq_, pk_, pv_, py_, scores_;
  std::vector<float> act_;  // (B, H) a long prompt's SwiGLU outputs, rows split across threads
  std::vector<Row> rows_;   // (B) the rows of the call being run
  ProductScratch scratch_;
};

}  // namespace folio::infer
