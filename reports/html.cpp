#include "reports/html.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "reports/compare.h"
#include "reports/report.h"
#include "reports/result_record.h"

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

// Roofline: each (report, backend)'s measured compute ceilings and its best STREAM bandwidth,
// and each case at its arithmetic intensity (flops per byte moved).
std::string roofline(const std::vector<Machine>& machines) {
  struct Roof {
    std::string name;
    std::vector<std::pair<std::string, double>> peaks;            // dtype, GFLOP/s
    double bandwidth = 0;                                         // GB/s
    std::vector<std::tuple<double, double, std::string>> points;  // intensity, GFLOP/s, title
  };
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
                                             result["dtype"].get<std::string>()));
    }
    for (auto& [name, roof] : by_backend)
      if (!roof.points.empty() || !roof.peaks.empty()) roofs.push_back(std::move(roof));
  }
  double y_max = 1, x_min = 0.1, x_max = 1000;
  for (const Roof& roof : roofs) {
    for (const auto& [dtype, peak] : roof.peaks) y_max = std::max(y_max, peak);
    for (const auto& [intensity, gflops, title] : roof.points) {
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
    }
    for (const auto& [intensity, gflops, title] : roof.points)
      svg += fmt::format(
          R"(<circle class="mark" cx="{:.1f}" cy="{:.1f}" r="4" fill="{}"><title>{}: {:.1f} GFLOP/s at {:.2f} flop/byte</title></circle>)",
          frame.x(intensity), frame.y(std::max(gflops, frame.y_min)), color(r), escape(title),
          gflops, intensity);
    legend += fmt::format(R"(<span class="key"><i style="background:{}"></i>{}</span>)", color(r),
                          escape(roof.name));
  }
  return svg + "</svg><div class=\"legend\">" + legend +
         " (solid: fp32 ceiling, dashed: other dtypes)</div>";
}

// Bars: the headline metric of every case, per (machine, backend), grouped by workload.
std::string bars(const std::vector<Machine>& machines) {
  struct Bar {
    std::string series;
    double value;
    std::string caveats;  // "[above the measured peak: 103.9%]", "[bf16 emulated]"
  };
  std::map<std::string, std::vector<Bar>> groups;  // "workload [dtype] (unit)" -> bars
  std::map<std::string, std::size_t> series_index;
  for (const Machine& machine : machines)
    for (const ResultRecord& record : read_results(*machine.report)) {
      const nlohmann::json& result = *record.json;
      const auto& figure = record.headline;
      if (!figure) continue;
      const std::string& unit = figure->headline.unit;
      const std::string series =
          fmt::format("{}: {}", machine.label, result["backend"].get<std::string>());
      series_index.emplace(series, series_index.size());
      groups[fmt::format("{} [{}] ({})", result["workload"].get<std::string>(),
                         result["dtype"].get<std::string>(), unit)]
          .push_back({series, figure->value, result_caveats(record)});
    }
  const double row = 16, label_width = 520, bar_width = 300;
  double height = 10;
  for (const auto& [name, group] : groups) height += row * (group.size() + 1);
  std::string svg = fmt::format(
      R"(<svg class="chart" id="bars" width="{}" height="{:.0f}" role="img"><title>Cases across backends and machines</title>)",
      label_width + bar_width + 120, height);
  double y = 10;
  for (const auto& [name, group] : groups) {
    svg += fmt::format(R"(<text x="0" y="{:.1f}" class="group">{}</text>)", y + 11, escape(name));
    y += row;
    double best = 0;
    for (const Bar& bar : group) best = std::max(best, bar.value);
    for (const Bar& bar : group) {
      const double w = best > 0 ? bar.value / best * bar_width : 0;
      svg += fmt::format(
          R"(<text x="{:.0f}" y="{:.1f}" class="tick" text-anchor="end">{}</text><rect class="mark" x="{:.0f}" y="{:.1f}" width="{:.1f}" height="{:.0f}" fill="{}"><title>{}: {:.4g} {}</title></rect><text x="{:.1f}" y="{:.1f}" class="tick">{:.4g} {}</text>)",
          label_width - 6, y + 11, escape(bar.series), label_width, y + 2, std::max(w, 1.0),
          row - 4, color(series_index[bar.series]), escape(bar.series), bar.value,
          escape(bar.caveats), label_width + w + 4, y + 11, bar.value, escape(bar.caveats));
      y += row;
    }
  }
  return svg + "</svg>";
}

// Time-to-train: quality against wall-clock time, one line per run of each result that
// carries runs with curves (details.runs[].curve).
std::string curves(const std::vector<Machine>& machines) {
  std::vector<std::pair<std::string, const nlohmann::json*>> found;
  for (const Machine& machine : machines)
    for (const auto& result : (*machine.report)["results"]) {
      const auto details = result.find("details");
      if (details == result.end() || !details->is_object() || !details->contains("runs") ||
          !(*details)["runs"].is_array())
        continue;
      for (const auto& run : (*details)["runs"])
        if (run.contains("curve") && run["curve"].is_array() && !run["curve"].empty())
          found.emplace_back(fmt::format("{}: {} {} (seed {}{})", machine.label,
                                         result["backend"].get<std::string>(),
                                         result["workload"].get<std::string>(),
                                         run.value("seed", std::uint64_t{0}),
                                         run.value("converged", false) ? "" : ", not converged"),
                             &run["curve"]);
    }
  if (found.empty()) return "<p>No time-to-train results in these reports.</p>";
  double t_max = 1;
  for (const auto& [name, curve] : found)
    for (const auto& point : *curve) t_max = std::max(t_max, point.at("time_s").get<double>());
  const double width = 720, height = 320, left = 60, bottom = 40;
  std::string svg = fmt::format(
      R"(<svg class="chart" id="curves" width="{}" height="{}" role="img"><title>Time to train</title>)",
      width, height);
  for (std::size_t i = 0; i < found.size(); ++i) {
    std::string points;
    for (const auto& point : *found[i].second)
      points += fmt::format(
          "{:.1f},{:.1f} ", left + point.at("time_s").get<double>() / t_max * (width - left - 20),
          height - bottom - point.at("quality").get<double>() * (height - bottom - 20));
    svg += fmt::format(
        R"(<polyline class="mark" points="{}" fill="none" stroke="{}" stroke-width="2"><title>{}</title></polyline>)",
        points, color(i), escape(found[i].first));
  }
  svg += fmt::format(
      R"(<text x="{:.0f}" y="{:.0f}" class="label" text-anchor="middle">seconds (0 to {:.0f})</text>)",
      width / 2, height - 8, t_max);
  return svg + "</svg>";
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

std::string render_html(const std::vector<std::pair<std::string, nlohmann::json>>& reports) {
  std::vector<Machine> machines;
  for (const auto& [label, report] : reports) machines.push_back({label, &report});
  std::string html = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>trainbench report</title>
<style>
body { font-family: sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
svg.chart { background: #fff; border: 1px solid #ddd; display: block; }
.grid { stroke: #eee; } .tick { font-size: 11px; fill: #555; } .label { font-size: 12px; fill: #222; }
.group { font-size: 12px; font-weight: bold; fill: #222; } .roof { fill: none; stroke-width: 2; }
.legend { font-size: 12px; margin: .5em 0; } .key { margin-right: 1.2em; white-space: nowrap; }
.key i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: middle; }
table.inventory { border-collapse: collapse; font-size: 12px; margin-bottom: 1.5em; }
table.inventory th { text-align: left; padding: 2px 10px 2px 0; vertical-align: top; color: #555; }
</style></head><body>
<h1>trainbench report</h1>
)";
  std::vector<std::string> labels;
  for (const Machine& machine : machines) labels.push_back(escape(machine.label));
  html += fmt::format("<p>{} report(s): {}</p>\n", machines.size(), fmt::join(labels, ", "));
  html += "<h2>Roofline</h2>\n" + roofline(machines) + "\n";
  html += "<h2>Cases across backends and machines</h2>\n" + bars(machines) + "\n";
  html += "<h2>Time to train</h2>\n" + curves(machines) + "\n";
  html += "<h2>Hosts</h2>\n";
  for (const Machine& machine : machines) html += inventory(machine) + "\n";
  // Marks the page once every chart has laid out visible marks, so a browser test can tell.
  html += R"(<script>
window.addEventListener("load", function () {
  var charts = document.querySelectorAll("svg.chart"), rendered = 0;
  charts.forEach(function (chart) {
    var marks = chart.querySelectorAll(".mark, .roof"), visible = 0;
    marks.forEach(function (mark) { var box = mark.getBBox(); if (box.width > 0 || box.height > 0) visible++; });
    if (visible > 0) rendered++;
  });
  document.body.setAttribute("data-charts", charts.length);
  document.body.setAttribute("data-charts-rendered", rendered);
});
</script>
</body></html>
)";
  return html;
}

}  // namespace tb
