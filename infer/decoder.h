#pragma once
// The generation hot loop: one token at a time through a GPT, with keys and values
// cached in buffers sized for the whole context. No Tensors, no graph, no allocation
// per token: at config S a token costs about as much as reading the weights once.
// It computes what GPT::forward computes, up to the order of float sums in the
// products; tests/test_decoder.cpp holds it to forward's logits.
//
// A decoder holds one or more streams, each with its own cache and length, sharing
// the packed weights. step() runs one stream's token as matrix-vector products;
// step_batch() runs one token of each of several streams as one matrix product per
// weight matrix (continuous batching, for folio serve): the weights are read once
// per step for all of them. tests/test_decoder.cpp holds step_batch to step.
//
// The matrices are stored as `weights` says (nn/weights.h): the Linear's fp32, bf16 or
// Q8_0 blocks, which the products read as stored. The embedding tables stay fp32 (a
// token reads one row of each), and the output layer is stored as the blocks' are.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "autograd/kernels/matmul.h"
#include "infer/kernels/quant.h"
#include "nn/transformer.h"
#include "nn/weights.h"

namespace folio::infer {

class DecoderMatrices;

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
  // One token for each of B distinct streams (ids[b] into streams[b]) as step() would
  // run them, with each product done once for all B rows. Returns the logits (B, V),
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
  // matrix large enough to pay for the fork (Matrix::step_threads) is split into as
  // many ranges of rows, one OpenMP thread each; the results do not change.
  void set_threads(int threads);
  int threads() const { return scratch_.threads; }
  // A prompt of this many rows or more runs as the forward does: its products
  // oneDNN's blocked fp32 product (int8 and bf16 on widened tiles), its attention
  // through matrix products (infer/decoder_prompt.cpp). A shorter one runs through a
  // step's kernels, which read the weights once for its few rows.
  static constexpr int64_t kPromptProductRows = 32;

 private:
  friend class DecoderMatrices;
  // Cached keys per tile: one 8-float vector of scores (AVX2's width).
  static constexpr int64_t kKeyTile = 8;
  // y (N) = W (N, K) x (K) [+ bias], from a Linear's weight (N, K), in the precision of
  // the model's products and stored as --weights says. fp32 weights are copied once into panels of kPanel rows
  // stored column by column, (ceil(N / kPanel), K, kPanel): a product then reads them as
  // one stream, which is what a token's time goes to.
  // Where the fp32 panels live: one allocation for them all (about 4 bytes per
  // parameter), in 2 MiB pages where the kernel offers them, since a generate call
  // faulting it in 4 KiB pages cost more than the packing itself.
  class PanelStore {
   public:
    explicit PanelStore(int64_t floats);
    float* take(int64_t floats);  // the next `floats` of the store
   private:
    struct Free {
      void operator()(float* p) const;
    };
    std::unique_ptr<float[], Free> data_;
    int64_t size_ = 0, used_ = 0;
  };
  // What the products need besides their operands: the activations rounded to bf16
  // (bf16 products), and a tile of weights widened to fp32 (a prompt's products from
  // bf16 or Q8_0 weights) with its part of the result.
  // And the activations quantized for the integer product (--weights int8 steps).
  struct Scratch {
    std::vector<kernels::bf16> x16;  // (M, K)
    std::vector<float> tile, ytile;  // (rows, K), (M, rows)
    std::vector<int8_t> xq;          // (M, ceil(K / 32) * 32)
    std::vector<float> xscale;       // (M, ceil(K / 32))
    int threads = 1;                 // a step's products' (Decoder::set_threads)
  };
  struct Matrix {
    static constexpr int64_t kPanel = 64;  // four 16-float vectors of sums
    static int64_t panel_floats(const Tensor& weight) {
      return (weight.size(0) + kPanel - 1) / kPanel * kPanel * weight.size(1);
    }
    Matrix(const Tensor& weight, const Tensor& bias, Precision p, nn::Weights w, PanelStore& store);
    void apply(const float* x, float* y, Scratch& scratch) const;
    // Y (M, N) = X (M, K) W^T [+ bias], reading the weights once for all M rows: the
    // panels four rows at a time (fp32), or one oneDNN product (bf16), on
    // step_threads(scratch) threads (1 unless Decoder::set_threads asked for more).
    // With `prompt` and at least kPromptProductRows rows (a long prefill), fp32 products are oneDNN's blocked product
    // on the Linear's own weights instead, with the threads of the calling thread's
    // setting: as fast as the model's forward, where four rows per pass would read the
    // weights T / 4 times.
    // With --weights bf16, rows are products of the stored weights widened in
    // registers, each weight row used for all M rows while in cache; with int8, the
    // rows are quantized to int8 blocks too and multiplied in integers (integer_rows,
    // kernels::q8x8_rows, on the blocks repacked in groups of 8 rows). A long prompt's rows
    // are oneDNN's fp32 product on tiles of weights widened to fp32 (exactly the
    // weights the row products use; the activations stay fp32), so that a prefill costs about what an f32 one does
    // plus the widening (N * K, against its M * N * K).
    void apply_rows(const float* x, float* y, int64_t M, Scratch& scratch, bool prompt) const;
    int64_t bytes() const;  // of the weights as the products read them
    // The threads a step's product on this matrix runs on: scratch.threads when the
    // matrix has at least kSplitWeights weights (below that the fork and join, a few
    // microseconds, cost about what the product does) and rows for each, else 1.
    static constexpr int64_t kSplitWeights = int64_t(1) << 17;
    int step_threads(const Scratch& scratch) const;
    const float* bias;
    int64_t N, K;
    nn::Weights stored;              // f32: panels, or bf16 products with w16
    const float* weight;             // (N, K) the Linear's own, in the model
    const float* packed = nullptr;   // fp32 products: panels in the store
    std::vector<kernels::bf16> w16;  // bf16 products or --weights bf16: the weights rounded, as Linear's (N, K)
    // --weights int8: (ceil(N / 8), ceil(K / 32)) Q8_0 blocks repacked in groups of 8
    // rows (kernels::BlockQ8x8), so a step's product reads each group as one stream
    std::vector<kernels::BlockQ8x8> q8;
   private:
    void widened_rows(const float* x, float* y, int64_t M, Scratch& scratch) const;
    void integer_rows(const float* x, float* y, int64_t M, Scratch& scratch) const;
  };
  struct Layer {
    const float* ln1_w;
    const float* ln1_b;  // null with RMSNorm
    const float* ln2_w;
    const float* ln2_b;  // null with RMSNorm
    const Matrix *qkv, *proj, *fc, *fc2;  // in matrices_
    const float* x0_gate;      // (C) with the x0 shortcut, else null
    const float* value_embed;  // (V, C) with value embeddings, else null
    const float* skip_gate;    // (C) for a block the U-net skips feed, else null
    int64_t skip_from;         // the encoder block whose kept output skip_gate scales
    bool keeps_output;         // an encoder block: its output goes to kept_ / bkept_
    // Per stream: keys in tiles of kKeyTile slots, each tile (head_size, kKeyTile), so
    // that a tile's scores are kKeyTile sums side by side over one contiguous read, and
    // values (n_head, block_size, head_size); position p in slot p % block_size.
    std::vector<float> k, v;  // (streams, n_head, key_tiles, head_size, kKeyTile), (streams, n_head, block_size, head_size)
  };
  // One row's attention scratch: scores (block_size), rotated [k; q] (2 * head_size),
  // and the rotary tables of its position (C each).
  struct RowScratch {
    float *att, *rot, *cos, *sin;
  };
  static int64_t panel_floats(const nn::GPT& model, nn::Weights w);  // of all its products (0 for bf16 or small ones)
  // One row of a batched step: token `id` of `stream` at position `pos`; `previous` is
  // the token before it (the bigram table's; unused at position 0).
  struct Row {
    int64_t stream, pos;
    int32_t id, previous;
  };
  // Runs the rows through every layer, each product once for all of them. Rows go
  // through attention in order, and a row sees its stream's cache up to its position,
  // so a prompt's rows, in order, see the rows before them. Returns the logits of the
  // last `with_logits` rows (with_logits, V); `prompt` as Matrix::apply_rows.
  std::span<const float> run_rows(std::span<const Row> rows, int64_t with_logits, bool prompt);
  // The cache's slots for keys: block_size rounded up to whole tiles.
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
  // qkv (3C) -> y (C) for one stream at `pos`, caching this position's key and value.
  void attend(Layer& L, int64_t stream, int64_t pos, float* qkv, float* y, const RowScratch& s);
  // A prompt's rows from an empty cache (restart's: positions 0..T-1 of one stream),
  // qkv (T, 3C) -> y (T, C), each head's scores and weighted values as two matrix
  // products (infer/decoder_prompt.cpp), caching every position's key and value as
  // attend does. From kPromptProductRows rows on.
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
  // split across threads) into bact_. Returns where they are.
  const float* activate(float* f, int64_t rows);
  void softcap(float* logits, int64_t n) const;
  void ensure_batch(int64_t B, int64_t with_logits);  // the batch scratch holds B rows, with_logits of logits
  const nn::GPT& model_;
  const nn::GPTConfig& config_;
  nn::Weights weights_;
  std::shared_ptr<const DecoderMatrices> matrices_;
  std::vector<Layer> layers_;
  const Matrix* lm_head_;  // in matrices_
  std::vector<int64_t> length_;  // (streams)
  std::vector<int32_t> last_id_;  // (streams) the last token run, the bigram table's previous one
  // Scratch for one token: x_, y_ (C), h_ (2C), qkv_ (3C), ff_ (H, or 2H with swiglu), att_ (block_size),
  // logits_ (V), cos_, sin_ (C).
  std::vector<float> x_, h_, qkv_, att_, y_, ff_, logits_, cos_, sin_, x0_;  // x0_: the embedding (C)
  std::vector<float> kept_;  // (skip_pairs, C) the encoder blocks' outputs, for the U-net skips
  // Scratch for step_batch's B rows: bx_, by_, bh_ (B, C), bqkv_ (B, 3C), bff_ (B, H or 2H),
  // blogits_ (rows with logits, V), batt_ (B, block_size), brot_ (B, 2 * head_size), bcos_, bsin_ (B, C).
  std::vector<float> bx_, by_, bh_, bqkv_, bff_, blogits_, batt_, brot_, bcos_, bsin_, bx0_;  // bx0_ (B, C)
  std::vector<float> bkept_;  // (skip_pairs, B, C)
  // attend_prompt's: one head's pq_, pk_, pv_, py_ (T, head_size) and scores_ (T, T)
  std::vector<float> pq_, pk_, pv_, py_, scores_;
  std::vector<float> bact_;  // (B, H) a long prompt's SwiGLU outputs, rows split across threads
  std::vector<Row> rows_;     // (B) the rows of the step being run
  Scratch scratch_;
};

// A model's matrices as a decoder's products read them (see Decoder::Matrix), built
// by Decoder::store; every block's four in Layer's order, then the output layer.
class DecoderMatrices {
 public:
  DecoderMatrices(const nn::GPT& model, nn::Weights weights);
  nn::Weights weights;                  // how they are stored: f32 panels, bf16, Q8_0 blocks
  Decoder::PanelStore store;            // the fp32 panels of all of them (empty otherwise)
  std::vector<Decoder::Matrix> blocks;  // (n_layer * 4): qkv (3C, C), proj (C, C), fc (H or 2H, C), fc2 (C, H) of each
  Decoder::Matrix lm_head;              // (V, C)
};

}  // namespace folio::infer
