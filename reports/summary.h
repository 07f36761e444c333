// What `trainbench summary` answers: the questions a buyer asks, answered from one report, each
// answer with the measurements it comes from (bench/ prints them).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/text_table.h"
#include "workloads/descriptor.h"

namespace tb {

struct Answer {
  std::string question, answer;
  std::vector<std::string> from;       // the measurements (descriptor and figure)
  std::vector<TextTable> tables = {};  // with a title line each, after the answer
  std::vector<std::string> titles = {};
  nlohmann::json data = nullptr;     // the figures behind the answer, for --format json
  std::string data_key = "figures";  // "projection" where they are one
};

// A step breakdown's (details.breakdown) slowest layers, forward + backward, with their spread:
// the first named the slowest only where it leads the next beyond their spreads. Throws
// nlohmann::json's exceptions for a breakdown without its entries.
std::string slowest_layers_of(const nlohmann::json& breakdown);

// Projected full-scale time-to-train: MLPerf's reference convergence points and evaluation
// (MLCommons' training rules and reference implementations).
struct ProjectionRecipe {
  const char* model;
  double samples;            // training samples to the target
  double evaluated_samples;  // evaluation samples over the run
  const char* assumptions;
};
// The recipe a training case projects to, or null: only the full-size models do.
const ProjectionRecipe* projection_recipe(const Descriptor& d);
// Training samples and evaluation (a third of a step's cost per sample) at `samples_per_s`.
double projected_training_seconds(const ProjectionRecipe& recipe, double samples_per_s);

// Whether an answer answers: one that cannot says why, starting "not measured", "not compared"
// or "not projected".
bool answered(const Answer& answer);

// GPU over CPU, memory bandwidth, mixed precision, the state of the art, the projected
// time-to-train, the per-layer breakdown, the communication projection and the measured
// energy, in that order.
std::vector<Answer> summary_answers(const nlohmann::json& report);

// A machine's price and power, where given (compare --price-per-hour, --watts, --costs).
struct Costs {
  std::optional<double> price_per_hour, watts;
};

// Per report: best GEMM TFLOP/s per dtype, bandwidth, training throughput and time-to-train,
// for each backend; with price and power, per dollar and per watt. The power is the one the
// case's energy counters measured where it has it, else the one given (watts_source says which).
nlohmann::json headline_lines(const nlohmann::json& report, const Costs& costs);

}  // namespace tb
