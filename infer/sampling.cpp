#include "infer/sampling.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace folio {

void SampleOptions::validate() const {
  if (max_new_tokens < 0) fail("generate", "max_new_tokens must be >= 0, got ", max_new_tokens);
  if (!(temperature > 0.0f && std::isfinite(temperature)))
    fail("generate", "temperature must be > 0, got ", temperature, " (for the most likely token every time: greedy, --greedy)");
  if (top_k < 0) fail("generate", "top_k must be >= 0 (0: off), got ", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("generate", "top_p ", top_p, " outside (0, 1]");
  if (context_shift < 0) fail("generate", "context_shift must be >= 0 (0: block_size / 2), got ", context_shift);
}

int32_t sample_token(std::span<const float> logits, const SampleOptions& opt, Rng& rng,
                     std::vector<std::pair<float, int32_t>>& scratch) {
  const int64_t V = int64_t(logits.size());
  for (float l : logits)  // sorting NaN is undefined behaviour; a diverged model gets a clear error instead
    if (!std::isfinite(l)) fail("generate", "the model produced a non-finite logit (", l, ")");
  if (opt.greedy) return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());  // first of ties
  scratch.resize(V);
  for (int64_t i = 0; i < V; ++i) scratch[i] = {logits[i] / opt.temperature, int32_t(i)};
  // Most likely first; ties broken by id so the order is deterministic.
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  std::sort(scratch.begin(), scratch.end(), by_logit);
  int64_t keep = opt.top_k > 0 ? std::min(opt.top_k, V) : V;
  const float mx = scratch[0].first;
  // A temperature so low that the top logit over it overflows float (1e-40, a denormal)
  // made every kept weight exp(inf - inf), NaN, and the draw fell through to the least
  // likely token kept. At such a temperature any other token's weight, exp(-gap / T), is
  // 0 in float: the most likely token it is, as greedy picks it.
  if (!std::isfinite(mx)) return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += (scratch[i].first = std::exp(scratch[i].first - mx));
  if (opt.top_p < 1.0f) {  // nucleus: the smallest prefix whose mass reaches top_p
    double mass = 0;
    int64_t n = 0;
    while (n < keep && mass < opt.top_p * total) mass += scratch[n++].first;
    keep = std::max<int64_t>(n, 1);
    total = mass > 0 ? mass : scratch[0].first;
  }
  double u = double(rng.uniform()) * total;
  for (int64_t i = 0; i < keep; ++i) {
    u -= scratch[i].first;
    if (u < 0) return scratch[i].second;
  }
  return scratch[keep - 1].second;
}

}  // namespace folio
