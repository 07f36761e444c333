// safetensors files: what is saved loads back, and a damaged file is a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "models/weights_file.h"

namespace tb {
namespace {

class WeightsFile : public testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("trainbench-weights-" + std::to_string(::getpid()) + ".safetensors");
  }
  void TearDown() override { std::filesystem::remove(path_); }
  void write_raw(const std::string& bytes) { std::ofstream(path_, std::ios::binary) << bytes; }
  std::string path_;
};

TEST_F(WeightsFile, RoundTripsFloatsAndCounts) {
  const std::vector<NamedTensor> saved = {{"conv1.weight", {2, 1, 1, 2}, {0.5, -1.25, 3.0, 1e-3}},
                                          {"bn1.num_batches_tracked", {}, {7}, true}};
  for (DType dtype : {DType::f32, DType::f64}) {
    ASSERT_TRUE(save_safetensors(path_, saved, dtype).ok());
    std::vector<NamedTensor> loaded;
    const Status status = load_safetensors(path_, &loaded);
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_EQ(loaded.size(), 2u);
    for (const NamedTensor& original : saved) {
      const auto match = std::find_if(loaded.begin(), loaded.end(), [&](const NamedTensor& t) {
        return t.name == original.name;
      });
      ASSERT_NE(match, loaded.end()) << original.name;
      EXPECT_EQ(match->dims, original.dims);
      EXPECT_EQ(match->integer, original.integer);
      for (std::size_t i = 0; i < original.values.size(); ++i)
        EXPECT_FLOAT_EQ(static_cast<float>(match->values[i]),
                        static_cast<float>(original.values[i]));
    }
  }
}

TEST_F(WeightsFile, DamagedFilesAreClearErrors) {
  std::vector<NamedTensor> loaded;
  EXPECT_EQ(load_safetensors(path_ + ".missing", &loaded).code(), StatusCode::invalid_argument);
  write_raw("abc");
  EXPECT_NE(load_safetensors(path_, &loaded).message().find("shorter"), std::string::npos);
  write_raw(std::string("\xff\0\0\0\0\0\0\0", 8) + "{}");
  EXPECT_NE(load_safetensors(path_, &loaded).message().find("past the end"), std::string::npos);
  const std::string header = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  std::string length(8, '\0');
  length[0] = static_cast<char>(header.size());
  write_raw(length + header + std::string(8, '\0'));  // 8 of the 16 bytes
  EXPECT_NE(load_safetensors(path_, &loaded).message().find("offsets"), std::string::npos);
  write_raw(length + std::string(header.size(), '{'));
  EXPECT_NE(load_safetensors(path_, &loaded).message().find("not JSON"), std::string::npos);
}

// Shapes and offsets are whole numbers and their products are checked: an offset of 5.6e26
// (undefined behaviour converted to an integer; found by the fuzzer) and a shape whose byte count
// wraps to the offsets' 16 bytes are refused without an allocation.
TEST_F(WeightsFile, ShapesAndOffsetsAreCheckedWholeNumbers) {
  for (const std::string header :
       {R"({"w":{"dtype":"F64","shape":[1,1],"data_offsets":[555555555555555555555555516,24]}})",
        R"({"w":{"dtype":"F32","shape":[4611686018427387908],"data_offsets":[0,16]}})",
        R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,16]}})",
        R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})",
        R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,16]}})"}) {
    std::string length(8, '\0');
    length[0] = static_cast<char>(header.size());
    write_raw(length + header + std::string(24, '\0'));
    std::vector<NamedTensor> loaded;
    const Status status = load_safetensors(path_, &loaded);
    EXPECT_EQ(status.code(), StatusCode::invalid_argument) << header;
    EXPECT_TRUE(loaded.empty()) << header;
  }
}

}  // namespace
}  // namespace tb
