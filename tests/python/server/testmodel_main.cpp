// Test-only server binary: `ds4server serve` with the scripted test model
// (tests/support/test_model.h). Extra flags: --test-delay-us N (per token forward),
// --test-context N, --test-family F (qwen_test -> MTPLX sampler, deepseek_v4 -> ds4).
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "server/serve.h"
#include "support/test_codec.h"
#include "support/test_model.h"

int main(int argc, char** argv) {
  std::vector<std::string> args;
  long delay_us = 0, context = 4096;
  std::string family = "qwen_test";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--test-delay-us" && i + 1 < argc) delay_us = std::stol(argv[++i]);
    else if (a == "--test-context" && i + 1 < argc) context = std::stol(argv[++i]);
    else if (a == "--test-family" && i + 1 < argc) family = argv[++i];
    else args.push_back(a);
  }
  try {
    return ds4::server::serve_main(args, [&](const ds4::engine::Settings&) {
      ds4::server::Loaded l;
      l.model = std::make_unique<ds4::testmodel::TestModel>(family, context, std::chrono::microseconds(delay_us));
      l.codec = std::make_unique<ds4::testmodel::TestCodec>();
      return l;
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ds4server_testmodel: %s\n", e.what());
    return 1;
  }
}
