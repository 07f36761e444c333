// Written paths: a report replaces only a regular file the user may write, through a link.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "backends/files.h"
#include "tests/temp_dir.h"

namespace tb {
namespace {

namespace fs = std::filesystem;
using testing_support::file_text;
using testing_support::TempDir;

// The message of the FileError that writing `path` throws; empty when it writes.
std::string refusal(const std::string& path) {
  try {
    write_file_atomically(path, "new\n");
  } catch (const FileError& e) {
    return e.what();
  }
  return "";
}

TEST(OutputPaths, ARegularFileIsReplacedKeepingItsPermissions) {
  const TempDir dir("trainbench-files");
  const std::string report = dir.file("r.json");
  std::ofstream(report) << "old\n";
  ::chmod(report.c_str(), 0600);
  EXPECT_EQ(refusal(report), "");
  EXPECT_EQ(file_text(report), "new\n");
  struct stat info {};
  ASSERT_EQ(::stat(report.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0600u);
  EXPECT_EQ(refusal(dir.file("fresh.json")), "");  // a new file in an existing directory
}

TEST(OutputPaths, ASymbolicLinkIsWrittenThroughAndStaysALink) {
  const TempDir dir("trainbench-files");
  fs::create_directories(dir.file("reports"));
  const std::string target = dir.file("reports/r.json"), link = dir.file("latest.json");
  std::ofstream(target) << "old\n";
  fs::create_symlink("reports/r.json", link);  // relative, as a user makes them
  EXPECT_EQ(output_path(link), (fs::path(dir.path()) / "reports/r.json").string());
  EXPECT_EQ(refusal(link), "");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(file_text(target), "new\n");
  const std::string dangling = dir.file("dangling.json");  // to a file not made yet
  fs::create_symlink(dir.file("reports/next.json"), dangling);
  EXPECT_EQ(refusal(dangling), "");
  EXPECT_EQ(file_text(dir.file("reports/next.json")), "new\n");
  const std::string loop = dir.file("loop");
  fs::create_symlink(loop, loop);
  EXPECT_NE(refusal(loop).find("too many levels of symbolic links"), std::string::npos);
}

TEST(OutputPaths, WhatIsNotARegularWritableFileIsRefusedAndKept) {
  const TempDir dir("trainbench-files");
  const std::string read_only = dir.file("kept.json");
  std::ofstream(read_only) << "old\n";
  ::chmod(read_only.c_str(), 0444);
  EXPECT_NE(refusal(read_only).find("read-only"), std::string::npos);  // root included
  EXPECT_EQ(file_text(read_only), "old\n");
  EXPECT_NE(refusal(dir.path()).find("a directory"), std::string::npos);
  EXPECT_NE(refusal("/dev/null").find("a character device"), std::string::npos);
  struct stat info {};
  ASSERT_EQ(::stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_NE(refusal(fifo).find("a pipe"), std::string::npos);
  const std::string to_device = dir.file("null-link");
  fs::create_symlink("/dev/null", to_device);
  EXPECT_NE(refusal(to_device).find("a symbolic link to /dev/null"), std::string::npos);
  EXPECT_NE(refusal(dir.file("no/such/dir/r.json")).find("no directory"), std::string::npos);
  EXPECT_NE(refusal("").find("empty path"), std::string::npos);
  for (const auto& entry : fs::directory_iterator(dir.path()))  // no temporary file left
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
}

// The longest name a file system allows (255 bytes) is written: the temporary file beside it
// has a short name of its own.
TEST(WriteFileAtomically, TheLongestLegalNameIsWritten) {
  const TempDir dir("trainbench-files-long");
  const std::string path = dir.file(std::string(255, 'r'));
  write_file_atomically(path, "{}\n");
  EXPECT_EQ(testing_support::file_text(path), "{}\n");
}

}  // namespace
}  // namespace tb
