// Data files: the first byte picks the reader, the rest is the file. IDX (Fashion-MNIST's
// format, 1 to 4 dimensions), WordNet's data files and the masked-LM corpus built from their
// glosses, and the safetensors weights file. Each must read the file or refuse it with a
// Status naming it; nothing may escape or allocate what the file merely claims.
#include <string>
#include <vector>

#include "data/idx_file.h"
#include "data/mlm_corpus.h"
#include "data/wordnet_glosses.h"
#include "models/weights_file.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tb;
  if (size == 0) return 0;
  const auto dir = fuzzing::scratch_directory();
  const std::string bytes = fuzzing::text(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      IdxArray array;
      (void)read_idx_file(fuzzing::scratch_file(dir, "file.idx", bytes), 1 + data[0] / 3 % 4,
                          &array);
      break;
    }
    case 1: {
      fuzzing::scratch_file(dir, "data.noun", bytes);
      std::vector<std::string> glosses;
      (void)load_wordnet_glosses(dir.string(), &glosses);
      // The corpus a run builds from glosses: here from the file's lines.
      std::vector<std::string> texts;
      for (std::size_t start = 0; start < bytes.size();) {
        const std::size_t end = std::min(bytes.find('\n', start), bytes.size());
        texts.push_back(bytes.substr(start, end - start));
        start = end + 1;
      }
      MlmCorpus corpus;
      (void)build_mlm_corpus(texts, 64 + data[0] % 64, 16, 4, 1, &corpus);
      break;
    }
    default: {
      std::vector<NamedTensor> tensors;
      (void)load_safetensors(fuzzing::scratch_file(dir, "weights.safetensors", bytes), &tensors);
    }
  }
  return 0;
}
