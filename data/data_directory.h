// Where a dataset's files are: where its Debian package installs them, unless an environment
// variable names another directory (a machine without the package, given a copy of the files,
// as the packed GPU archive carries them).
#pragma once

#include <cstdlib>
#include <string>

namespace tb {

inline std::string data_directory(const char* variable, const char* installed) {
  const char* chosen = std::getenv(variable);
  return chosen && *chosen ? chosen : installed;
}

}  // namespace tb
