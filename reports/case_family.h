// What one machine's result and another's have in common when their sizes differ: a case's
// family (its descriptor without the keys that size it) and its size (those keys). The buyer's
// table pairs machines by family, each at the size its own suite runs.
#pragma once

#include <string>
#include <string_view>

namespace tb {

// The order the buyer's table lists families in.
enum class CaseClass { training, time_to_train, product, bandwidth, transfer, collective, peak };

struct CaseFamily {
  CaseClass kind = CaseClass::product;
  // Every key but the sizing ones, defaults filled in from the kind's key table, so that a
  // suite's short line and a report's canonical descriptor of the same case agree. Keys whose
  // default the workload works out (a learning rate scaled with the batch, STREAM's array
  // length) are left out, as are labels (`name`). A collective adds its rank count.
  std::string key;
  std::string label;  // the kind and the keys off their defaults: "resnet50-train dtype=bf16"
  std::string size;   // "batch=256", "m=n=k=8192", "mb=16"; "" where no key sizes the case
};

// Throws UsageError for a descriptor that does not parse or names an unknown kind.
CaseFamily case_family(std::string_view workload, int ranks = 1);

}  // namespace tb
