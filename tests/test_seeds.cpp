// Forward values against the numbers printed in ../shared/seeds (4 decimals).
#include <gtest/gtest.h>

#include "autograd/ops.h"

namespace folio {
namespace {

void expect_printed(const Tensor& t, const std::vector<float>& printed) {
  ASSERT_EQ(t.numel(), int64_t(printed.size()));
  for (size_t i = 0; i < printed.size(); ++i)
    EXPECT_NEAR(t.data()[i], printed[i], 0.5e-4 + 1e-6) << "element " << i;
}

// "Your journey starts with one step", embedded in 3 dims (both seed notebooks).
Tensor inputs() {
  return Tensor::from({6, 3}, std::vector<float>{0.43f, 0.15f, 0.89f, 0.55f, 0.87f, 0.66f, 0.57f, 0.85f, 0.64f,
                                                 0.22f, 0.58f, 0.33f, 0.77f, 0.25f, 0.10f, 0.05f, 0.80f, 0.55f});
}

TEST(Seeds, SimplifiedSelfAttentionScores) {  // inputs @ inputs.T
  expect_printed(matmul(inputs(), inputs(), false, true),
                 {0.9995f, 0.9544f, 0.9422f, 0.4753f, 0.4576f, 0.6310f, 0.9544f, 1.4950f, 1.4754f,
                  0.8434f, 0.7070f, 1.0865f, 0.9422f, 1.4754f, 1.4570f, 0.8296f, 0.7154f, 1.0605f,
                  0.4753f, 0.8434f, 0.8296f, 0.4937f, 0.3474f, 0.6565f, 0.4576f, 0.7070f, 0.7154f,
                  0.3474f, 0.6654f, 0.2935f, 0.6310f, 1.0865f, 1.0605f, 0.6565f, 0.2935f, 0.9450f});
}

TEST(Seeds, SimplifiedSelfAttentionWeightsAndContext) {
  const Tensor weights = softmax(matmul(inputs(), inputs(), false, true));
  expect_printed(weights, {0.2098f, 0.2006f, 0.1981f, 0.1242f, 0.1220f, 0.1452f, 0.1385f, 0.2379f, 0.2333f,
                           0.1240f, 0.1082f, 0.1581f, 0.1390f, 0.2369f, 0.2326f, 0.1242f, 0.1108f, 0.1565f,
                           0.1435f, 0.2074f, 0.2046f, 0.1462f, 0.1263f, 0.1720f, 0.1526f, 0.1958f, 0.1975f,
                           0.1367f, 0.1879f, 0.1295f, 0.1385f, 0.2184f, 0.2128f, 0.1420f, 0.0988f, 0.1896f});
  expect_printed(matmul(weights, inputs()),
                 {0.4421f, 0.5931f, 0.5790f, 0.4419f, 0.6515f, 0.5683f, 0.4431f, 0.6496f, 0.5671f,
                  0.4304f, 0.6298f, 0.5510f, 0.4671f, 0.5910f, 0.5266f, 0.4177f, 0.6503f, 0.5645f});
}

TEST(Seeds, CausalMaskOfZerosAverages) {  // causal-head-with-dropout.txt: tril + softmax
  const Tensor w = causal_softmax(Tensor::zeros({8, 8}));
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) EXPECT_NEAR(w.at({i, j}), j <= i ? 1.0f / float(i + 1) : 0.0f, 1e-6f);
  // The 3x3 version applied to b gives the printed c.
  const Tensor b = Tensor::from({3, 2}, std::vector<float>{2, 7, 6, 4, 6, 5});
  expect_printed(matmul(causal_softmax(Tensor::zeros({3, 3})), b), {2.0f, 7.0f, 4.0f, 5.5f, 4.6667f, 5.3333f});
}

TEST(Seeds, CausalSoftmaxOfPrintedScores) {  // first batch's masked scores -> printed weights
  const Tensor scores = Tensor::from(
      {8, 8}, std::vector<float>{
                  0.0518f,  0,       0,       0,       0,       0,       0,       0,       //
                  -0.0279f, -0.2687f, 0,      0,       0,       0,       0,       0,       //
                  0.1603f,  -0.3077f, 0.5522f, 0,      0,       0,       0,       0,       //
                  0.2428f,  -0.4568f, 0.8337f, 1.2711f, 0,      0,       0,       0,       //
                  0.0102f,  0.3929f, -0.0695f, -0.1160f, -0.4921f, 0,     0,       0,       //
                  -0.3134f, 0.4386f, -1.0379f, -1.5788f, -0.3969f, 2.1592f, 0,     0,       //
                  0.0783f,  -0.2394f, 0.2922f, 0.4477f, 0.2602f, -0.6664f, 0.0904f, 0,      //
                  -0.3488f, 1.2351f, -1.3450f, -2.0646f, -1.3681f, 3.1349f, -0.3791f, 1.1684f});
  const Tensor w = causal_softmax(scores);
  const std::vector<float> row7{0.0223f, 0.1086f, 0.0082f, 0.0040f, 0.0080f, 0.7257f, 0.0216f, 0.1016f};
  const std::vector<float> row3{0.1640f, 0.0815f, 0.2961f, 0.4585f, 0, 0, 0, 0};
  for (int j = 0; j < 8; ++j) {
    EXPECT_NEAR(w.at({7, j}), row7[j], 1e-4f);
    EXPECT_NEAR(w.at({3, j}), row3[j], 1e-4f);
  }
}

}  // namespace
}  // namespace folio
