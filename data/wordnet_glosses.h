// The glosses (definitions and examples) of WordNet 3.0's synsets, as Debian's wordnet-base
// installs them: real English text that installs offline, for the masked-LM time-to-train.
#pragma once

#include <string>
#include <vector>

#include "backends/status.h"

namespace tb {

inline constexpr const char* kWordNetDirectory = "/usr/share/wordnet";
// kWordNetDirectory, or the directory $TRAINBENCH_WORDNET_DIR names.
std::string wordnet_directory();

// Every synset's gloss from data.noun, data.verb, data.adj and data.adv, in that order and
// file order (117,659 glosses). Each file is checked as wndb(5) defines it: a synset line
// starts with its own byte offset and carries its gloss after " | ", and the file holds
// WordNet 3.0's number of synsets. A missing, truncated or malformed file is an error naming
// the file and the Debian package.
Status load_wordnet_glosses(const std::string& directory, std::vector<std::string>* glosses);

}  // namespace tb
