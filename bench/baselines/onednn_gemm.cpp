// oneDNN matmul called directly, fp32 row-major, strict math: the baseline that
// `trainbench run -w 'gemm m=M n=N k=K'` is held against.
// Usage: trainbench-baseline-onednn-gemm M N K [REPETITIONS]
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "backends/onednn/onednn_api.h"  // the primitive descriptor, as oneDNN 2.x or 3.x makes it
#include "bench/baselines/huge_buffer.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s M N K [REPETITIONS]\n", argv[0]);
    return 2;
  }
  const long m = std::atol(argv[1]), n = std::atol(argv[2]), k = std::atol(argv[3]);
  const int repetitions = argc > 4 ? std::atoi(argv[4]) : 20;
  using dnnl::memory;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc a_md({m, k}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc b_md({k, n}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc c_md({m, n}, memory::data_type::f32, memory::format_tag::ab);
  dnnl::primitive_attr attr;
  attr.set_fpmath_mode(dnnl::fpmath_mode::strict);
  const dnnl::matmul::primitive_desc pd = tb::onednn::api::matmul(engine, a_md, b_md, c_md, attr);
  auto a_data = huge_buffer<float>(m * k), b_data = huge_buffer<float>(k * n),
       c_data = huge_buffer<float>(m * n);
  memory a(a_md, engine, a_data.get()), b(b_md, engine, b_data.get()),
      c(c_md, engine, c_data.get());
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (const memory* mem : {&a, &b, &c}) {
    float* data = static_cast<float*>(mem->get_data_handle());
    for (size_t i = 0; i < mem->get_desc().get_size() / sizeof(float); ++i) data[i] = uniform(rng);
  }
  dnnl::matmul matmul(pd);
  std::vector<double> seconds;
  for (int r = 0; r < repetitions + 3; ++r) {
    const auto start = std::chrono::steady_clock::now();
    matmul.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    stream.wait();
    if (r >= 3)
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  const double flops = 2.0 * m * n * k;
  std::printf("onednn matmul f32 %ldx%ldx%ld: median %.1f GFLOP/s, best %.1f GFLOP/s (%s)\n", m, n,
              k, flops / seconds[seconds.size() / 2] / 1e9, flops / seconds.front() / 1e9,
              pd.impl_info_str());
  return 0;
}
