//===- ToolMain.h - A runtime tool's main, with no exception escaping -----===//
//
// The runtime reports errors as Status, but the standard library may still
// throw (std::bad_alloc, a std::out_of_range from a map lookup). A tool's
// main runs its body through runToolMain, so such an exception becomes a
// message and exit code 1 rather than std::terminate's abort.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_TOOLS_TOOLMAIN_H
#define MLART_TOOLS_TOOLMAIN_H

namespace mlart::tool {

/// Returns `body(argc, argv)`; an exception that escapes it prints
/// "TOOL: internal error: WHAT" to stderr and returns 1.
int runToolMain(const char *tool, int argc, char **argv,
                int (*body)(int, char **));

} // namespace mlart::tool

#endif // MLART_TOOLS_TOOLMAIN_H
