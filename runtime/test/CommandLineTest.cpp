//===- CommandLineTest.cpp - The runtime tools' option parser -------------===//
//
// runtime/tools/common/CommandLine.cpp on hand-made argv: complete number
// parsing, ranges, both value forms, names, lists, positional counts, and
// the errors that name the flag.
//
//===----------------------------------------------------------------------===//
#include "common/CommandLine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace mlart::tool;

namespace {

enum class Color { Red, Green, Blue };

/// A tool with one option of every kind and a required positional.
struct Tool {
  std::string input;
  std::string output;
  bool verbose = false;
  std::optional<bool> fast;
  int64_t context = 40;
  int steps = 2;
  double tolerance = 1e-2;
  double scale = 0.0;
  std::string device = "cpu";
  Color color = Color::Green;
  std::vector<std::string> inputs;
  CommandLine cl{"tool", "INPUT [OUTPUT] [options]", "A test tool."};

  Tool() {
    cl.addPositional({"INPUT", &input, "what to read"});
    cl.addPositional({"OUTPUT", &output, "where to write", false});
    cl.add({
        Option::flag("verbose", &verbose, "say more"),
        Option::flag("fast", &fast, true, "go fast"),
        Option::flag("no-fast", &fast, false, "go slow"),
        Option::integer("context", &context, 0,
                        std::numeric_limits<int64_t>::max(), "N",
                        "tokens of context"),
        Option::integer("steps", &steps, 1, std::numeric_limits<int>::max(),
                        "N", "steps to run"),
        Option::real("tolerance", &tolerance, 0,
                     std::numeric_limits<double>::infinity(), "X",
                     "the tolerance"),
        Option::real("scale", &scale, -1, 1, "X", "a scale").noun("a scale"),
        Option::string("device", &device, "NAME", "the device"),
        Option::oneOf("color", &color,
                      {{"red", Color::Red},
                       {"green", Color::Green},
                       {"blue", Color::Blue}},
                      "a color"),
        Option::list("input", &inputs, "NAME=FILE", "bind a buffer"),
    });
  }

  ParseResult parse(std::vector<const char *> args) {
    args.insert(args.begin(), "tool");
    return cl.parse(int(args.size()), args.data());
  }
  /// The error of parsing `args`, or "" when it parsed.
  std::string error(std::vector<const char *> args) {
    ParseResult r = parse(std::move(args));
    return r.action == ParseResult::Action::Error ? r.error : "";
  }
};

TEST(CommandLine, ValuesInBothForms) {
  Tool t;
  ParseResult r = t.parse({"in.mlaa", "--context", "100", "--steps=7",
                           "--tolerance=0.5", "--scale", "-0.25", "--device",
                           "cuda", "--color=blue", "--verbose"});
  ASSERT_EQ(r.action, ParseResult::Action::Run) << r.error;
  EXPECT_EQ(t.input, "in.mlaa");
  EXPECT_EQ(t.output, "");
  EXPECT_EQ(t.context, 100);
  EXPECT_EQ(t.steps, 7);
  EXPECT_EQ(t.tolerance, 0.5);
  EXPECT_EQ(t.scale, -0.25);
  EXPECT_EQ(t.device, "cuda");
  EXPECT_EQ(t.color, Color::Blue);
  EXPECT_TRUE(t.verbose);
  EXPECT_FALSE(t.fast.has_value());
}

TEST(CommandLine, DefaultsStayWhenNotGiven) {
  Tool t;
  ASSERT_EQ(t.error({"in"}), "");
  EXPECT_EQ(t.context, 40);
  EXPECT_EQ(t.steps, 2);
  EXPECT_EQ(t.color, Color::Green);
  EXPECT_FALSE(t.verbose);
}

TEST(CommandLine, BadIntegersNameTheFlagAndRange) {
  Tool t;
  EXPECT_EQ(t.error({"in", "--context", "abc"}),
            "--context needs an integer >= 0, not 'abc'");
  EXPECT_EQ(t.error({"in", "--context", ""}),
            "--context needs an integer >= 0, not ''");
  EXPECT_EQ(t.error({"in", "--context", "12x"}),
            "--context needs an integer >= 0, not '12x'");
  EXPECT_EQ(t.error({"in", "--context", " 12"}),
            "--context needs an integer >= 0, not ' 12'");
  EXPECT_EQ(t.error({"in", "--context", "1.5"}),
            "--context needs an integer >= 0, not '1.5'");
  EXPECT_EQ(t.error({"in", "--context=-1"}),
            "--context needs an integer >= 0, not '-1'");
  // Past int64 (strtoll's ERANGE), and past the int storage of --steps.
  EXPECT_EQ(t.error({"in", "--context", "99999999999999999999"}),
            "--context needs an integer >= 0, not '99999999999999999999'");
  EXPECT_EQ(t.error({"in", "--steps", "4294967297"}),
            "--steps needs an integer in [1, 2147483647], not '4294967297'");
  EXPECT_EQ(t.error({"in", "--steps", "0"}),
            "--steps needs an integer in [1, 2147483647], not '0'");
  EXPECT_EQ(t.steps, 2); // a refused value is not stored
}

TEST(CommandLine, RangeEdgesAreInclusive) {
  Tool t;
  EXPECT_EQ(t.error({"in", "--steps", "2147483647", "--context", "0", "--scale",
                     "1"}),
            "");
  EXPECT_EQ(t.steps, 2147483647);
  EXPECT_EQ(t.context, 0);
  EXPECT_EQ(t.scale, 1.0);
  EXPECT_EQ(t.error({"in", "--scale=-1"}), "");
  EXPECT_EQ(t.scale, -1.0);
}

TEST(CommandLine, BadDoubles) {
  Tool t;
  EXPECT_EQ(t.error({"in", "--tolerance", "nan"}),
            "--tolerance needs a finite number >= 0, not 'nan'");
  EXPECT_EQ(t.error({"in", "--tolerance", "inf"}),
            "--tolerance needs a finite number >= 0, not 'inf'");
  EXPECT_EQ(t.error({"in", "--tolerance", "1e999"}),
            "--tolerance needs a finite number >= 0, not '1e999'");
  EXPECT_EQ(t.error({"in", "--tolerance", "0.1x"}),
            "--tolerance needs a finite number >= 0, not '0.1x'");
  EXPECT_EQ(t.error({"in", "--tolerance", "-0.1"}),
            "--tolerance needs a finite number >= 0, not '-0.1'");
  EXPECT_EQ(t.error({"in", "--scale", "1.5"}),
            "--scale needs a scale in [-1, 1], not '1.5'");
  EXPECT_EQ(t.error({"in", "--tolerance", "1e-320"}), ""); // underflow is ok
}

TEST(CommandLine, NonFiniteWhenAllowed) {
  double x = 0;
  CommandLine cl("tool", "", "");
  cl.add(Option::real("x", &x, -std::numeric_limits<double>::infinity(),
                      std::numeric_limits<double>::infinity(), "X", "")
             .allowNonFinite());
  const char *argv[] = {"tool", "--x", "inf"};
  EXPECT_EQ(cl.parse(3, argv).action, ParseResult::Action::Run);
  EXPECT_TRUE(std::isinf(x));
  const char *nan[] = {"tool", "--x=nan"};
  EXPECT_EQ(cl.parse(2, nan).action, ParseResult::Action::Run);
  EXPECT_TRUE(std::isnan(x));
}

TEST(CommandLine, UnknownOptionsAndMissingValues) {
  Tool t;
  EXPECT_EQ(t.error({"in", "--foo"}), "unknown option '--foo'");
  EXPECT_EQ(t.error({"in", "--foo=3"}), "unknown option '--foo'");
  EXPECT_EQ(t.error({"in", "-x"}), "unknown option '-x'");
  EXPECT_EQ(t.error({"in", "--steps"}), "missing value for --steps N");
  EXPECT_EQ(t.error({"in", "--verbose=1"}), "--verbose takes no value");
  EXPECT_EQ(t.error({"in", "--help=1"}), "--help takes no value");
}

TEST(CommandLine, ValueMayStartWithDash) {
  Tool t;
  // "--scale -0.5": the value, not an option.
  EXPECT_EQ(t.error({"in", "--scale", "-0.5", "--device", "--x"}), "");
  EXPECT_EQ(t.scale, -0.5);
  EXPECT_EQ(t.device, "--x");
}

TEST(CommandLine, OneOfNames) {
  Tool t;
  EXPECT_EQ(t.error({"in", "--color", "red"}), "");
  EXPECT_EQ(t.color, Color::Red);
  EXPECT_EQ(t.error({"in", "--color", "purple"}),
            "--color is red, green or blue, not 'purple'");
  EXPECT_EQ(t.error({"in", "--color", "Red"}),
            "--color is red, green or blue, not 'Red'");
  EXPECT_EQ(t.color, Color::Red);
}

TEST(CommandLine, RepeatedListKeepsEveryValueInOrder) {
  Tool t;
  EXPECT_EQ(t.error({"in", "--input", "a=x.npy", "--input=b=y.npy", "--input",
                     "a=z.npy"}),
            "");
  EXPECT_EQ(t.inputs,
            (std::vector<std::string>{"a=x.npy", "b=y.npy", "a=z.npy"}));
}

TEST(CommandLine, LastFlagOfASettingWins) {
  Tool t;
  EXPECT_EQ(t.error({"in", "--fast", "--no-fast"}), "");
  EXPECT_EQ(t.fast, std::optional<bool>(false));
  EXPECT_EQ(t.error({"in", "--no-fast", "--fast"}), "");
  EXPECT_EQ(t.fast, std::optional<bool>(true));
}

TEST(CommandLine, PositionalCounts) {
  Tool t;
  EXPECT_EQ(t.error({}), "missing INPUT");
  EXPECT_EQ(t.error({"--verbose"}), "missing INPUT");
  EXPECT_EQ(t.error({"a", "b"}), "");
  EXPECT_EQ(t.output, "b");
  EXPECT_EQ(t.error({"a", "b", "c"}), "too many arguments: unexpected 'c'");
  // "--" ends the options; "-" is a value.
  Tool u;
  EXPECT_EQ(u.error({"--", "--verbose"}), "");
  EXPECT_EQ(u.input, "--verbose");
  EXPECT_FALSE(u.verbose);
  EXPECT_EQ(t.error({"-"}), "");
  EXPECT_EQ(t.input, "-");
}

TEST(CommandLine, HelpAndVersionWin) {
  Tool t;
  EXPECT_EQ(t.parse({"--help"}).action, ParseResult::Action::Help);
  EXPECT_EQ(t.parse({"--version"}).action, ParseResult::Action::Version);
  EXPECT_EQ(t.parse({"in", "--steps", "3", "--help"}).action,
            ParseResult::Action::Help);
}

TEST(CommandLine, HelpListsEveryOption) {
  Tool t;
  const std::string help = t.cl.helpText();
  EXPECT_EQ(help.rfind("usage: tool INPUT [OUTPUT] [options]\n", 0), 0u);
  for (const char *needle : {"INPUT",
                             "OUTPUT (optional)",
                             "--verbose",
                             "--fast",
                             "--no-fast",
                             "--context N",
                             "tokens of context (N >= 0; default 40)",
                             "--steps N",
                             "(N in [1, 2147483647]; default 2)",
                             "--tolerance X",
                             "(X >= 0; default 0.01)",
                             "--scale X",
                             "--device NAME",
                             "(default cpu)",
                             "--color red|green|blue",
                             "a color (default green)",
                             "--input NAME=FILE",
                             "bind a buffer (repeatable)",
                             "--help",
                             "--version"})
    EXPECT_NE(help.find(needle), std::string::npos) << needle;
}

TEST(CommandLine, HelpWrapsAt80Columns) {
  std::string s;
  CommandLine cl("tool", "", "");
  cl.add(Option::string("s", &s, "S",
                        std::string(30, 'a') + " " + std::string(30, 'b') +
                            " " + std::string(30, 'c')));
  const std::string help = cl.helpText();
  size_t start = 0;
  while (start < help.size()) {
    const size_t end = help.find('\n', start);
    EXPECT_LE(end - start, 80u) << help.substr(start, end - start);
    start = end + 1;
  }
  EXPECT_NE(help.find("      " + std::string(30, 'c')), std::string::npos);
}

TEST(CommandLine, VersionNamesToolAndProject) {
  Tool t;
  EXPECT_STRNE(projectVersion(), "");
  EXPECT_STRNE(projectVersion(), "unknown");
  EXPECT_EQ(t.cl.versionText(),
            std::string("tool version ") + projectVersion());
}

TEST(CommandLine, DuplicateDeclarationIsAnError) {
  bool a = false, b = false;
  CommandLine cl("tool", "", "");
  cl.add(Option::flag("x", &a, ""));
  cl.add(Option::flag("x", &b, ""));
  const char *argv[] = {"tool"};
  ParseResult r = cl.parse(1, argv);
  EXPECT_EQ(r.action, ParseResult::Action::Error);
  EXPECT_EQ(r.error, "internal error: --x is declared twice");
  CommandLine help("tool", "", "");
  help.add(Option::flag("help", &a, ""));
  EXPECT_EQ(help.parse(1, argv).action, ParseResult::Action::Error);
}

} // namespace
