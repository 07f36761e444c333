# Writes a C++ source holding text files as raw string literals.
# Usage: cmake -DOUTPUT=file.cpp -DBASE=dir -DFILES="a;b" -P embed_files.cmake
set(body "#include \"workloads/embedded_files.h\"\n\n#include <array>\n\nnamespace tb {\nnamespace {\nconstexpr EmbeddedFile kFiles[] = {\n")
foreach(file IN LISTS FILES)
  file(READ "${BASE}/${file}" content)
  string(FIND "${file}" "/" slash)
  math(EXPR start "${slash} + 1")
  string(SUBSTRING "${file}" ${start} -1 key)  # path below its top-level folder
  string(APPEND body "    {\"${key}\", R\"tbembed(${content})tbembed\"},\n")
endforeach()
string(APPEND body "};\n}  // namespace\n\nstd::span<const EmbeddedFile> embedded_files() { return kFiles; }\n\n"
  "std::optional<std::string_view> embedded_file(std::string_view path) {\n"
  "  for (const EmbeddedFile& file : kFiles)\n    if (file.path == path) return file.content;\n"
  "  return std::nullopt;\n}\n\n}  // namespace tb\n")
include("${CMAKE_CURRENT_LIST_DIR}/write_if_changed.cmake")
write_if_changed("${OUTPUT}" "${body}")
