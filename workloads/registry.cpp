#include "workloads/registry.h"

#include <sstream>

#include <fmt/format.h>

#include "backends/cpu/host_info.h"
#include "backends/status.h"
#include "workloads/embedded_files.h"
#include "workloads/kinds.h"

namespace tb {

const std::vector<WorkloadKind>& workload_kinds() {
  static const std::vector<WorkloadKind> kinds = {
      {"peak", "measured arithmetic peak (FMA / bf16 dot-product probe)",
       "[dtype=f32|bf16] [iterations=N]"},
      {"stream", "STREAM memory bandwidth (copy, scale, add, triad, dot), GB/s as STREAM counts",
       "[op=copy|scale|add|triad|dot] [n=ELEMENTS, default 4x last-level cache]"},
      {"transfer", "host <-> device and device <-> device copies (GPU backends)",
       "[dir=h2d|d2h|d2d] [bytes=N] [memory=pinned|pageable]"},
      {"gemm", "matrix multiply C = alpha op(A) op(B) + beta C",
       "m=M [n=N] [k=K] [batch=B] [dtype=f32|bf16] [out=f32|bf16] [ta=n|t] [tb=n|t] [alpha=] "
       "[beta=] [layout=plain|prepacked] [shapes=LIST]"},
      {"conv", "2-D convolution forward / backward-data / backward-weights",
       "mb= ic= ih= [iw=] oc= kh= [kw=] [sh=] [sw=] [ph=] [pw=] [dir=fwd|bwd_data|bwd_weights] "
       "[dtype=f32|bf16] [shapes=LIST]"},
      {"resnet50-train",
       "ResNet-50 training steps (forward, loss, backward, SGD momentum) on a fixed batch",
       "[batch=32|sweep] [image=224] [width=64] [classes=1000] [dtype=f32|bf16] "
       "[layout=native|plain] [conv=direct|auto] "
       "[lr=0.1*batch/256]"},
      {"bert-train",
       "BERT pre-training steps (masked-LM + next-sentence losses, backward, AdamW or LAMB) on a "
       "fixed batch",
       "[model=base|large|tiny] [batch=8] [seq=128] [dtype=f32|bf16] [optimizer=adamw|lamb] "
       "[dropout=0.1] [lr=1e-4]"},
      {"ttt-fashion-mnist",
       "time-to-train: ResNet-8 on Fashion-MNIST (Debian's dataset-fashion-mnist) to a test "
       "accuracy, MLPerf's clock; --runs via runs=N (MLPerf aggregate)",
       "[target=0.9] [batch=128] [dtype=f32|bf16] [epochs=3] [lr=0.1] [runs=1] [subset=N]"},
      {"ttt-mlm",
       "time-to-train: a small BERT's masked-LM on WordNet's glosses (Debian's wordnet-base) to "
       "a held-out masked-LM accuracy, MLPerf's clock; --runs via runs=N (MLPerf aggregate)",
       "[target=0.175] [batch=32] [dtype=f32|bf16] [epochs=4] [lr=0.002] [runs=1] [seq=64] "
       "[vocab=8192] [layers=2] [hidden=128] [dropout=0] [warmup=0.2] [subset=N]"},
  };
  return kinds;
}

std::unique_ptr<Workload> create_workload(const Descriptor& descriptor, const DeviceInfo& device) {
  const std::string& kind = descriptor.kind();
  if (descriptor.has("shapes"))
    throw UsageError(
        fmt::format("'{}': expand shapes= before creating a workload", descriptor.to_string()));
  if (kind == "gemm") return make_gemm(descriptor);
  if (kind == "conv") return make_conv(descriptor);
  if (kind == "stream") return make_stream(descriptor, device);
  if (kind == "peak") return make_peak(descriptor);
  if (kind == "transfer") return make_transfer(descriptor);
  if (kind == "resnet50-train") return make_resnet50_train(descriptor);
  if (kind == "bert-train") return make_bert_train(descriptor);
  if (kind == "ttt-fashion-mnist") return make_ttt_fashion_mnist(descriptor);
  if (kind == "ttt-mlm") return make_ttt_mlm(descriptor);
  std::vector<std::string> names;
  for (const WorkloadKind& known : workload_kinds()) names.push_back(known.name);
  throw UsageError(fmt::format("unknown workload '{}' (known: {})", kind, fmt::join(names, ", ")));
}

std::vector<Descriptor> expand_for_backend(const Descriptor& descriptor, Backend* backend,
                                           const DeviceInfo& device) {
  if (descriptor.kind() != "resnet50-train") return {descriptor};
  const std::uint64_t available =
      device.kind == "cpu" ? cpu::memory_available_bytes() : device.memory_bytes;
  return expand_resnet50_sweep(descriptor, backend, available);
}

std::vector<std::string> content_lines(std::string_view text) {
  std::vector<std::string> lines;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.push_back(line);
  }
  return lines;
}

std::vector<Descriptor> expand_shapes(const Descriptor& descriptor) {
  const auto list = descriptor.get("shapes");
  if (!list) return {descriptor};
  const auto text = embedded_file(fmt::format("shapes/{}.txt", *list));
  if (!text)
    throw UsageError(fmt::format("unknown shape list '{}' in '{}' (known: {})", *list,
                                 descriptor.to_string(), fmt::join(shape_list_names(), ", ")));
  std::vector<Descriptor> expanded;
  for (const std::string& line : content_lines(*text)) {
    Descriptor shape = Descriptor::parse(line);
    if (shape.kind() != descriptor.kind())
      throw UsageError(fmt::format("shape list '{}' holds {} shapes, not {}", *list, shape.kind(),
                                   descriptor.kind()));
    for (const auto& [key, value] : descriptor.params())
      if (key != "shapes") shape.set(key, value);
    expanded.push_back(std::move(shape));
  }
  return expanded;
}

std::vector<Descriptor> load_suite(std::string_view name) {
  const auto text = embedded_file(fmt::format("suites/{}.txt", name));
  if (!text)
    throw UsageError(
        fmt::format("unknown suite '{}' (known: {})", name, fmt::join(suite_names(), ", ")));
  std::vector<Descriptor> cases;
  for (const std::string& line : content_lines(*text))
    for (Descriptor& expanded : expand_shapes(Descriptor::parse(line)))
      cases.push_back(std::move(expanded));
  return cases;
}

namespace {
std::vector<std::string> names_under(std::string_view folder) {
  std::vector<std::string> names;
  for (const EmbeddedFile& file : embedded_files()) {
    std::string_view path = file.path;
    if (path.starts_with(folder) && path.ends_with(".txt"))
      names.emplace_back(path.substr(folder.size(), path.size() - folder.size() - 4));
  }
  return names;
}
}  // namespace

std::vector<std::string> suite_names() {
  return names_under("suites/");
}
std::vector<std::string> shape_list_names() {
  return names_under("shapes/");
}

}  // namespace tb
