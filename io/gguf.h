#pragma once
// Reading and writing GGUF version 3, llama.cpp's model file, with no knowledge of any
// model (io/gguf_model.h maps folio's onto it):
//   "GGUF", u32 version 3, u64 tensor count, u64 key-value count
//   key-value pairs: a string key (u64 length, bytes), a u32 type, the value; an
//                    array is a u32 element type, a u64 count, the elements
//   tensor infos:    a string name, u32 dimensions, u64 extents (innermost first: a
//                    numpy shape reversed), u32 type, u64 offset into the data
//   padding to general.alignment (32 unless the file says), then the data, each
//   tensor at a multiple of the alignment
// Files may come from strangers: the reader checks every count and extent against the
// bytes that are really there before it allocates anything, and reports one problem per
// Error: "[gguf] <where>: <what, with values>".
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace folio {

// The value types this reader knows (GGUF's numbering). Scalars of other integer
// widths are read into the nearest of these.
enum class GgufType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8, array = 9,
  u64 = 10, i64 = 11, f64 = 12,
};

// A value: an integer (any integer type, kept with its type for writing), a float, a
// bool, a string, or an array of strings, floats or integers.
struct GgufValue {
  GgufType type = GgufType::u32;  // for an array: its elements' type
  bool is_array = false;
  std::variant<int64_t, double, bool, std::string, std::vector<std::string>, std::vector<double>,
               std::vector<int64_t>>
      value;

  static GgufValue u32(uint32_t v) { return {GgufType::u32, false, int64_t(v)}; }
  static GgufValue i32(int32_t v) { return {GgufType::i32, false, int64_t(v)}; }
  static GgufValue f32(float v) { return {GgufType::f32, false, double(v)}; }
  static GgufValue flag(bool v) { return {GgufType::boolean, false, v}; }
  static GgufValue text(std::string v) { return {GgufType::string, false, std::move(v)}; }
  static GgufValue texts(std::vector<std::string> v) { return {GgufType::string, true, std::move(v)}; }
  static GgufValue f32s(std::vector<double> v) { return {GgufType::f32, true, std::move(v)}; }
  static GgufValue i32s(std::vector<int64_t> v) { return {GgufType::i32, true, std::move(v)}; }
};

// Tensor data types: f32, f16, and q8_0 (blocks of 32 weights along the innermost
// extent: an f16 scale, then 32 int8, 34 bytes).
enum class GgufDtype : uint32_t { f32 = 0, f16 = 1, q8_0 = 8 };
const char* to_string(GgufDtype t);  // "F32", "F16", "Q8_0"
// The bytes `numel` values take; numel must be a multiple of 32 for q8_0.
int64_t gguf_bytes(GgufDtype t, int64_t numel);

struct GgufTensor {
  std::string name;
  std::vector<int64_t> shape;  // numpy order, outermost first: a Linear's (out, in)
  GgufDtype dtype = GgufDtype::f32;
  std::string data;  // gguf_bytes(dtype, numel) bytes, little-endian
  int64_t numel() const;
};

struct GgufFile {
  std::vector<std::pair<std::string, GgufValue>> kv;  // in file order
  std::vector<GgufTensor> tensors;                    // in file order

  const GgufValue* find(std::string_view key) const;  // nullptr if absent
  const GgufTensor* tensor(std::string_view name) const;
};

// Writes `file` atomically (base/atomic_file.h): a failure leaves no half-written
// `path` and an existing one untouched. Keys and tensor names must be unique.
void write_gguf(const std::string& path, const GgufFile& file);
std::string gguf_bytes(const GgufFile& file);  // what write_gguf writes

// Reads and validates a GGUF v3 file; `where` names it in errors.
GgufFile read_gguf(const std::string& path);
GgufFile parse_gguf(std::string_view bytes, const std::string& where);

// A tensor's values as f32, dequantizing f16 and q8_0.
std::vector<float> gguf_floats(const GgufTensor& t);
// f32 values as f16 (round to nearest even) or q8_0 bytes; the inverse of gguf_floats up
// to the type's rounding.
std::string gguf_encode(GgufDtype t, const float* values, int64_t numel);

}  // namespace folio
