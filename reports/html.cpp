#include "reports/html.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "reports/buyers_table.h"
#include "reports/compare.h"
#include "reports/report.h"
#include "reports/result_record.h"
#include "reports/summary.h"
#include "workloads/descriptor.h"

namespace tb {
namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                    "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string color(std::size_t index) {
  return kPalette[index % std::size(kPalette)];
}

// A log-log plotting frame.
struct LogFrame {
  double x_min, x_max, y_min, y_max;
  double width = 720, height = 420, left = 70, right = 20, top = 20, bottom = 50;
  double x(double value) const {
    return left + (std::log10(value) - std::log10(x_min)) /
                      (std::log10(x_max) - std::log10(x_min)) * (width - left - right);
  }
  double y(double value) const {
    return height - bottom -
           (std::log10(value) - std::log10(y_min)) / (std::log10(y_max) - std::log10(y_min)) *
               (height - top - bottom);
  }
  std::string axes(const std::string& x_label, const std::string& y_label) const {
    std::string svg;
    for (double d = std::pow(10, std::floor(std::log10(x_min))); d <= x_max * 1.0001; d *= 10)
      if (d >= x_min)
        svg += fmt::format(
            R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" class="grid"/><text x="{0:.1f}" y="{3:.1f}" class="tick" text-anchor="middle">{4:g}</text>)",
            x(d), top, height - bottom, height - bottom + 16, d);
    for (double d = std::pow(10, std::floor(std::log10(y_min))); d <= y_max * 1.0001; d *= 10)
      if (d >= y_min)
        svg += fmt::format(
            R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{2:.1f}" y2="{1:.1f}" class="grid"/><text x="{3:.1f}" y="{1:.1f}" class="tick" text-anchor="end" dominant-baseline="middle">{4:g}</text>)",
            left, y(d), width - right, left - 6, d);
    svg +=
        fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" class="label">{}</text>)",
                    (left + width - right) / 2, height - 10, escape(x_label));
    svg += fmt::format(
        R"svg(<text transform="translate(16,{:.1f}) rotate(-90)" text-anchor="middle" class="label">{}</text>)svg",
        (top + height - bottom) / 2, escape(y_label));
    return svg;
  }
};

struct Machine {
  std::string label;
  const nlohmann::json* report;
};

// A roofline point's marker, one shape per workload kind (in order of appearance), centred at
// (x, y); `attributes` go on the shape.
std::string marker(std::size_t shape, double x, double y, const std::string& attributes) {
  switch (shape % 4) {
    case 0:
      return fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="4.5" {}>)", x, y, attributes);
    case 1:
      return fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="8" height="8" {}>)", x - 4, y - 4,
                         attributes);
    case 2:
      return fmt::format(R"(<polygon points="{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}" {}>)", x,
                         y - 5, x + 5, y + 4, x - 5, y + 4, attributes);
    default:
      return fmt::format(
          R"(<polygon points="{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}" {}>)", x,
          y - 5.5, x + 5.5, y, x, y + 5.5, x - 5.5, y, attributes);
  }
}
constexpr const char* kMarkerClose[] = {"</circle>", "</rect>", "</polygon>", "</polygon>"};
constexpr const char* kMarkerSymbol[] = {"&#9679;", "&#9632;", "&#9650;", "&#9670;"};

// One (report, backend)'s roofline: its measured compute ceilings, best STREAM bandwidth and cases.
struct Roof {
  std::string name;
  std::vector<std::pair<std::string, double>> peaks;  // dtype, GFLOP/s
  double bandwidth = 0;                               // GB/s
  // intensity, GFLOP/s, title, workload kind
  std::vector<std::tuple<double, double, std::string, std::string>> points;
};

std::vector<Roof> collect_roofs(const std::vector<Machine>& machines) {
  std::vector<Roof> roofs;
  for (const Machine& machine : machines) {
    std::map<std::string, Roof> by_backend;
    for (const auto& backend : (*machine.report)["backends"]) {
      Roof& roof = by_backend[backend["name"]];
      roof.name = fmt::format("{}: {}", machine.label, backend["name"].get<std::string>());
      for (const auto& [dtype, peak] : backend["peaks"].items())
        if (peak["measured_gflops"].is_number())
          roof.peaks.emplace_back(dtype, peak["measured_gflops"].get<double>());
    }
    for (const ResultRecord& record : read_results(*machine.report)) {
      const nlohmann::json& result = *record.json;
      if (!record.passed() || !result["metrics"].is_object()) continue;
      const auto& m = result["metrics"];
      Roof& roof = by_backend[result["backend"]];
      const auto& figure = record.headline;
      if (figure && figure->headline.figure == kMemoryBandwidthFigure)
        roof.bandwidth = std::max(roof.bandwidth, figure->value);
      else if (m.contains("flops") && m.contains("bytes") && m.contains("tflops") &&
               m["bytes"].get<double>() > 0)
        roof.points.emplace_back(m["flops"].get<double>() / m["bytes"].get<double>(),
                                 m["tflops"].get<double>() * 1e3,
                                 fmt::format("{} [{}]", result["workload"].get<std::string>(),
                                             result["dtype"].get<std::string>()),
                                 descriptor_kind(record.key.workload));
    }
    for (auto& [name, roof] : by_backend)
      if (!roof.points.empty() || !roof.peaks.empty()) roofs.push_back(std::move(roof));
  }
  return roofs;
}

// Roofline: each (report, backend)'s measured compute ceilings and its best STREAM bandwidth,
// and each case at its arithmetic intensity (flops per byte moved).
std::string roofline(const std::vector<Machine>& machines) {
  const std::vector<Roof> roofs = collect_roofs(machines);
  double y_max = 1, x_min = 0.1, x_max = 1000;
  for (const Roof& roof : roofs) {
    for (const auto& [dtype, peak] : roof.peaks) y_max = std::max(y_max, peak);
    for (const auto& [intensity, gflops, title, kind] : roof.points) {
      x_min = std::min(x_min, intensity);
      x_max = std::max(x_max, intensity);
      y_max = std::max(y_max, gflops);
    }
  }
  LogFrame frame{std::pow(10, std::floor(std::log10(x_min))),
                 std::pow(10, std::ceil(std::log10(x_max))), 1,
                 std::pow(10, std::ceil(std::log10(y_max * 1.5)))};
  std::string svg = fmt::format(
      R"(<svg class="chart" id="roofline" width="{}" height="{}" role="img"><title>Roofline</title>)",
      frame.width, frame.height);
  svg += frame.axes("arithmetic intensity (flop per byte moved)", "GFLOP/s");
  std::string legend;
  std::map<std::string, std::size_t> kinds;  // workload kind -> its marker
  std::vector<double> label_ys;              // the ceilings' names, top to bottom
  for (std::size_t r = 0; r < roofs.size(); ++r) {
    const Roof& roof = roofs[r];
    for (const auto& [dtype, peak] : roof.peaks) {
      // The roof: bandwidth x intensity until it meets the compute ceiling.
      const double knee = roof.bandwidth > 0 ? peak / roof.bandwidth : frame.x_min;
      std::string points;
      if (roof.bandwidth > 0 && knee > frame.x_min)
        points += fmt::format("{:.1f},{:.1f} ", frame.x(frame.x_min),
                              frame.y(std::max(frame.y_min, roof.bandwidth * frame.x_min)));
      points += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f}",
                            frame.x(std::clamp(knee, frame.x_min, frame.x_max)), frame.y(peak),
                            frame.x(frame.x_max), frame.y(peak));
      svg += fmt::format(
          R"(<polyline class="roof" points="{}" stroke="{}" stroke-dasharray="{}"><title>{} {} peak {:.0f} GFLOP/s, bandwidth {:.1f} GB/s</title></polyline>)",
          points, color(r), dtype == "f32" ? "none" : "6,3", escape(roof.name), escape(dtype), peak,
          roof.bandwidth);
      // Each ceiling named where it ends: its backend, dtype and measured peak; names of
      // ceilings at the same height stacked below one another.
      double label_y = frame.y(peak) - 3;
      while (std::any_of(label_ys.begin(), label_ys.end(),
                         [&](double used) { return std::abs(used - label_y) < 11; }))
        label_y += 11;
      label_ys.push_back(label_y);
      svg += fmt::format(
          R"(<text class="tick ceiling" x="{:.1f}" y="{:.1f}" text-anchor="end" fill="{}">{} {} {:.0f} GFLOP/s</text>)",
          frame.x(frame.x_max) - 2, label_y, color(r), escape(roof.name), escape(dtype), peak);
    }
    for (const auto& [intensity, gflops, title, kind] : roof.points) {
      const std::size_t shape = kinds.emplace(kind, kinds.size()).first->second;
      svg += marker(shape, frame.x(intensity), frame.y(std::max(gflops, frame.y_min)),
                    fmt::format(R"(class="mark" fill="{}")", color(r))) +
             fmt::format("<title>{}: {:.1f} GFLOP/s at {:.2f} flop/byte</title>{}", escape(title),
                         gflops, intensity, kMarkerClose[shape % 4]);
    }
    legend += fmt::format(R"(<span class="key"><i style="background:{}"></i>{}</span>)", color(r),
                          escape(roof.name));
  }
  std::string markers;
  for (const auto& [kind, shape] : kinds)
    markers +=
        fmt::format(R"(<span class="key">{} {}</span>)", kMarkerSymbol[shape % 4], escape(kind));
  return svg + "</svg><div class=\"legend\">" + legend +
         " (solid: fp32 ceiling, dashed: other dtypes)</div><div class=\"legend\">markers: " +
         markers + "</div>";
}

// A case's bar: its machine (report), backend and headline.
struct Bar {
  std::size_t machine;
  std::string series;  // "report: backend"
  const ResultRecord* record;
};

// What a bar says after its value: with one report, its percent of the measured and theoretical
// peaks; with several, its ratio to the first report's bar of the same backend (or the first
// report's first bar), and whether the samples tell the two apart.
std::string bar_note(const Bar& bar, const std::vector<Bar>& group,
                     const std::vector<Machine>& machines) {
  if (machines.size() == 1) {
    const auto measured = bar.record->metric("percent_of_peak");
    const auto theoretical = bar.record->metric("percent_of_theoretical_peak");
    if (!measured) return "";
    return theoretical ? fmt::format("{:.1f}% of the measured peak, {:.1f}% of the theoretical",
                                     *measured, *theoretical)
                       : fmt::format("{:.1f}% of the measured peak", *measured);
  }
  if (bar.machine == 0) return "";
  const Bar* first = nullptr;
  for (const Bar& other : group)
    if (other.machine == 0 && (!first || other.record->key.backend == bar.record->key.backend))
      first = &other;
  if (!first) return fmt::format("not measured in {}", machines[0].label);
  const std::optional<double> ratio = headline_ratio(*bar.record, *first->record);
  if (!ratio) return "";
  const Verdict verdict =
      compare_samples(first->record->samples_s, bar.record->samples_s, 0.05).verdict;
  const char* told = verdict == Verdict::faster || verdict == Verdict::slower ? ""
                     : verdict == Verdict::insufficient_samples ? " [inconclusive: too few samples]"
                                                                : " [inconclusive: within noise]";
  return fmt::format("{:.2f}x vs {}{}", *ratio, machines[0].label, told);
}

// Bars: the headline metric of every case, per (machine, backend), grouped by workload and dtype.
// One report: each bar's length is its percent of the measured peak where the case has one;
// several: its value against the group's largest. A case measured on one side only says so;
// flagged figures (reference kernels, emulation, over the peak) are outlined and say why.
std::string bars(const std::vector<Machine>& machines) {
  std::vector<std::vector<ResultRecord>> records;
  for (const Machine& machine : machines) records.push_back(read_results(*machine.report));
  std::map<std::string, std::vector<Bar>> groups;  // "workload [dtype] (unit)" -> bars
  std::map<std::string, std::size_t> series_index;
  for (std::size_t m = 0; m < machines.size(); ++m)
    for (const ResultRecord& record : records[m]) {
      if (!record.headline) continue;
      const std::string series = fmt::format("{}: {}", machines[m].label, record.key.backend);
      series_index.emplace(series, series_index.size());
      groups[fmt::format("{} [{}] ({})", record.key.workload, record.key.dtype,
                         record.headline->headline.unit)]
          .push_back({m, series, &record});
    }
  const double row = 16, label_width = 520, bar_width = 300;
  double height = 10;
  for (const auto& [name, group] : groups) height += row * (group.size() + 1);
  std::string svg = fmt::format(
      R"(<svg class="chart" id="bars" width="{}" height="{:.0f}" role="img"><title>Cases across backends and machines</title>)",
      label_width + bar_width + 420, height);
  double y = 10;
  for (const auto& [name, group] : groups) {
    std::set<std::size_t> sides;
    for (const Bar& bar : group) sides.insert(bar.machine);
    const std::string only = machines.size() > 1 && sides.size() == 1
                                 ? fmt::format(" (only in {})", machines[*sides.begin()].label)
                                 : "";
    svg += fmt::format(R"(<text x="0" y="{:.1f}" class="group">{}{}</text>)", y + 11, escape(name),
                       escape(only));
    y += row;
    double best = 0;
    for (const Bar& bar : group) best = std::max(best, bar.record->headline->value);
    for (const Bar& bar : group) {
      const HeadlineValue& h = *bar.record->headline;
      const auto percent = bar.record->metric("percent_of_peak");
      const double fraction = machines.size() == 1 && percent ? std::min(*percent, 100.0) / 100
                              : best > 0                      ? h.value / best
                                                              : 0;
      const std::string caveats = result_caveats(*bar.record);
      std::string label = fmt::format("{:.4g} {}", h.value, h.headline.unit);
      for (const std::string& part : {bar_note(bar, group, machines), caveats})
        if (!part.empty()) label += ", " + part;
      const double w = fraction * bar_width;
      svg += fmt::format(
          R"(<text x="{:.0f}" y="{:.1f}" class="tick" text-anchor="end">{}</text><rect class="mark{}" x="{:.0f}" y="{:.1f}" width="{:.1f}" height="{:.0f}" fill="{}"><title>{}: {}</title></rect><text x="{:.1f}" y="{:.1f}" class="tick">{}</text>)",
          label_width - 6, y + 11, escape(bar.series), caveats.empty() ? "" : " flagged",
          label_width, y + 2, std::max(w, 1.0), row - 4, color(series_index[bar.series]),
          escape(bar.series), escape(label), label_width + w + 4, y + 11, escape(label));
      y += row;
    }
  }
  return svg + "</svg>";
}

// Every case that has no figure to draw (failed, skipped, unimplemented; a time-to-train run
// that missed its target has its curve below): its report, backend, status and why, so that
// each case of every report is on the page.
std::string cases_without_a_figure(const std::vector<Machine>& machines) {
  std::string rows;
  for (const Machine& machine : machines) {
    const std::vector<ResultRecord> records = read_results(*machine.report);
    for (const ResultRecord& record : records)
      if (!record.headline)
        rows += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                            escape(machine.label), escape(record.key.backend),
                            escape(record.key.workload), case_status_name(record.status),
                            escape(record.reason));
  }
  if (rows.empty()) return "";
  return "<h3>Cases without a figure</h3>\n<table class=\"answers\"><tr><th>report</th>"
         "<th>backend</th><th>case</th><th>status</th><th>why</th></tr>" +
         rows + "</table>\n";
}

// One training step's time as its instrumented steps measured it: forward and backward time per
// layer kind (in order of their share) and the optimizer, as one stacked bar.
struct StepTime {
  std::vector<std::tuple<std::string, double, double>> kinds;  // kind, forward s, backward s
  double optimizer_s = 0, total_s = 0;
};

StepTime step_time(const nlohmann::json& breakdown) {
  std::map<std::string, std::pair<double, double>> by_kind;
  for (const auto& layer : breakdown.at("layers")) {
    auto& [forward, backward] = by_kind[layer.value("kind", "layer")];
    forward += layer.at("forward_s").get<double>();
    backward += layer.at("backward_s").get<double>();
  }
  StepTime step{
      {}, breakdown.at("optimizer_s").get<double>(), breakdown.at("total_s").get<double>()};
  for (const auto& [kind, times] : by_kind)
    step.kinds.emplace_back(kind, times.first, times.second);
  std::sort(step.kinds.begin(), step.kinds.end(), [](const auto& a, const auto& b) {
    return std::get<1>(a) + std::get<2>(a) > std::get<1>(b) + std::get<2>(b);
  });
  return step;
}

// Where each training step's time goes: a stacked bar per case (each layer kind's forward solid,
// its backward lighter, then the optimizer in grey) on the same scale as the step's measured
// median (the black tick), and its slowest layers with their spread.
std::string step_breakdowns(const std::vector<Machine>& machines) {
  std::map<std::string, std::size_t> kind_color;
  std::string out;
  for (const Machine& machine : machines)
    for (const ResultRecord& record : read_results(*machine.report)) {
      const nlohmann::json& result = *record.json;
      if (!record.passed() || !result.contains("details") ||
          !result["details"].contains("breakdown") || !record.stats)
        continue;
      const nlohmann::json& breakdown = result["details"]["breakdown"];
      const StepTime step = step_time(breakdown);
      const double measured = record.stats->median, scale = 640 / std::max(step.total_s, measured);
      std::string svg = fmt::format(
          R"(<svg class="chart step" width="700" height="46" role="img"><title>{}: {} [{}]</title>)",
          escape(machine.label), escape(record.key.workload), escape(record.key.dtype));
      double x = 10;
      const auto segment = [&](double seconds, const std::string& fill, const std::string& name) {
        svg += fmt::format(
            R"(<rect class="mark" x="{:.1f}" y="8" width="{:.1f}" height="20" fill="{}"><title>{}: {:.2f} ms ({:.1f}% of the step)</title></rect>)",
            x, seconds * scale, fill, escape(name), seconds * 1e3, 100 * seconds / step.total_s);
        x += seconds * scale;
      };
      for (const auto& [kind, forward, backward] : step.kinds) {
        const std::string fill = color(kind_color.emplace(kind, kind_color.size()).first->second);
        segment(forward, fill, kind + " forward");
        segment(backward, fill + "88", kind + " backward");
      }
      segment(step.optimizer_s, "#999", "optimizer");
      svg += fmt::format(
          R"(<line x1="{0:.1f}" y1="4" x2="{0:.1f}" y2="32" stroke="#000" stroke-width="2"><title>measured step (median): {1:.2f} ms</title></line><text x="10" y="42" class="tick">instrumented {2:.1f} ms; measured step {1:.1f} ms (median)</text></svg>)",
          10 + measured * scale, measured * 1e3, step.total_s * 1e3);
      out +=
          fmt::format("<h3>{}: {} {} [{}]</h3>{}<p class=\"sub\">{}</p>\n", escape(machine.label),
                      escape(record.key.backend), escape(record.key.workload),
                      escape(record.key.dtype), svg, escape(slowest_layers_of(breakdown)));
    }
  if (out.empty()) return "<p>No training step with a per-layer breakdown in these reports.</p>";
  std::string legend;
  for (const auto& [kind, index] : kind_color)
    legend += fmt::format(R"(<span class="key"><i style="background:{}"></i>{}</span>)",
                          color(index), escape(kind));
  return "<div class=\"legend\">" + legend +
         " (forward solid, backward lighter, optimizer grey)</div>" + out;
}

// One time-to-train run's curve: its name, points, whether it reached the target and the target.
struct Run {
  std::string name;
  const nlohmann::json* curve;
  bool converged;
  std::optional<double> target;
  std::string quality;  // "test accuracy"
};

std::vector<Run> time_to_train_runs(const std::vector<Machine>& machines) {
  std::vector<Run> runs;
  for (const Machine& machine : machines)
    for (const auto& result : (*machine.report)["results"]) {
      const auto details = result.find("details");
      if (details == result.end() || !details->is_object() || !details->contains("runs") ||
          !(*details)["runs"].is_array())
        continue;
      const auto target = details->find("target");
      for (const auto& run : (*details)["runs"]) {
        if (!run.contains("curve") || !run["curve"].is_array() || run["curve"].empty()) continue;
        const bool converged = run.value("converged", false);
        runs.push_back(
            {fmt::format("{}: {} {} (seed {}{})", machine.label,
                         result["backend"].get<std::string>(),
                         result["workload"].get<std::string>(), run.value("seed", std::uint64_t{0}),
                         converged ? "" : ", missed the target"),
             &run["curve"], converged,
             target != details->end() && target->is_number()
                 ? std::optional<double>(target->get<double>())
                 : std::nullopt,
             details->value("quality", std::string("quality"))});
      }
    }
  return runs;
}

// Time-to-train: quality against wall-clock time, one line per run of each result that carries
// runs with curves (details.runs[].curve); each target a dashed line, a run that missed it
// dashed too and crossed at its end.
std::string curves(const std::vector<Machine>& machines) {
  const std::vector<Run> runs = time_to_train_runs(machines);
  if (runs.empty()) return "<p>No time-to-train results in these reports.</p>";
  double t_max = 1;
  for (const Run& run : runs)
    for (const auto& point : *run.curve) t_max = std::max(t_max, point.at("time_s").get<double>());
  const double width = 720, height = 320, left = 60, bottom = 40;
  const auto x = [&](double t) { return left + t / t_max * (width - left - 20); };
  const auto y = [&](double q) { return height - bottom - q * (height - bottom - 20); };
  std::string svg = fmt::format(
      R"(<svg class="chart" id="curves" width="{}" height="{}" role="img"><title>Time to train</title>)",
      width, height);
  std::set<std::pair<double, std::string>> targets;
  for (const Run& run : runs)
    if (run.target) targets.emplace(*run.target, run.quality);
  for (const auto& [target, quality] : targets)
    svg += fmt::format(
        R"(<line class="target" x1="{0:.1f}" y1="{1:.1f}" x2="{2:.1f}" y2="{1:.1f}" stroke="#555" stroke-dasharray="2,3"/><text x="{2:.1f}" y="{3:.1f}" class="tick" text-anchor="end">target: {4} {5:g}</text>)",
        left, y(target), width - 20, y(target) - 4, escape(quality), target);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::string points;
    for (const auto& point : *runs[i].curve)
      points += fmt::format("{:.1f},{:.1f} ", x(point.at("time_s").get<double>()),
                            y(point.at("quality").get<double>()));
    svg += fmt::format(
        R"(<polyline class="mark" points="{}" fill="none" stroke="{}" stroke-width="2"{}><title>{}</title></polyline>)",
        points, color(i), runs[i].converged ? "" : R"( stroke-dasharray="6,3")",
        escape(runs[i].name));
    if (!runs[i].converged) {
      const nlohmann::json& last = runs[i].curve->back();
      svg += fmt::format(
          R"(<text class="missed" x="{:.1f}" y="{:.1f}" text-anchor="middle" fill="{}">&#215;<title>{}</title></text>)",
          x(last.at("time_s").get<double>()), y(last.at("quality").get<double>()) + 4, color(i),
          escape(runs[i].name));
    }
  }
  svg += fmt::format(
      R"(<text x="{:.0f}" y="{:.0f}" class="label" text-anchor="middle">seconds (0 to {:.0f}); dashed with a cross: a run that missed the target</text>)",
      width / 2, height - 8, t_max);
  return svg + "</svg>";
}

// Each case's median time over the history's reports, oldest first, one small chart per case;
// a point significantly slower than the one before (a regression, as the gate would call it)
// red, one faster green, with its date, commit and time in its tooltip.
std::string history_charts(const std::vector<TrendSeries>& history) {
  std::string out;
  for (const TrendSeries& series : history) {
    if (series.points.empty()) continue;
    double low = INFINITY, high = 0;
    for (const TrendPoint& p : series.points)
      low = std::min(low, p.median_s), high = std::max(high, p.median_s);
    const double span = high > low ? high - low : std::max(high, 1e-12) * 0.1;
    const double width = 560, height = 110, left = 70, top = 10, bottom = 20;
    const auto x = [&](std::size_t i) {
      return left + (series.points.size() > 1 ? i * (width - left - 20) / (series.points.size() - 1)
                                              : (width - left - 20) / 2);
    };
    const auto y = [&](double s) {
      return top + (high + span * 0.1 - s) / (span * 1.2) * (height - top - bottom);
    };
    std::string svg = fmt::format(
        R"(<svg class="chart history" width="{}" height="{}" role="img"><title>{} [{}] on {}</title>)",
        width, height, escape(series.workload), escape(series.dtype), escape(series.backend));
    svg += fmt::format(
        R"(<text x="{0}" y="{1:.1f}" class="tick" text-anchor="end">{2}</text><text x="{0}" y="{3:.1f}" class="tick" text-anchor="end">{4}</text>)",
        left - 6, y(high) + 4, format_seconds(high), y(low) + 4, format_seconds(low));
    std::string line;
    for (std::size_t i = 0; i < series.points.size(); ++i)
      line += fmt::format("{:.1f},{:.1f} ", x(i), y(series.points[i].median_s));
    svg += fmt::format(R"(<polyline points="{}" fill="none" stroke="#999"/>)", line);
    for (std::size_t i = 0; i < series.points.size(); ++i) {
      const TrendPoint& p = series.points[i];
      const char* fill = p.change == "slower"   ? "#d62728"
                         : p.change == "faster" ? "#2ca02c"
                                                : "#1f77b4";
      svg += fmt::format(
          R"(<circle class="mark" cx="{:.1f}" cy="{:.1f}" r="{}" fill="{}"><title>{} {}: median {}{}</title></circle>)",
          x(i), y(p.median_s), p.change.empty() ? 3 : 5, fill, escape(p.started_at),
          escape(p.git_commit.substr(0, 12)), format_seconds(p.median_s),
          p.change.empty() ? "" : ", " + p.change + " than the run before (significant)");
    }
    out += fmt::format("<h3>{} [{}] on {}</h3>{}</svg>\n", escape(series.workload),
                       escape(series.dtype), escape(series.backend), svg);
  }
  return out.empty() ? "<p>No case in the history database.</p>"
                     : "<p>Median time per run, oldest first (lower is better); red: "
                       "significantly slower than the run before, green: faster.</p>" +
                           out;
}

// The answers first: summary's answers for these reports read as one (with two or more, the buyer's
// table of them all), each with the cases it came from; those without an answer say why.
std::string answers(const std::vector<Machine>& machines) {
  std::vector<MachineReport> reports;
  for (const Machine& machine : machines) reports.push_back({machine.label, machine.report, {}});
  std::vector<Answer> all;
  try {
    all = machine_answers(reports);
  } catch (const std::exception& e) {  // a case the report names in no form trainbench reads
    return fmt::format("<p>No answers: these reports' cases could not be read ({}).</p>",
                       escape(e.what()));
  }
  std::string rows;
  std::size_t answered_count = 0;
  for (const Answer& a : all) {
    const bool has_answer = answered(a);
    answered_count += has_answer;
    std::string answer = escape(a.answer);
    for (std::size_t t = 0; t < a.tables.size(); ++t)
      answer += fmt::format("<div class=\"sub\">{}</div><pre>{}</pre>", escape(a.titles[t]),
                            escape(a.tables[t].render(TableFormat::table)));
    std::string from;
    for (const std::string& source : a.from) from += "<li>" + escape(source) + "</li>";
    rows += fmt::format(R"(<tr class="{}"><th>{}</th><td>{}</td><td><ul>{}</ul></td></tr>)",
                        has_answer ? "answered" : "unanswered", escape(a.question), answer, from);
  }
  return fmt::format(
      "<p>{} of {} questions answered from these reports; the others say what they need.</p>"
      R"(<table class="answers"><tr><th>question</th><th>answer</th><th>from</th></tr>{}</table>)",
      answered_count, all.size(), rows);
}

std::string inventory(const Machine& machine) {
  const auto& report = *machine.report;
  const auto& host = report["host"];
  std::string rows;
  auto row = [&rows](const std::string& key, const std::string& value) {
    rows += fmt::format("<tr><th>{}</th><td>{}</td></tr>", escape(key), escape(value));
  };
  row("report", machine.label);
  row("tool", fmt::format("{} {} ({})", report["tool"]["name"].get<std::string>(),
                          report["tool"]["version"].get<std::string>(),
                          report["tool"]["git_commit"].get<std::string>()));
  row("started", report["started_at"].get<std::string>());
  row("command", report["command"].get<std::string>());
  row("CPU", fmt::format("{} ({} sockets, {} cores, {} logical CPUs, {} NUMA nodes)",
                         host["cpu_model"].get<std::string>(), host["sockets"].get<int>(),
                         host["cores"].get<int>(), host["logical_cpus"].get<int>(),
                         host["numa_nodes"].get<int>()));
  row("memory", fmt::format("{:.1f} GiB", host["memory_bytes"].get<double>() / (1 << 30)));
  row("ISA", fmt::format("{}", fmt::join(host["isa"].get<std::vector<std::string>>(), " ")));
  row("OS",
      fmt::format("{} / {}", host["os"].get<std::string>(), host["kernel"].get<std::string>()));
  row("compiler", host["compiler"].get<std::string>());
  for (const auto& library : host["libraries"])
    row(library["name"].get<std::string>(), library["version"].get<std::string>());
  for (const auto& [name, value] : host["environment"].items()) row(name, value.get<std::string>());
  for (const auto& backend : report["backends"]) {
    if (!backend["device"].is_object()) {
      row(backend["name"].get<std::string>(),
          "not usable: " + backend["reason"].get<std::string>());
      continue;
    }
    const auto& device = backend["device"];
    std::vector<std::string> libraries;
    for (const auto& library : device["libraries"])
      libraries.push_back(library["name"].get<std::string>() + " " +
                          library["version"].get<std::string>());
    row(backend["name"].get<std::string>(),
        fmt::format("{}; {} threads on CPUs [{}]; {:.2f} GHz; {}",
                    device["model"].get<std::string>(), device["threads_used"].get<int>(),
                    fmt::join(device["affinity"].get<std::vector<int>>(), ","),
                    device["clock_ghz"].get<double>(), fmt::join(libraries, ", ")));
  }
  return "<table class=\"inventory\">" + rows + "</table>";
}

}  // namespace

std::string render_html(const std::vector<std::pair<std::string, nlohmann::json>>& reports,
                        const std::vector<TrendSeries>& history) {
  std::vector<Machine> machines;
  for (const auto& [label, report] : reports) machines.push_back({label, &report});
  std::string html = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>trainbench report</title>
<style>
body { font-family: sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; } h3 { font-size: 1em; }
svg.chart { background: #fff; border: 1px solid #ddd; display: block; }
.grid { stroke: #eee; } .tick { font-size: 11px; fill: #555; } .label { font-size: 12px; fill: #222; }
.group { font-size: 12px; font-weight: bold; fill: #222; } .roof { fill: none; stroke-width: 2; }
.legend { font-size: 12px; margin: .5em 0; } .key { margin-right: 1.2em; white-space: nowrap; }
.key i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: middle; }
table.inventory { border-collapse: collapse; font-size: 12px; margin-bottom: 1.5em; }
table.inventory th { text-align: left; padding: 2px 10px 2px 0; vertical-align: top; color: #555; }
rect.flagged { stroke: #d62728; stroke-width: 2; stroke-dasharray: 3,2; }
table.answers { border-collapse: collapse; font-size: 13px; width: 100%; }
table.answers th, table.answers td { text-align: left; vertical-align: top; padding: 4px 8px;
  border-bottom: 1px solid #eee; }
table.answers th { min-width: 14em; } table.answers ul { min-width: 16em; }
table.answers ul { margin: 0; padding-left: 1.2em; font-size: 11px; color: #555; }
table.answers pre { font-size: 11px; overflow-x: auto; max-width: 55vw; }
tr.unanswered td { color: #888; } .sub { font-size: 11px; margin-top: .5em; color: #555; }
</style></head><body>
<h1>trainbench report</h1>
)";
  std::vector<std::string> labels;
  for (const Machine& machine : machines) labels.push_back(escape(machine.label));
  html += fmt::format("<p>{} report(s): {}</p>\n", machines.size(), fmt::join(labels, ", "));
  if (!machines.empty()) {
    html += "<h2>Answers</h2>\n" + answers(machines) + "\n";
    html += "<h2>Roofline</h2>\n" + roofline(machines) + "\n";
    html += "<h2>Cases across backends and machines</h2>\n" + bars(machines) + "\n" +
            cases_without_a_figure(machines);
    html += "<h2>Where a training step's time goes</h2>\n" + step_breakdowns(machines) + "\n";
    html += "<h2>Time to train</h2>\n" + curves(machines) + "\n";
  }
  if (!history.empty())
    html += "<h2 id=\"history\">History</h2>\n" + history_charts(history) + "\n";
  if (!machines.empty()) html += "<h2>Hosts</h2>\n";
  for (const Machine& machine : machines) html += inventory(machine) + "\n";
  // Marks the page once laid out, so a browser test can tell: how many charts drew visible
  // marks, how many are labelled (a name, text, and a title on every mark), and any NaN,
  // undefined or Infinity in the text or attributes the reader gets (the script aside).
  html += R"(<script>
window.addEventListener("load", function () {
  var charts = document.querySelectorAll("svg.chart"), rendered = 0, labelled = 0;
  var said = function (node) { return node !== null && node.textContent.trim() !== ""; };
  charts.forEach(function (chart) {
    var marks = chart.querySelectorAll(".mark, .roof"), visible = 0, titled = 0, texts = 0;
    marks.forEach(function (mark) {
      var box = mark.getBBox();
      if (box.width > 0 || box.height > 0) visible++;
      if (said(mark.querySelector("title"))) titled++;
    });
    chart.querySelectorAll("text").forEach(function (text) { if (said(text)) texts++; });
    if (visible > 0) rendered++;
    if (said(chart.querySelector("title")) && texts > 0 && titled === marks.length) labelled++;
  });
  var page = document.body.cloneNode(true), bad = [];
  page.querySelectorAll("script").forEach(function (script) { script.remove(); });
  var words = /\b(NaN|undefined|Infinity)\b/;
  [page].concat(Array.from(page.querySelectorAll("*"))).forEach(function (node) {
    Array.from(node.attributes).forEach(function (a) { if (words.test(a.value)) bad.push(a.name + "=" + a.value); });
  });
  var found = page.textContent.match(/\b(NaN|undefined|Infinity)\b.{0,40}/g);
  if (found) bad = bad.concat(found);
  document.body.setAttribute("data-charts", charts.length);
  document.body.setAttribute("data-charts-rendered", rendered);
  document.body.setAttribute("data-charts-labelled", labelled);
  document.body.setAttribute("data-bad-values", bad.length ? bad.join(" | ").slice(0, 400) : "none");
});
</script>
</body></html>
)";
  return html;
}

}  // namespace tb
