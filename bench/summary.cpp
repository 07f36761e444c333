// `trainbench summary`: the questions a buyer asks, answered from one report, each answer
// with the measurements it comes from.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "workloads/descriptor.h"

#include "backends/status.h"
#include "bench/report_commands.h"
#include "reports/compare.h"
#include "reports/report.h"

namespace tb {
namespace {

// Projected full-scale time-to-train: MLPerf's reference convergence points and evaluation
// (MLCommons' training rules and reference implementations).
struct ProjectionRecipe {
  const char* model;
  double samples;            // training samples to the target
  double evaluated_samples;  // evaluation samples over the run
  const char* assumptions;
};
// ResNet-50 to 75.9% top-1: about 35 epochs of ImageNet's 1,281,167 images at batch
// 1,632-3,264 (LARS); 50,000 validation images every 4 epochs (9 evaluations).
constexpr ProjectionRecipe kResnet50{
    "ResNet-50 on ImageNet-1k to 75.9% top-1", 35.0 * 1'281'167, 9.0 * 50'000,
    "35 epochs of 1,281,167 images (MLPerf's reference convergence at batch 1,632-3,264 with "
    "LARS), 9 evaluations of 50,000 images at a third of a training step's cost per image; "
    "measured at this batch with SGD, so the optimizer's share differs slightly; JPEG decoding "
    "and augmentation not included"};
// BERT-large to 0.720 masked-LM accuracy: about 2.55 M samples at batch 256 from MLPerf's
// checkpoint; 10,000 evaluation samples every 150,000 training samples (17 evaluations).
constexpr ProjectionRecipe kBertLarge{
    "BERT-large (phase 2, from MLPerf's checkpoint) to 0.720 masked-LM accuracy", 2.55e6,
    17.0 * 10'000,
    "2.55 M samples of length 512 (MLPerf's reference convergence at batch 256, LAMB), 17 "
    "evaluations of 10,000 samples at a third of a training step's cost; packing and data "
    "loading not included"};

// The recipe a training case projects to, or null: only the full-size models do.
const ProjectionRecipe* projection_recipe(const Descriptor& d) {
  if (d.kind() == "resnet50-train" && d.get("image") == "224" && d.get("width") == "64" &&
      d.get("classes") == "1000")
    return &kResnet50;
  if (d.kind() == "bert-train" && d.get("model") == "large" && d.get("seq") == "512")
    return &kBertLarge;
  return nullptr;
}

struct Answer {
  std::string question, answer;
  std::vector<std::string> from;  // the measurements (descriptor and figure)
};

std::string measured(const nlohmann::json& result) {
  const std::string caveats = result_caveats(result);
  return fmt::format("{} {} {}: median {:.4g} s{}", result["backend"].get<std::string>(),
                     result["dtype"].get<std::string>(), result["workload"].get<std::string>(),
                     result["stats"]["median_s"].get<double>(),
                     caveats.empty() ? "" : " " + caveats);
}

std::vector<Answer> answer(const nlohmann::json& report) {
  std::map<std::string, std::string> device_kind;  // backend -> cpu / gpu
  for (const auto& backend : report["backends"])
    if (backend["device"].is_object()) device_kind[backend["name"]] = backend["device"]["kind"];
  std::vector<const nlohmann::json*> passed;
  for (const auto& result : report["results"])
    if (result["status"] == "passed") passed.push_back(&result);
  auto kind = [&](const nlohmann::json& r) {
    return device_kind.count(r["backend"]) ? device_kind[r["backend"]] : "";
  };
  auto median = [](const nlohmann::json& r) { return r["stats"]["median_s"].get<double>(); };
  std::vector<Answer> answers;

  // 1. GPU over CPU speed-up, per workload and dtype: the GPU against the fastest CPU backend.
  Answer speedup{"GPU over CPU speed-up per workload and dtype", "", {}};
  std::map<std::pair<std::string, std::string>,
           std::pair<const nlohmann::json*, const nlohmann::json*>>
      pairs;
  for (const nlohmann::json* r : passed) {
    auto& [cpu, gpu] = pairs[{(*r)["workload"], (*r)["dtype"]}];
    auto& slot = kind(*r) == "gpu" ? gpu : cpu;
    if (kind(*r) != "gpu" && kind(*r) != "cpu") continue;
    if (!slot || median(*r) < median(*slot)) slot = r;
  }
  for (const auto& [key, pair] : pairs)
    if (pair.first && pair.second) {
      speedup.answer +=
          fmt::format("{}{:.1f}x for {} [{}]", speedup.answer.empty() ? "" : "; ",
                      median(*pair.first) / median(*pair.second), key.first, key.second);
      speedup.from.push_back(measured(*pair.first));
      speedup.from.push_back(measured(*pair.second));
    }
  if (speedup.answer.empty())
    speedup.answer = "not measured: no case ran on both a GPU and a CPU backend";
  answers.push_back(speedup);

  // 2. Memory bandwidth: best STREAM figure on each kind of device.
  Answer bandwidth{"Memory-bandwidth ratio, GPU over CPU", "", {}};
  std::map<std::string, const nlohmann::json*> best_stream;
  for (const nlohmann::json* r : passed)
    if (const auto figure = result_headline(*r);
        figure && figure->headline.figure == kMemoryBandwidthFigure &&
        (*r)["metrics"].contains("gbps")) {
      auto& slot = best_stream[kind(*r)];
      if (!slot || (*r)["metrics"]["gbps"] > (*slot)["metrics"]["gbps"]) slot = r;
    }
  for (const auto& [device, r] : best_stream)
    bandwidth.from.push_back(fmt::format("{}: {:.1f} GB/s ({})", device,
                                         (*r)["metrics"]["gbps"].get<double>(), measured(*r)));
  if (best_stream.count("gpu") && best_stream.count("cpu"))
    bandwidth.answer =
        fmt::format("{:.1f}x", (*best_stream["gpu"])["metrics"]["gbps"].get<double>() /
                                   (*best_stream["cpu"])["metrics"]["gbps"].get<double>());
  else
    bandwidth.answer = fmt::format("not measured: STREAM ran on {}",
                                   best_stream.empty() ? "no device" : "one kind of device only");
  answers.push_back(bandwidth);

  // 3. Mixed precision: the same case in a low-precision dtype against fp32, same backend.
  Answer mixed{"Mixed-precision speed-up and memory saving over fp32", "", {}};
  std::map<std::pair<std::string, std::string>, const nlohmann::json*> by_workload;
  for (const nlohmann::json* r : passed) by_workload[{(*r)["backend"], (*r)["workload"]}] = r;
  for (const nlohmann::json* r : passed) {
    const std::string dtype = (*r)["dtype"], workload = (*r)["workload"];
    const std::string tag = " dtype=" + dtype;
    if (dtype == "f32" || dtype == "f64" || workload.find(tag) == std::string::npos) continue;
    std::string fp32 = workload;
    fp32.replace(fp32.find(tag), tag.size(), " dtype=f32");
    const auto it = by_workload.find({(*r)["backend"], fp32});
    if (it == by_workload.end()) continue;
    const auto& m32 = (*it->second)["metrics"];
    const auto& mlp = (*r)["metrics"];
    std::string saving;
    if (m32.contains("bytes") && mlp.contains("bytes"))
      saving = fmt::format(", {:.0f}% less memory traffic",
                           100 * (1 - mlp["bytes"].get<double>() / m32["bytes"].get<double>()));
    mixed.answer += fmt::format("{}{} {:.2f}x{} ({} {})", mixed.answer.empty() ? "" : "; ", dtype,
                                median(*it->second) / median(*r), saving,
                                (*r)["backend"].get<std::string>(), descriptor_kind(workload));
    mixed.from.push_back(measured(*it->second));
    mixed.from.push_back(measured(*r));
  }
  if (mixed.answer.empty())
    mixed.answer = "not measured: no case ran in both fp32 and a lower precision";
  answers.push_back(mixed);

  // 4. Training state per parameter with AdamW.
  Answer state{"Training-state memory per parameter with AdamW", "", {}};
  for (const nlohmann::json* r : passed)
    if ((*r)["metrics"].contains("optimizer_state_bytes_per_parameter")) {
      state.answer =
          fmt::format("{:.1f} bytes (measured)",
                      (*r)["metrics"]["optimizer_state_bytes_per_parameter"].get<double>());
      state.from.push_back(measured(*r));
    }
  if (state.answer.empty())
    state.answer =
        "not measured in this report; by the AdamW state layout: fp32 16 bytes (weights 4, "
        "gradients 4, two moments 8); "
        "bf16 mixed precision with fp32 master weights 18 bytes (+2 for the bf16 weight copy), "
        "activations extra";
  answers.push_back(state);

  // 5. Projected full-scale time-to-train from measured training throughput: a projection,
  // with its assumptions, never a measurement.
  Answer projection{
      "Projected time-to-train per device (a projection from MLPerf's "
      "convergence points, not a measurement)",
      "",
      {}};
  std::map<std::string, const ProjectionRecipe*> used;
  for (const nlohmann::json* r : passed) {
    if (!(*r)["metrics"].contains("samples_per_s")) continue;
    const ProjectionRecipe* recipe =
        projection_recipe(Descriptor::parse((*r)["workload"].get<std::string>()));
    if (!recipe) continue;
    const double rate = (*r)["metrics"]["samples_per_s"];
    const double seconds = (recipe->samples + recipe->evaluated_samples / 3.0) / rate;
    projection.answer += fmt::format(
        "{}{} on {} [{}]: {:.1f} h ({:.3g} training samples at the measured {:.2f}/s)",
        projection.answer.empty() ? "" : "; ", recipe->model, (*r)["backend"].get<std::string>(),
        (*r)["dtype"].get<std::string>(), seconds / 3600, recipe->samples, rate);
    projection.from.push_back(measured(*r));
    used[recipe->model] = recipe;
  }
  for (const auto& [model, recipe] : used)
    projection.answer += fmt::format(". Assumptions for {}: {}", model, recipe->assumptions);
  if (projection.answer.empty())
    projection.answer =
        "not measured: no full-size ResNet-50 (224x224, 1000 classes) or "
        "BERT-large (length 512) training step in this report";
  answers.push_back(projection);

  // 6. Where a model step's time goes: the slowest layers of the instrumented step.
  constexpr std::size_t kLayersShown = 3;
  Answer breakdown{
      "Where a training step's time goes (slowest layers, forward + backward)", "", {}};
  for (const nlohmann::json* r : passed) {
    if (!r->contains("details") || !(*r)["details"].contains("breakdown")) continue;
    const nlohmann::json& b = (*r)["details"]["breakdown"];
    const double total = b["total_s"].get<double>();
    std::map<std::string, double> by_kind;
    std::vector<std::pair<double, std::string>> layers;
    for (const auto& layer : b["layers"]) {
      const double seconds = layer["forward_s"].get<double>() + layer["backward_s"].get<double>();
      by_kind[layer.value("kind", "layer")] += seconds;
      layers.emplace_back(seconds, layer["layer"].get<std::string>());
    }
    std::vector<std::pair<double, std::string>> kinds;
    for (const auto& [kind, seconds] : by_kind) kinds.emplace_back(seconds, kind);
    std::sort(kinds.begin(), kinds.end(), std::greater<>());
    std::sort(layers.begin(), layers.end(), std::greater<>());
    std::string shares, slowest;
    for (const auto& [seconds, kind] : kinds)
      shares +=
          fmt::format("{}{} {:.0f}%", shares.empty() ? "" : ", ", kind, 100 * seconds / total);
    for (std::size_t i = 0; i < std::min(kLayersShown, layers.size()); ++i)
      slowest +=
          fmt::format("{}{} {:.0f} ms", i ? ", " : "", layers[i].second, layers[i].first * 1e3);
    breakdown.answer += fmt::format(
        "{}{} {} [{}]: step {:.0f} ms: {}, optimizer {:.0f} ms; slowest layers {}",
        breakdown.answer.empty() ? "" : "; ", (*r)["backend"].get<std::string>(),
        descriptor_kind((*r)["workload"].get<std::string>()), (*r)["dtype"].get<std::string>(),
        total * 1e3, shares, b["optimizer_s"].get<double>() * 1e3, slowest);
    breakdown.from.push_back(measured(*r));
  }
  if (breakdown.answer.empty())
    breakdown.answer = "not measured: no model training step in this report";
  answers.push_back(breakdown);
  return answers;
}

}  // namespace

int summary_command(const SummaryOptions& options) {
  const nlohmann::json report = read_input_report(options.report);
  const std::vector<Answer> answers = answer(report);
  std::string text;
  if (options.format == TableFormat::json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Answer& a : answers)
      out.push_back({{"question", a.question}, {"answer", a.answer}, {"from", a.from}});
    text = out.dump(2) + "\n";
  } else {
    const bool markdown = options.format == TableFormat::markdown;
    for (const Answer& a : answers) {
      text += fmt::format(fmt::runtime(markdown ? "**{}**: {}\n" : "{}:\n  {}\n"), a.question,
                          a.answer);
      for (const std::string& from : a.from)
        text += fmt::format(fmt::runtime(markdown ? "- from {}\n" : "    from {}\n"), from);
      text += "\n";
    }
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace tb
