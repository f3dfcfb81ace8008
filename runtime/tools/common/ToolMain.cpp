//===- ToolMain.cpp - A runtime tool's main, with no exception escaping ---===//
#include "common/ToolMain.h"

#include <cstdio>
#include <exception>

namespace mlart::tool {

int runToolMain(const char *tool, int argc, char **argv,
                int (*body)(int, char **)) {
  try {
    return body(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s: internal error: %s\n", tool, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: internal error: unknown exception\n", tool);
  }
  return 1;
}

} // namespace mlart::tool
