#pragma once
// What the tests share: expect_error, temp directories, corpus files, and running the
// built `folio` binary (FOLIO_BINARY) as a child process, for the tests that must see
// it from outside: exit codes, stderr, signals, files left on disk, memory. fork +
// execv, so arguments need no shell quoting (words() splits a command line written
// as one string); stdout and stderr go to files under the test's directory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "autograd/kernels/matmul.h"
#include "data/dataset.h"

// The first line of a test of bf16 products: skipped on a CPU where oneDNN has none
// (below AVX-512), as `folio train --dtype bf16` is refused there.
#define FOLIO_SKIP_WITHOUT_BF16()                                                    \
  if (!::folio::kernels::bf16_runs()) GTEST_SKIP() << "oneDNN runs no bf16 products on this CPU (it lacks AVX-512)"

namespace folio::testing {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;

// A (B, T) = (2, 6) batch of token ids below 7, for small models' forward passes.
inline const std::vector<int32_t> kIds2x6{1, 3, 5, 0, 6, 2, 2, 4, 0, 1, 3, 5};  // (2, 6)

// The message of the folio::Error f throws ("" and a test failure if it throws none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

// Runs f and expects a folio::Error whose message contains every fragment.
template <class F>
void expect_error(F f, std::initializer_list<std::string> fragments) {
  const std::string msg = error_of(f);
  for (const std::string& frag : fragments) EXPECT_NE(msg.find(frag), std::string::npos) << msg << "\n lacks: " << frag;
}

// `text` contains every fragment.
inline void expect_contains(const std::string& text, std::initializer_list<std::string> fragments) {
  for (const std::string& frag : fragments) EXPECT_NE(text.find(frag), std::string::npos) << text << "\n lacks: " << frag;
}

// A command line as words: split at spaces, except inside '...' (quotes removed).
inline Args words(const std::string& line) {
  Args out;
  std::string word;
  bool quoted = false, any = false;
  for (char c : line) {
    if (c == '\'') quoted = !quoted, any = true;
    else if (c == ' ' && !quoted) {
      if (any) out.push_back(word);
      word.clear(), any = false;
    } else {
      word += c, any = true;
    }
  }
  if (any) out.push_back(word);
  return out;
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void spit(const fs::path& p, std::string_view bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// A fresh directory under the system temp dir, removed by the destructor.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("folio_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& rel) const { return (path / rel).string(); }
};

// The first `chars` bytes of the bundled corpus (plain ASCII), as a file.
inline std::string write_small_corpus(const fs::path& file, size_t chars = 30000) {
  std::ifstream in(default_corpus_path(), std::ios::binary);
  std::string text(chars, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));
  spit(file, text);
  return file.string();
}

// A child running folio. stdout/stderr go to out_file/err_file ("" = /dev/null); it runs
// in `cwd` (empty: the test's own working directory).
struct Child {
  pid_t pid = -1;
  std::string out_file, err_file;
};

inline Child spawn_folio(const Args& args, const std::string& out_file, const std::string& err_file,
                         const std::vector<std::string>& extra_env = {}, const fs::path& cwd = {}) {
  const std::string dir = cwd.string();
  std::vector<std::string> all{FOLIO_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The environment is built before fork: only async-signal-safe calls after it.
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) {
    bool overridden = false;
    for (const auto& x : extra_env)
      overridden = overridden || std::strncmp(*e, x.c_str(), x.find('=') + 1) == 0;
    if (!overridden) env_store.emplace_back(*e);
  }
  env_store.insert(env_store.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string out = out_file.empty() ? "/dev/null" : out_file;
  const std::string err = err_file.empty() ? "/dev/null" : err_file;

  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in = ::open("/dev/null", O_RDONLY);
    if (o < 0 || e < 0 || in < 0) ::_exit(127);
    if (!dir.empty() && ::chdir(dir.c_str()) != 0) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    // The test may have SIGINT ignored or blocked; the child starts with defaults.
    ::signal(SIGINT, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  return Child{pid, out_file, err_file};
}

struct Exit {
  bool exited = false;    // normal exit (code is valid)
  int code = -1;          // exit code
  int signal = 0;         // the signal that ended it
  bool timed_out = false;
  rusage usage{};         // the child's resource use (ru_maxrss in KiB)
};

// Waits up to timeout_s for the child, then SIGKILLs it (timed_out = true).
inline Exit wait_child(pid_t pid, double timeout_s) {
  Exit x;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  for (;;) {
    const pid_t r = ::wait4(pid, &status, WNOHANG, &x.usage);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      x.timed_out = true;
      ::kill(pid, SIGKILL);
      ::wait4(pid, &status, 0, &x.usage);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  x.exited = WIFEXITED(status);
  x.code = x.exited ? WEXITSTATUS(status) : -1;
  x.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return x;
}

struct Result {
  int code = -1;
  std::string out, err;
  Exit exit;
};

// Runs folio to completion (killed after timeout_s), capturing stdout and stderr.
inline Result run_folio(const Args& args, const fs::path& scratch, double timeout_s = 300,
                        const std::vector<std::string>& extra_env = {}, const fs::path& cwd = {}) {
  static int counter = 0;
  const std::string tag = std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const std::string out = (scratch / ("stdout_" + tag)).string(), err = (scratch / ("stderr_" + tag)).string();
  const Child c = spawn_folio(args, out, err, extra_env, cwd);
  Result r;
  r.exit = wait_child(c.pid, timeout_s);
  r.code = r.exit.code;
  r.out = slurp(out);
  r.err = slurp(err);
  fs::remove(out);
  fs::remove(err);
  return r;
}

// The CLI tests on data and tokenizers: a folder named after the test suite, holding
// text.txt (the bundled corpus's first 30,000 bytes), folio run inside it, and a short
// run's options (with --quiet unless `quiet` is false).
class CliCorpusTest : public ::testing::Test {
 protected:
  explicit CliCorpusTest(bool quiet = true)
      : dir_(::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name()), quiet_(quiet) {}
  void SetUp() override { write_small_corpus(dir_.path / "text.txt", 30000); }
  Result folio(const std::string& args) const { return run_folio(words(args), dir_.path); }
  std::string text() const { return dir_ / "text.txt"; }
  // A short run into `out`: a small model unless it starts --init-from one (small false).
  std::string run(const std::string& out, int iters, bool small = true) const {
    return (small ? " --n-layer 1 --n-head 2 --n-embd 32 --block-size 32" : "") + std::string(" --out ") + (dir_ / out) +
           " --batch-size 8 --eval-interval 10 --eval-iters 2 --warmup-iters 2 --threads 2" +
           (quiet_ ? " --quiet" : "") + " --max-iters " + std::to_string(iters);
  }
  TempDir dir_;
  bool quiet_;
};

inline std::string show(const Args& args) {
  std::string s = "folio";
  for (const auto& a : args) s += " '" + a + "'";
  return s;
}

// Every entry under `root` (recursively): path -> (type, size, mtime in ns, inode).
// Equal snapshots before and after a command mean it created, removed or changed nothing.
using Snapshot = std::map<std::string, std::tuple<int, uintmax_t, int64_t, ino_t>>;
inline Snapshot snapshot(const fs::path& root, const std::vector<fs::path>& skip = {}) {
  Snapshot s;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    bool skipped = false;
    for (const auto& p : skip) skipped = skipped || it->path() == p;
    if (skipped) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    s[it->path().string()] = {int(st.st_mode & S_IFMT), uintmax_t(st.st_size),
                              int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, st.st_ino};
  }
  return s;
}

inline std::string diff(const Snapshot& before, const Snapshot& after) {
  std::ostringstream out;
  for (const auto& [p, v] : before) {
    auto it = after.find(p);
    if (it == after.end()) out << "  removed " << p << "\n";
    else if (it->second != v) out << "  changed " << p << "\n";
  }
  for (const auto& [p, v] : after)
    if (!before.count(p)) out << "  created " << p << "\n";
  return out.str();
}

// Resident memory of a running process, in KiB (-1 if it is gone).
inline long rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

inline bool built_with_asan() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#endif
#endif
  return false;
}

}  // namespace folio::testing
