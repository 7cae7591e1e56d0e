#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <set>
#include <system_error>

#include "base/error.h"
#include "io/json.h"

namespace folio {
namespace {

// Tensor bytes go to and from disk unconverted.
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");
static_assert(sizeof(float) == 4);

// A folio header is tens of KB (a few hundred tensors, a config, a vocabulary). Parsing
// costs ~25x the header in memory, so a cap of 8 MiB bounds what a hostile file can make
// the reader spend (~200 MB, ~2 s) while leaving 100x room for real checkpoints.
constexpr uint64_t kMaxHeader = uint64_t(8) << 20;
constexpr size_t kChunk = size_t(64) << 20;           // bytes per read()/write() call
constexpr int64_t kF32 = 4;

const char* const kOtherDtypes[] = {"BOOL", "U8",  "I8",  "I16", "U16", "F16",     "BF16",    "I32",
                                    "U32",  "I64", "U64", "F64", "C64", "F8_E5M2", "F8_E4M3", "F8_E8M0",
                                    "F4",   "F6_E2M3", "F6_E3M2"};

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

template <class... Parts>
[[noreturn]] void bad(const std::string& path, const Parts&... parts) {
  fail("checkpoint", path, ": ", parts...);
}

// Text from a file, cut short for a message (on a UTF-8 boundary).
std::string clip(std::string s, size_t max = 80) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
  s.resize(n);
  return s + "...";
}
std::string quote(std::string_view name) { return clip(json_quote(name)); }
std::string show(const Json& v) { return clip(v.dump()); }

struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// Writes all n bytes, retrying on EINTR and short writes. Returns 0 or an errno.
int write_all(int fd, const void* data, size_t n) {
  auto p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, std::min(n, kChunk));
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;  // cannot happen for a regular file; do not spin
    p += w;
    n -= size_t(w);
  }
  return 0;
}

// Reads exactly n bytes at the current position of fd, which was `at` bytes into the file.
void read_exact(const std::string& path, int fd, void* data, size_t n, uint64_t at) {
  auto p = static_cast<char*>(data);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::read(fd, p + done, std::min(n - done, kChunk));
    if (r < 0) {
      if (errno == EINTR) continue;
      bad(path, "file: read failed at byte ", at + done, ": ", errno_text(errno));
    }
    if (r == 0) bad(path, "file: ended at byte ", at + done, ", expected ", at + n, " (changed while reading?)");
    done += size_t(r);
  }
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// The temp file of an atomic save; removed unless committed.
struct TempFile {
  std::string path;
  int fd = -1;
  bool committed = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!committed) ::unlink(path.c_str());
  }
};

// One header entry, validated. begin/end are byte offsets into the data section.
struct Entry {
  std::string name;
  Shape shape;
  uint64_t begin = 0, end = 0;
  size_t index = 0;  // position in SafetensorsFile::tensors
};

// A non-negative JSON integer, or an error naming `what`.
uint64_t non_negative(const std::string& path, const std::string& field, const char* what, const Json& v) {
  if (!v.is_int()) bad(path, field, ": ", what, " is ", show(v), ", not an integer");
  if (v.as_int() < 0) bad(path, field, ": ", what, " is ", v.as_int(), ", must be >= 0");
  return uint64_t(v.as_int());
}

Entry parse_entry(const std::string& path, const std::string& name, const Json& v, uint64_t data_size) {
  const std::string where = cat("tensor ", quote(name));
  if (name.empty()) bad(path, "tensor name: empty string");
  if (!v.is_object()) bad(path, where, ": expected an object with dtype, shape, data_offsets, got ", v.type_name());
  for (const auto& [key, value] : v.as_object())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      bad(path, where, ": unexpected key ", quote(key), " (expected dtype, shape, data_offsets)");
  const Json* dtype = v.find("dtype");
  const Json* shape = v.find("shape");
  const Json* offsets = v.find("data_offsets");
  if (!dtype) bad(path, where, ": dtype: missing");
  if (!shape) bad(path, where, ": shape: missing");
  if (!offsets) bad(path, where, ": data_offsets: missing");

  if (!dtype->is_string()) bad(path, where, ": dtype: expected a string, got ", show(*dtype));
  const std::string& dt = dtype->as_string();
  if (dt != "F32") {
    if (std::find(std::begin(kOtherDtypes), std::end(kOtherDtypes), dt) != std::end(kOtherDtypes))
      bad(path, where, ": dtype: unsupported dtype ", dt, " (folio reads F32)");
    bad(path, where, ": dtype: unknown dtype ", quote(dt));
  }

  Entry e;
  const std::string shape_field = where + ": shape";
  if (!shape->is_array()) bad(path, shape_field, ": expected an array, got ", show(*shape));
  const Json::Array& dims = shape->as_array();
  if (dims.size() > size_t(Shape::kMaxDims))
    bad(path, shape_field, ": ", dims.size(), " dimensions, folio tensors have at most ", Shape::kMaxDims);
  int64_t numel = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    const uint64_t d = non_negative(path, shape_field, cat("dimension ", i).c_str(), dims[i]);
    e.shape.dims[i] = int64_t(d);  // d <= INT64_MAX: it came from an int64
    if (__builtin_mul_overflow(numel, int64_t(d), &numel))
      bad(path, shape_field, ": ", show(*shape), " has too many elements (64-bit overflow)");
  }
  e.shape.ndim = int(dims.size());
  int64_t bytes;
  if (__builtin_mul_overflow(numel, kF32, &bytes))
    bad(path, shape_field, ": ", show(*shape), " has too many bytes (64-bit overflow)");

  const std::string off_field = where + ": data_offsets";
  if (!offsets->is_array() || offsets->as_array().size() != 2)
    bad(path, off_field, ": expected [begin, end], got ", show(*offsets));
  e.begin = non_negative(path, off_field, "begin", offsets->as_array()[0]);
  e.end = non_negative(path, off_field, "end", offsets->as_array()[1]);
  if (e.begin > e.end) bad(path, off_field, ": begin ", e.begin, " > end ", e.end);
  if (e.end > data_size) bad(path, off_field, ": end ", e.end, " exceeds the data section size ", data_size);
  if (e.end - e.begin != uint64_t(bytes))
    bad(path, off_field, ": [", e.begin, ", ", e.end, "] holds ", e.end - e.begin, " bytes but shape ", e.shape,
        " of F32 needs ", bytes);
  return e;
}

Metadata parse_metadata(const std::string& path, const Json& v) {
  if (!v.is_object()) bad(path, "__metadata__: expected an object, got ", v.type_name());
  Metadata m;
  for (const auto& [key, value] : v.as_object()) {
    if (!value.is_string())
      bad(path, "__metadata__: value of ", quote(key), " is ", show(value), " (", value.type_name(),
          "), not a string");
    m.emplace_back(key, value.as_string());
  }
  return m;
}

// The data section must be tiled exactly, as the format requires: sorted by offset,
// each tensor starts where the previous one ends, the last ends at the section's end.
void check_tiling(const std::string& path, std::vector<Entry> sorted, uint64_t data_size) {
  std::sort(sorted.begin(), sorted.end(),
            [](const Entry& a, const Entry& b) { return std::pair(a.begin, a.end) < std::pair(b.begin, b.end); });
  uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : sorted) {
    if (e.begin < covered)
      bad(path, "data_offsets: tensor ", quote(e.name), " [", e.begin, ", ", e.end, ") overlaps tensor ",
          quote(prev->name), " [", prev->begin, ", ", prev->end, ")");
    if (e.begin > covered)
      bad(path, "data_offsets: bytes [", covered, ", ", e.begin, ") of the data section belong to no tensor (gap ",
          prev ? cat("between tensor ", quote(prev->name), " and ") : std::string("before "), "tensor ",
          quote(e.name), ")");
    covered = e.end;
    prev = &e;
  }
  if (covered != data_size)
    bad(path, "data section: bytes [", covered, ", ", data_size, ") after the last tensor belong to no tensor");
}

struct Header {
  uint64_t length = 0;         // N: the data section starts at byte 8 + N
  std::vector<Entry> entries;  // in the header's order
};

// Opens `path` into `f`, reads its header and validates all of it (the entries, the
// metadata, which goes to `out`, and their tiling of the data section the file's size
// leaves) before anything is allocated for tensor data. `f` is left at the data section.
Header read_header(const std::string& path, Fd& f, SafetensorsMetadata& out) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  // Regular files ignore it.
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd < 0) bad(path, "file: cannot open: ", errno_text(errno));
  struct stat st;
  if (::fstat(f.fd, &st) != 0) bad(path, "file: cannot stat: ", errno_text(errno));
  if (S_ISDIR(st.st_mode)) bad(path, "file: is a directory, not a regular file");
  if (!S_ISREG(st.st_mode)) bad(path, "file: not a regular file");
  const uint64_t size = uint64_t(st.st_size);
  if (size < 8) bad(path, "file: size ", size, " is less than the 8-byte header length");

  unsigned char prefix[8];
  read_exact(path, f.fd, prefix, 8, 0);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(prefix[i]) << (8 * i);
  // folio export's own output given back where a checkpoint goes: its magic would read
  // as a header length of gigabytes, which says nothing of what the file is.
  if (std::memcmp(prefix, "GGUF", 4) == 0)
    bad(path, "a GGUF file, not safetensors: folio import RUN --from ", path, " makes a run directory of it");
  // A length beyond the file is what any other file (a log.csv, a text) gives: say so.
  constexpr const char* kOther =
      " (not a safetensors file? It starts with an 8-byte little-endian header length, then a JSON header)";
  if (n > size - 8) bad(path, "header length: ", n, " exceeds file size ", size, " minus the 8-byte length", kOther);
  if (n > kMaxHeader) bad(path, "header length: ", n, " exceeds the limit of ", kMaxHeader, " bytes", kOther);
  std::string text(n, '\0');
  read_exact(path, f.fd, text.data(), n, 8);

  Json header;
  try {
    header = Json::parse(text);
  } catch (const Error& e) {
    std::string_view what = e.what();
    if (what.starts_with("[json] ")) what.remove_prefix(7);
    bad(path, "header: invalid JSON: ", what, " of the header");
  }
  if (!header.is_object()) bad(path, "header: expected a JSON object, got ", header.type_name());

  // Validate every entry before allocating anything for tensor data.
  const uint64_t data_size = size - 8 - n;
  out.path = path;
  Header h{n, {}};
  std::vector<Entry>& entries = h.entries;
  for (const auto& [name, value] : header.as_object()) {
    if (name == "__metadata__") {  // the JSON parser already refused a second one
      out.metadata = parse_metadata(path, value);
      continue;
    }
    entries.push_back(parse_entry(path, name, value, data_size));  // names are unique: JSON refuses duplicate keys
    entries.back().name = name;
    entries.back().index = entries.size() - 1;
  }
  check_tiling(path, entries, data_size);
  return h;
}

}  // namespace

void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors, const Metadata& metadata) {
  Json::Object header;
  if (!metadata.empty()) {
    Json::Object m;
    std::set<std::string_view> keys;
    for (const auto& [key, value] : metadata) {
      if (!keys.insert(key).second) bad(path, "__metadata__: duplicate key ", quote(key));
      m.emplace_back(key, Json(value));
    }
    header.emplace_back("__metadata__", Json(std::move(m)));
  }
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    if (t.name.empty()) bad(path, "tensor name: empty string");
    if (t.name == "__metadata__") bad(path, "tensor name: \"__metadata__\" is reserved");
    if (!names.insert(t.name).second) bad(path, "tensor ", quote(t.name), ": duplicate name");
    if (!t.tensor.defined()) bad(path, "tensor ", quote(t.name), ": undefined tensor");
    const Shape& s = t.tensor.shape();
    Json::Array dims;
    for (int i = 0; i < s.ndim; ++i) dims.emplace_back(s.dims[i]);
    const uint64_t bytes = uint64_t(t.tensor.numel()) * kF32;
    header.emplace_back(t.name, Json(Json::Object{{"dtype", Json("F32")},
                                                  {"shape", Json(std::move(dims))},
                                                  {"data_offsets", Json(Json::Array{Json(offset), Json(offset + bytes)})}}));
    offset += bytes;
  }
  std::string text = Json(std::move(header)).dump();
  // Never write a file our own reader would refuse (e.g. a name that is not UTF-8).
  try {
    Json::parse(text);
  } catch (const Error& e) {
    bad(path, "header: names and metadata must be valid UTF-8: ", e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned
  std::string head(8, '\0');
  for (int i = 0; i < 8; ++i) head[i] = char((uint64_t(text.size()) >> (8 * i)) & 0xff);
  head += text;

  TempFile tmp{path + ".tmp." + std::to_string(::getpid())};
  // O_NOFOLLOW: never write through a symlink planted at the temp name.
  tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (tmp.fd < 0) bad(path, "save: cannot create ", tmp.path, ": ", errno_text(errno));
  auto check = [&](int err, const char* what) {
    if (err) bad(path, "save: ", what, " ", tmp.path, ": ", errno_text(err));
  };
  check(write_all(tmp.fd, head.data(), head.size()), "cannot write");
  for (const NamedTensor& t : tensors)
    check(write_all(tmp.fd, t.tensor.data(), size_t(t.tensor.numel()) * kF32), "cannot write");
  check(::fsync(tmp.fd) ? errno : 0, "cannot fsync");
  const int fd = tmp.fd;
  tmp.fd = -1;
  check(::close(fd) ? errno : 0, "cannot close");  // NFS may report write errors only here
  if (::rename(tmp.path.c_str(), path.c_str()) != 0)
    bad(path, "save: cannot rename ", tmp.path, " to it: ", errno_text(errno));
  tmp.committed = true;

  // Make the rename itself durable. The new file is already in place, so a failure
  // here cannot be undone; it is still reported.
  const std::string dir = parent_dir(path);
  Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.fd < 0) bad(path, "save: written, but cannot open directory ", dir, " to fsync it: ", errno_text(errno));
  // EINVAL: this file system cannot sync directories; nothing more can be done.
  if (::fsync(d.fd) != 0 && errno != EINVAL)
    bad(path, "save: written, but cannot fsync directory ", dir, ": ", errno_text(errno));
}

const Tensor* SafetensorsFile::find(std::string_view name) const {
  for (const NamedTensor& t : tensors)
    if (t.name == name) return &t.tensor;
  return nullptr;
}

std::string SafetensorsMetadata::meta(std::string_view key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return v;
  fail("checkpoint", path, ": __metadata__: no key ", quote(key));
}

SafetensorsFile load_safetensors(const std::string& path) {
  Fd f(-1);
  SafetensorsFile out;
  Header h = read_header(path, f, out);
  // The tensors tile the data section, so their total size is data_size <= the file size.
  for (const Entry& e : h.entries) {
    out.shapes.push_back({e.name, e.shape});
    out.tensors.push_back({e.name, Tensor::empty(e.shape)});
  }
  std::vector<Entry>& entries = h.entries;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  for (const Entry& e : entries)  // in file order: one sequential pass
    read_exact(path, f.fd, out.tensors[e.index].tensor.data(), e.end - e.begin, 8 + h.length + e.begin);
  return out;
}

SafetensorsMetadata load_safetensors_metadata(const std::string& path) {
  Fd f(-1);
  SafetensorsMetadata out;
  for (const Entry& e : read_header(path, f, out).entries) out.shapes.push_back({e.name, e.shape});
  return out;
}

}  // namespace folio
