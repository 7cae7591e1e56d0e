// One causal self-attention head on "Your journey starts with one step", the six
// tokens the seed notebooks embed in 3 dimensions, with the query, key and value
// weights of their torch.manual_seed(123) example. Prints the attention weights and
// the outputs as tables, then takes a gradient and checks it against a finite
// difference. Built against an installed folio (see CMakeLists.txt).
#include <folio/autograd/ops.h>
#include <folio/nn/attention.h>
#include <folio/version.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace folio;

constexpr const char* kTokens[] = {"Your", "journey", "starts", "with", "one", "step"};

// The notebooks write x @ W with W (d_in, d_out); a folio Linear holds W^T (d_out, d_in).
void set_weight(nn::Linear& layer, const float (&w)[3][2]) {
  float* dst = layer.weight.data();
  for (int out = 0; out < 2; ++out)
    for (int in = 0; in < 3; ++in) dst[out * 3 + in] = w[in][out];
}

// The output of the head on x, summed: a scalar to differentiate.
float summed_output(const nn::Head& head, const Tensor& x) { return sum(head.forward(x)).item(); }

int main() {
  std::printf("folio %s: one attention head, 6 tokens, n_embd 3, head_size 2\n\n", FOLIO_VERSION);
  Rng init(0);
  nn::Head head(/*n_embd=*/3, /*head_size=*/2, /*block_size=*/6, /*dropout=*/0.0f, init);
  head.eval();
  set_weight(*head.query, {{0.2961f, 0.5166f}, {0.2517f, 0.6886f}, {0.0740f, 0.8665f}});
  set_weight(*head.key, {{0.1366f, 0.1025f}, {0.1841f, 0.7264f}, {0.3153f, 0.6871f}});
  set_weight(*head.value, {{0.0756f, 0.1966f}, {0.3164f, 0.4017f}, {0.1186f, 0.8274f}});

  const Tensor x = Tensor::from({1, 6, 3}, std::vector<float>{0.43f, 0.15f, 0.89f, 0.55f, 0.87f, 0.66f,  //
                                                              0.57f, 0.85f, 0.64f, 0.22f, 0.58f, 0.33f,  //
                                                              0.77f, 0.25f, 0.10f, 0.05f, 0.80f, 0.55f});
  Tensor weights;
  const Tensor out = head.forward(x, &weights);  // out (1, 6, 2), weights (1, 6, 6)

  std::printf("attention weights (rows: queries, columns: keys)\n%9s", "");
  for (const char* t : kTokens) std::printf("%9s", t);
  std::printf("\n");
  for (int q = 0; q < 6; ++q) {
    std::printf("%9s", kTokens[q]);
    for (int k = 0; k < 6; ++k) std::printf("%9.4f", weights.at({0, q, k}));
    std::printf("\n");
  }
  std::printf("\noutputs (context vectors)\n");
  for (int q = 0; q < 6; ++q) std::printf("%9s%9.4f%9.4f\n", kTokens[q], out.at({0, q, 0}), out.at({0, q, 1}));
  std::printf("The last token sees every key, so its row is the notebook's SelfAttention\n"
              "output for \"step\": 0.2990 0.8040.\n\n");

  // d sum(out) / d W_query, by backpropagation and by a central difference.
  head.zero_grad();
  sum(head.forward(x)).backward();
  const Tensor grad = head.query->weight.grad();  // (2, 3)
  std::printf("d sum(outputs) / d query.weight, backward vs central difference\n");
  float worst = 0;
  for (int i = 0; i < 6; ++i) {
    float* w = head.query->weight.data() + i;
    const float saved = *w, h = 1e-2f;
    *w = saved + h;
    const float up = summed_output(head, x);
    *w = saved - h;
    const float down = summed_output(head, x);
    *w = saved;
    const float numeric = (up - down) / (2 * h);
    worst = std::max(worst, std::fabs(numeric - grad.data()[i]));
    std::printf("  [%d][%d] %10.6f %10.6f\n", i / 3, i % 3, grad.data()[i], numeric);
  }
  std::printf("largest difference %.2e\n", worst);
  return worst < 1e-3f ? 0 : 1;
}
