// Resource limits: a checkpoint cannot make folio allocate more than the file holds,
// and generation streams in constant memory however long it runs. Measured from
// outside, on the folio binary, as the peak RSS and CPU time of finished children
// (wait4's rusage): amounts of work, which a loaded machine does not change, unlike
// wall-clock times.
#include <gtest/gtest.h>

#include "base/error.h"
#include "tests/support.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "io/safetensors.h"

namespace folio {
namespace {

using namespace folio::testing;

// A safetensors file: 8-byte length, `header`, then `data_bytes` zero bytes.
void write_raw(const std::string& path, const std::string& header, size_t data_bytes) {
  std::string text = header;
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = char((uint64_t(text.size()) >> (8 * i)) & 0xff);
  spit(path, out + text + std::string(data_bytes, '\0'));
}

class ResourceLimits : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>("limits");
    write_small_corpus(dir_->path / "corpus.txt");
    const Result t = run_folio({"train", "--data", *dir_ / "corpus.txt", "--out", *dir_ / "run", "--n-layer", "1",
                                "--n-head", "2", "--n-embd", "32", "--block-size", "32", "--batch-size", "4",
                                "--max-iters", "2", "--eval-interval", "2", "--eval-iters", "1", "--threads", "1",
                                "--quiet"},
                               dir_->path);
    ASSERT_EQ(t.code, 0) << t.err;
  }
  static void TearDownTestSuite() { dir_.reset(); }
  static std::unique_ptr<TempDir> dir_;

  // Runs `folio info` on `file`: exit code, peak RSS (KiB) and CPU time of the child.
  struct Probe {
    Result r;
    long max_rss_kib;
    double cpu_seconds;
  };
  static Probe info(const std::string& file) {
    Result r = run_folio({"info", "--checkpoint", file}, dir_->path);
    return {r, r.exit.usage.ru_maxrss, cpu_seconds(r.exit.usage)};
  }
  static double cpu_seconds(const rusage& u) {
    auto s = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
    return s(u.ru_utime) + s(u.ru_stime);
  }
};
std::unique_ptr<TempDir> ResourceLimits::dir_;

// Headers that claim far more than the file holds are refused before any tensor is
// allocated: the refusal costs no more memory than reading a valid tiny checkpoint.
TEST_F(ResourceLimits, HugeClaimsAreRefusedBeforeAllocating) {
  const Probe base = info(*dir_ / "run");
  ASSERT_EQ(base.r.code, 0) << base.r.err;
  const long slack_kib = 64 * 1024;  // far below any of the claims (4 EB, 16 GB, 3 TB)
  RecordProperty("valid_checkpoint_max_rss_kib", int(base.max_rss_kib));

  // A tensor of 10^9 x 10^9 floats (4 EB) in a file of a few bytes.
  const std::string huge_shape = *dir_ / "huge_shape.safetensors";
  write_raw(huge_shape,
            R"({"w":{"dtype":"F32","shape":[1000000000,1000000000],"data_offsets":[0,4000000000000000000]}})", 8);
  // The same claim, consistent with itself but not with the file size.
  const std::string huge_offsets = *dir_ / "huge_offsets.safetensors";
  write_raw(huge_offsets, R"({"w":{"dtype":"F32","shape":[4000000000],"data_offsets":[0,16000000000]}})", 16);
  // A real checkpoint's header with the largest config the reader accepts (n_embd
  // 16384, 256 layers, block_size 65536: ~3 TB of weights) and its small tensors.
  const std::string huge_config = *dir_ / "huge_config.safetensors";
  {
    const SafetensorsFile f = load_safetensors(*dir_ / "run/model.safetensors");
    Metadata meta = f.metadata;
    for (auto& [k, v] : meta)
      if (k == "config") {
        Json c = Json::parse(v);
        for (auto& [ck, cv] : c.as_object()) {
          if (ck == "n_embd") cv = Json(16384);
          if (ck == "n_layer") cv = Json(256);
          if (ck == "n_head") cv = Json(16);
          if (ck == "block_size") cv = Json(65536);
        }
        v = c.dump();
      }
    save_safetensors(huge_config, f.tensors, meta);
  }
  for (const auto& [file, fragment] : {std::pair{huge_shape, "exceeds the data section"},
                                      std::pair{huge_offsets, "exceeds the data section"},
                                      std::pair{huge_config, "the config needs"}}) {
    SCOPED_TRACE(file);
    const Probe p = info(file);
    EXPECT_EQ(p.r.code, 2) << p.r.err;
    EXPECT_NE(p.r.err.find(fragment), std::string::npos) << p.r.err;
    EXPECT_LT(p.max_rss_kib, base.max_rss_kib + slack_kib) << "peak RSS " << p.max_rss_kib << " KiB, a valid file "
                                                           << base.max_rss_kib << " KiB";
    // Not a pass over the claimed elements either: about the work of the valid file
    // (CPU time, so the machine's load does not count; generous for its jitter).
    EXPECT_LT(p.cpu_seconds, 2.0 * base.cpu_seconds + 1.0) << "a valid file took " << base.cpu_seconds << " s";
    RecordProperty(fs::path(file).stem().string() + "_max_rss_kib", int(p.max_rss_kib));
    // And in-process: the same refusal, as a folio::Error.
    EXPECT_THROW(load_model(file), Error);
  }
}

// The peak RSS of generating 65,000 characters is that of generating 5,000 (within a
// few MB): past its start-up, generation allocates nothing that stays. The runs count
// tokens, not seconds, so a slow or loaded machine only makes them take longer.
TEST_F(ResourceLimits, GenerationStreamsInConstantMemory) {
  std::vector<std::string> env;
  // ASan keeps freed blocks in a quarantine (256 MB by default) before reusing them,
  // which looks like growth; a small one keeps its use-after-free checks meaningful.
  // It must be well under the 4 MB allowed below: one of 8 MB filled up only in the
  // longer run and gave it 4.1 MB more.
  if (built_with_asan()) env.push_back("ASAN_OPTIONS=" + std::string(std::getenv("ASAN_OPTIONS") ? std::getenv("ASAN_OPTIONS") : "") +
                                       ":quarantine_size_mb=1:thread_local_quarantine_size_kb=64");
  auto peak_rss_kib = [&](int64_t tokens) {
    const Result r = run_folio({"generate", "--checkpoint", *dir_ / "run", "--max-new-tokens", std::to_string(tokens),
                                "--threads", "1"},
                               dir_->path, 600, env);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.exit.usage.ru_maxrss;
  };
  const long short_run = peak_rss_kib(5000), long_run = peak_rss_kib(65000);
  ASSERT_GT(short_run, 0);
  // 4 MB over 60,000 more tokens: a leak of 70 bytes a token would show.
  EXPECT_LT(long_run - short_run, 4 * 1024) << "peak RSS " << short_run << " KiB for 5,000 tokens, " << long_run
                                            << " KiB for 65,000";
  RecordProperty("max_rss_kib_5000_tokens", int(short_run));
  RecordProperty("max_rss_kib_65000_tokens", int(long_run));
}

}  // namespace
}  // namespace folio
