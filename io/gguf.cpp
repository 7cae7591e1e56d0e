#include "io/gguf.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "base/atomic_file.h"
#include "base/error.h"
#include "autograd/kernels/fp16.h"  // Q8_0 scales and f16 tensors

namespace folio {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;                                  // ggml's GGML_MAX_DIMS
constexpr int64_t kMaxFileBytes = int64_t(16) << 30;         // far past any model folio trains
constexpr uint64_t kMaxStringBytes = uint64_t(1) << 30;      // one key, name or string value

// ---- writing ----

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

void put_scalar(std::string& out, GgufType type, const GgufValue& v, size_t i = 0) {
  auto integer = [&]() -> int64_t {
    if (v.is_array) return std::get<std::vector<int64_t>>(v.value).at(i);
    return std::get<int64_t>(v.value);
  };
  auto real = [&]() -> double {
    if (v.is_array) return std::get<std::vector<double>>(v.value).at(i);
    return std::get<double>(v.value);
  };
  switch (type) {
    case GgufType::u8: put<uint8_t>(out, uint8_t(integer())); break;
    case GgufType::i8: put<int8_t>(out, int8_t(integer())); break;
    case GgufType::u16: put<uint16_t>(out, uint16_t(integer())); break;
    case GgufType::i16: put<int16_t>(out, int16_t(integer())); break;
    case GgufType::u32: put<uint32_t>(out, uint32_t(integer())); break;
    case GgufType::i32: put<int32_t>(out, int32_t(integer())); break;
    case GgufType::u64: put<uint64_t>(out, uint64_t(integer())); break;
    case GgufType::i64: put<int64_t>(out, integer()); break;
    case GgufType::f32: put<float>(out, float(real())); break;
    case GgufType::f64: put<double>(out, real()); break;
    case GgufType::boolean:  // an array of them is read as integers
      put<uint8_t>(out, (v.is_array ? integer() != 0 : std::get<bool>(v.value)) ? 1 : 0);
      break;
    case GgufType::string:
      put_string(out, v.is_array ? std::get<std::vector<std::string>>(v.value).at(i) : std::get<std::string>(v.value));
      break;
    case GgufType::array: fail("gguf", "an array of arrays is not written");
  }
}

size_t array_size(const GgufValue& v) {
  return std::visit([](const auto& x) -> size_t {
    if constexpr (requires { x.size(); x.begin(); } && !std::is_same_v<std::decay_t<decltype(x)>, std::string>)
      return x.size();
    else
      return 0;
  }, v.value);
}

uint64_t align(uint64_t at, uint64_t alignment) { return (at + alignment - 1) / alignment * alignment; }

// ---- reading ----

// A cursor over the file's bytes that refuses to read past the end.
struct Reader {
  std::string_view bytes;
  const std::string& where;
  size_t at = 0;

  size_t left() const { return bytes.size() - at; }
  template <class T>
  T get(const char* what) {
    if (left() < sizeof(T)) fail("gguf", where, ": truncated: ", what, " at byte ", at, " needs ", sizeof(T),
                                 " bytes, ", left(), " left");
    T v;
    std::memcpy(&v, bytes.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  std::string string(const char* what) {
    const uint64_t n = get<uint64_t>(what);
    if (n > left() || n > kMaxStringBytes)
      fail("gguf", where, ": ", what, " at byte ", at - 8, " claims ", n, " bytes, but ", left(), " are left");
    std::string s(bytes.substr(at, size_t(n)));
    at += size_t(n);
    return s;
  }
  // A count of items each at least `min_bytes` long: more than the rest of the file can
  // hold is refused before anything is reserved for them.
  uint64_t count(const char* what, uint64_t min_bytes) {
    const uint64_t n = get<uint64_t>(what);
    if (n > left() / min_bytes)
      fail("gguf", where, ": ", what, " is ", n, ", but the ", left(), " bytes left hold at most ", left() / min_bytes);
    return n;
  }
};

int64_t scalar_bytes(GgufType t) {
  switch (t) {
    case GgufType::u8: case GgufType::i8: case GgufType::boolean: return 1;
    case GgufType::u16: case GgufType::i16: return 2;
    case GgufType::u32: case GgufType::i32: case GgufType::f32: return 4;
    case GgufType::u64: case GgufType::i64: case GgufType::f64: return 8;
    case GgufType::string: return 8;  // at least its length
    case GgufType::array: return 12;  // at least its type and count
  }
  return 0;
}

bool known_type(uint32_t t) { return t <= uint32_t(GgufType::f64); }

bool is_integer(GgufType t) {
  return t != GgufType::f32 && t != GgufType::f64 && t != GgufType::boolean && t != GgufType::string &&
         t != GgufType::array;
}

int64_t read_integer(Reader& r, GgufType t, const char* what) {
  switch (t) {
    case GgufType::u8: return r.get<uint8_t>(what);
    case GgufType::i8: return r.get<int8_t>(what);
    case GgufType::u16: return r.get<uint16_t>(what);
    case GgufType::i16: return r.get<int16_t>(what);
    case GgufType::u32: return r.get<uint32_t>(what);
    case GgufType::i32: return r.get<int32_t>(what);
    case GgufType::i64: return r.get<int64_t>(what);
    default: {
      const uint64_t v = r.get<uint64_t>(what);
      return v > uint64_t(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max() : int64_t(v);
    }
  }
}

GgufValue read_value(Reader& r, uint32_t raw_type, const std::string& key) {
  if (!known_type(raw_type)) fail("gguf", r.where, ": key ", key, ": unknown value type ", raw_type);
  const auto type = GgufType(raw_type);
  const std::string what = "key " + key;
  if (type == GgufType::array) {
    const uint32_t raw = r.get<uint32_t>(what.c_str());
    if (!known_type(raw) || GgufType(raw) == GgufType::array)
      fail("gguf", r.where, ": key ", key, ": unknown array element type ", raw);
    const auto el = GgufType(raw);
    const uint64_t n = r.count((what + "'s element count").c_str(), uint64_t(scalar_bytes(el)));
    GgufValue v{el, true, int64_t(0)};
    if (el == GgufType::string) {
      std::vector<std::string> s;
      s.reserve(size_t(n));
      for (uint64_t i = 0; i < n; ++i) s.push_back(r.string(what.c_str()));
      v.value = std::move(s);
    } else if (el == GgufType::f32 || el == GgufType::f64) {
      std::vector<double> d(static_cast<size_t>(n));
      for (auto& x : d) x = el == GgufType::f32 ? double(r.get<float>(what.c_str())) : r.get<double>(what.c_str());
      v.value = std::move(d);
    } else {
      std::vector<int64_t> d(static_cast<size_t>(n));
      for (auto& x : d) x = el == GgufType::boolean ? r.get<uint8_t>(what.c_str()) : read_integer(r, el, what.c_str());
      v.value = std::move(d);
    }
    return v;
  }
  GgufValue v{type, false, int64_t(0)};
  if (type == GgufType::string) v.value = r.string(what.c_str());
  else if (type == GgufType::boolean) v.value = r.get<uint8_t>(what.c_str()) != 0;
  else if (type == GgufType::f32) v.value = double(r.get<float>(what.c_str()));
  else if (type == GgufType::f64) v.value = r.get<double>(what.c_str());
  else v.value = read_integer(r, type, what.c_str());
  return v;
}

}  // namespace

const char* to_string(GgufDtype t) {
  return t == GgufDtype::f32 ? "F32" : t == GgufDtype::f16 ? "F16" : t == GgufDtype::q8_0 ? "Q8_0" : "?";
}

int64_t gguf_bytes(GgufDtype t, int64_t numel) {
  return t == GgufDtype::f32 ? 4 * numel : t == GgufDtype::f16 ? 2 * numel : numel / 32 * 34;
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& [k, v] : kv)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensor* GgufFile::tensor(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::string gguf_bytes(const GgufFile& file) {
  std::set<std::string_view> keys, names;
  for (const auto& [k, v] : file.kv)
    if (!keys.insert(k).second) fail("gguf", "key ", k, " given twice");
  uint64_t alignment = kDefaultAlignment;
  if (const GgufValue* a = file.find("general.alignment")) alignment = uint64_t(std::get<int64_t>(a->value));
  std::string out = "GGUF";
  put<uint32_t>(out, kVersion);
  put<uint64_t>(out, file.tensors.size());
  put<uint64_t>(out, file.kv.size());
  for (const auto& [k, v] : file.kv) {
    put_string(out, k);
    if (!v.is_array) {
      put<uint32_t>(out, uint32_t(v.type));
      put_scalar(out, v.type, v);
      continue;
    }
    put<uint32_t>(out, uint32_t(GgufType::array));
    put<uint32_t>(out, uint32_t(v.type));
    const size_t n = array_size(v);
    put<uint64_t>(out, n);
    for (size_t i = 0; i < n; ++i) put_scalar(out, v.type, v, i);
  }
  uint64_t offset = 0;
  for (const GgufTensor& t : file.tensors) {
    if (!names.insert(t.name).second) fail("gguf", "tensor ", t.name, " given twice");
    if (int64_t(t.data.size()) != gguf_bytes(t.dtype, t.numel()))
      fail("gguf", "tensor ", t.name, ": ", t.data.size(), " bytes of data for ", t.numel(), " ", to_string(t.dtype),
           " values");
    put_string(out, t.name);
    put<uint32_t>(out, uint32_t(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) put<uint64_t>(out, uint64_t(*d));  // innermost first
    put<uint32_t>(out, uint32_t(t.dtype));
    put<uint64_t>(out, offset);
    offset = align(offset + t.data.size(), alignment);
  }
  out.resize(align(out.size(), alignment), '\0');
  for (const GgufTensor& t : file.tensors) {
    out += t.data;
    out.resize(align(out.size(), alignment), '\0');
  }
  return out;
}

void write_gguf(const std::string& path, const GgufFile& file) { write_file_atomic(path, gguf_bytes(file)); }

GgufFile read_gguf(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) fail("gguf", path, ": cannot read (", ec.message(), ")");
  if (int64_t(size) > kMaxFileBytes) fail("gguf", path, ": ", size, " bytes, more than the ", kMaxFileBytes, " read");
  std::ifstream in(path, std::ios::binary);
  std::string bytes(size_t(size), '\0');
  if (!in.read(bytes.data(), std::streamsize(size))) fail("gguf", path, ": cannot read ", size, " bytes");
  return parse_gguf(bytes, path);
}

GgufFile parse_gguf(std::string_view bytes, const std::string& where) {
  Reader r{bytes, where};
  if (bytes.substr(0, 4) != "GGUF")
    fail("gguf", where, ": not a GGUF file (it starts with ", bytes.size() < 4 ? "fewer than 4 bytes" : "other bytes",
         ", not \"GGUF\")");
  r.at = 4;
  const uint32_t version = r.get<uint32_t>("the version");
  if (version != kVersion) fail("gguf", where, ": version ", version, ", expected ", kVersion);
  // A tensor info takes at least 24 bytes (empty name, no dims), a key-value 13.
  const uint64_t n_tensors = r.get<uint64_t>("the tensor count");
  const uint64_t n_kv = r.count("the key-value count", 13);
  if (n_tensors > r.left() / 24)
    fail("gguf", where, ": the tensor count is ", n_tensors, ", but the file's ", r.left(), " bytes left hold at most ",
         r.left() / 24);
  GgufFile file;
  std::set<std::string> keys;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.string("a key");
    const uint32_t type = r.get<uint32_t>("a value type");
    GgufValue v = read_value(r, type, key);
    if (!keys.insert(key).second) fail("gguf", where, ": key ", key, " appears twice");
    file.kv.emplace_back(std::move(key), std::move(v));
  }
  uint64_t alignment = kDefaultAlignment;
  if (const GgufValue* a = file.find("general.alignment")) {
    if (a->is_array || !is_integer(a->type) || std::get<int64_t>(a->value) <= 0 ||
        std::get<int64_t>(a->value) > (1 << 20) || (std::get<int64_t>(a->value) & (std::get<int64_t>(a->value) - 1)))
      fail("gguf", where, ": general.alignment must be a power of two up to 2^20");
    alignment = uint64_t(std::get<int64_t>(a->value));
  }
  struct Info {
    uint64_t offset, bytes;
  };
  std::vector<Info> infos;
  std::set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    t.name = r.string("a tensor name");
    if (!names.insert(t.name).second) fail("gguf", where, ": tensor ", t.name, " appears twice");
    const uint32_t n_dims = r.get<uint32_t>("a tensor's dimension count");
    if (n_dims < 1 || n_dims > kMaxDims)
      fail("gguf", where, ": tensor ", t.name, ": ", n_dims, " dimensions, expected 1 to ", kMaxDims);
    t.shape.resize(n_dims);
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t extent = r.get<uint64_t>("a tensor's extent");
      // Each extent and their product stay below the file's size in bytes: a tensor holds
      // at least a byte per value (q8_0, 34 bytes for 32).
      if (extent < 1 || extent > bytes.size() / uint64_t(numel))
        fail("gguf", where, ": tensor ", t.name, ": extent ", extent, " (dimension ", d,
             ") is zero or more values than the file's ", bytes.size(), " bytes hold");
      numel *= int64_t(extent);
      t.shape[n_dims - 1 - d] = int64_t(extent);  // innermost first in the file
    }
    const uint32_t type = r.get<uint32_t>("a tensor type");
    if (type != uint32_t(GgufDtype::f32) && type != uint32_t(GgufDtype::f16) && type != uint32_t(GgufDtype::q8_0))
      fail("gguf", where, ": tensor ", t.name, ": type ", type, " is not one folio reads (F32 = 0, F16 = 1, Q8_0 = 8)");
    t.dtype = GgufDtype(type);
    if (t.dtype == GgufDtype::q8_0 && t.shape.back() % 32)
      fail("gguf", where, ": tensor ", t.name, ": Q8_0 needs an innermost extent divisible by 32, got ",
           t.shape.back());
    const uint64_t offset = r.get<uint64_t>("a tensor offset");
    if (offset % alignment) fail("gguf", where, ": tensor ", t.name, ": offset ", offset, " is not a multiple of ", alignment);
    infos.push_back({offset, uint64_t(gguf_bytes(t.dtype, numel))});
    file.tensors.push_back(std::move(t));
  }
  const uint64_t data = align(r.at, alignment);
  if (data > bytes.size() && n_tensors > 0)
    fail("gguf", where, ": truncated: the tensor data would start at byte ", data, " of ", bytes.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    const uint64_t have = bytes.size() - std::min<uint64_t>(data, bytes.size());
    if (infos[i].offset > have || infos[i].bytes > have - infos[i].offset)
      fail("gguf", where, ": truncated: tensor ", file.tensors[i].name, " needs bytes ", infos[i].offset, " to ",
           infos[i].offset + infos[i].bytes, " of the data section, which has ", have);
    file.tensors[i].data.assign(bytes.substr(size_t(data + infos[i].offset), size_t(infos[i].bytes)));
  }
  return file;
}

std::vector<float> gguf_floats(const GgufTensor& t) {
  const int64_t n = t.numel();
  std::vector<float> out(static_cast<size_t>(n));
  const auto* p = reinterpret_cast<const unsigned char*>(t.data.data());
  if (int64_t(t.data.size()) != gguf_bytes(t.dtype, n)) fail("gguf", "tensor ", t.name, ": wrong data size");
  if (t.dtype == GgufDtype::f32) {
    std::memcpy(out.data(), p, size_t(n) * 4);
  } else if (t.dtype == GgufDtype::f16) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[size_t(i)] = kernels::fp16_to_float(h);
    }
  } else {
    for (int64_t b = 0; b < n / 32; ++b) {
      uint16_t h;
      std::memcpy(&h, p + 34 * b, 2);
      const float scale = kernels::fp16_to_float(h);
      for (int i = 0; i < 32; ++i) out[size_t(32 * b + i)] = scale * float(int8_t(p[34 * b + 2 + i]));
    }
  }
  return out;
}

std::string gguf_encode(GgufDtype t, const float* values, int64_t numel) {
  std::string out;
  if (t == GgufDtype::f32) {
    out.assign(reinterpret_cast<const char*>(values), size_t(numel) * 4);
  } else if (t == GgufDtype::f16) {
    for (int64_t i = 0; i < numel; ++i) put<uint16_t>(out, kernels::fp16_from_float(values[i]));
  } else {
    if (numel % 32) fail("gguf", "Q8_0 needs a multiple of 32 values, got ", numel);
    for (int64_t b = 0; b < numel / 32; ++b) {
      float amax = 0.0f;  // as ggml quantizes: scale = max |x| / 127, q = round(x / scale)
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(values[32 * b + i]));
      const float scale = amax / 127.0f, inv = scale ? 1.0f / scale : 0.0f;
      put<uint16_t>(out, kernels::fp16_from_float(scale));
      for (int i = 0; i < 32; ++i) put<int8_t>(out, int8_t(std::lround(values[32 * b + i] * inv)));
    }
  }
  return out;
}

}  // namespace folio
